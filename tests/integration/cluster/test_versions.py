"""The gate table in dralab.versions is what each built Kubernetes version declares.

Reads ``pkg/features/kube_features.go`` of ``k8s.io/kubernetes@<version>`` from the Go module cache,
where building that version's control plane put it, and compares every dralab gate's stages
(from version, default, pre-release stage, locked) with the table.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from dralab.versions import GATE_STAGES, SUPPORTED_KUBERNETES_VERSIONS
from dralab_kit.cluster import build

pytestmark = pytest.mark.integration

_SPEC = re.compile(
    r'\{Version: version\.MustParse\("1\.(\d+)"\), Default: (true|false), PreRelease: featuregate\.(\w+)'
    r'(?:, LockToDefault: (true|false))?\}'
)


def _features_source(version: str) -> Path | None:
    cache = subprocess.run(["go", "env", "GOMODCACHE"], capture_output=True, text=True, check=True).stdout.strip()
    path = Path(cache) / f"k8s.io/kubernetes@{version}" / "pkg" / "features" / "kube_features.go"
    return path if path.is_file() else None


def declared(source: str, gate: str) -> tuple[tuple[int, str, bool, bool], ...]:
    body = re.search(r"\n\t" + gate + r": \{(.*?)\n\t\},", source, re.S)
    assert body, f"{gate} is not declared"
    return tuple((int(m[1]), m[3].lower(), m[2] == "true", m[4] == "true") for m in _SPEC.finditer(body[1]))


@pytest.mark.parametrize("version", SUPPORTED_KUBERNETES_VERSIONS)
def test_the_gate_table_matches_the_built_source(version: str) -> None:
    source = _features_source(version)
    if source is None or build.missing_binaries(version):
        pytest.skip(f"Kubernetes {version} is not built here (`dralab cluster build --kubernetes {version}`)")
    text = source.read_text()
    minor = int(version.split(".")[1])
    for gate, stages in GATE_STAGES.items():
        # the table lists the stages up to the newest supported version; the source up to its own
        assert declared(text, gate) == tuple(s for s in stages if s[0] <= minor), (gate, version)
