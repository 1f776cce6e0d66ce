"""Integrity of committed stage outputs: every file a stage wrote, with its size and sha256, checked on reuse.

``_SUCCESS.json`` lists every file of its output folder (``StageSuccess.files``: parts, rejects, shard tars,
indexes, ``complete()`` artifacts) but the unit markers, which record wall times and so are checked by
presence and by parsing them against the files they list instead of by hash. Three checks use it:

* **reading an upstream output** (every stage): before planning, the driver checks every upstream file's
  presence and size (one listing) and rehashes the few files no unit reads (rejects, artifacts); each unit
  rehashes the upstream files it reads itself (``verify_inputs``), so that work is spread over the workers
  like the rest of the stage. A damaged input fails the stage with a message naming the file and the
  repair command;
* **a cache hit** re-checks what it reuses at metadata cost (one listing: names and sizes), or with full
  sha256 when ``verify_cache_hits="full"`` (``fm run --verify``);
* **``fm verify`` / ``fm repair``** check everything and map damage back to the units that wrote it.

Outputs committed before this module existed have no ``files``; they are checked against their unit
markers' sha256 (``legacy_files``), without sizes.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Literal

from fm_assets.engine import layout
from fm_assets.engine.records import StageSuccess, UnitMarker
from fm_assets.engine.store import ObjectStore

log = logging.getLogger(__name__)

Problem = Literal["missing", "size", "sha256", "unreadable"]
HASH_THREADS = 4  # hashlib releases the GIL on large buffers: threads overlap I/O and hashing


class DamagedDataError(RuntimeError):
    """A committed file does not match what its writer recorded; the message names it and the repair."""


@dataclass(frozen=True)
class Damage:
    """One damaged file of one stage output."""

    stage: str
    batch: str
    path: str  # relative to the store root
    problem: Problem
    expected: str
    found: str

    def describe(self) -> str:
        what = {
            "missing": "is missing",
            "size": f"has {self.found} bytes, {self.expected} were written",
            "sha256": f"has sha256 {self.found[:16]}..., {self.expected[:16]}... was written",
            "unreadable": f"cannot be read ({self.found})",
        }[self.problem]
        return f"{self.path} {what}"


def repair_command(stage: str, batch: str) -> str:
    return f"fm repair {batch} --stage {stage}"


def damage_message(damage: list[Damage], reader: str | None = None) -> str:
    """One readable message for a list of damaged files of one stage output."""
    first = damage[0]
    head = f"{reader}: " if reader else ""
    lines = [
        f"{head}the committed output of {first.stage}[{first.batch}] is damaged "
        f"({len(damage)} file{'s' if len(damage) != 1 else ''}):"
    ]
    lines += [f"  - {d.describe()}" for d in damage[:10]]
    if len(damage) > 10:
        lines.append(f"  - ... and {len(damage) - 10} more")
    lines.append(
        f"Nothing was built on it. Recompute exactly the damaged units with `{repair_command(first.stage, first.batch)}`"
        " (or `fm verify` to check the whole root)."
    )
    return "\n".join(lines)


def describe_output(
    store: ObjectStore, prefix: str, markers: Iterable[UnitMarker]
) -> dict[str, dict[str, Any]]:
    """``{name under prefix: {"sha256", "bytes"}}`` for every file of the output folder but ``_SUCCESS.json``,
    and ``"rows"`` for the part files whose marker recorded them.

    Unit files take the sha256 their marker recorded (no second read); other files (unit markers,
    ``complete()`` artifacts) are hashed here.
    """
    markers = list(markers)
    known = {name: sha for marker in markers for name, sha in marker.files.items()}
    rows = {name: n for marker in markers for name, n in zip(marker.parts, marker.part_rows, strict=False)}
    sizes = {name: size for name, size in store.sizes_under(prefix).items() if not _is_marker(name)}
    todo = [name for name in sizes if name not in known and name != layout.SUCCESS]
    with ThreadPoolExecutor(HASH_THREADS) as pool:
        hashed = dict(
            zip(todo, pool.map(lambda n: store.sha256(layout.in_output(prefix, n)), todo), strict=True)
        )
    files = {}
    for name, size in sorted(sizes.items()):
        if name == layout.SUCCESS:
            continue
        files[name] = {"sha256": known.get(name) or hashed[name], "bytes": size}
        if name in rows:
            files[name]["rows"] = rows[name]
    return files


def _is_marker(name: str) -> bool:
    # unit markers record their unit's wall time, so their bytes differ between equal runs: they are checked
    # by presence (cache hits) and by parsing against the files they list (full checks), not by hash
    return name.startswith(UNITS_DIR)


UNITS_DIR = "_units/"


def _check_markers(
    store: ObjectStore, success: StageSuccess, sizes: dict[str, int], full: bool
) -> list[Damage]:
    damage = []
    for unit in success.units:
        rel = layout.unit_marker(success.prefix, unit)
        name = rel.removeprefix(success.prefix + "/")
        if name not in sizes:
            damage.append(Damage(success.stage, success.batch, rel, "missing", "", ""))
            continue
        if not full:
            continue
        try:
            marker = UnitMarker.from_json(store.read_json(rel))
        except (OSError, ValueError, TypeError) as exc:
            damage.append(
                Damage(success.stage, success.batch, rel, "unreadable", "", f"{type(exc).__name__}: {exc}")
            )
            continue
        recorded = {n: f["sha256"] for n, f in success.files.items() if n in marker.files}
        if success.files and recorded != marker.files:
            damage.append(
                Damage(
                    success.stage,
                    success.batch,
                    rel,
                    "unreadable",
                    "",
                    "lists other files than _SUCCESS.json",
                )
            )
    return damage


def legacy_files(store: ObjectStore, success: StageSuccess) -> dict[str, dict[str, Any]]:
    """What an output committed without ``files`` promises: its unit markers' sha256 (sizes unknown)."""
    files: dict[str, dict[str, Any]] = {}
    for unit in success.units:
        rel = layout.unit_marker(success.prefix, unit)
        try:
            marker = UnitMarker.from_json(store.read_json(rel))
        except (OSError, ValueError, TypeError):
            continue  # reported by _check_markers
        for name, sha in marker.files.items():
            files[name] = {"sha256": sha, "bytes": -1}
    return files


