"""Deprecated location: :func:`fm_loader.prefetch.prefetched` (the loader core's prefetch thread, every kind)."""

from fm_loader.prefetch import prefetched

__all__ = ["prefetched"]
