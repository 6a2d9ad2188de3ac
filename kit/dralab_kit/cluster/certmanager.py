"""cert-manager's artifacts for a cluster: binaries, OCI image archives, the Helm chart and its values.

Everything comes from one Go module, ``github.com/cert-manager/cert-manager`` at ``VERSION``, built
like the other cluster components (wrapper module ``kit/dralab_kit/gobuild/wrappers/cert_manager``, one
``go build`` through :func:`dralab_kit.gobuild.build_go_tools`); nothing is pulled from a registry.

Why v1.11.5: it is the newest release whose *root* module still holds ``cmd/controller``,
``cmd/webhook``, ``cmd/cainjector`` and ``cmd/ctl``. From v1.12 on the binaries are separate modules
(``.../controller-binary`` etc.) that the Go module proxy does not serve (404), and the root module
zip of v1.12+ has no ``cmd/`` at all; no v1.11.6 exists.

The chart in the module (``deploy/charts/cert-manager``) is the release *source*, not the released
chart: it has ``Chart.template.yaml`` (``version``/``appVersion`` ``v0.1.0`` placeholders) instead of
``Chart.yaml``, and no ``templates/crds.yaml`` (upstream's ``make/manifests.mk`` writes both at release
time). :func:`assemble_chart` does what that makefile does, into the cache, so the chart's own
``installCRDs=true`` installs the CRDs. The module cache is read-only and is never written.

Images (``dralab.local/cert-manager-<component>:VERSION``) hold one static binary at upstream's path
(``/app/cmd/<component>/<component>``) and a ``/tmp``; upstream's distroless images run as uid 1000,
which these archives cannot record (``images.write_oci_archive`` writes no ``User``), so
:func:`helm_values` sets ``runAsUser: 1000`` - the chart's ``runAsNonRoot: true`` refuses an image
whose user is unknown otherwise.

``python -m dralab_kit.cluster.certmanager build`` builds everything and prints where it is.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dralab.errors import UserError
from dralab.util import atomic_write
from dralab_kit.cluster.build import ToolSet
from dralab_kit.cluster.node.images import Layer, write_oci_archive
from dralab_kit.gobuild import build_go_tools, cache_root, find_go

VERSION = "v1.11.5"  # keep in step with kit/dralab_kit/gobuild/wrappers/cert_manager/go.mod
# Its cainjector updates whole webhook configurations through Go types of Kubernetes 1.26 (k8s.io/api
# v0.26.4), which lack matchConditions: each injection drops dralab's. Raising k8s.io/api alone does not
# build (client-go v0.26 and controller-runtime v0.14 need their own API versions), so dralab's webhook
# writes its CA bundle itself on clusters with this cert-manager (chart webhook.certManager.caInjector).
CAINJECTOR_DROPS_MATCH_CONDITIONS = True
MODULE = "github.com/cert-manager/cert-manager"
REGISTRY = "dralab.local"
NAMESPACE = "cert-manager"
RUN_AS_USER = 1000  # upstream's images: USER 1000
CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")  # copied into the images when the host has it

# Each is the main package cmd/<component> of the module. "ctl" (cmctl) is the startupapicheck job's image.
COMPONENTS: tuple[str, ...] = ("controller", "webhook", "cainjector", "ctl")


def binary_name(component: str) -> str:
    """``cert-manager-<component>``: the binary's file name in the cache."""
    if component not in COMPONENTS:
        raise UserError(f"{component!r} is not a cert-manager component (known: {', '.join(COMPONENTS)})")
    return f"cert-manager-{component}"


def ldflags(version: str = VERSION) -> str:
    """The version stamp: ``pkg/util.AppVersion`` is what ``--version``, the User-Agent and ctl print."""
    return f"-X {MODULE}/pkg/util.AppVersion={version}"


TOOLSET = ToolSet(
    wrapper="cert_manager",
    packages={binary_name(c): f"{MODULE}/cmd/{c}" for c in COMPONENTS},
    ldflags=ldflags(),
)


def home(root: Path | None = None) -> Path:
    """``<cache>/cert-manager/<VERSION>``: bin/, images/, the assembled chart and values.yaml."""
    return (root or cache_root()) / "cert-manager" / VERSION


def bin_dir(root: Path | None = None) -> Path:
    return home(root) / "bin"


def binary_path(component: str, root: Path | None = None) -> Path:
    return bin_dir(root) / binary_name(component)


def images_dir(root: Path | None = None) -> Path:
    return home(root) / "images"


def chart_dir(root: Path | None = None) -> Path:
    """Where :func:`assemble_chart` puts the chart (see :func:`ensure_chart`)."""
    return home(root) / "cert-manager"


def values_path(root: Path | None = None) -> Path:
    return home(root) / "values.yaml"


# ---------------------------------------------------------------- images


def image_repository(component: str) -> str:
    return f"{REGISTRY}/{binary_name(component)}"


