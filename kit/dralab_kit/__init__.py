"""dralab-kit: what builds, stands up and tests clusters for dralab (the product, ``dralab``).

The kit's ``dralab`` subcommands (``cluster``, ``image``, ``lab``, ``bench``, ``infra``) and schemas
(``profile``, ``lab``, ``infra``) reach the product's command line through entry points
(``kit/pyproject.toml``); the product never imports the kit.

- :mod:`.cluster`: the local cluster, its kubelet stand-in and the real node
- :mod:`.bench`: benchmarks that write JSON results, and their report
- :mod:`.faults`: one fault-scenario engine for both profiles, with its leak audit (tests and benches run it)
- :mod:`.pulumi`: the Pulumi toolchain, language host and Automation API runner (``dralab infra``)
- :mod:`.provision`: kind and kubeadm configs, chart values, Ansible, the feature-gate table's sync
- :mod:`.gobuild`: Go programs built from the wrapper modules shipped with the kit
- :mod:`.image`: dralab's container image built by buildah, without a Docker daemon
- :mod:`.fixtures`: test data the tests and benches share (Lab 20's claims), not shipped in the product
- :mod:`.fuzz`: the fuzz campaign (hostile admission and driver input, the contracts they must keep)
- :mod:`.schemas`: the JSON Schemas of the kit's file formats, for ``dralab schema``
"""

from __future__ import annotations

from pathlib import Path

# The repository checkout the kit runs from (kit/dralab_kit/ -> the root): infra/, charts/,
# playbooks/ and the Makefile live there, not in the distribution (an editable install sees them).
CHECKOUT = Path(__file__).resolve().parents[2]
