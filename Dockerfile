# syntax=docker/dockerfile:1.7
# dralab's image: the `dralab` CLI (webhook, driver) and the vcore enforcement library.
# Multi-arch:  docker buildx build --platform linux/amd64,linux/arm64 -t dralab:dev .
# vcore is cross-compiled on the build machine (no emulation); the Python stage is pure Python.

ARG PYTHON_IMAGE=python:3.11.11-slim-bookworm
ARG DEBIAN_IMAGE=debian:bookworm-slim

# --- vcore: libvcore.so and the probe, for the target architecture ------------------------
FROM --platform=$BUILDPLATFORM ${DEBIAN_IMAGE} AS vcore
ARG TARGETARCH
ARG BUILDARCH
RUN set -eu; \
    case "$TARGETARCH" in \
      "$BUILDARCH") cross="" ;; \
      arm64) cross="gcc-aarch64-linux-gnu libc6-dev-arm64-cross" ;; \
      amd64) cross="gcc-x86-64-linux-gnu libc6-dev-amd64-cross" ;; \
      *) echo "unsupported target architecture $TARGETARCH" >&2; exit 1 ;; \
    esac; \
    apt-get update; \
    apt-get install -y --no-install-recommends make gcc libc6-dev $cross; \
    rm -rf /var/lib/apt/lists/*
WORKDIR /src/vcore
COPY vcore/ ./
# The library binds to old glibc symbol versions (src/compat.h), so it loads in old-glibc
# workload images such as Lab 20's Kylin V10 (glibc 2.28).
RUN set -eu; \
    case "$TARGETARCH" in \
      "$BUILDARCH") cc=gcc ;; \
      arm64) cc=aarch64-linux-gnu-gcc ;; \
      amd64) cc=x86_64-linux-gnu-gcc ;; \
    esac; \
    rm -rf build; \
    make CC="$cc" build/libvcore.so build/vcore-probe; \
    mkdir -p /out; \
    cp build/libvcore.so build/vcore-probe /out/

# --- the Python distribution as a wheel (architecture independent) --------------------------
FROM --platform=$BUILDPLATFORM ${PYTHON_IMAGE} AS wheel
WORKDIR /src
COPY pyproject.toml README.m[d] ./
COPY dralab/ dralab/
COPY harness/ harness/
COPY labs/ labs/
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

# --- runtime ----------------------------------------------------------------------------------
FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="dralab" \
      org.opencontainers.image.description="Accelerator sharing on Kubernetes DRA: admission webhook, DRA node driver, vcore" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=wheel /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels
# The chart's driver init container copies the library from here onto the host.
# Laid out as dralab.vcore expects under $DRALAB_VCORE_DIR (build/libvcore.so, build/vcore-probe).
COPY --from=vcore /out/libvcore.so /out/vcore-probe /opt/dralab/vcore/build/
RUN groupadd --system --gid 65532 dralab && useradd --system --uid 65532 --gid 65532 --no-create-home dralab
ENV PYTHONUNBUFFERED=1 \
    DRALAB_VCORE_DIR=/opt/dralab/vcore
# The webhook runs as 65532 (the chart sets it); the driver runs as root to write host paths.
USER 65532:65532
ENTRYPOINT ["dralab"]
CMD ["--help"]
