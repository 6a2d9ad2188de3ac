"""dralab image: the pure parts (argv, cache keys, progress, storage choice, errors). Builds nothing."""

from __future__ import annotations

import hashlib
import io
import json
import re
import sys
import tarfile
from pathlib import Path

import pytest

from dralab.errors import UserError
from dralab_kit.image import oci
from dralab_kit.image.base import BASE_REPOSITORY, BaseSpec, config_args, mmdebstrap_argv
from dralab_kit.image.build import (
    DEBIAN_CA_BUNDLE,
    BuildSpec,
    StepProgress,
    archive_is_current,
    bud_args,
    ca_bundle,
    content_tag,
    image_name,
    push_args,
    target_arch,
)
from dralab_kit.image.store import Store, choose_driver, mount_fstype
from dralab_kit.image.tools import find_program, require_root, run_logged


def test_base_key_changes_with_every_input_and_not_with_package_order() -> None:
    spec = BaseSpec(arch="amd64")
    assert spec.key() == BaseSpec(arch="amd64", packages=tuple(reversed(spec.packages))).key()
    others = [
        BaseSpec(arch="arm64"),
        BaseSpec(arch="amd64", suite="trixie"),
        BaseSpec(arch="amd64", packages=(*spec.packages, "gcc")),
        BaseSpec(arch="amd64", recipe=spec.recipe + 1),
        BaseSpec(arch="amd64", sources=("deb http://mirror.example/debian bookworm main",)),
        BaseSpec(arch="amd64", dpkg_options=()),
    ]
    assert len({spec.key(), *(o.key() for o in others)}) == len(others) + 1
    assert spec.image_name() == f"{BASE_REPOSITORY}:bookworm-{spec.key()}"


def test_mmdebstrap_argv_makes_a_patched_slim_tree_as_a_tar(tmp_path: Path) -> None:
    argv = mmdebstrap_argv(BaseSpec(arch="amd64"), tmp_path / "rootfs.tar")
    assert argv[0] == "mmdebstrap" and "--variant=minbase" in argv and "--architectures=amd64" in argv
    assert "--include=python3,python3-venv,ca-certificates" in argv
    assert "--dpkgopt=path-exclude=/usr/share/doc/*" in argv
    suite = argv.index("bookworm")
    assert argv[suite + 1] == str(tmp_path / "rootfs.tar")
    assert any("bookworm-security" in line for line in argv[suite + 2 :])


def test_base_config_gives_the_scratch_image_a_path() -> None:
    args = config_args(BaseSpec(arch="arm64"), "ctr")
    assert args[0] == "config" and args[-1] == "ctr"
    assert args[args.index("--arch") : args.index("--arch") + 2] == ["--arch", "arm64"]
    env = [args[i + 1] for i, a in enumerate(args) if a == "--env"]
    assert any(e.startswith("PATH=") and "/usr/bin" in e for e in env)


def test_storage_is_private_and_its_driver_named_in_the_folder(tmp_path: Path) -> None:
    store = Store.under(tmp_path, driver="vfs")
    argv = store.buildah("images")
    assert argv[:7] == ["buildah", "--root", str(tmp_path / "storage-vfs" / "root"), "--runroot",
                        str(tmp_path / "storage-vfs" / "run"), "--storage-driver", "vfs"]  # fmt: skip
    assert "/var/lib/containers" not in " ".join(argv)
    store.prepare()
    assert 'driver = "vfs"' in store.conf.read_text()
    env = store.env({"PATH": "/usr/bin"})
    assert env["CONTAINERS_STORAGE_CONF"] == str(store.conf) and env["BUILDAH_ISOLATION"] == "chroot"


def test_overlay_only_where_the_kernel_has_it_and_not_on_overlayfs() -> None:
    filesystems = "nodev\tsysfs\nnodev\toverlay\n\text4\n"
    mounts = "overlay / overlay rw 0 0\n/dev/vda /root/.cache ext4 rw 0 0\n"
    assert mount_fstype(Path("/root/.cache/dralab/image"), mounts) == "ext4"
    assert mount_fstype(Path("/work"), mounts) == "overlay"
    assert choose_driver(filesystems, "ext4") == "overlay"
    assert choose_driver(filesystems, "overlay") == "vfs"
    assert choose_driver("nodev\tsysfs\n\text4\n", "ext4") == "vfs"


def _spec(tmp_path: Path) -> BuildSpec:
    return BuildSpec(tmp_path, "dev", "amd64", "dralab.local/base/python:bookworm-x", "debian-x",
                     tmp_path / "out.tar")  # fmt: skip


