"""The janitor's decisions (pure plan) and one reconcile pass against the fake API."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from dralab.kube import informer as informers
from dralab.kube.paths import claims_path
from dralab.webhook.controllers import janitor
from dralab.webhook.metrics import Metrics

from .conftest import delete_uids

NOW = 1_767_225_600.0  # 2026-01-01T00:00:00Z
GRACE = 30.0


def claim(name: str, *, age: float = 0.0, owner_uid: str | None = None, deleting: bool = False) -> dict[str, Any]:
    import datetime as dt

    created = dt.datetime.fromtimestamp(NOW - age, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "ns",
        "uid": f"c-{name}",
        "creationTimestamp": created,
        "resourceVersion": "7",
        "labels": {"app.kubernetes.io/managed-by": "dralab", "dralab.io/lifecycle": "claim"},
    }
    if owner_uid:
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": owner_uid}]
    if deleting:
        meta["deletionTimestamp"] = created
    return {"metadata": meta}


def pod(name: str, uid: str, *claims: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": uid},
        "spec": {"resourceClaims": [{"name": c, "resourceClaimName": c} for c in claims]},
    }


def test_claim_of_an_existing_pod_is_adopted() -> None:
    p = janitor.plan([claim("c1")], [pod("p", "u1", "c1")], NOW, GRACE)
    assert [(c["metadata"]["name"], q["metadata"]["uid"]) for c, q in p.adopt] == [("c1", "u1")]
    assert p.reap == []


def test_young_orphan_waits_for_its_grace_period() -> None:
    p = janitor.plan([claim("c1", age=10)], [], NOW, GRACE)
    assert p.reap == [] and p.adopt == []
    assert abs(p.next_check - 20.0) < 1.0


def test_old_orphan_is_reaped() -> None:
    p = janitor.plan([claim("c1", age=31)], [], NOW, GRACE)
    assert [c["metadata"]["name"] for c in p.reap] == ["c1"]


def test_owned_claim_whose_pod_is_gone_is_reaped_and_live_one_kept() -> None:
    p = janitor.plan(
        [claim("gone", owner_uid="u-old"), claim("live", owner_uid="u1")], [pod("p", "u1", "live")], NOW, GRACE
    )
    assert [c["metadata"]["name"] for c in p.reap] == ["gone"]
    assert p.adopt == []


def test_claims_being_deleted_are_left_alone() -> None:
    assert janitor.plan([claim("c1", age=100, deleting=True)], [], NOW, GRACE).reap == []


def test_owner_patch_is_guarded_by_resource_version() -> None:
    patch = janitor.owner_patch(claim("c1"), pod("p", "u1", "c1"))
    assert patch["metadata"]["resourceVersion"] == "7"
    assert patch["metadata"]["labels"] == {"dralab.io/pod": "p"}
    assert patch["metadata"]["annotations"] == {"dralab.io/pod-name": "p"}
    assert patch["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u1", "blockOwnerDeletion": False, "controller": False}
    ]


def test_reconcile_adopts_and_reaps_after_checking_live_pods(fake_api) -> None:
    path = claims_path("ns")
    for c in (claim("adopt-me"), claim("orphan", age=60), claim("raced", age=60)):
        fake_api.objects[f"{path}/{c['metadata']['name']}"] = c
    # "raced": its pod exists (live) but is not in the janitor's cache yet: must not be deleted.
    fake_api.objects["/api/v1/namespaces/ns/pods/late"] = pod("late", "u9", "raced")
    jan = janitor.Janitor(fake_api, Metrics(), grace_seconds=GRACE, clock=lambda: NOW)
    jan.claims.items = {("ns", n): fake_api.objects[f"{path}/{n}"] for n in ("adopt-me", "orphan", "raced")}
    jan.pods.items = {("ns", "p"): pod("p", "u1", "adopt-me")}
    jan.reconcile_once()
    assert fake_api.names(path) == ["adopt-me", "raced"]
    assert delete_uids(fake_api) == ["c-orphan"]  # deleted only if it is still the claim the janitor saw
    adopted = fake_api.objects[f"{path}/adopt-me"]["metadata"]
    assert adopted["ownerReferences"][0]["uid"] == "u1"
    assert adopted["labels"]["dralab.io/pod"] == "p"
    assert adopted["labels"]["app.kubernetes.io/managed-by"] == "dralab"
    rendered = jan.metrics.render()
    assert b"dralab_janitor_claims_adopted_total 1.0" in rendered
    assert b"dralab_janitor_claims_reaped_total 1.0" in rendered


class WatchingApi:
    """list_all() and watch() scripted: the first watch delivers events then an expiry, later ones block."""

    def __init__(self) -> None:
        self.lists = 0
        self.watched_from: list[str] = []

    def list_all(self, path: str, **_: Any) -> tuple[list[dict[str, Any]], str]:
        self.lists += 1
        items = [pod("a", "ua")] if self.lists == 1 else [pod("b", "ub")]
        return items, str(self.lists)

    def watch(self, path: str, *, resource_version: str, stop, **_: Any):
        self.watched_from.append(resource_version)
        if self.lists == 1:
            yield {"type": "ADDED", "object": pod("c", "uc")}
            yield {"type": "DELETED", "object": pod("a", "ua")}
            yield {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "9"}}}
            yield {"type": "ERROR", "object": {"code": 410, "message": "too old resource version"}}
        else:
            stop.wait(10)


def test_informer_applies_events_and_relists_after_expiry() -> None:
    from dralab.util import wait_for

    api = WatchingApi()
    changes = []
    informer = informers.Informer(api, "/api/v1/pods", "hami.io/dra=true", lambda: changes.append(1), "pods")
    informer.start()
    try:
        wait_for(lambda: api.lists == 2 and informer.synced.is_set(), 10, "the informer to relist")
        wait_for(lambda: [p["metadata"]["name"] for p in informer.snapshot()] == ["b"], 10, "the relisted state")
        assert len(changes) >= 3  # first list, ADDED, DELETED, relist
        assert api.watched_from[:2] == ["1", "2"]  # each watch starts at its list's version, the relist's too
    finally:
        informer.stop()


def test_the_webhooks_own_new_claims_do_not_each_cost_a_pass(fake_api) -> None:
    """A new unowned claim needs a pass only if its pod is cached or its grace ends before the next wake-up."""
    jan = janitor.Janitor(fake_api, Metrics(), grace_seconds=GRACE, clock=lambda: NOW)
    fresh = claim("fresh")
    assert jan.claim_needs_pass("ADDED", fresh) is True  # no pass scheduled yet
    jan._wake_at = NOW + 5  # a pass is due before this claim's grace (30 s) ends
    assert jan.claim_needs_pass("ADDED", fresh) is False
    assert jan.claim_needs_pass("ADDED", claim("old", age=GRACE - 1)) is True  # due in 1 s, before the wake-up
    assert jan.claim_needs_pass("MODIFIED", claim("mine", owner_uid="u1")) is False  # our own adoption patch
    assert jan.claim_needs_pass("DELETED", fresh) is False
    assert jan.claim_needs_pass("MODIFIED", claim("going", deleting=True)) is False
    fresh["metadata"]["annotations"] = {"dralab.io/pod-name": "p"}
    jan.pods.items[("ns", "p")] = pod("p", "u1", "fresh")
    assert jan.claim_needs_pass("ADDED", fresh) is True  # its pod exists: adopt now


def test_adoption_waits_for_the_binding_so_it_never_races_the_schedulers_claim_writes() -> None:
    import datetime as dt

    def stamped(p: dict, age: float, node: str | None = None) -> dict:
        p["metadata"]["creationTimestamp"] = dt.datetime.fromtimestamp(NOW - age, dt.UTC).strftime(
            "%Y-%m-%dT%H:%M:%SZ")
        if node:
            p["spec"]["nodeName"] = node
        return p

    c = claim("c1", age=2)
    pending = janitor.plan([c], [stamped(pod("p", "u1", "c1"), age=2)], NOW, GRACE)
    assert pending.adopt == [] and pending.reap == []
    assert pending.next_check == janitor.ADOPT_PENDING_AFTER - 2  # look again when it has waited long enough
    bound = janitor.plan([c], [stamped(pod("p", "u1", "c1"), age=2, node="n1")], NOW, GRACE)
    assert [x[1]["metadata"]["name"] for x in bound.adopt] == ["p"]
    stuck = janitor.plan([c], [stamped(pod("p", "u1", "c1"), age=janitor.ADOPT_PENDING_AFTER)], NOW, GRACE)
    assert len(stuck.adopt) == 1  # pending for long: adopted anyway, so the garbage collector covers it


def test_a_young_claim_whose_pod_was_seen_and_is_gone_is_reaped_at_once() -> None:
    """A pod deleted before adoption (pending, or deleted right after binding) frees its claim now.

    The grace period is for a pod that has not appeared yet; waiting it out after the pod was seen
    and deleted would only hold the device's capacity for up to ``GRACE`` seconds longer.
    """
    c = claim("c1", age=2)
    first = janitor.plan([c], [pod("p", "u1", "c1")], NOW, GRACE)
    assert first.used == {("ns", "c1")} and first.reap == []
    after = janitor.plan([c], [], NOW, GRACE, first.used)
    assert [x["metadata"]["name"] for x in after.reap] == ["c1"]
    never_seen = janitor.plan([claim("c2", age=2)], [], NOW, GRACE, first.used)
    assert never_seen.reap == []  # its pod may still be on its way: the grace period applies


def test_owner_patches_wait_for_admissions_and_scheduling_to_quiet_down_but_not_forever() -> None:
    q, most = janitor.ADOPT_QUIET, janitor.ADOPT_DEFER_MAX
    assert janitor.adoption_delay(NOW, None, NOW, False) == 0.0  # nothing going on: patch now
    assert janitor.adoption_delay(NOW, NOW - 0.25, NOW, False) == q - 0.25  # a claim was just created
    assert janitor.adoption_delay(NOW, NOW - q, NOW, False) == 0.0  # quiet for long enough
    assert janitor.adoption_delay(NOW, None, NOW, True) == q  # pods still being scheduled: look again
    assert janitor.adoption_delay(NOW, NOW, NOW - most + 0.5, True) == 0.5  # capped by the longest wait
    assert janitor.adoption_delay(NOW, NOW, NOW - most, True) == 0.0  # waited long enough: patch anyway


def _stamped(p: dict[str, Any], age: float, node: str | None = None) -> dict[str, Any]:
    import datetime as dt

    p["metadata"]["creationTimestamp"] = dt.datetime.fromtimestamp(NOW - age, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    if node:
        p["spec"]["nodeName"] = node
    return p


def test_scheduling_means_a_young_unbound_pod_that_stays() -> None:
    assert janitor.scheduling([_stamped(pod("p", "u1"), age=1)], NOW)
    assert not janitor.scheduling([_stamped(pod("p", "u1"), age=1, node="n1")], NOW)
    assert not janitor.scheduling([_stamped(pod("p", "u1"), age=janitor.ADOPT_PENDING_AFTER)], NOW)
    going = _stamped(pod("p", "u1"), age=1)
    going["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert not janitor.scheduling([going], NOW)


def test_a_held_back_adoption_is_sent_once_the_burst_is_over(fake_api) -> None:
    path = claims_path("ns")
    fake_api.objects[f"{path}/c1"] = claim("c1", age=2)
    clock = [NOW]
    jan = janitor.Janitor(fake_api, Metrics(), grace_seconds=GRACE, clock=lambda: clock[0])
    jan.claims.items = {("ns", "c1"): fake_api.objects[f"{path}/c1"]}
    jan.pods.items = {("ns", "p"): _stamped(pod("p", "u1", "c1"), age=2, node="n1"),
                      ("ns", "q"): _stamped(pod("q", "u2"), age=0.5)}  # another pod still being scheduled
    assert jan.claim_needs_pass("ADDED", claim("c2")) is True  # a new claim: admissions under way
    wait = jan.reconcile_once()
    assert "ownerReferences" not in fake_api.objects[f"{path}/c1"]["metadata"]  # held back
    assert 0 < wait <= janitor.ADOPT_QUIET + 0.05
    clock[0] = NOW + janitor.ADOPT_QUIET
    jan.pods.items[("ns", "q")]["spec"]["nodeName"] = "n1"  # bound: the burst is over ...
    jan.pods._changed("MODIFIED", jan.pods.items[("ns", "q")])  # ... as its watch event says
    jan.reconcile_once()
    assert fake_api.objects[f"{path}/c1"]["metadata"]["ownerReferences"][0]["uid"] == "u1"


def test_a_pod_deleted_before_adoption_gets_no_owner_patch_and_its_claim_is_reaped_when_it_is_gone(fake_api) -> None:
    """The owner patch is skipped for a pod on its way out; the janitor frees its claim itself."""
    path = claims_path("ns")
    fake_api.objects[f"{path}/c1"] = claim("c1", age=2)
    jan = janitor.Janitor(fake_api, Metrics(), grace_seconds=GRACE, clock=lambda: NOW)
    jan.claims.items = {("ns", "c1"): fake_api.objects[f"{path}/c1"]}
    going = _stamped(pod("p", "u1", "c1"), age=2, node="n1")
    going["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    jan.pods.items = {("ns", "p"): going}
    jan.reconcile_once()
    assert "ownerReferences" not in fake_api.objects[f"{path}/c1"]["metadata"]
    assert fake_api.names(path) == ["c1"]  # still in use by the terminating pod: kept
    jan.pods._changed("DELETED", going)  # the pod is gone (and not in the live list either)
    jan.reconcile_once()
    assert fake_api.names(path) == [] and delete_uids(fake_api) == ["c-c1"]  # freed now, not after the grace


def test_a_pod_that_lived_between_two_passes_still_frees_its_claim_at_once(fake_api) -> None:
    """The first replay on a fresh cluster: pod A is added and deleted before any pass runs.

    The pod's watch events themselves record that it named the claim, so the next pass reaps the
    claim now instead of waiting out the grace period meant for pods that have not appeared yet.
    """
    path = claims_path("ns")
    fake_api.objects[f"{path}/c1"] = claim("c1", age=2)
    jan = janitor.Janitor(fake_api, Metrics(), grace_seconds=GRACE, clock=lambda: NOW)
    jan.claims.items = {("ns", "c1"): fake_api.objects[f"{path}/c1"]}
    short_lived = pod("a", "u1", "c1")
    jan.pods._changed("ADDED", short_lived)  # informer events: no pass ran in between
    jan.pods._changed("DELETED", short_lived)
    jan.reconcile_once()
    assert f"{path}/c1" not in fake_api.objects


def test_a_claim_never_named_by_a_pod_still_gets_its_grace_period(fake_api) -> None:
    path = claims_path("ns")
    fake_api.objects[f"{path}/c1"] = claim("c1", age=2)
    jan = janitor.Janitor(fake_api, Metrics(), grace_seconds=GRACE, clock=lambda: NOW)
    jan.claims.items = {("ns", "c1"): fake_api.objects[f"{path}/c1"]}
    jan.pods._changed("DELETED", pod("other", "u9", "c2"))  # names another claim
    jan.reconcile_once()
    assert f"{path}/c1" in fake_api.objects


def test_the_memory_of_used_claims_forgets_adopted_and_long_gone_claims(fake_api) -> None:
    clock = [NOW]
    jan = janitor.Janitor(fake_api, Metrics(), grace_seconds=GRACE, clock=lambda: clock[0])
    jan.reconcile_once()  # the first (full) pass, over empty caches
    jan.pods._changed("ADDED", pod("a", "u1", "owned", "elsewhere"))
    jan.claims._changed("ADDED", claim("owned", owner_uid="u1"))
    jan.reconcile_once()
    assert set(jan._seen_used) == {("ns", "elsewhere")}  # adopted: its owner reference decides now
    clock[0] = NOW + GRACE + 1
    jan.reconcile_once()
    assert not jan.last_full and jan._seen_used == {}  # never cached for a whole grace period: not dralab's, or deleted


# -- the incremental pass (issue 27) -------------------------------------------------------------


def _bound(name: str, uid: str, *claims: str) -> dict[str, Any]:
    return _stamped(pod(name, uid, *claims), age=60, node="n1")


def test_one_pod_event_decides_only_the_claims_that_pod_concerns_and_a_resync_decides_all(fake_api) -> None:
    """2,000 cached pods with their adopted claims: a pod event costs a pass over its own claim, not 2,000."""
    n = 2000
    clock = [NOW]
    jan = janitor.Janitor(fake_api, Metrics(), grace_seconds=GRACE, clock=lambda: clock[0])
    jan.pods.items = {("ns", f"p{i}"): _bound(f"p{i}", f"u{i}", f"c{i}") for i in range(n)}
    jan.claims.items = {("ns", f"c{i}"): claim(f"c{i}", age=60, owner_uid=f"u{i}") for i in range(n)}
    jan.reconcile_once()
    assert jan.last_full and jan.last_evaluated == n
    clock[0] += 1
    jan.pods._changed("MODIFIED", _bound("p7", "u7", "c7"))  # say, a status update
    jan.reconcile_once()
    assert not jan.last_full and jan.last_evaluated == 1
    jan.reconcile_once()  # nothing happened since
    assert jan.last_evaluated == 0
    jan.pods._changed("DELETED", _bound("p8", "u8", "c8"))  # its claim is owned by it: reaped now
    jan.reconcile_once()
    assert jan.last_evaluated == 1 and delete_uids(fake_api) == ["c-c8"]
    clock[0] += jan.resync  # the safety net: every claim again
    jan.reconcile_once()
    assert jan.last_full and jan.last_evaluated == n
    jan.pods._listed(list(jan.pods.items.values()), "9")  # a relist (after 410 Gone): every claim again
    jan.reconcile_once()
    assert jan.last_full and jan.last_evaluated == n


def test_a_grace_period_ends_without_any_event_and_the_claim_is_reaped_at_its_deadline(fake_api) -> None:
    path = claims_path("ns")
    fake_api.objects[f"{path}/c1"] = claim("c1", age=2)
    clock = [NOW]
    jan = janitor.Janitor(fake_api, Metrics(), grace_seconds=GRACE, clock=lambda: clock[0])
    jan.claims.items = {("ns", "c1"): fake_api.objects[f"{path}/c1"]}
    wait = jan.reconcile_once()
    assert wait == GRACE - 2 + 0.05  # woken at the deadline
    clock[0] = NOW + GRACE - 2 - 0.5
    jan.reconcile_once()
    assert jan.last_evaluated == 0 and fake_api.names(path) == ["c1"]  # not yet, and nothing to decide
    clock[0] = NOW + GRACE - 2
    jan.reconcile_once()
    assert not jan.last_full and jan.last_evaluated == 1
    assert fake_api.names(path) == [] and delete_uids(fake_api) == ["c-c1"]


def test_the_counts_a_pass_needs_follow_the_events(fake_api) -> None:
    """The janitor_pending gauge and the scheduling check come from the index, not from a walk."""
    jan = janitor.Janitor(fake_api, Metrics(), grace_seconds=GRACE, clock=lambda: NOW)
    jan.reconcile_once()
    jan.claims._changed("ADDED", claim("c1"))
    jan.claims._changed("ADDED", claim("c2", owner_uid="u1"))
    young = _stamped(pod("q", "u2"), age=1)
    jan.pods._changed("ADDED", young)
    jan.reconcile_once()
    assert b"dralab_janitor_unowned_claims 1.0" in jan.metrics.render()
    assert jan._index.scheduling(NOW)
    jan.pods._changed("MODIFIED", _stamped(pod("q", "u2"), age=1, node="n1"))
    jan.claims._changed("DELETED", claim("c1"))
    jan.reconcile_once()
    assert b"dralab_janitor_unowned_claims 0.0" in jan.metrics.render()
    assert not jan._index.scheduling(NOW)


class NullApi:
    """An API that accepts every patch and delete and has no live pods: the world changes only by events."""

    def list(self, path: str, **_: Any) -> dict[str, Any]:
        return {"items": []}

    def patch(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return {}

    def delete(self, path: str, **_: Any) -> None:
        return None


POD_NAMES = ("a", "b")
CLAIM_NAMES = ("c0", "c1", "c2")
OWNER_UIDS = (None, None, None, "u-a-0", "u-a-1", "u-b-0", "u-gone")  # unowned about half the time
_ages = st.integers(0, 40)
_step = st.sampled_from([0.5, 1.0, 2.0, 5.0, 8.0, 10.0, 28.0, 31.0])
EVENTS = st.lists(st.one_of(
    st.tuples(st.just("pod"), st.sampled_from(POD_NAMES), st.integers(0, 1), st.integers(0, 5).map(bool),
              st.lists(st.sampled_from(CLAIM_NAMES), max_size=2, unique=True), st.booleans(),
              st.integers(0, 3).map(lambda n: n == 0), _ages),
    st.tuples(st.just("pod-gone"), st.sampled_from(POD_NAMES)),
    st.tuples(st.just("pod-gone"), st.sampled_from(POD_NAMES)),
    st.tuples(st.just("claim"), st.sampled_from(CLAIM_NAMES), st.sampled_from(OWNER_UIDS),
              st.integers(0, 3).map(lambda n: n == 0), st.one_of(st.none(), _ages)),
    st.tuples(st.just("claim-gone"), st.sampled_from(CLAIM_NAMES)),
    st.tuples(st.just("tick"), _step), st.tuples(st.just("tick"), _step),
    st.tuples(st.just("pass")), st.tuples(st.just("pass")), st.tuples(st.just("pass")),
    # rare: a relist makes the next pass a full one, which would hide what the incremental ones miss
    st.integers(0, 5).flatmap(lambda n: st.tuples(st.just("relist" if n == 0 else "pass"), st.booleans(),
                                                  st.sets(st.integers(0, 3), max_size=2))),
), max_size=60)


def _at(t: float) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@settings(max_examples=500, deadline=None)
@given(EVENTS)
def test_incremental_passes_decide_what_a_full_plan_over_the_same_state_decides(events: list[tuple[Any, ...]]) -> None:
    """Random pod and claim events, relists and clock advances: after every pass the janitor's
    decisions (adoptions with their pod, deletions, the next deadline), its memory of used claims,
    the gauge and the scheduling check equal what the full, pure computation gives over its caches."""
    clock = [NOW]
    jan = janitor.Janitor(NullApi(), Metrics(), grace_seconds=GRACE, resync_seconds=1e9, clock=lambda: clock[0])
    ref_seen: dict[tuple[str, str], float] = {}  # the memory of used claims as the janitor kept it before issue 27

    def check_pass() -> None:
        now, seen = clock[0], set(jan._seen_used)
        assert seen == set(ref_seen)
        jan.reconcile_once()
        claims, pods = jan.claims.snapshot(), jan.pods.snapshot()
        ref = janitor.plan(claims, pods, now, GRACE, seen)
        assert {k: informers.key_of(p) for k, (_, p) in jan._adopting.items()} == {
            informers.key_of(c): informers.key_of(p) for c, p in ref.adopt}
        assert all(c is jan.claims.items[k] for k, (c, _) in jan._adopting.items())  # the cached claim
        assert set(jan._reaping) == {informers.key_of(c) for c in ref.reap}
        due = jan._next_due(now)
        assert (due is None) == (ref.next_check is None)
        assert due is None or abs(due - ref.next_check) < 1e-6
        assert len(jan._index.unowned) == sum(1 for c in claims if janitor._unowned(c))
        assert jan._index.scheduling(now) == janitor.scheduling(pods, now)
        cached = {informers.key_of(c): c for c in claims}
        for key in ref.used:
            ref_seen.setdefault(key, now)
        for key, since in list(ref_seen.items()):
            c = cached.get(key)
            if (c is not None and janitor._pod_owners(c["metadata"])) or (c is None and now - since > GRACE):
                del ref_seen[key]
        assert jan._seen_used == ref_seen

    for ev in [*events, ("pass",)]:
        kind = ev[0]
        if kind == "pod":
            _, name, gen, has_uid, names, bound, deleting, age = ev
            p = pod(name, f"u-{name}-{gen}", *names)
            if not has_uid:
                del p["metadata"]["uid"]
            p["metadata"]["creationTimestamp"] = _at(clock[0] - age)
            if bound:
                p["spec"]["nodeName"] = "n1"
            if deleting:
                p["metadata"]["deletionTimestamp"] = _at(clock[0])
            if has_uid:
                for c in names:
                    ref_seen.setdefault(("ns", c), clock[0])
            jan.pods._changed("ADDED" if ("ns", name) not in jan.pods.items else "MODIFIED", p)
        elif kind == "pod-gone":  # a pod not cached: its DELETED event still counts (it existed)
            gone = jan.pods.items.get(("ns", ev[1])) or pod(ev[1], f"u-{ev[1]}-9", *CLAIM_NAMES[:1])
            for c in janitor.claim_refs([gone]) if gone["metadata"].get("uid") else ():
                ref_seen.setdefault(c, clock[0])
            jan.pods._changed("DELETED", gone)
        elif kind == "claim":
            _, name, owner, deleting, age = ev
            c = claim(name, owner_uid=owner, deleting=deleting)
            if age is None:
                del c["metadata"]["creationTimestamp"]
            else:
                c["metadata"]["creationTimestamp"] = _at(clock[0] - age)
            jan.claims._changed("ADDED" if ("ns", name) not in jan.claims.items else "MODIFIED", c)
        elif kind == "claim-gone":
            if ("ns", ev[1]) in jan.claims.items:
                jan.claims._changed("DELETED", jan.claims.items[("ns", ev[1])])
        elif kind == "tick":
            clock[0] += ev[1]
        elif kind == "relist":  # a relist after 410 Gone: some objects went meanwhile, with no event
            _, of_pods, drop = ev
            informer = jan.pods if of_pods else jan.claims
            kept = [o for i, o in enumerate(informer.snapshot()) if i not in drop]
            informer._listed(kept, "v")
        else:
            check_pass()
