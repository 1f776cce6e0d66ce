"""Dagster wiring of the platform (see ``build.py``).

Two Dagster APIs used here on purpose print a warning at every import of the code location (each CLI call,
each run worker): observable source assets (beta) and partitioned asset-check specs (preview). Only those
two messages are silenced; any other Dagster warning still shows. A process that loads the code location
(code server, run worker) collects garbage less often, as `fm` does (engine/collector.py).
"""

import warnings

from fm_assets.engine.collector import tune_for_batch_work

tune_for_batch_work()

warnings.filterwarnings("ignore", message=r"Function `observable_source_asset` is currently in beta")
warnings.filterwarnings(
    "ignore", message=r"Specifying a partitions_def on an AssetCheckSpec is currently in preview"
)
