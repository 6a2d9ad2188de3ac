"""cert-manager's artifacts, the pure parts: toolset, image names, values, chart assembly (nothing is built)."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import yaml

from dralab_kit.cluster import certmanager as cm
from dralab_kit.cluster.node import images
from dralab_kit.gobuild import wrapper_names
from dralab_kit.gobuild.builder import normalize_packages

WRAPPER = Path(__file__).resolve().parents[3] / "kit" / "dralab_kit" / "gobuild" / "wrappers" / "cert_manager"


def test_toolset_builds_four_binaries_from_the_root_module() -> None:
    ts = cm.TOOLSET
    assert ts.wrapper == "cert_manager" and ts.wrapper in wrapper_names()
    assert ts.packages == {
        "cert-manager-controller": "github.com/cert-manager/cert-manager/cmd/controller",
        "cert-manager-webhook": "github.com/cert-manager/cert-manager/cmd/webhook",
        "cert-manager-cainjector": "github.com/cert-manager/cert-manager/cmd/cainjector",
        "cert-manager-ctl": "github.com/cert-manager/cert-manager/cmd/ctl",
    }
    normalize_packages(ts.packages)  # one go build: no two packages may give the same file name
    assert ts.ldflags == "-X github.com/cert-manager/cert-manager/pkg/util.AppVersion=v1.11.5"
    assert dict(ts.env).get("CGO_ENABLED", "0") == "0"


def test_wrapper_module_pins_the_version_and_repeats_the_replace() -> None:
    gomod = (WRAPPER / "go.mod").read_text()
    assert f"github.com/cert-manager/cert-manager {cm.VERSION}" in gomod
    assert "replace github.com/miekg/dns v1.1.41 => github.com/miekg/dns v1.1.34" in gomod
    for pkg in cm.TOOLSET.packages.values():
        assert f"\t{pkg}\n" in gomod, pkg
    assert (WRAPPER / "go.sum").stat().st_size > 0


def test_paths_live_under_one_versioned_cache_folder(tmp_path: Path) -> None:
    home = tmp_path / "cert-manager" / "v1.11.5"
    assert cm.binary_path("webhook", tmp_path) == home / "bin" / "cert-manager-webhook"
    assert cm.archive_path("ctl", tmp_path) == home / "images" / "cert-manager-ctl.oci.tar"
    assert cm.chart_dir(tmp_path) == home / "cert-manager"
    assert cm.values_path(tmp_path) == home / "values.yaml"
    mod = Path("/gomod/github.com/cert-manager/cert-manager@v1.11.5")
    assert cm.chart_source(mod) == mod / "deploy" / "charts" / "cert-manager"


def test_image_names_and_entrypoints() -> None:
    assert cm.image_name("controller") == "dralab.local/cert-manager-controller:v1.11.5"
    assert cm.image_name("ctl") == "dralab.local/cert-manager-ctl:v1.11.5"
    assert cm.entrypoint("cainjector") == ["/app/cmd/cainjector/cainjector"]


def test_values_point_every_component_at_the_local_images() -> None:
    values = cm.helm_values()
    sections = {"controller": values, "webhook": values["webhook"], "cainjector": values["cainjector"],
                "ctl": values["startupapicheck"]}  # fmt: skip
    for component, section in sections.items():
        image = section["image"]
        assert f"{image['repository']}:{image['tag']}" == cm.image_name(component)
        assert image["pullPolicy"] == "Never"
        assert section["securityContext"] == {"runAsUser": 1000}
    assert values["installCRDs"] is True
    assert values["global"]["leaderElection"]["namespace"] == "cert-manager"
    assert cm.helm_values("certs")["global"]["leaderElection"]["namespace"] == "certs"
    assert yaml.safe_load(cm.values_yaml()) == values


def test_image_archive_holds_the_binary_at_upstreams_path(tmp_path: Path) -> None:
    binary = tmp_path / "webhook"
    binary.write_bytes(b"\x7fELF fake")
    out = tmp_path / "w.oci.tar"
    images.write_oci_archive(out, cm.image_name("webhook"), cm.image_layer("webhook", binary),
                             cm.entrypoint("webhook"), cm.IMAGE_ENV)  # fmt: skip
    with tarfile.open(out) as tar:
        index = json.loads(tar.extractfile("index.json").read())  # type: ignore[union-attr]
        names = tar.getnames()
    annotations = index["manifests"][0]["annotations"]
    assert annotations["io.containerd.image.name"] == "dralab.local/cert-manager-webhook:v1.11.5"
    layer_blobs = [n for n in names if n.startswith("blobs/")]
    assert len(layer_blobs) == 3
    with tarfile.open(fileobj=io.BytesIO(cm.image_layer("webhook", binary).tar_bytes())) as layer:
        entries = {m.name: m for m in layer}
    assert entries["app/cmd/webhook/webhook"].mode == 0o755
    assert entries["tmp"].mode == 0o1777


def test_chart_yaml_fills_the_release_placeholders() -> None:
    template = "apiVersion: v1\nname: cert-manager\nversion: v0.1.0\nappVersion: v0.1.0\n" \
               "annotations:\n  artifacthub.io/prerelease: \"{{IS_PRERELEASE}}\"\n"  # fmt: skip
    chart = yaml.safe_load(cm.chart_yaml(template))
    assert chart["version"] == chart["appVersion"] == "v1.11.5"
    assert chart["annotations"]["artifacthub.io/prerelease"] == "false"


CRD = """apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: issuers.cert-manager.io
  labels:
    app: '{{ template "cert-manager.name" . }}'
    # Generated labels {{- include "labels" . | nindent 4 }}
