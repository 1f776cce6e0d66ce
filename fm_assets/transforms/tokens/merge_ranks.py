"""Token ranks for a rank-based BPE (tiktoken) from a merge-list BPE, only where both give the same ids.

HF ``tokenizers`` merges the adjacent pair that is earliest in the merge list; tiktoken merges the adjacent
pair whose concatenation has the lowest rank, whether or not that pair is the merge that made the token.
With ranks = ids the two agree when

1. merge ``i`` makes a token whose id increases with ``i`` (the same priority order), every token above
   the 256 bytes is made by exactly one merge, and
2. every token is *merge-consistent*: rank-based BPE of the token's own bytes, allowed only ranks below
   the token's, ends in exactly the two parts of the token's merge.

Under (2), whenever two adjacent parts concatenate to a token during rank-based BPE they are that token's
merge: the merges inside their span happened as in the token's own run, and that run passes through one
two-part state only, the merge pair. So both algorithms see the same candidate pairs with the same order
and take the same steps (ties go to the leftmost pair in both). ``tiktoken_ranks`` checks (1) and (2) and
raises ``UnsupportedTokenizer`` naming the first token that breaks them.
"""

from __future__ import annotations

from fm_assets.transforms.tokens.tokenizer_json import ByteLevelBpe, UnsupportedTokenizer, token_bytes


def rank_merge(data: bytes, ranks: dict[bytes, int], below: int) -> list[bytes]:
    """Rank-based BPE of ``data`` using only ranks lower than ``below`` (leftmost pair on ties)."""
    parts = [data[i : i + 1] for i in range(len(data))]
    while len(parts) > 1:
        best_rank, best_at = below, -1
        for i in range(len(parts) - 1):
            rank = ranks.get(parts[i] + parts[i + 1])
            if rank is not None and rank < best_rank:
                best_rank, best_at = rank, i
        if best_at < 0:
            break
        parts[best_at : best_at + 2] = [parts[best_at] + parts[best_at + 1]]
    return parts


def tiktoken_ranks(spec: ByteLevelBpe) -> dict[bytes, int]:
    """``mergeable_ranks`` (token bytes -> id) for tiktoken, identical to ``spec``'s merges, or raise why not."""
    added = {token.content for token in spec.added}
    ranks = {token_bytes(token): token_id for token, token_id in spec.vocab.items() if token not in added}
    made_by: dict[bytes, tuple[bytes, bytes]] = {}
    previous = -1
    for left, right in spec.merges:
        merged = left + right
        if merged not in spec.vocab:
            raise UnsupportedTokenizer(
                f"merge {left!r} + {right!r} makes {merged!r}, which is not in the vocabulary"
            )
        if merged in added:
            raise UnsupportedTokenizer(f"merge {left!r} + {right!r} makes the added token {merged!r}")
        token_id = spec.vocab[merged]
        if token_id <= previous:
            raise UnsupportedTokenizer(
                f"token {merged!r} (id {token_id}) is out of merge order: ids are not ranks"
            )
        previous = token_id
        made_by[token_bytes(merged)] = (token_bytes(left), token_bytes(right))
    unmade = [data for data in ranks if len(data) > 1 and data not in made_by]
    if unmade:
        raise UnsupportedTokenizer(
            f"{len(unmade)} multi-byte tokens are made by no merge, e.g. {unmade[0]!r}"
        )
    for data, (left, right) in made_by.items():
        parts = rank_merge(data, ranks, ranks[data])
        if parts != [left, right]:
            raise UnsupportedTokenizer(
                f"token {data!r} is not merge-consistent: by rank it splits as {parts}, its merge is {[left, right]}"
            )
    return ranks
