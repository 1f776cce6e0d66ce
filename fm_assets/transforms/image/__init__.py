"""Pure image transforms: decode and probe, quality rules, perceptual hashes, the resize policy."""
