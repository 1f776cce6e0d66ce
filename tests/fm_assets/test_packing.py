"""Best-fit-decreasing packing: capacity respected, every token placed once, only long documents split."""

from hypothesis import given, settings
from hypothesis import strategies as st

from fm_assets.steps.packing import best_fit_decreasing, split_documents


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=5000), min_size=1, max_size=300), st.sampled_from([64, 512, 2048]))
def test_every_token_packed_once_within_capacity(lengths, capacity):
    pieces = split_documents(lengths, capacity)
    bins = best_fit_decreasing(pieces, capacity)
    assert all(sum(p.length for p in b) <= capacity for b in bins)
    covered = {}
    for b in bins:
        for p in b:
            covered.setdefault(p.doc, []).append((p.start, p.length))
    for doc, length in enumerate(lengths):
        spans = sorted(covered[doc])
        assert sum(n for _, n in spans) == length
        assert spans[0][0] == 0
        # a document is split only when it is longer than a row
        assert (len(spans) > 1) == (length > capacity)


def test_best_fit_fills_the_fullest_bin_that_fits():
    pieces = split_documents([6, 5, 4, 3, 2], 10)
    bins = best_fit_decreasing(pieces, 10)
    assert [[p.length for p in b] for b in bins] == [[6, 4], [5, 3, 2]]


def test_deterministic_for_equal_lengths():
    lengths = [7] * 20 + [3] * 20
    first = best_fit_decreasing(split_documents(lengths, 10), 10)
    second = best_fit_decreasing(split_documents(lengths, 10), 10)
    assert first == second
    assert len(first) == 20  # 7 + 3 fills each row exactly
