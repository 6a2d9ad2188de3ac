"""``DriverMetrics.work``: the calling thread's CPU per unit of driver work, not its wall time."""

from __future__ import annotations

import threading

import pytest

from dralab.driver.metrics import DriverMetrics

DRIVER = "ascend.project-hami.io"


def _sample(metrics: DriverMetrics, work: str, part: str) -> float:
    value = metrics.registry.get_sample_value(f"dralab_driver_work_cpu_seconds_{part}",
                                              {"driver": DRIVER, "work": work})
    return value or 0.0


def test_computing_counts_and_waiting_does_not() -> None:
    metrics = DriverMetrics()
    with metrics.work(DRIVER, "prepare"):
        sum(i * i for i in range(300_000))
    computed = _sample(metrics, "prepare", "sum")
    with metrics.work(DRIVER, "reconcile"):
        threading.Event().wait(0.2)  # a call waiting on the apiserver: wall time, no CPU
    assert _sample(metrics, "prepare", "count") == 1 and computed > 0.0
    assert _sample(metrics, "reconcile", "count") == 1
    assert _sample(metrics, "reconcile", "sum") < 0.2 / 4  # far below the wait


def test_another_thread_s_cpu_is_not_counted() -> None:
    metrics = DriverMetrics()
    done = threading.Event()

    def busy() -> None:
        while not done.is_set():
            sum(i for i in range(10_000))

    other = threading.Thread(target=busy)
    other.start()
    try:
        with metrics.work(DRIVER, "status"):
            threading.Event().wait(0.2)
    finally:
        done.set()
        other.join()
    assert _sample(metrics, "status", "sum") < 0.2 / 4  # the busy thread's 0.2 s are its own


def test_a_block_that_raises_is_still_counted() -> None:
    metrics = DriverMetrics()
    with pytest.raises(RuntimeError), metrics.work(DRIVER, "publish"):
        raise RuntimeError("apiserver gone")
    assert _sample(metrics, "publish", "count") == 1


def test_an_unknown_kind_of_work_is_refused_with_the_known_ones() -> None:
    with pytest.raises(ValueError, match="use one of prepare, unprepare"), DriverMetrics().work(DRIVER, "prepar"):
        pass
