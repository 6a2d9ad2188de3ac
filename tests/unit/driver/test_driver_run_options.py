"""``dralab driver run``'s flags reach RunOptions (the process itself is replaced: nothing starts)."""

from __future__ import annotations

from typing import Any

import pytest
from click.testing import CliRunner

from dralab.driver import cli, runner


class _Captured:
    options: Any = None

    def __init__(self, options: Any) -> None:
        _Captured.options = options

    def start(self) -> None: ...

    def wait(self) -> None: ...

    def stop(self) -> None: ...


def _options(monkeypatch: pytest.MonkeyPatch, *flags: str) -> Any:
    monkeypatch.setattr(runner, "DriverProcess", _Captured)
    monkeypatch.setattr(cli.signal, "signal", lambda *a: None)  # the test process keeps its handlers
    result = CliRunner().invoke(cli.driver, ["run", "--backend", "fake", "--node", "n1", *flags])
    assert result.exit_code == 0, result.output
    return _Captured.options


def test_defaults_keep_the_claim_cache_and_a_minute_reconcile(monkeypatch: pytest.MonkeyPatch) -> None:
    opts = _options(monkeypatch)
    assert opts.claim_cache is True and opts.reconcile_seconds == 60.0


def test_a_fleet_turns_the_cache_off_and_slows_the_reconcile(monkeypatch: pytest.MonkeyPatch) -> None:
    opts = _options(monkeypatch, "--no-claim-cache", "--reconcile-seconds", "600")
    assert opts.claim_cache is False and opts.reconcile_seconds == 600.0


def test_a_reconcile_under_a_second_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner, "DriverProcess", _Captured)
    result = CliRunner().invoke(cli.driver, ["run", "--backend", "fake", "--node", "n1", "--reconcile-seconds", "0"])
    assert result.exit_code == 2 and "--reconcile-seconds" in result.output
