"""The same near-dup job on a standalone master + worker on loopback gives the local-mode result."""

from __future__ import annotations

import pytest
from spark_planted import planted_corpus

from fm_assets.defs.resources.spark import get_or_create_session
from fm_assets.transforms.dedup.near_dup.job import NearDedupConfig, run_near_dedup

pytestmark = [pytest.mark.spark, pytest.mark.cluster, pytest.mark.slow]


def test_cluster_matches_local(spark_cluster_master, tmp_path):
    corpus = planted_corpus(15, seed=7)
    docs = corpus.write(str(tmp_path / "docs.parquet"))
    config = NearDedupConfig(local_max_docs=0)  # force the Spark engine: the point of this test
    local = run_near_dedup(
        get_or_create_session(master="local[2]", shuffle_partitions=4),
        [docs],
        [],
        str(tmp_path / "local"),
        config,
    )
    cluster_session = get_or_create_session(
        master=spark_cluster_master,
        shuffle_partitions=4,
        extra_conf={"spark.executor.memory": "768m", "spark.cores.max": "1"},
    )
    assert cluster_session.sparkContext.master == spark_cluster_master
    remote = run_near_dedup(cluster_session, [docs], [], str(tmp_path / "cluster"), config)
    assert local.removed.num_rows > 20
    assert remote.removed.equals(local.removed)
    for sub in ("bands", "signatures"):
        for f in sorted((tmp_path / "local" / sub).glob("*.parquet")):
            assert f.read_bytes() == (tmp_path / "cluster" / sub / f.name).read_bytes()
