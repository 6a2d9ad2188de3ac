"""Attack: the offline preview approves what the webhook denies.

Before the fix ``dralab convert`` built its converter without ``webhook.maxClaimsPerPod`` (and
converted Volcano Jobs whatever ``migration.volcanoJobs`` said): a pod with 200 accelerator containers
printed 200 ResourceClaims and exited 0, while the webhook serving the same config denies it. A
reviewer trusting the preview learned nothing true. Now both build their converters with
``dralab.webhook.converters.build_converters`` from the same config, and the preview refuses what the
real server refuses, with the same message and exit code 2.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from dralab.config import load_config

from ._webhook import answer, gpu_pod, review, serve


def _preview(tmp_path: Path, pod: dict, config: Path) -> subprocess.CompletedProcess[str]:
    pod_file = tmp_path / "pod.yaml"
    pod_file.write_text(yaml.safe_dump(pod))
    return subprocess.run([sys.executable, "-m", "dralab.cli", "convert", "-f", str(pod_file), "--config",
                           str(config)], capture_output=True, text=True, timeout=60)


def test_preview_refuses_the_pod_the_served_webhook_denies(tmp_path: Path) -> None:
    config = tmp_path / "dralab.yaml"
    config.write_text("webhook:\n  maxClaimsPerPod: 16\n")
    pod = {**gpu_pod("wide", containers=200), "metadata": {"name": "wide", "namespace": "team-a"}}
    with serve(tmp_path, load_config(config)) as s, s.client(timeout=10) as c:
        got = answer(c.post(f"{s.url}/mutate", json=review(pod)))
    assert got["allowed"] is False and "webhook.maxClaimsPerPod" in got["status"]["message"]
    proc = _preview(tmp_path, pod, config)
    assert proc.returncode == 2, proc.stdout[:300]
    assert proc.stdout == "", "not one ResourceClaim may be printed for a denied pod"
    assert proc.stderr == f"error: pod team-a/wide: {got['status']['message']}\n"


def test_preview_allows_what_the_served_webhook_allows(tmp_path: Path) -> None:
    config = tmp_path / "dralab.yaml"
    config.write_text("webhook:\n  maxClaimsPerPod: 2\n")
    pod = {**gpu_pod("two", containers=2), "metadata": {"name": "two", "namespace": "team-a"}}
    with serve(tmp_path, load_config(config)) as s, s.client(timeout=10) as c:
        assert answer(c.post(f"{s.url}/mutate", json=review(pod)))["allowed"] is True
    proc = _preview(tmp_path, pod, config)
    assert proc.returncode == 0, proc.stderr
    kinds = [d["kind"] for d in yaml.safe_load_all(proc.stdout)]
    assert kinds == ["Pod", "ResourceClaim", "ResourceClaim"]
    assert "ShareBudgets were not consulted" in proc.stderr  # the one check the preview cannot make
