"""Near-dup settings: shingles, MinHash size, LSH banding, survivor rule; their fingerprint is in the stage key."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from fm_assets.engine.hashing import stable_hash
from fm_assets.transforms.dedup.lsh_params import optimal_lsh_params
from fm_assets.transforms.dedup.minhash import MinHasher

CODE_VERSION = "near_dup_spark/1"


@dataclass(frozen=True)
class NearDedupConfig:
    ngram: int = 5
    threshold: float = 0.8
    num_perm: int = 128
    seed: int = 1
    verify_exact: bool = True
    fp_weight: float = 0.1
    fn_weight: float = 0.9
    bands: int | None = None  # both None: chosen by lsh_params for threshold/num_perm/weights
    rows: int | None = None
    max_bucket_pairs: int = 50
    min_survivor_similarity: float | None = None  # None: threshold - 0.1
    index_partitions: int = 4
    # Engine choice, not output: batch documents + prior index documents below this run in-process
    # (near_dup.local, identical output), otherwise on Spark; 0 always uses Spark. Not in the fingerprint.
    # Measured (bench/dedup.py, 2 cores): ~100 docs 0.11 s in-process vs 11 s on Spark; 50K docs 32 s
    # vs 87 s on local[2], ~16 s of one core and +0.3 GB in-process.
    local_max_docs: int = 50_000

    def lsh(self) -> tuple[int, int]:
        if self.bands is not None and self.rows is not None:
            return self.bands, self.rows
        params = optimal_lsh_params(self.threshold, self.num_perm, self.fp_weight, self.fn_weight)
        return params.bands, params.rows

    def survivor_floor(self) -> float:
        if self.min_survivor_similarity is not None:
            return self.min_survivor_similarity
        return self.threshold - 0.1

    def hasher(self) -> MinHasher:
        return MinHasher(num_perm=self.num_perm, ngram=self.ngram, seed=self.seed)

    def fingerprint(self) -> str:
        """Stable key of everything that changes the output (config + this module's code version).

        Fields that only pick how the output is computed (:data:`ENGINE_FIELDS`) are left out.
        """
        fields = {k: v for k, v in asdict(self).items() if k not in ENGINE_FIELDS}
        return stable_hash({"code": CODE_VERSION, **fields})


ENGINE_FIELDS = frozenset({"local_max_docs"})  # change where the work runs, never what it writes
