"""``pulumi up`` runs this: dralab's program (profile from ``dralab:profile``: local, kind or baremetal)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from dralab_infra.program import main

main()
