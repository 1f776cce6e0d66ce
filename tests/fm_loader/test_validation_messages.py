"""Mistakes a trainer can make get a message that says what is wrong and what to write: loader states that
are incomplete, of the wrong type or past the end, and mixture specs with missing or invalid keys."""

from __future__ import annotations

import pytest
from loader_helpers import make_dataset

from fm_loader import Loader
from fm_loader.mixture import MixtureError


@pytest.fixture
def dataset(tmp_path) -> str:
    return make_dataset(str(tmp_path / "ds"), [10, 6], seq_len=16)


def test_state_past_the_end_is_refused(dataset):
    loader = Loader(dataset, global_batch_size=4, epochs=1)
    state = {**loader.state_dict(), "epoch": 3}
    with pytest.raises(ValueError, match="past the end: epoch 3 row 0, but this loader has 1 epoch"):
        Loader(dataset, global_batch_size=4, epochs=1).load_state_dict(state)


def test_state_missing_a_key_says_which(dataset):
    state = Loader(dataset, global_batch_size=4).state_dict()
    del state["rows_consumed"]
    with pytest.raises(ValueError, match="no 'rows_consumed'; a state_dict\\(\\) looks like"):
        Loader(dataset, global_batch_size=4).load_state_dict(state)


def test_state_with_a_wrong_type_says_which(dataset):
    state = {**Loader(dataset, global_batch_size=4).state_dict(), "epoch": "1"}
    with pytest.raises(ValueError, match="'epoch' must be int"):
        Loader(dataset, global_batch_size=4).load_state_dict(state)


def test_finished_state_still_loads(dataset):
    loader = Loader(dataset, global_batch_size=4, epochs=1)
    list(loader)
    again = Loader(dataset, global_batch_size=4, epochs=1)
    again.load_state_dict(loader.state_dict())
    assert list(again) == []


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (
            {"mds": "x", "vocab_size": 10},
            r"source 1 \(mds: x\): 'seq_len' is missing; add e.g. `seq_len: 2048`",
        ),
        ({"mds": "x", "seq_len": 8}, r"'vocab_size' is missing"),
        ({"manifest": "m.json", "weight": 0}, r"'weight' must be a number > 0, got 0"),
        ({"manifest": "m.json", "weight": 1, "choose": 3}, r"give 'weight'.*or 'choose'.*not both"),
        ({"manifest": "m.json", "wieght": 1}, r"unknown key\(s\) \['wieght'\]"),
        ({"weight": 1}, r"give exactly one of 'manifest'"),
    ],
)
def test_mixture_mistakes_name_the_key_and_the_source(source, message):
    with pytest.raises(MixtureError, match=message):
        Loader({"sources": [source]}, global_batch_size=4)


def test_mixture_manifest_that_does_not_exist(tmp_path):
    (tmp_path / "mix.yaml").write_text("sources:\n  - manifest: nowhere/manifest.json\n")
    with pytest.raises(MixtureError, match=r"manifest 'nowhere/manifest\.json' not found"):
        Loader(str(tmp_path / "mix.yaml"), global_batch_size=4)
