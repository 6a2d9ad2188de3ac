"""The real node of the ``node`` profile: kubelet + containerd + runc + CNI in a private mount namespace.

Modules, one job each: :mod:`.images` (OCI archives built locally, no registry), :mod:`.config` (the
node's base configs, then the project's Ansible roles edit them), :mod:`.holder` (the private mount
namespace that keeps the host's /run, /var/lib and kernel settings untouched, held open),
:mod:`.paths` (where the node keeps its files), :mod:`.components` (argv of containerd and the
kubelet), :mod:`.lifecycle` (bring-up steps and teardown), :mod:`.integration` (the node inside a
local cluster: specs, order, teardown), :mod:`.podnet` (the pod network for Services) and :mod:`.tap`
(records the kubelet's calls to the DRA drivers).
"""
