"""kubeadm v1beta4 configuration for a bare-metal dralab cluster.

The gates go on kube-apiserver, kube-controller-manager and kube-scheduler as v1beta4 ``extraArgs``
(a list of ``{name, value}``, not the v1beta3 map) and on the kubelet through the
KubeletConfiguration, which kubeadm uploads to the cluster so joining nodes get the same gates.
"""

from __future__ import annotations

from typing import Any

import yaml

from dralab.versions import check_kubernetes_version, feature_gates_arg, feature_gates_for

KUBEADM_API = "kubeadm.k8s.io/v1beta4"
KUBELET_API = "kubelet.config.k8s.io/v1beta1"
CONTAINERD_SOCKET = "unix:///run/containerd/containerd.sock"
DEFAULT_POD_SUBNET = "10.244.0.0/16"  # the flannel default; Lab 20's pods sit in 10.244.0.0/24
DEFAULT_SERVICE_SUBNET = "10.96.0.0/12"


def _gate_args(gates: dict[str, bool]) -> list[dict[str, str]]:
    """The ``feature-gates`` extra argument; none when the version needs no gate passed."""
    return [{"name": "feature-gates", "value": feature_gates_arg(gates)}] if gates else []


def kubeadm_config(
    *,
    kubernetes_version: str,
    advertise_address: str,
    node_name: str,
    control_plane_endpoint: str | None = None,
    feature_gates: dict[str, bool] | None = None,
    pod_subnet: str = DEFAULT_POD_SUBNET,
    service_subnet: str = DEFAULT_SERVICE_SUBNET,
    schedule_on_control_plane: bool = False,
    cri_socket: str = CONTAINERD_SOCKET,
) -> list[dict[str, Any]]:
    """InitConfiguration, ClusterConfiguration and KubeletConfiguration for ``kubeadm init``.

    ``schedule_on_control_plane`` drops the control-plane taint (a single-node lab like Lab 20's).
    """
    version = check_kubernetes_version(kubernetes_version)
    # the gates this version needs (none from 1.36 on) unless the caller gives its own
    gates = dict(feature_gates_for(version) if feature_gates is None else feature_gates)
    registration: dict[str, Any] = {"name": node_name, "criSocket": cri_socket}
    if schedule_on_control_plane:
        registration["taints"] = []  # an explicit empty list: no control-plane taint
    init = {
        "apiVersion": KUBEADM_API,
        "kind": "InitConfiguration",
        "localAPIEndpoint": {"advertiseAddress": advertise_address, "bindPort": 6443},
        "nodeRegistration": registration,
    }
    cluster = {
        "apiVersion": KUBEADM_API,
        "kind": "ClusterConfiguration",
        "kubernetesVersion": version,
        "controlPlaneEndpoint": control_plane_endpoint or f"{advertise_address}:6443",
        "networking": {"podSubnet": pod_subnet, "serviceSubnet": service_subnet},
        "apiServer": {"extraArgs": _gate_args(gates)},
        "controllerManager": {"extraArgs": _gate_args(gates)},
        "scheduler": {"extraArgs": _gate_args(gates)},
    }
    kubelet = {
        "apiVersion": KUBELET_API,
        "kind": "KubeletConfiguration",
        "cgroupDriver": "systemd",
        "featureGates": gates,
    }
    return [init, cluster, kubelet]


def render(documents: list[dict[str, Any]]) -> str:
    """Multi-document YAML, as ``kubeadm init --config`` reads it."""
    return yaml.safe_dump_all(documents, sort_keys=False, default_flow_style=False)


def gates_by_component(documents: list[dict[str, Any]]) -> dict[str, dict[str, bool]]:
    """Which gates each of the four components gets from ``documents`` (what a check compares)."""
    from dralab.versions import parse_feature_gates

    out: dict[str, dict[str, bool]] = {}
    by_kind = {d["kind"]: d for d in documents}
    cluster = by_kind.get("ClusterConfiguration", {})
    for component, key in (
        ("kube-apiserver", "apiServer"),
        ("kube-controller-manager", "controllerManager"),
        ("kube-scheduler", "scheduler"),
    ):
        args = (cluster.get(key) or {}).get("extraArgs") or []
        value = next((a["value"] for a in args if a.get("name") == "feature-gates"), "")
        out[component] = parse_feature_gates(value)
    out["kubelet"] = dict((by_kind.get("KubeletConfiguration") or {}).get("featureGates") or {})
    return out
