"""``dralab driver run`` as a process: sockets up, /healthz answers, SIGTERM stops it cleanly."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx

from dralab.util import free_port, wait_for

KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:9", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
"""


def _healthy(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def test_run_serves_until_sigterm(short_tmp: Path, library: Path) -> None:
    kubeconfig = short_tmp / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG)
    port = free_port()
    argv = [
        sys.executable, "-m", "dralab.cli", "driver", "run",
        "--backend", "fake", "--node", "aio-node74-arm",
        "--kubeconfig", str(kubeconfig), "--no-publish",
        "--plugin-dir", str(short_tmp / "p"), "--registry-dir", str(short_tmp / "r"),
        "--cdi-dir", str(short_tmp / "cdi"), "--state-dir", str(short_tmp / "s"),
        "--metrics-port", str(port), "--enforcement-library", str(library),
    ]  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ})
    try:
        wait_for(lambda: _healthy(port) or proc.poll() is not None, 60, "the driver's /healthz")
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        assert (short_tmp / "r" / "ascend.project-hami.io-reg.sock").exists()
        assert (short_tmp / "cdi" / "k8s.ascend.project-hami.io-npu_common.yaml").exists()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert not (short_tmp / "r" / "ascend.project-hami.io-reg.sock").exists()
    assert not (short_tmp / "p" / "ascend.project-hami.io" / "dra.sock").exists()


def test_run_without_devices_for_the_node_is_a_one_line_error(short_tmp: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "dralab.cli", "driver", "run", "--node", "nope", "--state-dir", str(short_tmp / "s")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.startswith("error: node 'nope' is not in the device inventory")
