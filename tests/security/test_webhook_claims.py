"""Attack 5: claims per pod. A pod with hundreds of containers is denied naming the cap; one deadline
covers a whole admission and nothing is created after it passes."""

from __future__ import annotations

import itertools
from pathlib import Path

import anyio
import pytest

from dralab.config import parse_config
from dralab.kube.paths import claims_path
from dralab.model.convert import Converter
from dralab.model.denials import Denied
from dralab.webhook.controllers.janitor import CLAIM_SELECTOR
from dralab.webhook.lifecycle import ClaimLifecycle, LifecycleError
from dralab.webhook.metrics import Metrics

from ._webhook import answer, gpu_pod, review, serve


def test_pod_with_500_containers_is_denied_naming_the_cap(tmp_path: Path) -> None:
    with serve(tmp_path) as s, s.client(timeout=10) as c:
        got = answer(c.post(f"{s.url}/mutate", json=review(gpu_pod(containers=500))))
    assert got["allowed"] is False and got["status"]["code"] == 400
    message = got["status"]["message"]
    assert message.startswith("spec.containers:"), message
    assert "500" in message and "maxClaimsPerPod" in message


def test_cap_is_configurable() -> None:
    cfg = parse_config({"webhook": {"maxClaimsPerPod": 2}})
    conv = Converter(cfg.vendors, max_claims=cfg.webhook.max_claims_per_pod)
    assert len(conv.convert(gpu_pod(containers=2), namespace="a").plans) == 2
    with pytest.raises(Denied, match="at most 2"):
        conv.convert(gpu_pod(containers=3), namespace="a")


def test_bad_cap_is_a_config_error() -> None:
    with pytest.raises(Exception, match="maxClaimsPerPod"):
        parse_config({"webhook": {"maxClaimsPerPod": 0}})


@pytest.mark.integration
def test_nothing_is_created_after_the_admission_deadline(kube, namespace: str) -> None:
    """A clock that passes the deadline after the first claim: the pod is denied and the claim rolled back."""
    cfg = parse_config({})
    ticks = itertools.count()
    lifecycle = ClaimLifecycle(Converter(cfg.vendors), kube, Metrics(), clock=lambda: float(next(ticks)))
    pod = gpu_pod("late", containers=3)
    with pytest.raises(LifecycleError, match="deadline"):
        anyio.run(lambda: lifecycle.admit(pod, namespace, "uid-late", deadline=0.5))
    assert kube.list(claims_path(namespace), label_selector=CLAIM_SELECTOR)["items"] == []
