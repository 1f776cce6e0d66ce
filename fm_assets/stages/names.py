"""The stage names of every chain, in graph order, importable without loading any stage (reports and the
CLI need only these).

Two chains run on the same landing partitions: ``text`` (documents into packed token shards) and ``media``
(image-, audio- and video-text samples into multimodal shards). The chain names are also the Dagster asset
group names. There is no name for "the stages" that silently means one chain: say ``CHAIN_NAMES[TEXT]``
or ``ALL_STAGE_NAMES``. ``registry.check_chain`` asserts that these lists and the stage classes agree.
"""

TEXT = "text"
MEDIA = "media"

CHAIN_NAMES: dict[str, list[str]] = {
    TEXT: [
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
    ],
    MEDIA: [
        "media_land",
        "media_validate",
        "media_clip",
        "media_filter",
        "media_dedup",
        "media_near_dedup",
        "media_normalize",
        "media_shard",
    ],
}

ALL_STAGE_NAMES = [name for names in CHAIN_NAMES.values() for name in names]
