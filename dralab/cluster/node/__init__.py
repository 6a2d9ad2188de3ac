"""The real node of the ``node`` profile: kubelet + containerd + runc + CNI in a private mount namespace.

Modules, one job each: ``images`` (OCI archives built locally, no registry), ``config`` (the
node's base configs, then the project's Ansible roles edit them), ``namespace`` (the private
mount namespace that keeps the host's /run, /var/lib and kernel settings untouched),
``components`` (argv of containerd and the kubelet), ``lifecycle`` (bring-up steps and teardown).
"""
