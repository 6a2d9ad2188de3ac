"""Switching from HAMi / HAMi-DRA to dralab: a read-only plan of the cluster and the changes to apply."""
