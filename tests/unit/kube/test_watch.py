"""The one list-and-watch loop: versions move with events and bookmarks, 410 relists, failures resume."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from dralab.kube import Expired, Kube, KubeError, ListWatch

PATH = "/api/v1/pods"


def _obj(name: str, version: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "resourceVersion": version}}


class Recorder:
    def __init__(self) -> None:
        self.lists: list[tuple[list[str], str]] = []
        self.events: list[tuple[str, str]] = []

    def on_list(self, items: list[dict[str, Any]], version: str) -> None:
        self.lists.append(([i["metadata"]["name"] for i in items], version))

    def on_event(self, kind: str, obj: dict[str, Any]) -> None:
        self.events.append((kind, obj["metadata"]["name"]))


def _stopping(stop: threading.Event):
    def answer(query: dict[str, str]) -> list[dict[str, Any]]:
        stop.set()
        return []

    return answer


def test_resumes_from_the_last_version_and_relists_on_410(apiserver) -> None:
    stop = threading.Event()
    script = apiserver.script
    script.on("GET", PATH,
              (200, {"items": [_obj("a", "9")], "metadata": {"resourceVersion": "10"}}),
              (200, {"items": [_obj("c", "19")], "metadata": {"resourceVersion": "20"}}))
    script.on("WATCH", PATH,
              [{"type": "ADDED", "object": _obj("b", "11")}, {"type": "BOOKMARK", "object": _obj("", "15")}],
              [{"type": "ERROR", "object": {"kind": "Status", "code": 410, "message": "too old resource version"}}],
              _stopping(stop))
    seen = Recorder()
    with Kube.from_kubeconfig(apiserver.kubeconfig) as kube:
        watch = ListWatch(kube, PATH, on_list=seen.on_list, on_event=seen.on_event, label_selector="x=y",
                          backoff=(0.01, 0.02))
        watch.run(stop)
    assert seen.lists == [(["a"], "10"), (["c"], "20")]
    assert seen.events == [("ADDED", "b")], "bookmarks move the version only"
    watches = [s.query for s in script.requests("GET") if "watch" in s.query]
    assert [w["resourceVersion"] for w in watches] == ["10", "15", "20"]
    assert all(w["allowWatchBookmarks"] == "true" and w["labelSelector"] == "x=y" for w in watches)


def test_a_failed_watch_backs_off_and_resumes_without_a_relist(apiserver) -> None:
    stop = threading.Event()
    script = apiserver.script
    script.on("GET", PATH, (200, {"items": [], "metadata": {"resourceVersion": "10"}}))
    unavailable = {"kind": "Status", "code": 500, "reason": "InternalError", "message": "etcd away"}
    script.on("WATCH", PATH, (500, unavailable), [{"type": "MODIFIED", "object": _obj("a", "12")}], _stopping(stop))
    seen = Recorder()
    with Kube.from_kubeconfig(apiserver.kubeconfig) as kube:
        ListWatch(kube, PATH, on_list=seen.on_list, on_event=seen.on_event, backoff=(0.01, 0.02)).run(stop)
    assert len(seen.lists) == 1
    assert seen.events == [("MODIFIED", "a")]
    watches = [s.query["resourceVersion"] for s in script.requests("GET") if "watch" in s.query]
    assert watches == ["10", "10", "12"]


def test_a_410_answer_before_the_stream_relists(apiserver) -> None:
    stop = threading.Event()
    script = apiserver.script
    script.on("GET", PATH, (200, {"items": [], "metadata": {"resourceVersion": "10"}}),
              (200, {"items": [], "metadata": {"resourceVersion": "30"}}))
    gone = {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old"}
    script.on("WATCH", PATH, (410, gone), _stopping(stop))
    seen = Recorder()
    with Kube.from_kubeconfig(apiserver.kubeconfig) as kube:
        ListWatch(kube, PATH, on_list=seen.on_list, on_event=seen.on_event, backoff=(0.01, 0.02)).run(stop)
    assert [v for _, v in seen.lists] == ["10", "30"]


def test_error_events_raise_the_right_error() -> None:
    watch = ListWatch(None, PATH, on_list=lambda i, v: None, on_event=lambda k, o: None)
    with pytest.raises(Expired):
        watch.handle({"type": "ERROR", "object": {"code": 410, "message": "too old"}})
    with pytest.raises(KubeError) as err:
        watch.handle({"type": "ERROR", "object": {"code": 500, "reason": "InternalError", "message": "boom"}})
    assert err.value.status == 500 and err.value.message == "boom"
    watch.handle({"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "42"}}})
    assert watch.resource_version == "42"


def test_stop_closes_an_open_watch(apiserver) -> None:
    from .conftest import Held

    held = Held([{"type": "ADDED", "object": _obj("a", "11")}])
    apiserver.script.on("GET", PATH, (200, {"items": [], "metadata": {"resourceVersion": "10"}}))
    apiserver.script.on("WATCH", PATH, held)
    arrived = threading.Event()
    with Kube.from_kubeconfig(apiserver.kubeconfig) as kube:
        watch = ListWatch(kube, PATH, on_list=lambda items, version: None, on_event=lambda k, o: arrived.set())
        thread = threading.Thread(target=watch.run, daemon=True)
        thread.start()
        assert arrived.wait(60), "the first event never arrived"
        watch.stop()  # the stream is still open: only closing it ends the loop
        thread.join(60)
        ended = not thread.is_alive()
        held.release.set()
    assert ended, "stop() did not end a watch whose stream stayed open"
    assert watch.resource_version == "11"
