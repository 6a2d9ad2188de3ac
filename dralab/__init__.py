"""dralab: fine-grained accelerator sharing on Kubernetes DRA (the product; the lab kit is ``dralab-kit``)."""

__version__ = "0.1.0"
