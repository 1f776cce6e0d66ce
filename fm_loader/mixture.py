"""Mixtures: which sources an epoch draws from, and how many rows each contributes.

A mixture YAML (paths are relative to the YAML file)::

    epoch_rows: 200000        # optional: rows per epoch shared by the ``weight`` sources
    epoch_tokens: 400000000   # optional: tokens per epoch shared by the ``token_weight`` sources
    sources:
      - manifest: web/manifest.json
        weight: 3
      - manifest: books/manifest.json
        token_weight: 2       # a share of the epoch's tokens, not rows
      - manifest: code/manifest.json
        choose: 50000         # exactly this many rows per epoch (more than the source has tiles passes)
      - mds: s3://bucket/mds-tokens      # MosaicML MDS, pre-tokenized column
        column: tokens
        tokenizer_hash: gpt2-abc
        vocab_size: 50257
        weight: 1
      - mds: ./mds-documents             # MDS token column of whole documents: packed into rows
        pack: true
        seq_len: 2048
        vocab_size: 50257
      - mds: ./mds-text                  # MosaicML MDS, text column tokenized and packed on the fly
        text_column: text
        tokenizer: ./tokenizer.json
        namespace: cloud                 # MDS has no manifest: its namespace is said here (default cloud)
        choose: 1000

A source with none of ``weight``, ``token_weight`` or ``choose`` contributes one full pass per epoch.
``weight`` sources split ``epoch_rows`` (default: their total rows) by largest remainder, so counts are
exact integers. ``token_weight`` sources split ``epoch_tokens`` (default: their total tokens) the same way,
then each share becomes the whole number of rows nearest to it at the source's tokens per row (known from
its manifest): over whole passes the tokens are exact, within a pass exact in expectation, and never more
than half a row's tokens from the share. Sources with long and short documents thus get the token shares
that were asked for, and the counts stay a pure function of the manifests and the mixture.
``validate_spec`` refuses a spec that cannot work with a message naming the key, the source and what to write.
"""

from __future__ import annotations

import math
import os
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

import yaml

from fm_loader.access import check_namespace
from fm_loader.holdout import TRAIN, apply_split
from fm_loader.manifest import DatasetManifest
from fm_loader.sources import ManifestSource, Source
from fm_loader.storage import ShardCache, read_bytes, resolve_uri


@dataclass
class Mixture:
    sources: list[Source]
    counts: list[int]  # rows per epoch from each source
    window_rows: int = 8192
    spec: dict[str, Any] = field(default_factory=dict)


def apportion(weights: list[float], total: int) -> list[int]:
    """Split ``total`` in proportion to ``weights`` with exact integers (largest remainder, ties by index)."""
    wsum = float(sum(weights))
    if wsum <= 0:
        raise ValueError("weights must sum to a positive number")
    quotas = [w * total / wsum for w in weights]
    counts = [int(q) for q in quotas]
    short = total - sum(counts)
    by_remainder = sorted(range(len(weights)), key=lambda i: (-(quotas[i] - counts[i]), i))
    for i in by_remainder[:short]:
        counts[i] += 1
    return counts


TOP_KEYS = {"sources", "epoch_rows", "epoch_tokens", "window_rows", "seq_len", "tokenizer_hash", "vocab_size"}
SHARE_KEYS = {"weight", "token_weight", "choose", "name"}
SHARES = ("weight", "token_weight", "choose")
MANIFEST_KEYS = {"manifest"} | SHARE_KEYS
MDS_KEYS = {"mds", "column", "dtype", "seq_len", "vocab_size", "tokenizer_hash", "eos_token_id", "pack",
            "text_column", "tokenizer", "namespace"} | SHARE_KEYS  # fmt: skip


class MixtureError(ValueError):
    """A mixture spec that cannot work; the message names the key, the source and what to write."""


def _label(i: int, entry: Any) -> str:
    if isinstance(entry, dict):
        for key in ("manifest", "mds"):
            if key in entry:
                return f"source {i + 1} ({key}: {entry[key]})"
    return f"source {i + 1}"


