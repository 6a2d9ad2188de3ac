"""The Dockerfile and the kind e2e workflow, checked statically (no Docker engine, no GitHub here).

What can be checked without building: every path the Dockerfile copies exists and is not
excluded by .dockerignore, the vcore targets exist in vcore/Makefile, the image layout matches
what the chart and dralab.vcore read, base images are pinned; the workflow uses the same kind
config generator and pins, and every workflow passes actionlint (when `make tools` built it).
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from dralab.versions import (
    CERT_MANAGER_VERSION,
    KIND_NODE_IMAGE,
    KIND_VERSION,
    KUBERNETES_VERSION,
    SUPPORTED_KUBERNETES_VERSIONS,
)
from dralab_kit.image.dockerfile import instructions

REPO = Path(__file__).resolve().parents[3]
DOCKERFILE = (REPO / "Dockerfile").read_text()
WORKFLOW_PATH = REPO / ".github" / "workflows" / "e2e-kind.yml"


def _instructions() -> list[tuple[str, str]]:
    return instructions(DOCKERFILE)


def test_copied_sources_exist_and_are_not_ignored() -> None:
    ignored = [
        p.strip() for p in (REPO / ".dockerignore").read_text().splitlines() if p.strip() and not p.startswith("#")
    ]
    for op, rest in _instructions():
        if op != "COPY" or rest.startswith("--from"):
            continue
        sources = rest.split()[:-1]
        for src in sources:
            if "[" in src:  # optional file (glob), e.g. README.m[d]
                continue
            path = REPO / src.rstrip("/")
            assert path.exists(), f"COPY {src}: not in the repository"
            top = src.rstrip("/").split("/")[0]
            assert top not in ignored, f"COPY {src}: excluded by .dockerignore"
    for needed in (".venv", "vcore/build", ".git"):
        assert needed in ignored


def test_vcore_targets_and_image_layout_match_chart_and_vcore_helper() -> None:
    makefile = (REPO / "vcore" / "Makefile").read_text()
    assert "$(BUILD)/libvcore.so:" in makefile and "$(BUILD)/vcore-probe:" in makefile
    assert 'make CC="$cc" build/libvcore.so build/vcore-probe' in DOCKERFILE
    assert "COPY --from=vcore /out/libvcore.so /out/vcore-probe /opt/dralab/vcore/build/" in DOCKERFILE
    assert "DRALAB_VCORE_DIR=/opt/dralab/vcore" in DOCKERFILE  # dralab.vcore: $DRALAB_VCORE_DIR/build/libvcore.so
    daemonset = (REPO / "charts/dralab/templates/driver-daemonset.yaml").read_text()
    assert "/opt/dralab/vcore/build/libvcore.so" in daemonset
    assert 'ENTRYPOINT ["dralab"]' in DOCKERFILE
    assert "USER 65532:65532" in DOCKERFILE  # the chart's webhook runAsUser


def test_multi_arch_build_cross_compiles_and_pins_bases() -> None:
    froms = [rest for op, rest in _instructions() if op == "FROM"]
    assert len(froms) == 3
    assert froms[0].startswith("--platform=$BUILDPLATFORM") and froms[1].startswith("--platform=$BUILDPLATFORM")
    assert "aarch64-linux-gnu-gcc" in DOCKERFILE and "x86_64-linux-gnu-gcc" in DOCKERFILE
    args = dict(re.findall(r"^ARG (\w+)=(\S+)$", DOCKERFILE, re.M))
    assert re.match(r"python:3\.11\.\d+-slim-bookworm@sha256:[0-9a-f]{64}$", args["PYTHON_IMAGE"])
    assert re.match(r"debian:bookworm-slim@sha256:[0-9a-f]{64}$", args["DEBIAN_IMAGE"])
    assert ":latest" not in DOCKERFILE


def test_workflow_uses_the_generated_kind_config_and_the_pins() -> None:
    text = WORKFLOW_PATH.read_text()
    wf = yaml.safe_load(text)
    steps = wf["jobs"]["e2e-kind"]["steps"]
    by_name = {s["name"]: s for s in steps}
    assert "python -m dralab_kit.provision.kind" in by_name["Generate the kind config"]["run"]
    kind = by_name["Create the kind cluster"]
    assert kind["uses"].startswith("helm/kind-action@")
    assert kind["with"]["config"] == "kind-config.yaml"
    assert "steps.kind.outputs.node_image" in kind["with"]["node_image"]
    generate = by_name["Generate the kind config"]["run"]
    assert '--kubernetes "$KUBERNETES"' in generate and "kind_release(version)" in generate
    assert "kind load docker-image" in by_name["Load the image into kind"]["run"]
    assert "crds.enabled=true" in by_name["Install cert-manager"]["run"]
    assert by_name["Replay the labs on kind"]["run"].endswith("pytest -m e2e --dralab-profile kind")
    upload = by_name["Upload the lab report"]
    assert upload["if"] == "always()" and upload["with"]["path"] == "reports/"
    assert KIND_NODE_IMAGE.startswith("kindest/node:v1.35.") and "@sha256:" in KIND_NODE_IMAGE
    assert KIND_VERSION.startswith("v0.") and CERT_MANAGER_VERSION.startswith("v1.")
    # the gates checked on the nodes are the version's (none from 1.36 on), not a fixed name
    check = by_name["Check the gates and CDI on the nodes"]
    assert check["env"]["GATES"] == "${{ steps.kind.outputs.gates }}" and "DRAConsumable" not in check["run"]


def test_a_manual_kind_run_picks_any_supported_version_and_others_run_the_default() -> None:
    wf = yaml.safe_load(WORKFLOW_PATH.read_text())
    on = wf.get("on", wf.get(True))  # YAML 1.1 reads the key `on` as true
    choice = on["workflow_dispatch"]["inputs"]["kubernetes"]
    assert choice["options"] == list(SUPPORTED_KUBERNETES_VERSIONS)
    assert choice["default"] == KUBERNETES_VERSION
    assert wf["env"]["KUBERNETES"] == f"${{{{ inputs.kubernetes || '{KUBERNETES_VERSION}' }}}}"


def test_workflows_pass_actionlint() -> None:
    from dralab_kit.provision.tools import built_tool

    actionlint = built_tool("actionlint")
    if actionlint is None:
        why = (
            "needs actionlint built from its Go module, and the unit tier builds nothing from Go: "
            "run `make tools` once (`make test` and CI's lint job do), then this test runs"
        )
        if os.environ.get("DRALAB_REQUIRE_TOOLS"):  # CI's lint job: a skip there would hide the check
            pytest.fail(f"DRALAB_REQUIRE_TOOLS is set but actionlint is not built: {why}")
        pytest.skip(why)
    workflows = sorted(str(p) for p in (REPO / ".github" / "workflows").glob("*.yml"))
    proc = subprocess.run([str(actionlint), "-no-color", *workflows], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
