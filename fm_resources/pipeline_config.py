"""Pipeline settings that change stage outputs (they are part of each stage key) or how stages run."""

from __future__ import annotations

from dagster import ConfigurableResource
from pydantic import Field


class PipelineConfigResource(ConfigurableResource):
    """Knobs for the preprocessing stages; every field that changes output is hashed into a stage key."""

    seq_len: int = Field(default=2048, description="Tokens per packed row (context window T)")
    rows_per_shard: int = Field(default=1024, description="Packed rows per WebDataset shard")
    land_rows_per_part: int = Field(default=5000, description="Records per land part file (work-unit size)")
    pack_min_fragment: int = Field(default=1, description="Smallest piece of a long document used to fill a row gap")
    pack_tokens_per_unit: int = Field(default=8_000_000, description="Token budget of one pack work unit")
    allowed_languages: list[str] = Field(default_factory=list, description="Keep only these languages (empty: all)")
    min_language_score: float = Field(default=0.0, description="Reject documents whose language score is lower")
    quarantine_namespace_rejected: bool = Field(default=True, description="Quarantine-namespace records never reach shards")
    decontaminate: bool = Field(default=True, description="Drop documents that overlap the eval n-gram index")
    decontam_min_matches: int = Field(default=1, description="Matching eval n-grams that make a document contaminated")
    near_dedup: bool = Field(default=True, description="Run the Spark MinHash near-dup stage")
    near_dedup_threshold: float = Field(default=0.8, description="Jaccard threshold for near duplicates")
    blocklist_file: str | None = Field(default=None, description="YAML/JSON blocklists (domains, doc hashes, revocations)")
    min_packing_efficiency: float = Field(default=0.98, description="Packing-efficiency floor checked on every partition")
    verify_committed_units: bool = Field(default=False, description="Recompute committed units and fail if they differ")
    dataset_name: str = Field(default="fm-demo", description="Name of the released dataset version")
    progress: bool = Field(default=True, description="Show per-unit progress bars")
