"""Per-token columns of the tokenize output (``tok_<name>``) reach the shards aligned with their tokens,
through real pack and shard stages (split documents included), and the loader returns them."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from fm_assets.defs.resources.pipeline_config import PipelineConfigResource
from fm_assets.engine.checks import check_schema
from fm_assets.engine.refs import read_success, write_ref
from fm_assets.engine.run import run_stage
from fm_assets.engine.stage import Stage, StageContext, UnitContext, UnitResult, WorkUnit
from fm_assets.engine.store import ObjectStore
from fm_assets.stages.pack import STAGE as PACK
from fm_assets.stages.pack import per_token_values
from fm_assets.stages.shard import STAGE as SHARD
from fm_assets.transforms.tokens.schemas import MISSING_TOKEN_VALUE, TOKENS_SCHEMA, token_list_array
from fm_loader import DatasetManifest, Loader, read_rows

T, VOCAB, UNMARKED = 16, 1000, 999  # tokens of the document without the column are all UNMARKED
LENGTHS = [5, 9, 40, 3, 16, 7, 11, 2, 23]  # 40 and 23 are longer than a row: split


class TokenizeLike(Stage):
    """Writes a tokenize-stage output without per-token columns."""

    name = "tokenize"
    code_version = "tokenize-like"
    upstream = None
    depth = False
    output_schema = TOKENS_SCHEMA

    def config(self, ctx: StageContext) -> dict:
        return {"depth": self.depth}

    def plan(self, ctx: StageContext) -> list[WorkUnit]:
        return [WorkUnit("u00000", ())]

    def process(self, unit: UnitContext) -> UnitResult:
        rng = np.random.default_rng(0)
        docs = [rng.integers(0, UNMARKED, n).astype(np.uint32) for n in LENGTHS]
        docs[3][:] = UNMARKED
        offsets = np.concatenate([[0], np.cumsum(LENGTHS)])
        n = len(docs)
        columns = {
            "doc_id": [f"d{i}" for i in range(n)],
            "batch": ["b"] * n,
            "source": ["s"] * n,
            "license": ["MIT"] * n,
            "namespace": ["cloud"] * n,
            "cas_hash": ["0" * 64] * n,
            "record_index": list(range(n)),
            "n_tokens": LENGTHS,
            "tokens": token_list_array(np.concatenate(docs), offsets),
        }
        if self.depth:
            columns["tok_depth"] = [
                None if i == 3 else (d.astype(np.int64) + 1).tolist() for i, d in enumerate(docs)
            ]
        unit.writer.write_table(pa.table(columns, schema=self.output_schema))
        return UnitResult(records_in=n, records_out=n)

    def complete(self, ctx, prepared, output_prefix, markers) -> dict:
        return {"vocab_size": VOCAB, "tokenizer_sha256": "tok-like"}


class TokenizeLikeWithDepth(TokenizeLike):
    """The same documents carrying ``tok_depth`` = token + 1, except document 3, whose list is null."""

    depth = True
    output_schema = pa.schema([*TOKENS_SCHEMA, pa.field("tok_depth", pa.large_list(pa.int32()))])


def run_to_shards(root: str, depth: bool) -> str:
    store = ObjectStore(root)
    settings = PipelineConfigResource(progress=False, near_dedup=False, seq_len=T, rows_per_shard=3)
    for stage in (TokenizeLikeWithDepth() if depth else TokenizeLike(), PACK, SHARD):
        outcome = run_stage(stage, StageContext(store, "b", settings))
        write_ref(store, stage.name, "b", outcome.success, cache_hit=outcome.cache_hit, wall_seconds=0.0)
        # every part has the schema its stage declares (a blocking check in the pipeline)
        assert check_schema(store, outcome.success, stage).passed, stage.name
    return str(store.local_path(read_success(store, "shard", "b").artifacts["manifest"]))


def test_token_columns_follow_their_tokens_through_pack_and_shard(tmp_path):
    manifest_path = run_to_shards(str(tmp_path / "root"), depth=True)
    manifest = DatasetManifest.load(manifest_path)
    assert manifest.format_version == 3
    rows = list(read_rows(manifest))
    assert any("@" in doc for row, _, _ in rows for doc in row.doc_ids)  # long documents were split
    assert sum(len(row.tokens) for row, _, _ in rows) == sum(LENGTHS)
    for row, _, _ in rows:
        tokens, depth = row.tokens.astype(np.int64), row.columns["depth"]
        assert np.array_equal(depth, np.where(tokens == UNMARKED, MISSING_TOKEN_VALUE, tokens + 1))

    seen = 0
    for batch in Loader(manifest_path, global_batch_size=4, extra_columns={"depth": -7}):
        ids, depth = batch["input_ids"].numpy().astype(np.int64), batch["depth"].numpy()
        real = np.arange(T)[None, :] < batch["valid_token_count"].numpy()[:, None]
        want = np.where(ids == UNMARKED, MISSING_TOKEN_VALUE, ids + 1)
        assert np.array_equal(depth[real], want[real]) and (depth[~real] == -7).all()
        seen += int(real.sum())
    assert seen == sum(LENGTHS)


def test_without_token_columns_shards_stay_format_2(tmp_path):
    manifest = DatasetManifest.load(run_to_shards(str(tmp_path / "root"), depth=False))
    assert manifest.format_version == 2
    assert all(not row.columns for row, _, _ in read_rows(manifest))


def test_a_column_list_of_the_wrong_length_names_the_document():
    column = pa.chunked_array([pa.array([[1, 2], None, [1]], pa.large_list(pa.int32()))])
    offsets = np.array([0, 2, 4, 6])
    with pytest.raises(ValueError, match="tok_depth of document c has 1 values for 2 tokens"):
        per_token_values(column, offsets, ["a", "b", "c"], "depth")
    good = pa.chunked_array([pa.array([[1, 2], None, [5, 6]], pa.large_list(pa.int32()))])
    assert per_token_values(good, offsets, ["a", "b", "c"], "depth").tolist() == [1, 2, -1, -1, 5, 6]


def test_shard_integrity_rehashes_every_shard_in_process_and_on_workers(tmp_path):
    """The blocking ``shard_integrity`` check re-reads every shard the manifest lists (on the stage's workers
    when it has some): intact shards pass, one changed byte fails it naming that shard, either way."""
    from damaged_files import flip_middle_byte, in_process_and_on_workers

    from fm_assets.engine import layout
    from fm_assets.stages.shard import check_shard_integrity

    root = str(tmp_path / "root")
    manifest = DatasetManifest.load(run_to_shards(root, depth=False))
    store = ObjectStore(root)
    success = read_success(store, "shard", "b")
    assert len(manifest.shards) >= 2
    intact = check_shard_integrity(store, success, SHARD)
    assert intact.passed and intact.metadata["shards"] == len(manifest.shards)
    damaged = store.local_path(layout.in_output(success.prefix, manifest.shards[1].path))
    flip_middle_byte(damaged)
    in_process, on_workers = in_process_and_on_workers(lambda: check_shard_integrity(store, success, SHARD))
    assert not in_process.passed and in_process.metadata["bad_shards"] == [manifest.shards[1].path]
    assert on_workers == in_process
