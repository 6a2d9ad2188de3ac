"""The one error type conversion raises: a denial that names the offending field and the fix."""

from __future__ import annotations

from dralab.errors import UserError


class Denied(UserError):
    """A pod that cannot be converted as written; ``field`` is the path the message starts with."""

    def __init__(self, field: str, problem: str) -> None:
        self.field = field
        self.problem = problem
        super().__init__(f"{field}: {problem}")
