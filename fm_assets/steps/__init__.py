"""Pure record-level processing steps (no Dagster imports): one job per module."""
