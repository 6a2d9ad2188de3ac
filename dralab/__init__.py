"""dralab: fine-grained accelerator sharing on Kubernetes DRA, and the kit to prove it works."""

__version__ = "0.1.0"
