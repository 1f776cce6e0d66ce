"""Media revocation without running the chain: which samples a revocation covers, and that recording one
re-keys ``media_filter`` for exactly the batches it can match."""

from __future__ import annotations

import pytest

from fm_assets.compliance.revocations import record_revocation, revocation_blocklists, revoked_by
from fm_assets.defs.resources.pipeline_config import PipelineConfigResource
from fm_assets.engine.stage import StageContext
from fm_assets.stages.media_filter import STAGE as MEDIA_FILTER
from fm_assets.transforms.blocklist.lists import Blocklists

SHA = "ab" * 32


@pytest.mark.parametrize(
    ("lists", "sample", "expected"),
    [
        (Blocklists(revoked=(("gen", "*"),)), ("gen", "MIT", "00" * 32), "revoked_license"),
        (Blocklists(revoked=(("*", "MIT"),)), ("gen", "MIT", "00" * 32), "revoked_license"),
        (Blocklists(revoked=(("gen", "CC-BY-4.0"),)), ("gen", "MIT", "00" * 32), None),
        (Blocklists(doc_hashes=(SHA,)), ("gen", "MIT", SHA), "blocked_doc_hash"),
        (Blocklists(doc_hashes=(SHA,)), ("gen", "MIT", "00" * 32), None),
    ],
)
def test_a_sample_is_revoked_by_its_pair_or_its_raw_media_hash(lists, sample, expected):
    found = revoked_by(lists, *sample)
    assert (found[0] if found else None) == expected


def _key_inputs(store, batch):
    settings = PipelineConfigResource(progress=False)
    return dict(MEDIA_FILTER.side_inputs(StageContext(store, batch, settings, {})).versions)


def test_recording_a_revocation_rekeys_media_filter_only_where_it_can_match(store, land):
    revoked, other = land("gen", "CC-BY-4.0"), land("keep", "MIT")
    before = {batch: _key_inputs(store, batch) for batch in (revoked, other)}
    record_revocation(store, reason="LEGAL-1", source="gen", license_id="CC-BY-4.0")
    after = {batch: _key_inputs(store, batch) for batch in (revoked, other)}
    assert after[revoked] != before[revoked]
    assert after[other] == before[other]
    assert revocation_blocklists(store, revoked).revoked == (("gen", "CC-BY-4.0"),)
