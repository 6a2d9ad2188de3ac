"""Cluster profiles shipped with dralab, as YAML data (see harness.profile)."""
