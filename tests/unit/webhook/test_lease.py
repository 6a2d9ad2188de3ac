"""Leader election on a Lease: acquire, renew, expiry on the candidate's own clock, optimistic concurrency, release.

The store below keeps the two apiserver rules the elector relies on: a create of an existing name is
409, and an update whose ``resourceVersion`` is not the current one is 409. The integration test
(tests/integration/webhook/test_leader_election.py) runs the same elector against the real apiserver.
"""

from __future__ import annotations

import copy
import itertools
from typing import Any

import pytest

from dralab.kube import KubeError
from dralab.webhook.controllers.lease import LeaderElector, LeaseTiming, lease_path

TIMING = LeaseTiming(lease_seconds=15, renew_deadline=10, retry_period=2)


class LeaseStore:
    """Leases by path, with resource versions; ``down`` makes every call fail like an unreachable apiserver."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.versions = itertools.count(1)
        self.down = False
        self.writes = 0

    def request(self, method: str, path: str, *, body: Any = None, timeout: float | None = None) -> dict[str, Any]:
        if self.down:
            raise KubeError(0, "ConnectionRefusedError: apiserver down", what=f"{method} {path}")
        if method == "GET":
            if path not in self.objects:
                raise KubeError(404, "NotFound", what=f"{method} {path}")
            return copy.deepcopy(self.objects[path])
        if method == "POST":
            full = f"{path}/{body['metadata']['name']}"
            if full in self.objects:
                raise KubeError(409, "AlreadyExists", what=f"{method} {path}")
            return self._store(full, body)
        if method == "PUT":
            current = self.objects.get(path)
            if current is None:
                raise KubeError(404, "NotFound", what=f"{method} {path}")
            if body["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]:
                raise KubeError(409, "Conflict", what=f"{method} {path}")
            return self._store(path, body)
        raise AssertionError(f"unexpected {method}")

    def _store(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.writes += 1
        obj = copy.deepcopy(body)
        obj["metadata"]["resourceVersion"] = str(next(self.versions))
        self.objects[path] = obj
        return copy.deepcopy(obj)

    def holder(self) -> str | None:
        return self.objects[lease_path("ns", "jan")]["spec"].get("holderIdentity")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def candidate(store: LeaseStore, clock: Clock, name: str, events: list[str] | None = None) -> LeaderElector:
    def note(what: str):
        return (lambda: events.append(f"{name}:{what}")) if events is not None else None

    return LeaderElector(store, "ns", "jan", identity=name, timing=TIMING, on_start=note("start"),
                         on_stop=note("stop"), clock=clock, wall=lambda: 1_767_225_600.0 + clock.now)


def test_first_candidate_creates_the_lease_and_leads_the_second_waits() -> None:
    store, clock, events = LeaseStore(), Clock(), []
    a, b = candidate(store, clock, "a", events), candidate(store, clock, "b", events)
    assert a.step() is True
    assert b.step() is False
    spec = store.objects[lease_path("ns", "jan")]["spec"]
    assert spec["holderIdentity"] == "a"
    assert spec["leaseDurationSeconds"] == 15
    assert spec["renewTime"].endswith("Z")
    assert events == ["a:start"]


def test_renewal_keeps_the_lease_and_the_acquire_time() -> None:
    store, clock = LeaseStore(), Clock()
    a, b = candidate(store, clock, "a"), candidate(store, clock, "b")
    a.step()
    acquired = store.objects[lease_path("ns", "jan")]["spec"]["acquireTime"]
    for _ in range(20):  # 40 s of renewals, far past one lease duration
        clock.now += 2
        assert a.step() is True
        assert b.step() is False
    spec = store.objects[lease_path("ns", "jan")]["spec"]
    assert spec["acquireTime"] == acquired
    assert spec["leaseTransitions"] == 0


def test_a_silent_holder_loses_the_lease_only_after_a_full_duration_on_the_candidates_clock() -> None:
    store, clock, events = LeaseStore(), Clock(), []
    a, b = candidate(store, clock, "a", events), candidate(store, clock, "b", events)
    a.step()
    assert b.step() is False  # b first sees the record now
    clock.now += 14.9
    assert b.step() is False
    clock.now += 0.1
    assert b.step() is True
    spec = store.objects[lease_path("ns", "jan")]["spec"]
    assert (spec["holderIdentity"], spec["leaseTransitions"]) == ("b", 1)
    # The old holder's next renewal fails (its resourceVersion and holder are stale): it stops, and
    # since it last renewed more than renew_deadline ago it gives up leadership at once.
    assert a.step() is False
    assert events == ["a:start", "b:start", "a:stop"]


def test_the_holders_own_timestamps_are_not_trusted() -> None:
    """A holder whose renewTime looks ancient (clock skew) still holds while its record keeps changing."""
    store, clock = LeaseStore(), Clock()
    a = LeaderElector(store, "ns", "jan", identity="a", timing=TIMING, clock=clock, wall=lambda: 0.0)
    b = candidate(store, clock, "b")
    a.step()
    for _ in range(10):
        clock.now += 2
        a.step()  # renews: a new resourceVersion each time, renewTime stuck in 1970
        assert b.step() is False


def test_racing_candidates_cannot_both_win() -> None:
    """Both read the expired lease; the write of the second carries a stale resourceVersion and gets 409."""
    store, clock = LeaseStore(), Clock()
    old = candidate(store, clock, "old")
    old.step()
    b, c = candidate(store, clock, "b"), candidate(store, clock, "c")
    b.step(), c.step()
    clock.now += 20
    real_request = store.request
    read: dict[str, Any] = {}

    def interleaved(method: str, path: str, **kw: Any) -> dict[str, Any]:
        if method == "GET" and "c" in read:  # c reads, then b reads and writes, then c writes
            return copy.deepcopy(read["c"])
        return real_request(method, path, **kw)

    read["c"] = store.request("GET", lease_path("ns", "jan"))
    assert b.step() is True
    store.request = interleaved  # type: ignore[method-assign]
    assert c.step() is False
    assert store.holder() == "b"


def test_release_hands_over_at_once() -> None:
    store, clock, events = LeaseStore(), Clock(), []
    a, b = candidate(store, clock, "a", events), candidate(store, clock, "b", events)
    a.step()
    assert b.step() is False
    assert a.release() is True
    assert store.holder() is None
    assert b.step() is True  # no wait for expiry
    assert events == ["a:start", "a:stop", "b:start"]


def test_release_by_a_non_leader_writes_nothing() -> None:
    store, clock = LeaseStore(), Clock()
    a, b = candidate(store, clock, "a"), candidate(store, clock, "b")
    a.step()
    writes = store.writes
    assert b.release() is False
    assert store.writes == writes
    assert store.holder() == "a"


def test_a_leader_that_cannot_renew_stops_before_the_lease_can_expire_for_others() -> None:
    store, clock, events = LeaseStore(), Clock(), []
    a = candidate(store, clock, "a", events)
    a.step()
    store.down = True
    clock.now += 9.9
    assert a.step() is True  # within the renew deadline: still leading
    clock.now += 0.1
    assert a.step() is False  # renew deadline (10 s) passed: stopped, 5 s before anyone may take over
    assert events == ["a:start", "a:stop"]


def test_a_callback_that_fails_does_not_stop_the_elector() -> None:
    store, clock = LeaseStore(), Clock()

    def boom() -> None:
        raise RuntimeError("janitor could not start")

    a = LeaderElector(store, "ns", "jan", identity="a", timing=TIMING, on_start=boom, clock=clock)
    assert a.step() is True
    clock.now += 2
    assert a.step() is True


def test_identity_is_unique_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POD_NAME", "dralab-webhook-7d9")
    store = LeaseStore()
    first, second = LeaderElector(store, "ns", "jan"), LeaderElector(store, "ns", "jan")
    assert first.identity.startswith("dralab-webhook-7d9_")
    assert first.identity != second.identity


@pytest.mark.parametrize(("lease", "renew", "retry"), [(10, 10, 2), (15, 10, 10), (15, 10, 0)])
def test_timing_must_leave_the_leader_time_to_stop(lease: float, renew: float, retry: float) -> None:
    with pytest.raises(ValueError, match="retry period < renew deadline < lease duration"):
        LeaseTiming(lease_seconds=lease, renew_deadline=renew, retry_period=retry)
