"""``dralab bench`` takes a SIGTERM as Ctrl-C, so a benchmark's throw-away clusters are taken down."""

from __future__ import annotations

import os
import signal

import pytest

from dralab_kit.bench.common import stop_on_terminate


@pytest.fixture
def sigterm_restored():
    previous = signal.getsignal(signal.SIGTERM)
    yield
    signal.signal(signal.SIGTERM, previous)


def test_a_sigterm_interrupts_once_and_the_next_is_ignored(sigterm_restored) -> None:
    stop_on_terminate()
    with pytest.raises(KeyboardInterrupt, match="SIGTERM"):
        os.kill(os.getpid(), signal.SIGTERM)
    # the clean-up after the first runs undisturbed: a second SIGTERM neither interrupts nor kills
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
    os.kill(os.getpid(), signal.SIGTERM)


def test_the_bench_group_installs_it(sigterm_restored) -> None:
    from click.testing import CliRunner

    from dralab_kit.bench import bench

    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    result = CliRunner().invoke(bench, ["report", "--help"])
    assert result.exit_code == 0, result.output
    handler = signal.getsignal(signal.SIGTERM)
    assert callable(handler) and handler not in (signal.SIG_DFL, signal.SIG_IGN)
