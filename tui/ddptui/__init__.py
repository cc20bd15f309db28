"""ddptui: get multi-node PyTorch jobs running from a login node, and keep them running."""

__version__ = "0.1.0"