def image_name(component: str, version: str = VERSION) -> str:
    """``dralab.local/cert-manager-<component>:<version>``, the name containerd imports it under."""
    return f"{image_repository(component)}:{version}"


def archive_path(component: str, root: Path | None = None) -> Path:
    return images_dir(root) / f"{binary_name(component)}.oci.tar"


def entrypoint(component: str) -> list[str]:
    """Upstream's path in its images; the chart passes only args, so the entrypoint is the binary."""
    return [f"/app/cmd/{component}/{component}"]


def image_layer(component: str, binary: Path, ca_bundle: Path | None = None) -> Layer:
    """The one layer: the static binary, a world-writable /tmp, and the CA bundle when given."""
    layer = Layer()
    layer.add_file(entrypoint(component)[0], binary, 0o755)
    layer.add_dir("tmp", 0o1777)
    if ca_bundle is not None:
        layer.add_file("etc/ssl/certs/ca-certificates.crt", ca_bundle, 0o644)
    return layer


IMAGE_ENV = ("PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp")  # HOME: ctl's discovery cache goes to ~/.kube


def build_images(root: Path | None = None, force: bool = False) -> dict[str, Path]:
    """An OCI archive per component (binaries must be built); ``{image name: archive}``.

    An archive newer than its binary is kept (the archives are deterministic, so rewriting is only slower).
    """
    bundle = CA_BUNDLE if CA_BUNDLE.is_file() else None
    out: dict[str, Path] = {}
    for component in COMPONENTS:
        binary, archive = binary_path(component, root), archive_path(component, root)
        if not binary.is_file():
            raise UserError(f"{binary} is missing; run `python -m dralab_kit.cluster.certmanager build`")
        if force or not archive.is_file() or archive.stat().st_mtime < binary.stat().st_mtime:
            layer = image_layer(component, binary, bundle)
            write_oci_archive(archive, image_name(component), layer, entrypoint(component), IMAGE_ENV)
        out[image_name(component)] = archive
    return out


# ---------------------------------------------------------------- chart


def module_dir() -> Path:
    """cert-manager's module in Go's module cache (downloaded when absent; the build downloads it too)."""
    tool = find_go()
    env = {**os.environ, "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=mod"}
    proc = subprocess.run(
        [tool.path, "mod", "download", "-json", f"{MODULE}@{VERSION}"],
        capture_output=True, text=True, timeout=600, check=False, env=env, cwd=tempfile.gettempdir(),
    )  # fmt: skip
    try:
        info = json.loads(proc.stdout)
    except ValueError:
        info = {}
    if proc.returncode != 0 or not info.get("Dir"):
        detail = info.get("Error") or proc.stderr.strip() or proc.stdout.strip()
        raise UserError(f"go mod download {MODULE}@{VERSION} failed (is the Go module proxy reachable?): {detail}")
    return Path(info["Dir"])


def chart_source(module: Path) -> Path:
    return module / "deploy" / "charts" / "cert-manager"


def crd_sources(module: Path) -> list[Path]:
    return sorted((module / "deploy" / "crds").glob("crd-*.yaml"))


def chart_yaml(template: str, version: str = VERSION) -> str:
    """``Chart.template.yaml`` with the release tool's substitutions: version, appVersion, prerelease."""
    out = []
    for line in template.splitlines():
        if line.startswith("version:"):
            line = f"version: {version}"
        elif line.startswith("appVersion:"):
            line = f"appVersion: {version}"
        out.append(line.replace("{{IS_PRERELEASE}}", "false"))
    return "\n".join(out) + "\n"


def crds_template(crds: list[str]) -> str:
    """``templates/crds.yaml`` as ``make/manifests.mk`` writes it: the CRD sources inside ``installCRDs``."""
    body = "---\n".join(text if text.endswith("\n") else text + "\n" for text in crds)
    return "{{- if .Values.installCRDs }}\n" + body + "{{- end }}\n"


def strip_helm_lines(crd: str) -> str:
    """One CRD source without its Helm template lines (labels naming the release): for ``kubectl apply``."""
    return "".join(line for line in crd.splitlines(keepends=True) if "{{" not in line)


