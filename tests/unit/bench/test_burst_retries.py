"""BurstRunner.send_create: overload answers are resent as a controller would, everything else fails at once.

The apiserver is httpx's MockTransport answering from a script; the backoff is patched to 0 so the
test waits for nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest

from dralab_kit.bench import concurrency
from dralab_kit.bench.concurrency import Burst, BurstRunner, retry_delay

REFUSED = '{"kind":"Status","message":"dralab could not finish this admission within 8 s; retry the pod"}'


def _runner(answers: list[int], retry: bool) -> tuple[BurstRunner, list[int]]:
    sent: list[int] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(1)
        code = answers[len(sent) - 1]
        return httpx.Response(code, text=REFUSED if code >= 400 else "{}")

    client = httpx.AsyncClient(transport=httpx.MockTransport(answer), base_url="https://apiserver")
    return BurstRunner(client, retry_refusals=retry), sent


def _send(runner: BurstRunner, burst: Burst) -> bool:
    return asyncio.run(runner.send_create("/api/v1/namespaces/b/pods", {"metadata": {"name": "p"}}, burst))


@pytest.fixture(autouse=True)
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(concurrency, "retry_delay", lambda attempt: 0.0)


def test_a_refused_create_is_resent_until_it_is_admitted() -> None:
    runner, sent = _runner([504, 429, 201], retry=True)
    burst = Burst(n=1)
    assert _send(runner, burst) is True
    assert (len(sent), burst.retries, burst.failures) == (3, 2, 0)
    assert burst.first_refusal.startswith("HTTP 504: ") and "retry the pod" in burst.first_refusal  # the first kept
    assert burst.first_error == ""  # resent and created: not a failure


def test_a_resend_meeting_the_pod_already_made_counts_as_created() -> None:
    runner, sent = _runner([504, 409], retry=True)
    burst = Burst(n=1)
    assert _send(runner, burst) is True and burst.failures == 0 and len(sent) == 2


def test_without_retries_the_first_refusal_is_a_failure() -> None:
    runner, sent = _runner([504, 201], retry=False)
    burst = Burst(n=1)
    assert _send(runner, burst) is False
    assert (len(sent), burst.retries, burst.failures) == (1, 0, 1)
    assert burst.first_error.startswith("HTTP 504") and "retry the pod" in burst.first_error


def test_a_denial_is_never_resent_and_a_first_409_is_a_failure() -> None:
    for code in (400, 403, 409):
        runner, sent = _runner([code, 201], retry=True)
        burst = Burst(n=1)
        assert _send(runner, burst) is False and len(sent) == 1 and burst.retries == 0


def test_resends_stop_after_the_last_attempt() -> None:
    runner, sent = _runner([504] * (concurrency.RETRY_ATTEMPTS + 1), retry=True)
    burst = Burst(n=1)
    assert _send(runner, burst) is False
    assert (len(sent), burst.retries, burst.failures) == (concurrency.RETRY_ATTEMPTS + 1, concurrency.RETRY_ATTEMPTS, 1)


def test_backoff_doubles_to_a_ceiling() -> None:
    assert [retry_delay(a) for a in range(1, 7)] == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0]


def _pod(name: str, node: str | None, phase: str) -> dict[str, object]:
    return {"metadata": {"name": name, "resourceVersion": "2"}, "spec": {"nodeName": node} if node else {},
            "status": {"phase": phase}}


def test_a_burst_stops_waiting_once_every_pod_is_bound_and_none_starts_running(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """p2 is bound but never runs (a claim that will never be prepared): the wait ends on the stall,
    not after the whole timeout, and p2 counts as not running."""
    import json

    monkeypatch.setattr(concurrency, "STALL_CHECK_S", 0.01)
    pods = [_pod("p1", "n1", "Running"), _pod("p2", "n1", "Pending")]

    def answer(request: httpx.Request) -> httpx.Response:
        if request.method == "POST":
            return httpx.Response(201, text="{}")
        if request.url.params.get("watch"):
            lines = "".join(json.dumps({"type": "MODIFIED", "object": p}) + "\n" for p in pods)

            async def stream() -> AsyncIterator[bytes]:  # the events, then a watch that stays open
                yield lines.encode()
                await asyncio.Event().wait()

            return httpx.Response(200, content=stream())
        return httpx.Response(200, json={"metadata": {"resourceVersion": "1"}, "items": pods})

    client = httpx.AsyncClient(transport=httpx.MockTransport(answer), base_url="https://apiserver")
    runner = BurstRunner(client, timeout=3600.0, stall_s=0.05)
    burst = asyncio.run(runner.run("b", [{"metadata": {"name": "p1"}}, {"metadata": {"name": "p2"}}], True))
    assert len(burst.latencies) == 2 and len(burst.running) == 1
    assert burst.not_running == 1 and burst.failures == 0
    assert "1 pod(s) bound but not Running" in burst.first_error


def test_duplicate_claims_counts_pods_owning_more_than_one() -> None:
    from dralab_kit.bench.fleet import duplicate_claims

    def claim(*owners: str) -> dict[str, object]:
        return {"metadata": {"ownerReferences": [{"kind": "Pod", "uid": u} for u in owners]}}

    assert duplicate_claims([claim("a"), claim("a"), claim("b"), claim(), claim("c"), claim("c"), claim("c")]) == 2


POD = {"metadata": {"name": "p"}}
RUNNING = {"metadata": {"name": "p", "resourceVersion": "7"}, "spec": {"nodeName": "n-0"},
           "status": {"phase": "Running"}}


def _watched_runner(relists: list[tuple[int, str]], timeout: float = 60.0) -> tuple[BurstRunner, list[str]]:
    """An apiserver whose first pod watch ends at once, whose relists answer from ``relists`` in turn, and
    whose next watch shows the pod bound and Running."""
    import json

    seen: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        watch = request.url.params.get("watch") == "true"
        if request.method == "POST":
            seen.append("create")
            return httpx.Response(201, json=POD)
        if watch:
            seen.append("watch")
            body = "" if seen.count("watch") == 1 else json.dumps({"type": "MODIFIED", "object": RUNNING}) + "\n"
            return httpx.Response(200, text=body)
        seen.append("list")
        if seen.count("list") == 1:
            return httpx.Response(200, json={"metadata": {"resourceVersion": "1"}, "items": []})
        code, text = relists[min(seen.count("list") - 2, len(relists) - 1)]
        return httpx.Response(code, text=text)

    client = httpx.AsyncClient(transport=httpx.MockTransport(answer), base_url="https://apiserver")
    return BurstRunner(client, timeout=timeout), seen


def test_a_relist_the_apiserver_refuses_does_not_end_the_pod_watch() -> None:
    runner, seen = _watched_runner([(504, "etcd request timed out")])
    burst = asyncio.run(runner.run("b", [POD], wait_running=True))
    # the refused relist is followed by a watch from the last version, which sees the pod Running
    assert seen[:3] == ["list", "watch", "list"] and seen.count("watch") >= 2
    assert burst.failures == 0 and len(burst.running) == 1 and burst.watch_restarts >= 1


def test_a_watch_that_stops_fails_the_batch_at_once_instead_of_waiting_out_the_timeout() -> None:
    runner, _ = _watched_runner([(404, '{"kind": "Status"}')], timeout=600.0)  # a list without metadata
    # raised within a stall check: before, the batch waited its 600 s and counted the pod as not bound
    with pytest.raises(RuntimeError, match="the pod watch of b stopped: KeyError"):
        asyncio.run(runner.run("b", [POD], wait_running=True))
