"""Best-fit-decreasing packing: capacity respected, every token placed once, only long documents split."""

from itertools import pairwise

from hypothesis import given, settings
from hypothesis import strategies as st

from fm_assets.transforms.tokens.packing import best_fit_decreasing, pack_documents, split_documents


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(min_value=1, max_value=5000), min_size=1, max_size=300),
    st.sampled_from([64, 512, 2048]),
)
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


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(min_value=1, max_value=9000), min_size=1, max_size=300),
    st.sampled_from([64, 512, 2048]),
)
def test_pack_documents_places_every_token_once_and_splits_only_long_docs(lengths, capacity):
    rows = pack_documents(lengths, capacity)
    assert all(0 < sum(p.length for p in row) <= capacity for row in rows)
    spans: dict[int, list[tuple[int, int]]] = {}
    for row in rows:
        for piece in row:
            spans.setdefault(piece.doc, []).append((piece.start, piece.length))
    for doc, length in enumerate(lengths):
        pieces = sorted(spans[doc])
        assert sum(n for _, n in pieces) == length
        assert all(a + n == b for (a, n), (b, _) in pairwise(pieces))  # contiguous cover
        if length <= capacity:
            assert len(pieces) == 1
    # with enough long-document tokens, every row but one is full
    long_tokens = sum(n for n in lengths if n > capacity)
    gaps = [capacity - sum(p.length for p in row) for row in rows]
    if long_tokens >= sum(gaps) + capacity:
        assert sum(1 for g in gaps if g > 0) <= 1


def test_long_documents_fill_the_gaps_short_ones_leave():
    rows = pack_documents([700, 700, 2500], 1000)
    assert sorted(sum(p.length for p in row) for row in rows) == [900, 1000, 1000, 1000]
