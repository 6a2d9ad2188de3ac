"""The allocation monitor: per-device, per-pod and per-namespace gauges from slices and claims.

Modules: :mod:`.allocation` (the picture, a pure function over slices and claims), :mod:`.collector`
(the gauges over watched objects), :mod:`.hami` (the same in HAMi's metric names), :mod:`.server`
(/metrics, /healthz, /readyz), :mod:`.top` (``dralab top``'s table), :mod:`.cli` (the commands).
"""
