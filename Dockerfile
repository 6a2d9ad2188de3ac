# syntax=docker/dockerfile:1.7
# dralab's image: what runs in the cluster (`dralab webhook`, `dralab driver`, `dralab monitor`) and
# the vcore enforcement library. No pytest, no lab harness, no labs: the wheel is built from dralab/.
#
# Multi-arch (CI, .github/workflows/release.yml):
#   docker buildx build --platform linux/amd64,linux/arm64 -t dralab:dev .
# Without a Docker daemon or a registry (`dralab image build`, kit/dralab_kit/image/): buildah on local
# Debian bases made with mmdebstrap, passed as PYTHON_IMAGE and DEBIAN_IMAGE.
# vcore is cross-compiled on the build machine (no emulation); the Python stage is pure Python.
# Both bases work because nothing here depends on which Python the base ships: every stage makes a
# venv with `python3 -m venv` (python:*-slim has it; on Debian it is python3-venv), so neither the
# image's Python nor Debian's externally-managed system Python is ever pip-installed into.

# The bases are pinned by digest, the tag beside it for the reader (tests/unit/image/test_dockerfile.py
# refuses a FROM without one): a tag can be moved to other bytes, a digest cannot. No registry was
# reachable where they were pinned, so they come from public records of these tags: debian's image
# index (amd64, arm64 and more) from docker-library/repo-info (repos/debian/remote/bookworm-slim.md,
# the build of 2026-08-03), python's from localstack/localstack's Dockerfile, whose Renovate keeps
# the index digest. To move a base, take the new tag's digest from
# `docker buildx imagetools inspect <tag>` and replace tag and digest together.
# kit/dralab_kit/image builds pass their own local bases as build arguments instead (no registry there).
ARG PYTHON_IMAGE=python:3.11.11-slim-bookworm@sha256:614c8691ab74150465ec9123378cd4dde7a6e57be9e558c3108df40664667a4c
ARG DEBIAN_IMAGE=debian:bookworm-slim@sha256:abd67ffcfa541b485a3dff59865ab629aa048a6c613e639d36e7456b0b229241

# --- vcore: libvcore.so and the probe, for the target architecture ------------------------
FROM --platform=$BUILDPLATFORM ${DEBIAN_IMAGE} AS vcore
# buildx and buildah (1.28 checked; its "missing build argument" warnings for them are spurious) set
# both from --platform and the build machine. Builders that do not (the classic `docker build`) leave
# them empty: then both mean this stage's own architecture, a native build.
ARG TARGETARCH
ARG BUILDARCH
RUN set -eu; \
    build="${BUILDARCH:-$(dpkg --print-architecture)}"; target="${TARGETARCH:-$build}"; \
    echo "vcore: for $target on $build"; \
    case "$target" in \
      "$build") cross="" ;; \
      arm64) cross="gcc-aarch64-linux-gnu libc6-dev-arm64-cross" ;; \
      amd64) cross="gcc-x86-64-linux-gnu libc6-dev-amd64-cross" ;; \
      *) echo "unsupported target architecture $target" >&2; exit 1 ;; \
    esac; \
    apt-get update; \
    apt-get install -y --no-install-recommends make gcc libc6-dev $cross; \
    rm -rf /var/lib/apt/lists/*
WORKDIR /src/vcore
COPY vcore/ ./
# The library binds to old glibc symbol versions (src/compat.h), so it loads in old-glibc
# workload images such as Lab 20's Kylin V10 (glibc 2.28).
RUN set -eu; \
    build="${BUILDARCH:-$(dpkg --print-architecture)}"; target="${TARGETARCH:-$build}"; \
    case "$target" in \
      "$build") cc=gcc ;; \
      arm64) cc=aarch64-linux-gnu-gcc ;; \
      amd64) cc=x86_64-linux-gnu-gcc ;; \
    esac; \
    rm -rf build; \
    make CC="$cc" build/libvcore.so build/vcore-probe; \
    mkdir -p /out; \
    cp build/libvcore.so build/vcore-probe /out/

# --- the Python distribution as a wheel (architecture independent) --------------------------
# Only the product is copied (pyproject.toml and dralab/): the lab kit (kit/, the dralab-kit distribution:
# harness, labs, cluster and provisioning tooling) is not, so the wheel (and the image) holds none of it.
FROM --platform=$BUILDPLATFORM ${PYTHON_IMAGE} AS wheel
WORKDIR /src
COPY pyproject.toml README.m[d] ./
COPY dralab/ dralab/
# The ca-bundle secret is optional: where HTTPS leaves through a TLS-intercepting proxy, `dralab image
# build` passes the host's CA bundle so pip trusts what the host trusts. A secret is never stored in
# a layer; buildx builds without it.
RUN --mount=type=secret,id=ca-bundle \
    if [ -s /run/secrets/ca-bundle ]; then export PIP_CERT=/run/secrets/ca-bundle; fi; \
    python3 -m venv /opt/build \
    && /opt/build/bin/pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

# --- runtime ----------------------------------------------------------------------------------
FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="dralab" \
      org.opencontainers.image.description="Accelerator sharing on Kubernetes DRA: admission webhook, DRA node driver, monitor, vcore" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=wheel /wheels /wheels
# pip installs the dependencies for the target architecture (grpcio, orjson, uvloop... are
# compiled wheels), checks them, and is then removed with setuptools: nothing at run time needs them.
RUN --mount=type=secret,id=ca-bundle \
    if [ -s /run/secrets/ca-bundle ]; then export PIP_CERT=/run/secrets/ca-bundle; fi; \
    python3 -m venv /opt/dralab/venv \
    && /opt/dralab/venv/bin/pip install --no-cache-dir --disable-pip-version-check /wheels/*.whl \
    && /opt/dralab/venv/bin/pip check \
    && /opt/dralab/venv/bin/pip uninstall --yes --disable-pip-version-check pip setuptools \
    && rm -rf /wheels
# The chart's driver init container copies the library from here onto the host.
# Laid out as dralab.vcore expects under $DRALAB_VCORE_DIR (build/libvcore.so, build/vcore-probe).
COPY --from=vcore /out/libvcore.so /out/vcore-probe /opt/dralab/vcore/build/
RUN groupadd --system --gid 65532 dralab && useradd --system --uid 65532 --gid 65532 --no-create-home dralab
ENV PATH=/opt/dralab/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    DRALAB_VCORE_DIR=/opt/dralab/vcore
# The webhook runs as 65532 (the chart sets it); the driver runs as root to write host paths.
USER 65532:65532
ENTRYPOINT ["dralab"]
CMD ["--help"]