def test_bud_uses_chroot_local_bases_and_the_repos_dockerfile(tmp_path: Path) -> None:
    args = bud_args(_spec(tmp_path))
    assert args[0] == "bud" and args[-1] == str(tmp_path)
    assert args[1:3] == ["--isolation", "chroot"]  # crun: "cgroups in hybrid mode not supported"
    assert "--pull=never" in args and "--layers" in args and "--force-rm" in args
    assert "PYTHON_IMAGE=dralab.local/base/python:bookworm-x" in args and "DEBIAN_IMAGE=debian-x" in args
    assert args[args.index("-f") + 1] == str(tmp_path / "Dockerfile")
    assert args[args.index("-t") + 1] == "dralab.local/dralab:dev"
    assert args[args.index("--platform") + 1] == "linux/amd64"
    assert "--layers" not in bud_args(BuildSpec(**{**_spec(tmp_path).__dict__, "layers": False}))


def test_pip_steps_get_the_hosts_ca_bundle_as_a_secret(tmp_path: Path) -> None:
    assert ca_bundle({"PIP_CERT": "/pip.pem", "SSL_CERT_FILE": "/ssl.pem"}, is_file=lambda _p: True) == "/pip.pem"
    assert ca_bundle({"PIP_CERT": "/gone.pem"}, is_file=lambda p: p == DEBIAN_CA_BUNDLE) == DEBIAN_CA_BUNDLE
    assert ca_bundle({}, is_file=lambda _p: False) is None
    spec = BuildSpec(**{**_spec(tmp_path).__dict__, "ca_bundle": "/ca.pem"})
    args = bud_args(spec)
    assert args[args.index("--secret") + 1] == "id=ca-bundle,src=/ca.pem"
    assert "--secret" not in bud_args(_spec(tmp_path))
    # the Dockerfile's pip steps read it only when present (buildx builds pass no secret)
    dockerfile = (Path(__file__).resolve().parents[3] / "Dockerfile").read_text()
    assert dockerfile.count("--mount=type=secret,id=ca-bundle") == 2
    assert dockerfile.count("if [ -s /run/secrets/ca-bundle ]; then export PIP_CERT=/run/secrets/ca-bundle; fi") == 2


def test_push_writes_a_named_oci_archive(tmp_path: Path) -> None:
    args = push_args("dralab.local/dralab:dev", tmp_path / "a.tar")
    assert args[-1] == f"oci-archive:{tmp_path / 'a.tar'}:dralab.local/dralab:dev"
    assert args[args.index("--format") + 1] == "oci"


def test_content_tags_follow_the_image_and_stamps_keep_an_archive(tmp_path: Path) -> None:
    image_id = "a7314479008" + "6" * 53
    assert content_tag("0.1.0", image_id) == "0.1.0-a73144790086" == content_tag("0.1.0", f"sha256:{image_id}")
    image_name(content_tag("0.1.0", image_id))  # a valid tag
    archive = tmp_path / "dralab-local-amd64.oci.tar"
    assert not archive_is_current(archive, "n", image_id)
    archive.write_bytes(b"x" * 10)
    stamp = archive.with_name(archive.name + ".json")
    stamp.write_text(json.dumps({"name": "n", "image_id": image_id, "size": 10}))
    assert archive_is_current(archive, "n", image_id)
    assert not archive_is_current(archive, "n", "b" * 64) and not archive_is_current(archive, "m", image_id)
    archive.write_bytes(b"x" * 11)  # changed behind the stamp's back
    assert not archive_is_current(archive, "n", image_id)


def test_tags_and_platforms_are_checked() -> None:
    assert image_name("0.1.0") == "dralab.local/dralab:0.1.0"
    for bad in ("", "-x", "a/b", "a:b", "x" * 129):
        with pytest.raises(UserError, match="invalid image tag"):
            image_name(bad)
    assert target_arch(None, "amd64") == "amd64"
    assert target_arch("linux/x86_64", "amd64") == "amd64"
    with pytest.raises(UserError, match=r"release\.yml"):
        target_arch("linux/arm64", "amd64")
    with pytest.raises(UserError, match="linux/<arch>"):
        target_arch("windows/amd64", "amd64")


def test_progress_prints_one_line_per_step_with_elapsed_time() -> None:
    lines: list[str] = []
    now = iter([0.0, 1.5, 42.0])
    progress = StepProgress(lines.append, clock=lambda: next(now), width=60)
    for line in [
        "[1/3] STEP 1/4: FROM dralab.local/base/python:bookworm-x AS vcore",
        "--> Using cache 1234",
        "Get:1 http://deb.debian.org/debian bookworm InRelease",
        "[3/3] STEP 2/9: RUN python3 -m venv /opt/dralab/venv     && pip install " + "x" * 80,
    ]:
        progress(line)
    assert progress.steps == 2 and progress.cached == 1
    assert lines[0].strip().startswith("1.5s  [stage 1/3] step 1/4: FROM")
    assert "42.0s  [stage 3/3] step 2/9: RUN python3 -m venv /opt/dralab/ven..." in lines[1]  # spaces folded
    assert lines[1].endswith("...") and len(lines[1].strip()) < 80


