"""Switching from HAMi / HAMi-DRA to dralab: a read-only plan of the cluster and the changes to apply.

Modules: :mod:`.plan` (what the cluster holds and what would change, pure), :mod:`.apply` (reading
the cluster and carrying a plan out), :mod:`.cli` (``dralab migrate plan|apply``).
"""
