"""The Dockerfile's content rules: what runs in the cluster goes in, the lab kit stays out, and it
builds on the public bases (buildx) and on the local Debian base (buildah) alike."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from dralab.extras import MODULE_EXTRAS
from dralab_kit.image.dockerfile import instructions as dockerfile_instructions

REPO = Path(__file__).resolve().parents[3]
DOCKERFILE = (REPO / "Dockerfile").read_text()


def instructions() -> list[tuple[str, str]]:
    return dockerfile_instructions(DOCKERFILE)


def test_no_harness_labs_or_tests_are_copied() -> None:
    copies = [rest for op, rest in instructions() if op in {"COPY", "ADD"} and not rest.startswith("--from")]
    sources = {src.rstrip("/") for rest in copies for src in rest.split()[:-1]}
    assert sources == {"vcore", "pyproject.toml", "README.m[d]", "dralab"}
    ignored = set((REPO / ".dockerignore").read_text().split())
    assert {"kit", "tests"} <= ignored  # not even in the build context


def test_the_bases_are_build_args_and_every_stage_uses_one() -> None:
    args = dict(re.findall(r"^ARG (\w+)=(\S+)$", DOCKERFILE, re.M))
    assert {"PYTHON_IMAGE", "DEBIAN_IMAGE"} <= set(args)
    froms = [rest.split() for op, rest in instructions() if op == "FROM"]
    assert [f[-3] if "AS" in f else f[-1] for f in froms] == ["${DEBIAN_IMAGE}", "${PYTHON_IMAGE}", "${PYTHON_IMAGE}"]


def test_target_and_build_arch_come_from_the_builder() -> None:
    # buildx and buildah both set them; the vcore stage cross-compiles when they differ
    assert "ARG TARGETARCH" in DOCKERFILE and "ARG BUILDARCH" in DOCKERFILE
    assert not re.search(r"^ARG (TARGETARCH|BUILDARCH)=", DOCKERFILE, re.M), "a default would hide the builder's value"


def test_python_goes_into_a_venv_on_path_on_either_base() -> None:
    runs = " ".join(rest for op, rest in instructions() if op == "RUN")
    assert "python3 -m venv /opt/dralab/venv" in runs
    # Debian's python3 is externally managed and python:slim's is the image's own: pip never installs into either
    assert not re.search(r"(?<![/\w])pip3? install", runs)
    env = " ".join(rest for op, rest in instructions() if op == "ENV")
    assert "PATH=/opt/dralab/venv/bin:$PATH" in env
    assert "pip uninstall" in runs and "pip check" in runs


def test_runs_as_non_root_with_the_dralab_entrypoint() -> None:
    users = [rest for op, rest in instructions() if op == "USER"]
    assert users == ["65532:65532"]
    assert instructions()[-2:] == [("ENTRYPOINT", '["dralab"]'), ("CMD", '["--help"]')]


def test_pytest_is_the_kits_lab_extra_not_a_product_dependency() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert not [d for d in project["dependencies"] if d.startswith("pytest")]
    assert set(project["optional-dependencies"]) == {"nvidia"}
    extras = tomllib.loads((REPO / "kit" / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert extras["lab"] == ["pytest>=8,<9"]
    assert "dralab-kit[provision,bench,lab]" in extras["test"]
    assert MODULE_EXTRAS["pytest"] == MODULE_EXTRAS["_pytest"] == ("dralab-kit", "lab")
    assert MODULE_EXTRAS["harness"] == MODULE_EXTRAS["labs"] == ("dralab-kit", None)


def test_every_base_is_pinned_by_digest_with_its_tag_beside() -> None:
    from dralab_kit.image.dockerfile import base_images, unpinned

    bases = base_images(DOCKERFILE)
    assert len(bases) == 3 and {b.split(":")[0] for b in bases} == {"python", "debian"}
    assert unpinned(DOCKERFILE) == [], "pin each base as name:tag@sha256:<digest>"


def test_the_pin_check_refuses_a_tag_a_bare_digest_and_a_short_one() -> None:
    from dralab_kit.image.dockerfile import unpinned

    digest = "sha256:" + "ab" * 32
    text = (f"ARG BASE=python:3.11-slim@{digest}\nFROM ${{BASE}} AS one\nFROM one AS two\n"
            f"FROM --platform=$BUILDPLATFORM debian:bookworm-slim\nFROM python@{digest}\n"
            f"FROM registry.local:5000/team/img:1.0@sha256:{'ab' * 31}\nFROM registry.local:5000/img:1@{digest}\n")
    assert unpinned(text) == ["debian:bookworm-slim", f"python@{digest}",
                              f"registry.local:5000/team/img:1.0@sha256:{'ab' * 31}"]


def test_the_local_build_replaces_the_pinned_bases_with_its_own(tmp_path: Path) -> None:
    """dralab image build reaches no registry: its --build-arg bases are what every stage starts from."""
    from dralab_kit.image.build import BuildSpec, bud_args
    from dralab_kit.image.dockerfile import base_images

    spec = BuildSpec(tmp_path, "dev", "amd64", "dralab.local/base/python:bookworm-k", "dralab.local/base/python:"
                     "bookworm-k", tmp_path / "out.tar")
    args = bud_args(spec)
    given = dict(args[i + 1].split("=", 1) for i, a in enumerate(args) if a == "--build-arg")
    assert base_images(DOCKERFILE, given) == ["dralab.local/base/python:bookworm-k"] * 3
