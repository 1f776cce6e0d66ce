"""The environment an end-to-end compliance world runs `fm` under: its own root and Dagster home, a fixed
tokenizer, small rows, one local Spark core, no progress bars."""

from __future__ import annotations

from pathlib import Path

import pytest


def set_pipeline_env(env: pytest.MonkeyPatch, tmp: Path, tokenizer_file: Path) -> None:
    for key, value in {
        "FM_ROOT": str(tmp / "root"),
        "DAGSTER_HOME": str(tmp / "dagster_home"),
        "FM_TOKENIZER_FILE": str(tokenizer_file),
        "FM_SEQ_LEN": "512",
        "FM_SPARK_MASTER": "local[1]",
        "FM_MIN_PACKING_EFFICIENCY": "0.5",
        "FM_PROGRESS": "0",
    }.items():
        env.setenv(key, value)
    (tmp / "dagster_home").mkdir()
    (tmp / "dagster_home" / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