def validate_spec(spec: Any) -> None:
    """Refuse a mixture spec with a message saying which key of which source is wrong and what to write."""
    if not isinstance(spec, dict):
        raise MixtureError(f"a mixture is a mapping with a 'sources' list, got {type(spec).__name__}")
    unknown = set(spec) - TOP_KEYS
    if unknown:
        raise MixtureError(
            f"unknown mixture key(s) {sorted(unknown)}; allowed at the top: {sorted(TOP_KEYS)}"
        )
    entries = spec.get("sources")
    if not isinstance(entries, list) or not entries:
        raise MixtureError(
            "a mixture needs a non-empty 'sources' list, e.g. sources: [{manifest: web/manifest.json}]"
        )
    for key in ("epoch_rows", "epoch_tokens", "window_rows"):
        if key in spec and (not isinstance(spec[key], int) or spec[key] <= 0):
            raise MixtureError(f"'{key}' must be a positive integer, got {spec[key]!r}")
    for i, entry in enumerate(entries):
        label = _label(i, entry)
        if not isinstance(entry, dict):
            raise MixtureError(
                f"{label}: each source is a mapping like {{manifest: path, weight: 1}}, got {entry!r}"
            )
        kinds = [k for k in ("manifest", "mds") if k in entry]
        if len(kinds) != 1:
            raise MixtureError(f"{label}: give exactly one of 'manifest' (fm shards) or 'mds' (MosaicML MDS)")
        allowed = MANIFEST_KEYS if kinds[0] == "manifest" else MDS_KEYS
        unknown = set(entry) - allowed
        if unknown:
            raise MixtureError(f"{label}: unknown key(s) {sorted(unknown)}; allowed: {sorted(allowed)}")
        given = [k for k in SHARES if k in entry]
        if len(given) > 1:
            raise MixtureError(
                f"{label}: give 'weight' (a share of epoch_rows), 'token_weight' (a share of epoch_tokens) "
                f"or 'choose' (exact rows), not both (this source has {' and '.join(given)})"
            )
        for key in ("weight", "token_weight"):
            weight = entry.get(key, 1)
            if isinstance(weight, bool) or not isinstance(weight, (int, float)) or weight <= 0:
                raise MixtureError(f"{label}: '{key}' must be a number > 0, got {weight!r}")
            if not math.isfinite(weight):
                raise MixtureError(f"{label}: '{key}' must be a finite number > 0, got {weight!r}")
        choose = entry.get("choose", 0)
        if isinstance(choose, bool) or not isinstance(choose, int) or choose < 0:
            raise MixtureError(f"{label}: 'choose' must be a whole number of rows >= 0, got {choose!r}")
        if kinds[0] == "mds" and "namespace" in entry:
            namespace = entry["namespace"]
            if not isinstance(namespace, str) or not namespace:
                raise MixtureError(f"{label}: 'namespace' must be a name such as cloud, got {namespace!r}")
        if kinds[0] == "mds":
            merged = {
                **{k: spec[k] for k in ("seq_len", "vocab_size", "tokenizer_hash") if k in spec},
                **entry,
            }
            needed = ["seq_len"] + (["tokenizer"] if "text_column" in entry else ["vocab_size"])
            for key in needed:
                if key not in merged:
                    raise MixtureError(
                        f"{label}: '{key}' is missing; add e.g. `{key}: {_EXAMPLES[key]}` to this source "
                        "(or, for seq_len and vocab_size, once at the top of the mixture)"
                    )


_EXAMPLES = {"seq_len": 2048, "vocab_size": 50257, "tokenizer": "./tokenizer.json"}


def _make_source(entry: dict[str, Any], base: str, cache: ShardCache, defaults: dict[str, Any]) -> Source:
    if "manifest" in entry:
        path = resolve_uri(base, entry["manifest"])
        try:
            manifest = DatasetManifest.load(path, cache.storage_options)
        except FileNotFoundError:
            raise MixtureError(
                f"manifest {entry['manifest']!r} not found (looked at {path}); paths are relative to the mixture file"
            ) from None
        return ManifestSource(manifest, cache=cache, name=entry.get("name", ""))
    if "mds" in entry:
        from fm_loader.mds import MDSTextSource, MDSTokenSource

        merged = {**defaults, **entry}
        uri = resolve_uri(base, entry["mds"])
        if "text_column" in entry:
            tokenizer = resolve_uri(base, merged["tokenizer"])
            return MDSTextSource(uri, merged, tokenizer, cache=cache)
        return MDSTokenSource(uri, merged, cache=cache)
    raise ValueError(f"mixture source needs a 'manifest' or 'mds' key: {entry}")


