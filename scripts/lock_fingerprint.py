"""Prints the sha256 of pyproject.toml's dependency lists (base + every extra, plus requires-python).

`make lock` writes it into requirements/lock.txt's header; tests/deploy/test_lock.py recomputes it, so a
dependency change that was not re-locked fails the tests instead of installing something untested.
Standard library only: it runs before any environment exists.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import tomllib


def dependency_fingerprint(pyproject: Path) -> str:
    project = tomllib.loads(pyproject.read_text())["project"]
    inputs = {
        "requires-python": project.get("requires-python", ""),
        "dependencies": project.get("dependencies", []),
        "optional-dependencies": project.get("optional-dependencies", {}),
    }
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()


if __name__ == "__main__":
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent
    print(dependency_fingerprint(root / "pyproject.toml"))
