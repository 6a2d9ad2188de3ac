"""The loader: no key file ever on disk, rotated tokens used on the next request, clear errors."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from kubernetes.config import incluster_config

from dralab.errors import UserError
from dralab.kube import Kube, load_config, load_kubeconfig


def _rotate(path: Path, token: str) -> None:
    """What the kubelet does: a new file swapped in atomically."""
    tmp = path.with_name(path.name + ".new")
    tmp.write_text(token)
    os.replace(tmp, path)


def test_embedded_keys_never_reach_the_temp_dir_even_when_the_process_is_killed(apiserver, tmp_path: Path) -> None:
    temp = tmp_path / "temp"
    temp.mkdir()
    program = textwrap.dedent(f"""
        import os, signal, sys, tempfile
        assert tempfile.gettempdir() == {str(temp)!r}
        from dralab.kube import Kube
        kube = Kube.from_kubeconfig({str(apiserver.kubeconfig)!r})
        kube.get("/version")
        print("listed:", os.listdir({str(temp)!r}), flush=True)
        os.kill(os.getpid(), signal.SIGKILL)  # no atexit, no finalizers
    """)
    apiserver.script.on("GET", "/version", (200, {"gitVersion": "v1.35.0"}))
    env = {**os.environ, "TMPDIR": str(temp)}
    proc = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert "listed: []" in proc.stdout, "a key file existed while the client was in use"
    assert list(temp.iterdir()) == []
    assert apiserver.script.requests("GET")[0].client_cn == "dralab-admin", "the client certificate was used"


def test_memory_files_close_with_the_config(apiserver) -> None:
    import gc

    config = load_kubeconfig(apiserver.kubeconfig)
    paths = [config.configuration.cert_file, config.configuration.key_file, config.configuration.ssl_ca_cert]
    assert all(p.startswith("/proc/self/fd/") for p in paths)
    assert all(os.path.exists(p) for p in paths)
    del config
    gc.collect()
    assert not any(os.path.exists(p) for p in paths)


def test_kubeconfig_token_file_is_read_again_after_rotation(apiserver, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("first-token\n")
    doc = yaml.safe_load(apiserver.kubeconfig.read_text())
    doc["users"][0]["user"]["tokenFile"] = "token"  # relative: to the kubeconfig's folder
    kubeconfig = tmp_path / "kubeconfig-token"
    kubeconfig.write_text(yaml.safe_dump(doc))
    apiserver.script.on("GET", "/version", (200, {}))
    with Kube.from_kubeconfig(kubeconfig) as kube:
        kube.get("/version")
        _rotate(token, "second-token")
        kube.get("/version")
        token.unlink()  # a rotation in progress: the last token is kept
        kube.get("/version")
    seen = [s.headers.get("Authorization") for s in apiserver.script.requests("GET")]
    assert seen == ["Bearer first-token", "Bearer second-token", "Bearer second-token"]


def test_in_cluster_token_is_read_again_after_rotation(apiserver, tmp_path: Path, monkeypatch) -> None:
    token = tmp_path / "sa-token"
    token.write_text("first-token")
    monkeypatch.setattr(incluster_config, "SERVICE_TOKEN_FILENAME", str(token))
    monkeypatch.setattr(incluster_config, "SERVICE_CERT_FILENAME", str(apiserver.ca))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", apiserver.url.rsplit(":", 1)[1])
    config = load_config()
    assert config.source == "in-cluster"
    apiserver.script.on("GET", "/version", (200, {}))
    # the fake apiserver wants a client certificate; a pod would not send one, so lend it the admin's
    admin = load_kubeconfig(apiserver.kubeconfig)  # kept alive: its memory files close with it
    config.configuration.cert_file = admin.configuration.cert_file
    config.configuration.key_file = admin.configuration.key_file
    with Kube(config) as kube:
        kube.get("/version")
        _rotate(token, "second-token")
        kube.get("/version")
    seen = [s.headers.get("Authorization") for s in apiserver.script.requests("GET")]
    assert seen == ["Bearer first-token", "Bearer second-token"]


def test_exec_plugin_credentials_are_asked_for_again_when_expired(apiserver, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("first-token")
    plugin = tmp_path / "plugin.py"
    plugin.write_text(
        "import json\n"
        f"token = open({str(token)!r}).read().strip()\n"
        "print(json.dumps({'apiVersion': 'client.authentication.k8s.io/v1', 'kind': 'ExecCredential',\n"
        "                  'status': {'token': token, 'expirationTimestamp': '2000-01-01T00:00:00Z'}}))\n"
    )
    doc = yaml.safe_load(apiserver.kubeconfig.read_text())
    doc["users"][0]["user"]["exec"] = {"apiVersion": "client.authentication.k8s.io/v1", "command": sys.executable,
                                       "args": [str(plugin)], "interactiveMode": "Never"}
    kubeconfig = tmp_path / "kubeconfig-exec"
    kubeconfig.write_text(yaml.safe_dump(doc))
    apiserver.script.on("GET", "/version", (200, {}))
    with Kube.from_kubeconfig(kubeconfig) as kube:
        kube.get("/version")
        token.write_text("rotated-token")
        kube.get("/version")
    seen = [s.headers.get("Authorization", "").lower() for s in apiserver.script.requests("GET")]
    assert seen == ["bearer first-token", "bearer rotated-token"]


def test_a_missing_kubeconfig_says_how_to_fix_it(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="not found: pass --kubeconfig"):
        load_kubeconfig(tmp_path / "nope")


def test_bad_embedded_data_names_the_entry(tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump({
        "clusters": [{"name": "c", "cluster": {"server": "https://x", "certificate-authority-data": "%%%"}}],
        "users": [{"name": "u", "user": {}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}], "current-context": "c"}))
    with pytest.raises(UserError, match="cluster 'c': certificate-authority-data is not base64"):
        load_kubeconfig(path)


def test_an_unknown_context_is_a_user_error(apiserver) -> None:
    with pytest.raises(UserError, match="context 'nope'"):
        load_kubeconfig(apiserver.kubeconfig, context="nope")


def test_a_copied_configuration_keeps_the_files_open(apiserver) -> None:
    import copy
    import gc

    config = load_kubeconfig(apiserver.kubeconfig)
    twin = copy.deepcopy(config.configuration)
    del config
    gc.collect()
    assert os.path.exists(twin.cert_file)
    assert Path(twin.key_file).read_bytes().startswith(b"-----BEGIN")
