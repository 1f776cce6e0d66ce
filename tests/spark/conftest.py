"""Spark fixtures: one local session for the whole run (the loopback cluster is tests/conftest.py's)."""

from __future__ import annotations

import pytest


@pytest.fixture
def spark():
    """The shared local session (recreated only if a cluster test switched the master)."""
    from fm_assets.defs.resources.spark import get_or_create_session

    return get_or_create_session(master="local[2]", shuffle_partitions=4)