def assemble_chart(module: Path, dest: Path, version: str = VERSION) -> Path:
    """The released chart at ``dest``, made from the module's chart source and CRDs; returns ``dest``.

    Copied (the module cache is read-only) and changed as upstream's release does: ``Chart.yaml``
    from ``Chart.template.yaml``, ``README.md`` from ``README.template.md``, a new
    ``templates/crds.yaml``; ``signkey_annotation.txt`` is left out (nothing is signed here).
    """
    source = chart_source(module)
    if not (source / "Chart.template.yaml").is_file():
        raise UserError(f"{source} has no Chart.template.yaml: not cert-manager {version}'s chart source")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".chart-", dir=dest.parent))
    try:
        chart = tmp / "cert-manager"
        shutil.copytree(source / "templates", chart / "templates", copy_function=shutil.copyfile)
        for folder in (chart, *(p for p in chart.rglob("*") if p.is_dir())):
            folder.chmod(0o755)  # copytree copies the module cache's read-only folder modes
        shutil.copyfile(source / "values.yaml", chart / "values.yaml")
        (chart / "Chart.yaml").write_text(chart_yaml((source / "Chart.template.yaml").read_text(), version))
        readme = source / "README.template.md"
        if readme.is_file():
            (chart / "README.md").write_text(readme.read_text().replace("{{RELEASE_VERSION}}", version))
        crds = [p.read_text() for p in crd_sources(module)]
        if not crds:
            raise UserError(f"{module}/deploy/crds has no crd-*.yaml")
        (chart / "templates" / "crds.yaml").write_text(crds_template(crds))
        if dest.exists():
            shutil.rmtree(dest)
        os.replace(chart, dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dest


def ensure_chart(root: Path | None = None, force: bool = False) -> Path:
    """The assembled chart in the cache (assembled once; ``force`` redoes it)."""
    dest = chart_dir(root)
    if force or not (dest / "Chart.yaml").is_file() or not (dest / "templates" / "crds.yaml").is_file():
        assemble_chart(module_dir(), dest)
    return dest


def crds_manifest(module: Path) -> str:
    """All CRDs as one plain manifest (no Helm), for installing them without the chart."""
    return "---\n".join(strip_helm_lines(p.read_text()) for p in crd_sources(module))


# ---------------------------------------------------------------- values


def _image(component: str, version: str) -> dict[str, str]:
    return {"repository": image_repository(component), "tag": version, "pullPolicy": "Never"}


def helm_values(namespace: str = NAMESPACE, version: str = VERSION) -> dict[str, Any]:
    """Values (for this chart version) that install cert-manager from the local images on one node.

    - every image points at ``dralab.local/...:<version>`` with ``pullPolicy: Never`` (no registry);
    - ``runAsUser: 1000`` per pod, since the archives carry no image user (see the module docstring);
    - ``installCRDs: true``: the CRDs come with the chart (``templates/crds.yaml``, see assemble_chart);
    - leader election in the release's namespace rather than kube-system, so the Leases go with it;
    - ``startupapicheck`` stays on: it is ``cmctl check api`` (built here as ``ctl``), the check that
      the webhook answers through the apiserver.

    No cluster DNS is needed: the apiserver calls the webhook through the Service it resolves itself,
    and the components reach the apiserver through in-cluster config (the kubernetes Service's
    address in the environment). ``--enable-certificate-owner-ref`` is left at its default (off):
    it only decides whether deleting a Certificate deletes its Secret.
    """

    def component(name: str) -> dict[str, Any]:
        return {"image": _image(name, version), "securityContext": {"runAsUser": RUN_AS_USER}}

    return {
        "installCRDs": True,
        "global": {"leaderElection": {"namespace": namespace}},
        **component("controller"),
        "webhook": component("webhook"),
        "cainjector": component("cainjector"),
        "startupapicheck": component("ctl"),
    }


def values_yaml(namespace: str = NAMESPACE) -> str:
    import yaml

    return yaml.safe_dump(helm_values(namespace), sort_keys=True)


# ---------------------------------------------------------------- build


@dataclass
class Artifacts:
    """Where one build put everything."""

    binaries: dict[str, Path]
    images: dict[str, Path]
    chart: Path
    values: Path
    seconds: float


def build_cert_manager(force: bool = False, progress: bool = True, root: Path | None = None) -> Artifacts:
    """Build the binaries (skipped when current), the image archives and the chart; write values.yaml."""
    ts = TOOLSET
    result = build_go_tools(ts.wrapper, ts.packages, bin_dir(root), ts.ldflags, dict(ts.env), force=force,
                            progress=progress)  # fmt: skip
    built_images = build_images(root, force=force)
    chart = ensure_chart(root, force=force)
    atomic_write(values_path(root), values_yaml())
    return Artifacts(result.paths, built_images, chart, values_path(root), result.seconds)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] != ["build"] or len([a for a in args[1:] if a != "--force"]) > 0:
        print("usage: python -m dralab_kit.cluster.certmanager build [--force]", file=sys.stderr)
        return 2
    try:
        art = build_cert_manager(force="--force" in args)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"cert-manager {VERSION} ({art.seconds:.0f}s)")
    for name, path in art.binaries.items():
        print(f"binary  {name}: {path}")
    for name, path in art.images.items():
        print(f"image   {name}: {path}")
    print(f"chart   {art.chart}")
    print(f"values  {art.values}")
    print(f"install: helm install cert-manager {art.chart} -n {NAMESPACE} --create-namespace -f {art.values}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
