"""A deleted shard or row index is a CorruptShardError naming the shard and the manifest, and with
``skip_corrupt`` its rows become padding, counted in the metrics, while every other row still arrives."""

from __future__ import annotations

import os

import pytest
from loader_helpers import collect, make_dataset

from fm_loader import CorruptShardError, Loader


@pytest.mark.parametrize("missing", ["shard-000001.tar", "shard-000001.idx"])
def test_missing_shard_file(tmp_path, missing):
    path = make_dataset(str(tmp_path), [10, 7, 9], seq_len=16)
    clean = collect(Loader(path, global_batch_size=4, prefetch=0))
    os.remove(tmp_path / "shards" / missing)

    with pytest.raises(CorruptShardError) as err:
        collect(Loader(path, global_batch_size=4, prefetch=0))
    assert (
        "shard-000001.tar" in str(err.value)
        and "manifest" in str(err.value)
        and "fm verify" in str(err.value)
    )

    loader = Loader(path, global_batch_size=4, skip_corrupt=True, prefetch=0)
    got = collect(loader)
    assert len(got) == len(clean)  # same positions: lost rows are padding, the stream does not shift
    kept = [s for s in got if s >= 0]
    assert len(kept) == 10 + 9
    assert set(kept) <= set(clean)
    assert loader.metrics()["corrupt_rows_skipped"] == 7
    assert loader.metrics()["lost_rows"] == 7
