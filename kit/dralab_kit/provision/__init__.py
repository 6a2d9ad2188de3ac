"""Provisioning as pure functions: kind and kubeadm configs, chart values, the feature gates.

The Pulumi program (infra/), the e2e workflow and the tests all render cluster configuration
from here, so a kind cluster created by hand, by CI or by ``pulumi up`` is the same cluster. The
Kubernetes versions and their feature gates are the product's (``dralab.versions``: the driver
reads them too).
"""