def expected_files(store: ObjectStore, success: StageSuccess) -> dict[str, dict[str, Any]]:
    return success.files or legacy_files(store, success)


def check_output(
    store: ObjectStore, success: StageSuccess, *, full: bool, names: Iterable[str] | None = None
) -> list[Damage]:
    """Damaged files of a committed output: missing or resized (one listing), or rehashed when ``full``.

    ``names`` limits the check to some files (names under the output folder).
    """
    expected = expected_files(store, success)
    wanted = sorted(expected if names is None else (n for n in names if n in expected))
    sizes = store.sizes_under(success.prefix)
    damage: list[Damage] = []
    to_hash: list[str] = []

    def damaged(name: str, problem: Problem, want: str, found: str) -> Damage:
        return Damage(
            success.stage, success.batch, layout.in_output(success.prefix, name), problem, want, found
        )

    for name in wanted:
        want = expected[name]
        if name not in sizes:
            damage.append(damaged(name, "missing", want["sha256"], ""))
        elif want["bytes"] >= 0 and sizes[name] != want["bytes"]:
            damage.append(damaged(name, "size", str(want["bytes"]), str(sizes[name])))
        elif full and want["sha256"]:
            to_hash.append(name)

    def rehash(name: str) -> Damage | None:
        try:
            found = store.sha256(layout.in_output(success.prefix, name))
        except OSError as exc:
            return damaged(name, "unreadable", expected[name]["sha256"], str(exc))
        return (
            None
            if found == expected[name]["sha256"]
            else damaged(name, "sha256", expected[name]["sha256"], found)
        )

    with ThreadPoolExecutor(HASH_THREADS) as pool:
        damage += [d for d in pool.map(rehash, to_hash) if d is not None]
    if names is None and success.files:  # outputs committed before files were recorded: markers as found
        damage += _check_markers(store, success, sizes, full)
    return sorted(damage, key=lambda d: d.path)


def verify_inputs(
    store: ObjectStore,
    expected: Mapping[str, str],
    inputs: Iterable[str],
    *,
    stage: str,
    batch: str,
    reader: str,
) -> None:
    """Rehash the unit inputs in ``inputs`` that ``expected`` (path under the root -> sha256, as the upstream
    stage ``stage[batch]`` recorded it) lists; raise ``DamagedDataError`` naming any that differ."""
    damage = []
    for rel in inputs:
        want = expected.get(rel)
        if not want:
            continue
        try:
            found = store.sha256(rel)
        except OSError as exc:
            damage.append(Damage(stage, batch, rel, "unreadable", want, str(exc)))
            continue
        if found != want:
            damage.append(Damage(stage, batch, rel, "sha256", want, found))
    if damage:
        raise DamagedDataError(damage_message(damage, reader))


def require_intact(
    store: ObjectStore, success: StageSuccess, *, full: bool, reader: str | None = None
) -> None:
    """Raise ``DamagedDataError`` if ``success``'s output is damaged (see ``check_output``)."""
    damage = check_output(store, success, full=full)
    if damage:
        raise DamagedDataError(damage_message(damage, reader))


def units_owning(store: ObjectStore, success: StageSuccess, damage: list[Damage]) -> tuple[list[str], bool]:
    """(units whose files or markers are damaged, whether files outside any unit are damaged)."""
    owner: dict[str, str] = {}
    for unit in success.units:
        marker_name = layout.unit_marker(success.prefix, unit).removeprefix(success.prefix + "/")
        owner[marker_name] = unit
        rel = layout.unit_marker(success.prefix, unit)
        try:
            marker = UnitMarker.from_json(store.read_json(rel))
        except (OSError, ValueError, TypeError):
            continue  # the marker itself is damaged: listed in the damage, owned via marker_name
        for name in marker.files:
            owner[name] = unit
    units: set[str] = set()
    outside = False
    for d in damage:
        name = d.path.removeprefix(success.prefix + "/")
        if name in owner:
            units.add(owner[name])
        else:
            outside = True
    return sorted(units), outside
