"""The allocation monitor: per-device, per-pod and per-namespace gauges from slices and claims."""
