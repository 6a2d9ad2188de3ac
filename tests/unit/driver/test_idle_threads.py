"""A node's idle driver threads sleep until there is work: the slice publisher until a trigger or its
resync, the claim status writer until an update or close(). A fleet process hosts thousands of them."""

from __future__ import annotations

import threading

import pytest

from dralab.driver.metrics import DriverMetrics
from dralab.driver.publisher import PublishResult, SlicePublisher
from dralab.driver.status import StatusWriter
from dralab.util import wait_for


class _Waits(threading.Event):
    """An Event that records the timeout of each wait."""

    def __init__(self) -> None:
        super().__init__()
        self.timeouts: list[float | None] = []

    def wait(self, timeout: float | None = None) -> bool:
        self.timeouts.append(timeout)
        return super().wait(timeout)


class _Ticks(_Waits):
    """A stop Event whose waits return at once (a loop's periods, recorded without being slept)."""

    def wait(self, timeout: float | None = None) -> bool:
        self.timeouts.append(timeout)
        return self.is_set()


def test_the_publisher_sleeps_until_a_trigger_and_a_stop_wakes_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("dralab.driver.publisher.spread_start", lambda period: period)  # no random first resync
    publisher = SlicePublisher.__new__(SlicePublisher)  # only run()'s loop is under test
    publisher.resync_seconds = 3600.0
    publisher._trigger = _Waits()
    publishes: list[int] = []
    publisher.publish_once = lambda: publishes.append(1) or PublishResult(False, 1, [])  # type: ignore[method-assign]
    publisher.metrics = DriverMetrics()
    publisher.driver = "ascend.project-hami.io"
    stop = threading.Event()
    thread = threading.Thread(target=publisher.run, args=(stop,), daemon=True)
    thread.start()
    wait_for(lambda: publisher._trigger.timeouts, 10, "the publisher to sleep")
    assert publisher._trigger.timeouts[0] > 3000  # one wait for the whole resync, not a 0.5 s poll
    publisher.trigger()
    wait_for(lambda: len(publishes) == 2, 10, "a publish on the trigger")
    stop.set()
    publisher.trigger()  # what DriverProcess.stop does
    thread.join(10)
    assert not thread.is_alive() and len(publishes) == 2


def test_the_status_writer_ends_on_close_without_a_stop() -> None:
    writer = StatusWriter(client=None, backoff=0)  # type: ignore[arg-type]
    thread = threading.Thread(target=writer.run, args=(threading.Event(),), daemon=True)
    thread.start()
    writer.close()
    thread.join(10)
    assert not thread.is_alive()




def test_spread_start_waits_a_random_point_within_the_period() -> None:
    from dralab.util import spread_start

    assert spread_start(300.0, lambda: 0.0) == 0.0 and spread_start(300.0, lambda: 0.5) == 150.0
    waits = [spread_start(300.0) for _ in range(200)]
    assert all(0.0 <= w < 300.0 for w in waits) and max(waits) - min(waits) > 150.0  # spread, not one instant


def test_the_reconcile_loop_first_waits_a_spread_start_then_whole_periods(monkeypatch: pytest.MonkeyPatch) -> None:
    from dralab.driver.metrics import DriverMetrics
    from dralab.driver.runner import DriverProcess, RunOptions

    monkeypatch.setattr("dralab.driver.runner.spread_start", lambda period: period / 4)
    proc = DriverProcess.__new__(DriverProcess)  # only the loop is under test
    proc.options = RunOptions(node="n", reconcile_seconds=600.0)
    proc.metrics = DriverMetrics()
    stop = _Ticks()
    passes: list[int] = []

    class State:
        driver = "ascend.project-hami.io"

        def reconcile(self) -> list[str]:
            passes.append(1)
            if len(passes) == 2:
                stop.set()
            return []

    proc._reconcile_loop(State())(stop)  # type: ignore[arg-type]
    assert stop.timeouts == [150.0, 600.0, 600.0] and len(passes) == 2
