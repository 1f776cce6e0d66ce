"""One module per stage, named like its asset; ``registry`` lists the chains."""

# a batch runs only its own chains' stages: plugs the chain rule into the engine's cross-batch waits
from fm_assets.stages import batch_chains as _batch_chains  # noqa: F401
