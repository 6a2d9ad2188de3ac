"""Attack 1: hostile quantities. Each is denied with a 4xx naming the field, never a 500, and never
holds up other requests; absurd but parseable values are refused instead of making unschedulable claims.

The clients below give up after a few seconds: before the fix ``1e9999999`` took 17 s to parse.
"""

from __future__ import annotations

import concurrent.futures
from pathlib import Path

import pytest

from dralab.model.denials import Denied
from dralab.model.hami_units import device_count, memory_bytes

from ._webhook import answer, gpu_pod, review, serve

FIELD = "spec.containers[0].resources.limits[{}]"
HOSTILE = [
    ("nvidia.com/gpumem", "1e9999999"),  # tiny number, huge exponent
    ("nvidia.com/gpumem", "9" * 5000),  # thousands of digits
    ("nvidia.com/gpumem", "1" + "0" * 25),  # 26-digit memory: parseable, absurd
    ("nvidia.com/gpumem", "0." + "0" * 3000 + "1Gi"),  # thousands of fraction digits
    ("nvidia.com/gpu", "1e18"),  # a quintillion devices
    ("nvidia.com/gpu", "1e-9999999"),
    ("nvidia.com/gpucores", "1e9999999"),
]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory):
    with serve(tmp_path_factory.mktemp("quantities")) as s:
        yield s


@pytest.mark.parametrize(("resource", "value"), HOSTILE, ids=[f"{r}={v[:12]}" for r, v in HOSTILE])
def test_hostile_quantity_is_denied_naming_the_field(served, resource: str, value: str) -> None:
    limits = {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1024", resource: value}
    with served.client(timeout=5) as c:
        got = answer(c.post(f"{served.url}/mutate", json=review(gpu_pod(limits=limits))))
    assert got["allowed"] is False
    assert 400 <= got["status"]["code"] < 500, got["status"]
    assert got["status"]["message"].startswith(FIELD.format(resource) + ":"), got["status"]["message"]


def test_normal_pod_is_answered_while_a_hostile_one_is_in_flight(served) -> None:
    hostile = gpu_pod("bad", {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1e9999999"})
    with served.client(timeout=5) as c, concurrent.futures.ThreadPoolExecutor(2) as pool:
        bad = pool.submit(c.post, f"{served.url}/mutate", json=review(hostile, uid="bad"))
        good = pool.submit(c.post, f"{served.url}/mutate", json=review(gpu_pod("good"), uid="good"))
        health = c.get(f"{served.url}/healthz", timeout=1)  # the chart's liveness probe gives up after 1 s
        assert health.text == "ok"
        assert answer(good.result())["allowed"] is True
        assert answer(bad.result())["allowed"] is False


@pytest.mark.parametrize("value", ["1e9999999", "9" * 5000, "1" + "0" * 25, "1e40Ei"])
def test_memory_parser_refuses_hostile_values(value: str) -> None:
    with pytest.raises(Denied) as err:
        memory_bytes(value, "f")
    assert str(err.value).startswith("f: ")


@pytest.mark.parametrize("value", ["1e18", "65", "9" * 5000])
def test_device_count_is_bounded(value: str) -> None:
    with pytest.raises(Denied) as err:
        device_count(value, "f")
    assert str(err.value).startswith("f: ")


def test_ordinary_values_still_convert(served, tmp_path: Path) -> None:
    limits = {"nvidia.com/gpu": "2", "nvidia.com/gpumem": "16Gi", "nvidia.com/gpucores": "50"}
    with served.client(timeout=5) as c:
        got = answer(c.post(f"{served.url}/mutate", json=review(gpu_pod(limits=limits))))
    assert got["allowed"] is True and got["patchType"] == "JSONPatch"
