"""The ``fm`` command line."""

from fm_assets.engine.collector import tune_for_batch_work

tune_for_batch_work()  # before the CLI's own imports (engine/collector.py says why)
