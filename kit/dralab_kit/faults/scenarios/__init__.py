"""The fault scenarios, registered with :func:`dralab_kit.faults.engine.scenario` when imported.

- :mod:`.outages`: the webhook, the node driver, the apiserver, the kubelet and containerd go away under load
- :mod:`.churn`: refused pods, rolling Deployments, StatefulSet names reused
- :mod:`.reboots`: the CDI folder wiped, and a whole reboot of the real node
"""

from dralab_kit.faults.scenarios import churn, outages, reboots

__all__ = ["churn", "outages", "reboots"]
