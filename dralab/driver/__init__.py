"""The DRA node driver: publishes accelerators as shareable devices and prepares claims through CDI.

Modules, one job each:

- ``proto/``: the kubelet's plugin-registration and DRA v1/v1beta1 protocols (own ``.proto`` files,
  generated modules committed; ``python -m dralab.driver.proto.generate``).
- ``devices/``: device backends (``fake``, ``ascend`` via npu-smi, ``nvidia`` via NVML) behind one
  small protocol: enumerate devices, vendor container edits for allocated devices.
- ``slices``: ResourceSlice objects (pure); ``publisher``: keeps them on the apiserver.
- ``library``: whether the enforcement library is loadable here, and the fail-closed decision (pure).
- ``cdi``: CDI spec rendering (pure); ``checkpoint``: crash-safe record of prepared claims;
  ``state``: owns prepare/unprepare; ``claims``: where claims are read from; ``kube``: JSON API client.
- ``server``: gRPC servers on unix sockets; ``runner``: one driver process; ``metrics``: /metrics,
  /healthz, /readyz; ``cli``: ``dralab driver run|slices|cdi``.

Host layout under ``--state-dir``: ``<driver>/checkpoint.json``, ``<driver>/claims/<claimUID>/``
(mounted per claim), ``<driver>/shared/`` (mounted into every claim), ``<driver>/ld.so.preload``,
``dev/`` (the fake backend's character devices) and ``driver.lock``.
"""
