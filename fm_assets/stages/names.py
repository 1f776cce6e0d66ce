"""The stage names in graph order, importable without loading any stage (reports and the CLI need only these).

``registry.check_chain`` asserts that this list and the stage classes agree.
"""

STAGE_NAMES = [
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
