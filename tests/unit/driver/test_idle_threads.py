"""A node's idle driver threads sleep until there is work: the slice publisher until a trigger or its
resync, the claim status writer until an update or close(). A fleet process hosts thousands of them."""

from __future__ import annotations

import threading

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


def test_the_publisher_sleeps_until_a_trigger_and_a_stop_wakes_it() -> None:
    publisher = SlicePublisher.__new__(SlicePublisher)  # only run()'s loop is under test
    publisher.resync_seconds = 3600.0
    publisher._trigger = _Waits()
    publishes: list[int] = []
    publisher.publish_once = lambda: publishes.append(1) or PublishResult(False, 1, [])  # type: ignore[method-assign]
    publisher.metrics = None  # type: ignore[assignment]
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


