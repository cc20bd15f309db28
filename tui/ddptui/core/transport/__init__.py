"""Transports: one interface (base.Transport), a local and an ssh implementation."""