spec:
  group: cert-manager.io
"""


def test_crds_template_wraps_the_sources_in_install_crds() -> None:
    text = cm.crds_template([CRD, CRD.replace("issuers", "orders")])
    lines = text.splitlines()
    assert lines[0] == "{{- if .Values.installCRDs }}" and lines[-1] == "{{- end }}"
    assert text.count("\n---\n") == 1
    docs = list(yaml.safe_load_all(cm.strip_helm_lines("\n".join(lines[1:-1]) + "\n")))
    assert [d["metadata"]["name"] for d in docs] == ["issuers.cert-manager.io", "orders.cert-manager.io"]


def test_assemble_chart_copies_and_completes_the_source(tmp_path: Path) -> None:
    module = tmp_path / "mod"
    source = module / "deploy" / "charts" / "cert-manager"
    (source / "templates").mkdir(parents=True)
    (source / "templates" / "deployment.yaml").write_text("kind: Deployment\n")
    (source / "values.yaml").write_text("installCRDs: false\n")
    (source / "Chart.template.yaml").write_text("name: cert-manager\nversion: v0.1.0\nappVersion: v0.1.0\n")
    (source / "README.template.md").write_text("cert-manager {{RELEASE_VERSION}}\n")
    (source / "signkey_annotation.txt").write_text("key\n")
    (module / "deploy" / "crds").mkdir(parents=True)
    (module / "deploy" / "crds" / "crd-issuers.yaml").write_text(CRD)
    for path in module.rglob("*"):
        path.chmod(0o555 if path.is_dir() else 0o444)  # like Go's module cache
    try:
        dest = cm.assemble_chart(module, tmp_path / "out" / "cert-manager")
        assert sorted(p.name for p in dest.iterdir()) == ["Chart.yaml", "README.md", "templates", "values.yaml"]
        assert yaml.safe_load((dest / "Chart.yaml").read_text())["appVersion"] == "v1.11.5"
        assert (dest / "README.md").read_text() == "cert-manager v1.11.5\n"
        assert "issuers.cert-manager.io" in (dest / "templates" / "crds.yaml").read_text()
        assert (dest / "templates").stat().st_mode & 0o777 == 0o755  # removable by a non-root owner
        cm.assemble_chart(module, dest)  # again over the first: replaced, writable
        assert (dest / "templates" / "deployment.yaml").read_text() == "kind: Deployment\n"
    finally:
        for path in module.rglob("*"):
            path.chmod(0o755 if path.is_dir() else 0o644)


def test_cli_answers_usage_for_anything_but_build(capsys) -> None:
    assert cm.main([]) == 2
    assert cm.main(["build", "--fast"]) == 2
    assert "usage: python -m dralab_kit.cluster.certmanager build" in capsys.readouterr().err
