"""Kit tooling: dralab's container image built from the repository's Dockerfile without a Docker daemon.

No registry is reachable on a lab machine, so the public bases of the Dockerfile (``python:*-slim``,
``debian:*-slim``) cannot be pulled. ``dralab image build`` makes a Debian base locally with
mmdebstrap (``base``), builds the Dockerfile on it with buildah in a private storage under the cache
(``store``, ``build``) and writes an OCI archive that ``ctr images import`` names correctly
(``oci``). The release workflow builds the same Dockerfile with docker buildx on the public bases.

Nothing in dralab/webhook, dralab/driver or dralab/monitor imports this package.
"""
