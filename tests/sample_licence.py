"""The licence an `fm sample-data` package's documents carry: what `fm land --license` must declare for them,
since land quarantines a record whose own licence is not the batch's (``license_conflict``)."""

from __future__ import annotations

import json
from pathlib import Path


def package_licence(folder: Path) -> str:
    """The licence of the first document of the package folder ``folder`` (every document of a package
    carries the same one)."""
    first = sorted(Path(folder).glob("*.jsonl"))[0]
    with first.open() as handle:
        return json.loads(handle.readline())["license"]
