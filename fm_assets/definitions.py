"""The Dagster code location (``workspace.yaml`` and ``dagster dev -m fm_assets.definitions`` load this)."""

from fm_assets.defs.build import build_definitions

defs = build_definitions()