def load_mixture(
    source: Any,
    cache: ShardCache | None = None,
    held_out_rows: int = 0,
    split: str = TRAIN,
    allowed_namespaces: Collection[str] | None = None,
) -> Mixture:
    """Load what a loader reads.

    Args:
        source: A manifest path/URI, a mixture YAML path/URI, a :class:`DatasetManifest`, or a parsed mixture.
        cache: Local cache of remote files.
        held_out_rows: Rows per source kept for validation (:mod:`fm_loader.holdout`); 0 holds none out.
        split: ``"train"`` (every source without its held-out rows) or ``"validation:<source name>"`` (that
            source's held-out rows, one full pass per epoch).
        allowed_namespaces: If given, an MDS entry of another namespace is refused before its source is
            opened (an MDS text source tokenizes its shards when opened); manifests are checked by the loader.

    Raises:
        NamespaceError: An MDS entry's namespace is not in ``allowed_namespaces``.
    """
    cache = cache or ShardCache()
    base = ""
    if isinstance(source, DatasetManifest):
        spec: dict[str, Any] = {"manifest": source.name}
        sources: list[Source] = [ManifestSource(source, cache=cache)]
    elif isinstance(source, (str, os.PathLike)) and not str(source).endswith((".yaml", ".yml")):
        spec = {"manifest": str(source)}
        sources = [ManifestSource(DatasetManifest.load(str(source), cache.storage_options), cache=cache)]
    else:
        if isinstance(source, (str, os.PathLike)):
            base = str(source)
            spec = yaml.safe_load(read_bytes(base, cache.storage_options))
        elif isinstance(source, dict):
            spec = source
        else:
            raise TypeError(f"unsupported source {source!r}")
        validate_spec(spec)
        defaults = {k: spec[k] for k in ("seq_len", "tokenizer_hash", "vocab_size") if k in spec}
        if allowed_namespaces is not None:
            for entry in spec["sources"]:
                if "mds" in entry:
                    uri = resolve_uri(base, entry["mds"])
                    name = entry.get("name") or uri.rstrip("/").rsplit("/", 1)[-1]
                    namespace = entry.get("namespace", "cloud")
                    check_namespace(name, f"mds {uri}", namespace, allowed_namespaces)
        sources = [_make_source(e, base, cache, defaults) for e in spec["sources"]]
    window = int(spec.get("window_rows", 8192))
    sources = apply_split(sources, held_out_rows, split)
    if split != TRAIN or "sources" not in spec:  # one source, one full pass per epoch
        return Mixture(sources, [sources[0].rows], window, spec)
    return Mixture(sources, epoch_counts(spec, sources), window, spec)


def epoch_counts(spec: dict[str, Any], sources: list[Source]) -> list[int]:
    """Rows each source contributes per epoch, from its ``choose``, ``weight`` or ``token_weight``."""
    entries = spec["sources"]
    counts: list[int] = [src.rows for src in sources]
    by_rows = [i for i, e in enumerate(entries) if "weight" in e]
    by_tokens = [i for i, e in enumerate(entries) if "token_weight" in e]
    for i, entry in enumerate(entries):
        if "choose" in entry:
            counts[i] = int(entry["choose"])
    if by_rows:
        total = int(spec.get("epoch_rows") or sum(sources[i].rows for i in by_rows))
        shares = apportion([float(entries[i]["weight"]) for i in by_rows], total)
        for i, n in zip(by_rows, shares, strict=True):
            counts[i] = n
    if by_tokens:
        tokens = [_known_tokens(sources[i], i, entries[i]) for i in by_tokens]
        total = int(spec.get("epoch_tokens") or sum(tokens))
        shares = apportion([float(entries[i]["token_weight"]) for i in by_tokens], total)
        for i, share, source_tokens in zip(by_tokens, shares, tokens, strict=True):
            rows = sources[i].rows  # the row count whose expected tokens are nearest the share (exact ints)
            counts[i] = (2 * share * rows + source_tokens) // (2 * source_tokens)
    return counts


def _known_tokens(source: Source, i: int, entry: dict[str, Any]) -> int:
    tokens = source.tokens
    if not tokens:
        raise MixtureError(
            f"{_label(i, entry)}: 'token_weight' needs the source's token count up front, which only "
            "manifest sources record; give this source 'weight' or 'choose' instead"
        )
    return tokens
