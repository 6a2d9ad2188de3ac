"""``dralab bench install``: dralab installed the way users install it, against the host-process profile.

In one run:

- ``image``: ``dralab image build`` cold (an empty image cache of its own: base made by mmdebstrap,
  then the Dockerfile by buildah) and warm (the same again), with the archive's size; beside it the
  host-process profiles' equivalent, the virtual environment dralab runs from (its site-packages).
- ``infra``: ``dralab infra up --profile node`` cold (no cluster; images already built by the phase
  above) and warm (a second ``up``: nothing to change), then ``destroy``.
- ``pods``: pod apply -> Running for pods in HAMi syntax (one 310P3 share each: 256 MiB, 1 core),
  one after the other, alternating between the ``node-chart`` cluster (webhook, driver from the chart)
  and the host-process ``node`` profile's cluster in the same run; p50/p99 of each.

Runs in its own ``DRALAB_HOME`` (a temp folder); the clusters it starts are taken down at the end.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

import click

from dralab_kit.bench import DEFAULT_OUT
from dralab_kit.bench.common import write_result
from dralab_kit.bench.node import is_running, summary
from dralab_kit.faults.context import Ctx

NODE_CLUSTER = "dralab-node"  # the host-process node profile's
CHART_CLUSTER = "dralab-node-chart"
IMAGE = "dralab.local/lab:1.0"


def _dralab(*args: str, env: dict[str, str], log: Path) -> float:
    started = time.monotonic()
    with log.open("a") as out:
        out.write(f"\n==== dralab {' '.join(args)}\n")
        out.flush()
        proc = subprocess.run([str(Path(sys.executable).parent / "dralab"), *args], env=env, stdout=out,
                              stderr=subprocess.STDOUT, check=False)  # fmt: skip
    seconds = round(time.monotonic() - started, 1)
    if proc.returncode != 0:
        raise click.ClickException(f"dralab {' '.join(args)} failed after {seconds}s; see {log}")
    return seconds


def _size_mib(path: Path) -> float:
    total = sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())
    return round(total / 2**20, 1)


def measure_image(root: Path, env: dict[str, str], log: Path) -> dict[str, Any]:
    cache = root / "image-cache"
    own = {**env, "DRALAB_CACHE": str(cache)}
    cold = _dralab("image", "build", "--tag", "bench", "--out", str(root / "bench.oci.tar"), env=own, log=log)
    warm = _dralab("image", "build", "--tag", "bench", "--out", str(root / "bench.oci.tar"), env=own, log=log)
    size = round((root / "bench.oci.tar").stat().st_size / 2**20, 1)
    subprocess.run(["rm", "-rf", str(cache)], check=False)
    venv = Path(sys.prefix)
    site = next(venv.glob("lib/python*/site-packages"), venv)
    return {"cold_s": cold, "warm_s": warm, "archive_mib": size,
            "host_process_venv_site_packages_mib": _size_mib(site)}  # fmt: skip


def hami_pod(name: str) -> dict[str, Any]:
    limits = {"huawei.com/Ascend310P": 1, "huawei.com/Ascend310P-memory": "256", "huawei.com/Ascend310P-core": "1"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "runtimeClassName": "ascend",
            "containers": [
                {"name": "c", "image": IMAGE, "command": ["sleep", "3600"], "resources": {"limits": limits}}
            ],
        },
    }


def measure_pods(benches: dict[str, Ctx], count: int) -> dict[str, Any]:
    """``count`` pods per cluster, one at a time, the clusters taking turns (drift hits both alike)."""
    from dralab.util import wait_for

    spaces = {label: b.namespace("install-lat") for label, b in benches.items()}
    times: dict[str, list[float]] = {label: [] for label in benches}
    for i in range(count):
        for label, b in benches.items():
            ns, name = spaces[label], f"p{i}"
            started = time.monotonic()
            b.kube.create(f"/api/v1/namespaces/{ns}/pods", hami_pod(name))
            wait_for(partial(is_running, b, ns, name), 120, f"{label} {name} Running", interval=0.05)
            times[label].append(time.monotonic() - started)
            b.kube.delete(f"/api/v1/namespaces/{ns}/pods/{name}")
    for label, b in benches.items():
        b.delete_namespace(spaces[label])
    return {label: summary(values) for label, values in times.items()}


@click.command("install")
@click.option("--out", default=DEFAULT_OUT, show_default=True, help="Folder for install.json.")
@click.option("--pods", default=20, show_default=True, help="Pods per cluster in the latency phase.")
@click.option("--quick", is_flag=True, help="5 pods, no cold image build (CI-sized).")
def install(out: str, pods: int, quick: bool) -> None:
    """Image build, `dralab infra up --profile node` cold and warm, and pod latency through the chart
    against the host-process node profile, in one run.

    \b
    Example:
      dralab bench install --out bench/results
    """
    from dralab_kit.cluster import api

    if shutil.which("iptables") is None:
        raise click.ClickException("dralab bench install needs iptables: scripts/system-packages chart")
    pods = 5 if quick else pods
    with tempfile.TemporaryDirectory(prefix="dralab-bench-install-") as tmp:
        root = Path(tmp)
        log = root / "bench.log"
        env = {**os.environ, "DRALAB_HOME": str(root / "home")}
        os.environ["DRALAB_HOME"] = env["DRALAB_HOME"]
        result: dict[str, Any] = {"pods_per_cluster": pods}
        try:
            if not quick:
                result["image"] = measure_image(root, env, log)
            result["infra"] = {
                "cold_up_s": _dralab("infra", "up", "--profile", "node", env=env, log=log),
                "warm_up_s": _dralab("infra", "up", "--profile", "node", env=env, log=log),
            }
            chart = api.get_cluster(CHART_CLUSTER)
            node = api.ensure_cluster(NODE_CLUSTER, real_node=True)
            benches = {"chart": Ctx(chart, quick, grace=0), "host_processes": Ctx(node, quick, grace=0)}
            result["pods"] = measure_pods(benches, pods)
            chart_p50, node_p50 = result["pods"]["chart"]["p50"], result["pods"]["host_processes"]["p50"]
            result["chart_over_host_processes_p50"] = round(chart_p50 / node_p50, 2) if node_p50 else None
            result["infra"]["destroy_s"] = _dralab("infra", "destroy", "--profile", "node", env=env, log=log)
        finally:
            for name in api.list_clusters():
                api.down(name)
    path = write_result(out, "install", result)
    lat = result["pods"]
    click.echo(f"pods p50: chart {lat['chart']['p50']}s, host processes {lat['host_processes']['p50']}s; "
               f"infra up cold {result['infra']['cold_up_s']}s")
    click.echo(str(path))
