"""Root pytest configuration: loads the lab harness plugin (profiles, cluster fixtures, lab items)."""

pytest_plugins = ["harness.plugin"]