def test_errors_name_the_fix() -> None:
    with pytest.raises(UserError, match="apt-get install -y mmdebstrap"):
        find_program("mmdebstrap", which=lambda _name: None)
    with pytest.raises(UserError, match="as root"):
        require_root(euid=1000)
    require_root(euid=0)


def test_a_failed_step_quotes_its_last_lines_and_names_the_log(tmp_path: Path) -> None:
    log = tmp_path / "logs" / "build.log"
    seen: list[str] = []
    code = "print('step one'); print('boom: no space left'); raise SystemExit(3)"
    with pytest.raises(UserError) as err:
        run_logged([sys.executable, "-c", code], log, "buildah bud (the Dockerfile)", on_line=seen.append,
                   hint="fix it")  # fmt: skip
    message = str(err.value)
    assert "buildah bud (the Dockerfile) failed (exit 3)" in message and "boom: no space left" in message
    assert f"full output: {log}" in message and message.endswith("fix it")
    assert seen == ["step one", "boom: no space left"]
    assert "boom: no space left" in log.read_text()


def _blob(data: bytes) -> tuple[str, bytes]:
    return "sha256:" + hashlib.sha256(data).hexdigest(), data


def _json_blob(doc: dict) -> tuple[str, bytes]:
    return _blob(json.dumps(doc).encode())


def _oci_archive(path: Path, files: dict[str, bytes], annotations: dict[str, str]) -> None:
    """A one-layer OCI archive laid out as buildah push writes it (gzip layer)."""
    layer = io.BytesIO()
    with tarfile.open(fileobj=layer, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    layer_d, layer_b = _blob(layer.getvalue())
    config_d, config_b = _json_blob(
        {"architecture": "amd64", "os": "linux", "config": {"User": "65532:65532", "Entrypoint": ["dralab"]}}
    )
    manifest = {"schemaVersion": 2, "config": {"digest": config_d, "size": len(config_b)},
                "layers": [{"digest": layer_d, "size": len(layer_b)}]}  # fmt: skip
    manifest_d, manifest_b = _json_blob(manifest)
    index = {"schemaVersion": 2, "manifests": [{"digest": manifest_d, "size": 1, "annotations": annotations}]}
    entries = [("oci-layout", b'{"imageLayoutVersion": "1.0.0"}'), ("index.json", json.dumps(index).encode())]
    for digest, data in ((layer_d, layer_b), (config_d, config_b), (manifest_d, manifest_b)):
        entries.append((f"blobs/sha256/{digest.split(':')[1]}", data))
    with tarfile.open(path, "w") as tar:
        for name, data in entries:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def test_archive_gets_the_containerd_name_and_reads_back(tmp_path: Path) -> None:
    archive = tmp_path / "img.tar"
    site = "opt/dralab/venv/lib/python3.11/site-packages"
    _oci_archive(archive, {f"{site}/dralab/__init__.py": b"", f"{site}/click-8.dist-info/METADATA": b"x"},
                 {oci.REF_NAME: "dralab.local/dralab:dev"})  # fmt: skip
    oci.name_for_containerd(archive, "dralab.local/dralab:dev")
    with oci.Archive(archive) as arc:
        arc.verify()
        info = arc.info()
        files = arc.files()
    assert info.names == ["dralab.local/dralab:dev"] and info.user == "65532:65532"
    assert info.entrypoint == ["dralab"] and info.architecture == "amd64"
    assert oci.site_packages(files) == ["click-8.dist-info", "dralab"]


def test_a_tar_that_is_not_an_oci_layout_is_a_user_error(tmp_path: Path) -> None:
    path = tmp_path / "x.tar"
    with tarfile.open(path, "w"):
        pass
    with oci.Archive(path) as arc, pytest.raises(UserError, match="not an OCI image layout"):
        arc.info()


def test_image_tooling_stays_out_of_the_product_and_imports_little() -> None:
    root = Path(__file__).resolve().parents[3]
    product = [p for part in ("webhook", "driver", "monitor", "model") for p in (root / "dralab" / part).rglob("*.py")]
    assert [str(p) for p in product if re.search(r"\bdralab_kit\.image\b", p.read_text())] == []
    allowed = {"dralab", "dralab.errors", "dralab.util", "dralab_kit.cluster.node.images"}
    for path in (root / "kit" / "dralab_kit" / "image").glob("*.py"):
        used = set(re.findall(r"^\s*(?:from|import) (dralab(?:_kit)?(?:\.\w+)*)", path.read_text(), re.M))
        assert {m for m in used if not m.startswith("dralab_kit.image")} <= allowed, path.name
