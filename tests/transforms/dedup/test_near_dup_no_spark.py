"""A near-dup batch below ``local_max_docs`` runs in-process without importing pyspark, each case in a fresh
interpreter: ``run_near_dedup`` against a prior index, and the near_dedup stage after the text chain with
pyspark and py4j unimportable, as on a host without them. Its equality with the Spark path: tests/spark/."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

TESTS = Path(__file__).resolve().parents[2]
REPO = TESTS.parent
SPARK_MODULES = ("pyspark", "py4j")


def run_fresh(script: str, tmp_path: Path) -> dict:
    """``script`` in a fresh interpreter (tests/ and tests/engine/ importable); its last stdout line as JSON."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script), str(TESTS), str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


_DIRECT = """
    import json, sys
    sys.path.insert(0, sys.argv[1])
    from spark_planted import planted_corpus
    from fm_assets.transforms.dedup.near_dup.job import NearDedupConfig, run_near_dedup

    def no_spark():
        raise AssertionError("the in-process path asked for a SparkSession")

    tmp = sys.argv[2]
    corpus = planted_corpus(8, seed=5)
    n = len(corpus.doc_ids)
    # the earlier batch: every other document of the first three families; the batch: the rest
    earlier_rows = [i for i in range(n) if corpus.family[i] < 3 and i % 2 == 0]
    batch_rows = [i for i in range(n) if i not in earlier_rows]
    earlier = corpus.write(tmp + "/earlier.parquet", earlier_rows)
    batch = corpus.write(tmp + "/batch.parquet", batch_rows)
    first = run_near_dedup(no_spark, [earlier], [], tmp + "/idx-earlier", NearDedupConfig())
    out = run_near_dedup(no_spark, [batch], [tmp + "/idx-earlier"], tmp + "/idx-batch", NearDedupConfig())
    print(json.dumps({
        "spark_modules": sorted({m.split(".")[0] for m in sys.modules} & {"pyspark", "py4j"}),
        "engines": [first.stats["engine"], out.stats["engine"]],
        "batch_ids": [corpus.doc_ids[i] for i in batch_rows],
        "removed": out.removed.to_pylist(),
        "index_rows": out.index_rows,
        "docs": out.stats["docs"],
        "empty_docs": out.stats["empty_docs"],
    }))
"""


def test_run_near_dedup_in_process_imports_no_pyspark(tmp_path: Path) -> None:
    result = run_fresh(_DIRECT, tmp_path)
    assert result["spark_modules"] == []
    assert result["engines"] == ["local", "local"]
    removed = result["removed"]
    batch_ids = set(result["batch_ids"])
    assert {row["doc_id"] for row in removed} <= batch_ids
    # planted ids: b<family> is the base, v<family>-k its variants, w<family> its whitespace copy; a removed
    # document's survivor is of its own family, here or in the earlier batch's index
    assert all(row["survivor_id"][1:6] == row["doc_id"][1:6] for row in removed)
    against_earlier = [row for row in removed if row["survivor_is_prior"]]
    assert against_earlier and len(against_earlier) < len(removed)  # both kinds of duplicate were found
    assert all(row["survivor_id"] not in batch_ids for row in against_earlier)
    assert all(row["similarity"] >= 0.7 for row in removed)
    assert result["index_rows"] == result["docs"] - len(removed) - result["empty_docs"]


_STAGE = """
    import json, sys
    blocked = {"pyspark", "py4j"}
    sys.modules.update(dict.fromkeys(blocked))  # as on a host without them: importing either raises
    sys.path[:0] = [sys.argv[1], sys.argv[1] + "/engine"]
    from pathlib import Path
    from pool_helpers import land_planted, run_chain, settings, side_resources
    from fm_assets.defs.resources.spark import SparkResource

    store = land_planted(Path(sys.argv[2]) / "root", bases=4)
    spark = SparkResource(master="local[1]")  # the batch is below local_max_docs: never started
    outcomes = run_chain(
        store, settings(workers=1, near_dedup=True), until="near_dedup", resources=side_resources(spark=spark)
    )
    near = outcomes["near_dedup"].success
    print(json.dumps({
        "spark_modules": sorted(m for m, mod in sys.modules.items() if mod and m.split(".")[0] in blocked),
        "engine": near.artifacts["stats"]["engine"],
        "rejected": near.counts.records_rejected,
        "records_in": near.counts.records_in,
    }))
"""


def test_near_dedup_stage_in_process_imports_no_pyspark(tmp_path: Path) -> None:
    result = run_fresh(_STAGE, tmp_path)
    assert result["spark_modules"] == []
    assert result["engine"] == "local"
    assert 0 < result["rejected"] < result["records_in"]
