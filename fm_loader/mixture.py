"""Mixtures: which sources an epoch draws from, and how many rows each contributes.

A mixture YAML (paths are relative to the YAML file)::

    epoch_rows: 200000        # optional: rows per epoch shared by the ``weight`` sources
    sources:
      - manifest: web/manifest.json
        weight: 3
      - manifest: code/manifest.json
        choose: 50000         # exactly this many rows per epoch (more than the source has tiles passes)
      - mds: s3://bucket/mds-tokens      # MosaicML MDS, pre-tokenized column
        column: tokens
        tokenizer_hash: gpt2-abc
        vocab_size: 50257
        weight: 1
      - mds: ./mds-text                  # MosaicML MDS, text column tokenized and packed on the fly
        text_column: text
        tokenizer: ./tokenizer.json
        choose: 1000

A source with neither ``weight`` nor ``choose`` contributes one full pass per epoch. ``weight`` sources
split ``epoch_rows`` (default: their total rows) by largest remainder, so counts are exact integers.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import yaml

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


def _make_source(entry: dict[str, Any], base: str, cache: ShardCache, defaults: dict[str, Any]) -> Source:
    if "manifest" in entry:
        manifest = DatasetManifest.load(resolve_uri(base, entry["manifest"]), cache.storage_options)
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


def load_mixture(source: Any, cache: ShardCache | None = None) -> Mixture:
    """Accepts a manifest path/URI, a mixture YAML path/URI, a :class:`DatasetManifest`, or a parsed mixture."""
    cache = cache or ShardCache()
    if isinstance(source, DatasetManifest):
        src = ManifestSource(source, cache=cache)
        return Mixture([src], [src.rows], spec={"manifest": source.name})
    base = ""
    if isinstance(source, (str, os.PathLike)):
        base = str(source)
        if base.endswith((".yaml", ".yml")):
            spec = yaml.safe_load(read_bytes(base, cache.storage_options))
        else:
            src = ManifestSource(DatasetManifest.load(base, cache.storage_options), cache=cache)
            return Mixture([src], [src.rows], spec={"manifest": base})
    elif isinstance(source, dict):
        spec = source
    else:
        raise TypeError(f"unsupported source {source!r}")
    entries = spec.get("sources") or []
    if not entries:
        raise ValueError("a mixture needs at least one source")
    defaults = {k: spec[k] for k in ("seq_len", "tokenizer_hash", "vocab_size") if k in spec}
    sources = [_make_source(e, base, cache, defaults) for e in entries]
    counts: list[int | None] = []
    weighted: list[int] = []
    for i, (entry, src) in enumerate(zip(entries, sources, strict=True)):
        if "choose" in entry and "weight" in entry:
            raise ValueError(f"source {src.name}: give 'weight' or 'choose', not both")
        if "choose" in entry:
            counts.append(int(entry["choose"]))
        elif "weight" in entry:
            counts.append(None)
            weighted.append(i)
        else:
            counts.append(src.rows)
    if weighted:
        total = int(spec.get("epoch_rows") or sum(sources[i].rows for i in weighted))
        for i, n in zip(
            weighted, apportion([float(entries[i]["weight"]) for i in weighted], total), strict=True
        ):
            counts[i] = n
    final = [int(c) for c in counts if c is not None]
    return Mixture(sources, final, int(spec.get("window_rows", 8192)), spec)
