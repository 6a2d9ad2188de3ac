"""``dralab image build`` for real: the repository's Dockerfile built by buildah on the local Debian base.

Checks what a unit test cannot: the archive is an OCI layout containerd can import under its name,
the image holds what runs in the cluster and none of the lab kit, it runs as 65532, and the CLI's
commands start inside it. Needs root, buildah and mmdebstrap (skipped without the programs), the
Debian mirror and PyPI; the first build makes the base (minutes), later ones reuse the cache.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from dralab import __version__
from dralab_kit.image.build import BuildResult, build, ensure_image
from dralab_kit.image.oci import Archive, site_packages
from dralab_kit.image.store import Store, image_cache

pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.xdist_group("image-build"),  # one build per module, shared by its tests: one worker
    pytest.mark.skipif(
        not (shutil.which("buildah") and shutil.which("mmdebstrap")),
        reason="needs buildah and mmdebstrap: apt-get install -y buildah mmdebstrap",
    ),
]
TAG = "integration"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> BuildResult:
    return build(TAG, archive=tmp_path_factory.mktemp("image") / "dralab.oci.tar")


@pytest.fixture(scope="module")
def container(built: BuildResult) -> Iterator[list[str]]:
    """argv prefix that runs a command in a working container of the built image, as its user."""
    store = Store.under(image_cache())
    env = store.env()
    name = subprocess.run(
        [*store.buildah("from", "--pull=never", built.name)], env=env, capture_output=True, text=True, check=True
    ).stdout.strip()
    yield store.buildah("run", "--isolation", "chroot", name, "--")
    subprocess.run(store.buildah("rm", name), env=env, capture_output=True, check=False)


def run_in(container: list[str], *argv: str) -> subprocess.CompletedProcess[str]:
    store = Store.under(image_cache())
    return subprocess.run([*container, *argv], env=store.env(), capture_output=True, text=True, timeout=120)


def test_archive_is_a_valid_oci_layout_named_for_containerd(built: BuildResult) -> None:
    assert built.archive.is_file()
    with Archive(built.archive) as arc:
        arc.verify()
        info = arc.info()
    assert info.names == [f"dralab.local/dralab:{TAG}"]  # io.containerd.image.name and the OCI ref name
    assert info.os == "linux" and info.entrypoint == ["dralab"]
    assert info.user == "65532:65532"
    assert "DRALAB_VCORE_DIR=/opt/dralab/vcore" in info.env


def test_image_holds_the_cluster_parts_and_not_the_lab_kit(built: BuildResult) -> None:
    with Archive(built.archive) as arc:
        files = arc.files()
    packages = site_packages(files)
    assert "dralab" in packages
    for absent in ("pytest", "_pytest", "harness", "labs", "dralab_kit", "pip", "setuptools"):
        assert absent not in packages
        assert not [p for p in packages if p.lower().startswith(f"{absent}-") and p.endswith(".dist-info")]
    assert "/opt/dralab/vcore/build/libvcore.so" in files and "/opt/dralab/vcore/build/vcore-probe" in files
    assert not [p for p in files if p.startswith(("/src/", "/wheels/"))]


def test_cli_runs_inside_as_65532_and_pytest_is_absent(container: list[str]) -> None:
    # CI once saw this first command print nothing: the answer says how it ended and what it wrote
    uid = run_in(container, "id", "-u")
    assert uid.returncode == 0 and uid.stdout.strip() == "65532", (uid.returncode, uid.stdout, uid.stderr)
    for argv in (["dralab", "--help"], ["dralab", "webhook", "--help"], ["dralab", "driver", "--help"],
                 ["dralab", "monitor", "--help"]):  # fmt: skip
        proc = run_in(container, *argv)
        assert proc.returncode == 0 and "Usage:" in proc.stdout, (argv, proc.stdout, proc.stderr)
    assert run_in(container, "python3", "-c", "import pytest").returncode != 0
    lab = run_in(container, "dralab", "lab", "list")
    assert lab.returncode == 2 and "pip install dralab-kit" in lab.stderr


def test_a_second_build_reuses_the_base_and_every_step(built: BuildResult, tmp_path: Path) -> None:
    again = build(TAG, archive=tmp_path / "again.oci.tar")
    assert again.base == built.base and not again.base_made
    assert again.cached_steps >= 15, again  # every RUN and COPY from the layer cache
    assert again.seconds["bud"] < 60


def test_ensure_image_names_the_image_by_content_and_keeps_its_archive(built: BuildResult) -> None:
    name, archive = ensure_image()
    assert re.fullmatch(rf"dralab\.local/dralab:{re.escape(__version__)}-[0-9a-f]{{12}}", name), name
    assert name.endswith(built.image_id[:12])  # same sources, same layers, same image
    with Archive(archive) as arc:
        assert arc.info().names == [name]
    stamp = archive.with_name(archive.name + ".json").read_text()
    assert (name, archive) == ensure_image() and archive.with_name(archive.name + ".json").read_text() == stamp
