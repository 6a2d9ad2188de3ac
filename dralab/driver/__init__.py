"""The DRA node driver: publishes accelerators as shareable devices and prepares claims through CDI.

Modules, one job each:

- :mod:`.proto`: the kubelet's plugin-registration and DRA v1/v1beta1 protocols (own ``.proto`` files,
  generated modules committed; ``python -m dralab.driver.proto.generate``).
- :mod:`.devices`: device backends (``fake``, ``ascend`` via npu-smi, ``nvidia`` via NVML) behind one
  small protocol: enumerate devices, vendor container edits for allocated devices, health.
- :mod:`.slices`: ResourceSlice objects (pure); :mod:`.publisher`: keeps them on the apiserver;
  :mod:`.health`: device health as device taints.
- :mod:`.library`: whether the enforcement library is loadable here, and the fail-closed decision (pure).
- :mod:`.cdi`: CDI spec rendering (pure); :mod:`.checkpoint`: crash-safe record of prepared claims;
  :mod:`.state`: owns prepare/unprepare; :mod:`.claims`: where claims are read from; :mod:`.informer`:
  a watch-fed cache of the node's claims; :mod:`.status`: the claim's ``status.devices`` after Prepare;
  :mod:`.limits`: size-limited claim folders; :mod:`.dirstamp`: whether the CDI folder changed since its
  last check (one ``stat`` a pass while it has not).
- :mod:`.server`: gRPC servers on unix sockets; :mod:`.runner`: one driver process; :mod:`.metrics`:
  /metrics, /healthz, /readyz; :mod:`.cli`: ``dralab driver run|slices|cdi``.

Host layout under ``--state-dir``: ``<driver>/checkpoint.json``, ``<driver>/claims/<claimUID>/``
(mounted per claim), ``<driver>/shared/`` (mounted into every claim), ``<driver>/ld.so.preload``,
``dev/`` (the fake backend's character devices) and ``driver.lock``.
"""
