"""Pure audio transforms: decode and probe, quality rules, resample-and-encode policy."""
