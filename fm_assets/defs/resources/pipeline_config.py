"""Dagster resource carrying the pipeline settings the stages see (fields declared once, in ``PipelineSettings``)."""

from __future__ import annotations

from dagster import ConfigurableResource

from fm_assets.settings import PipelineSettings


class PipelineConfigResource(ConfigurableResource, PipelineSettings):
    """Knobs for the preprocessing stages; every field that changes output is hashed into a stage key."""
