"""Every setting of the platform, parsed once at the edge (the CLI, the code location) and passed down.

``Settings`` reads ``FM_*`` environment variables (and ``DAGSTER_HOME``); nothing below the edge reads the
environment or writes it. ``PipelineSettings`` is the part the stages see: the knobs that change stage
outputs (each stage hashes the ones it depends on into its key, through its ``config()``) and how stages
run (``workers``, ``unit_executor``, ``progress``, ...: never part of a key, the output does not depend on them).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_ROOT = "./fm_data"
Profile = Literal["local", "prod"]


class SettingsError(ValueError):
    """The settings cannot run the platform; the message says which variable to fix."""


class PipelineSettings(BaseModel):
    """Knobs for the preprocessing stages; every field that changes output is hashed into a stage key."""

    seq_len: int = Field(default=2048, description="Tokens per packed row (context window T)")
    rows_per_shard: int = Field(default=1024, description="Packed rows per WebDataset shard")
    land_rows_per_part: int = Field(default=5000, description="Records per land part file (work-unit size)")
    land_unit_bytes: int = Field(
        default=8_000_000,
        ge=1,
        description="Landed files are grouped into land units of about this many bytes (many small files: few units)",
    )
    land_part_bytes: int = Field(
        default=4_000_000,
        ge=1,
        description="Bytes of text per land part file: the unit size of every later stage, so a few big files still "
        "spread over all workers",
    )
    pack_min_fragment: int = Field(
        default=1, description="Smallest piece of a long document used to fill a row gap"
    )
    pack_tokens_per_unit: int = Field(
        default=2_097_152,
        ge=1,
        description="Token budget of one pack work unit; the default is one shard's worth (rows_per_shard x "
        "seq_len at their defaults), so each pack unit becomes about one shard unit and a 30 MB batch spreads "
        "over several workers",
    )
    allowed_languages: list[str] = Field(
        default_factory=list, description="Keep only these languages (empty: all)"
    )
    min_language_score: float = Field(
        default=0.0, description="Reject documents whose language score is lower"
    )
    pii_policy_file: str | None = Field(
        default=None,
        description="Per-namespace PII policy (YAML: redact/drop/keep, NER mode); default "
        "fm_assets/data/pii_policy.yaml",
    )
    decontaminate: bool = Field(default=True, description="Drop documents that overlap the eval n-gram index")
    decontam_min_matches: int = Field(
        default=1, description="Matching eval n-grams that make a document contaminated"
    )
    near_dedup: bool = Field(default=True, description="Run the Spark MinHash near-dup stage")
    near_dedup_threshold: float = Field(default=0.8, description="Jaccard threshold for near duplicates")
    near_dedup_local_max_docs: int = Field(
        default=50_000,
        ge=0,
        description="near_dedup runs in process below this many documents (the batch's plus its earlier "
        "batches' indexes), on Spark from there (0: always Spark); where it runs, not what it writes",
    )
    lance_views: bool = Field(
        default=True,
        description="Write the per-document Lance views at each release (false: the release skips them and "
        "records that it did; a host without the lance package can run the text pipeline)",
    )
    video_store_clips: bool = Field(
        default=False,
        description="media_clip also stores each video clip re-encoded (MPEG-4 in MP4, deterministic) beside its "
        "keyframe strip; it goes into the video-text shards and the loader yields it (`clips`)",
    )
    video_cuts: Literal["fixed", "shots"] = Field(
        default="fixed",
        description="media_clip cuts videos into fixed windows, or at shot boundaries (frame differences on "
        "downscaled frames) and each shot into windows",
    )
    min_packing_efficiency: float = Field(
        default=0.98, description="Packing-efficiency floor checked on every partition"
    )
    verify_committed_units: bool = Field(
        default=False, description="Recompute committed units and fail if they differ"
    )
    dataset_name: str = Field(default="fm-demo", description="Name of the released dataset version")
    progress: bool = Field(
        default=True,
        description="Show per-unit progress bars (FM_PROGRESS=auto, the default: only when stderr is a terminal; "
        "otherwise a progress line is logged now and then)",
    )
    workers: int = Field(
        default=0,
        ge=0,
        description="Worker processes that run a stage's units (0: every core; 1: one after another in-process). "
        "Not part of any stage key: 1, 2 or N workers write the same bytes",
    )
    verify_cache_hits: Literal["metadata", "full"] = Field(
        default="metadata",
        description="How a cache hit re-checks the output it reuses: metadata (every file present with its "
        "recorded size; one listing) or full (every file's sha256, `fm run --verify`)",
    )
    unit_executor: Literal["local", "spark"] = Field(
        default="local",
        description="Where units run: local (this machine: in-process or worker processes) or spark (one Spark "
        "task per unit on the 'spark' resource's session; the store must be reachable from the executors)",
    )


class Settings(PipelineSettings, BaseSettings):
    """The whole configuration: storage root, profile, engines and the pipeline knobs (``FM_`` prefix)."""

    model_config = SettingsConfigDict(env_prefix="FM_", extra="ignore", populate_by_name=True)

    root: str = Field(default=DEFAULT_ROOT, description="Storage root: a local folder or s3://bucket/prefix")
    profile: Profile = Field(
        default="local", description="Resource bindings: local (one machine) or prod (k8s)"
    )
    dagster_home: str | None = Field(
        default=None,
        validation_alias=AliasChoices("DAGSTER_HOME", "FM_DAGSTER_HOME"),
        description="Dagster instance folder; default <root>/dagster_home (.fm/dagster_home for remote roots)",
    )
    s3_endpoint_url: str | None = Field(default=None, description="S3-compatible endpoint (MinIO, moto, ...)")
    s3_region: str | None = Field(
        default=None,
        validation_alias=AliasChoices("AWS_DEFAULT_REGION", "FM_S3_REGION"),
        description="S3 region",
    )
    spark_master: str | None = Field(
        default=None, description="Spark master; default local[2] (local), local[*] (prod)"
    )
    spark_log_level: str = Field(default="ERROR", description="Spark's own log level")
    spark_conf: dict[str, str] = Field(
        default_factory=dict,
        description='Extra Spark settings, JSON, e.g. {"spark.executor.memory": "4g", "spark.cores.max": "64"} '
        "for a cluster master (they win over the platform's defaults)",
    )
    dagster_log_level: str = Field(
        default="ERROR", description="Console log level of `fm run`'s Dagster runs"
    )
    tokenizer_file: str | None = Field(default=None, description="A tokenizer.json to register and pin")
    tokenizer_vocab_size: int = Field(
        default=8192, description="Vocab size when a BPE is trained from the data"
    )
    tokenizer_train_docs: int = Field(default=20000, description="Documents sampled to train the BPE")
    blocklist_file: str | None = Field(
        default=None, description="YAML/JSON blocklists (domains, hashes, revocations)"
    )
    eval_registry_file: str | None = Field(
        default=None, description="JSONL of eval passages, added to the registered benchmarks"
    )
    cost_teams: dict[str, str] = Field(
        default_factory=dict,
        description="Cost attribution: source -> owning team, JSON (`fm report --cost --by team`)",
    )
    quality_model_file: str | None = Field(
        default=None,
        description="A trained quality model (.npz) the quality_model asset registers and pins",
    )
    quality_train_dir: str | None = Field(
        default=None,
        description="`fm sample-data` folder the quality_model asset trains on when no model file is given",
    )
    eval_benchmarks: list[str] | None = Field(
        default=None,
        description="Registered benchmarks decontaminate guards against (default: every built-in one; "
        "see fm_assets/side_inputs/benchmarks.py)",
    )
    iceberg_catalog_type: str = Field(
        default="sql", description="pyiceberg catalog type: sql, rest, glue, ..."
    )
    iceberg_uri: str | None = Field(
        default=None, description="Catalog URI; default a SQLite file under the root"
    )

    @model_validator(mode="before")
    @classmethod
    def _progress_auto(cls, data: Any) -> Any:
        # bars redrawn into a pipe or a log (CI, `| tee`, the daemon) turn into one line per refresh
        if isinstance(data, dict) and str(data.get("progress", "auto")).strip().lower() in ("auto", ""):
            data = {**data, "progress": sys.stderr is not None and sys.stderr.isatty()}
        return data

    @model_validator(mode="after")
    def _absolute_local_root(self) -> Settings:
        if not self.is_remote:
            self.root = str(Path(self.root.removeprefix("file://")).expanduser().resolve())
        return self

    @property
    def is_remote(self) -> bool:
        return "://" in self.root and not self.root.startswith("file://")

    @property
    def instance_home(self) -> Path:
        """The Dagster instance folder this process uses (``DAGSTER_HOME`` wins)."""
        if self.dagster_home:
            return Path(self.dagster_home).expanduser().resolve()
        base = Path(".fm") if self.is_remote else Path(self.root)
        return (base / "dagster_home").resolve()

    @property
    def resolved_spark_master(self) -> str:
        return self.spark_master or ("local[2]" if self.profile == "local" else "local[*]")

    def pipeline(self) -> PipelineSettings:
        return PipelineSettings(**self.model_dump(include=set(PipelineSettings.model_fields)))

    def validate_for_profile(self) -> None:
        """Fail at load time, not at run time, when the prod profile cannot work."""
        if self.profile != "prod":
            return
        problems = []
        if not self.is_remote:
            problems.append(
                f"FM_ROOT={self.root} is a local folder; prod needs shared storage (s3://bucket/prefix)"
            )
        if self.iceberg_catalog_type in ("sql", "rest") and not self.iceberg_uri:
            problems.append(
                f"FM_ICEBERG_URI is not set; prod's {self.iceberg_catalog_type} catalog needs one (or use a Glue catalog)"
            )
        if problems:
            raise SettingsError("FM_PROFILE=prod is not usable: " + "; ".join(problems))


def load_settings(**overrides: object) -> Settings:
    """Settings from the environment, with explicit overrides (e.g. the CLI's ``--root``) on top."""
    given = {name: value for name, value in overrides.items() if value is not None}
    return Settings(**given)  # type: ignore[arg-type]
