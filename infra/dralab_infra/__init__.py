"""dralab's Pulumi program: one project (``dralab``), three profiles (local, kind, baremetal)."""
