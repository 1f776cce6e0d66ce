"""Which chains a landed batch feeds: ``text`` when it has a file the text chain reads, ``media`` when it has
one the media chain claims (``media_claims``: media files, tars, media JSONL, captions). A pure function of
the batch manifest, so the sensor, `fm run` and the releases agree: a batch is a run of its own chains'
steps only, and a release of one chain never lists a batch of the other as held back from it."""

from __future__ import annotations

from fm_assets.engine.landing import BatchManifest, LandingError, read_batch_manifest
from fm_assets.engine.refs import set_batch_feeds
from fm_assets.engine.store import ObjectStore
from fm_assets.stages.names import CHAIN_NAMES
from fm_assets.transforms.readers.media_samples import media_claims


def manifest_chains(manifest: BatchManifest) -> tuple[str, ...]:
    """The chains (in ``CHAIN_NAMES`` order) that have something to read in ``manifest``; a batch with no
    files at all is a text batch (its land stage reports the empty batch)."""
    paths = [entry["path"] for entry in manifest.files]
    claimed = media_claims(paths)
    found = {"media"} if claimed else set()
    if len(claimed) < len(paths) or not paths:
        found.add("text")
    return tuple(chain for chain in CHAIN_NAMES if chain in found)


def batch_chains(store: ObjectStore, batch: str) -> tuple[str, ...]:
    return manifest_chains(read_batch_manifest(store, batch))


def feeds_stage(store: ObjectStore, stage: str, batch: str) -> bool:
    """Whether ``batch`` runs ``stage`` (cross-batch stages wait only for the earlier batches that do); a
    stage of no chain (a test's own) keeps the engine's rule: every earlier batch."""
    chains = [chain for chain, names in CHAIN_NAMES.items() if stage in names]
    if not chains:
        return True
    try:
        fed = batch_chains(store, batch)
    except LandingError:  # an unreadable landing: waited for, as before (its own run names the problem)
        return True
    return any(chain in fed for chain in chains)


set_batch_feeds(feeds_stage)
