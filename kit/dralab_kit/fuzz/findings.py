"""What a campaign counts: broken contracts by kind with the first example of each, and the hypothesis
runner that feeds every generated case to a check without stopping at the first failure.

A fuzz run reports how often each failure happens; hypothesis alone would shrink and stop at one.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hseed
from hypothesis import strategies as st


@dataclass
class Findings:
    """Broken contracts by kind: how many cases, and the first example of each."""

    cases: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    problems: dict[str, int] = field(default_factory=dict)
    examples: dict[str, str] = field(default_factory=dict)

    def seen(self, outcome: str) -> None:
        self.cases += 1
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1

    def problem(self, kind: str, example: Any) -> None:
        self.problems[kind] = self.problems.get(kind, 0) + 1
        if kind not in self.examples:
            text = example if isinstance(example, str) else json.dumps(example, default=repr)
            self.examples[kind] = text[:600]

    def as_dict(self) -> dict[str, Any]:
        return {"cases": self.cases, "outcomes": self.outcomes, "problems": self.problems,
                "examples": self.examples, "passed": not self.problems}


def run_cases(strategy: st.SearchStrategy[Any], cases: int, check: Callable[[Any], None], seed: int | None) -> None:
    """``check`` on ``cases`` generated values, generation only (no shrinking, no saved examples);
    ``seed`` makes the run reproducible."""

    @settings(max_examples=cases, database=None, deadline=None, suppress_health_check=list(HealthCheck),
              phases=(Phase.generate,))
    @given(strategy)
    def each(value: Any) -> None:
        check(value)

    (hseed(seed)(each) if seed is not None else each)()
