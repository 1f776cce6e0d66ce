"""The stage names per chain in graph order, importable without loading any stage (reports and the CLI need
only these).

Two chains run on the same landing partitions: ``text`` (documents into packed token shards) and ``media``
(image-text and audio-text samples into multimodal shards). ``STAGE_NAMES`` stays the text chain (what the
text release, repair and reports walk); ``ALL_STAGE_NAMES`` is every stage of every chain.
``registry.check_chain`` asserts that these lists and the stage classes agree.
"""

TEXT_STAGE_NAMES = [
    "land",
    "validate",
    "pii_preflag",
    "filter",
    "dedup",
    "blocklist",
    "near_dedup",
    "normalize",
    "decontaminate",
    "tokenize",
    "pack",
    "shard",
]

MEDIA_STAGE_NAMES = [
    "media_land",
    "media_validate",
    "media_filter",
    "media_dedup",
    "media_near_dedup",
    "media_normalize",
    "media_shard",
]

CHAIN_NAMES: dict[str, list[str]] = {"text": TEXT_STAGE_NAMES, "media": MEDIA_STAGE_NAMES}

STAGE_NAMES = TEXT_STAGE_NAMES
ALL_STAGE_NAMES = [name for names in CHAIN_NAMES.values() for name in names]
