"""The loader state: a few integers, and the one check that a dict is a state this loader can continue from.

Every sample kind saves ``{format, fingerprint, seed, epoch, <its position keys>}``: packed tokens count
``rows_consumed`` of the epoch; media kinds count ``batches_emitted`` and ``samples_consumed`` and pin
``global_batch_size`` (their bucketed batches depend on it). :class:`StateSpec` says which, and
:func:`validate_state` checks any of them the same way.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class StateSpec:
    """The layout of one kind's state.

    Attributes:
        format: The ``format`` value (``fm_loader.state/1`` for packed tokens).
        position: Position keys after ``epoch``, in order; every one a non-negative int.
        progress: The position key counting rows (samples) of the epoch already consumed.
        label: How messages name the state (``loader state``, ``media loader state``).
        pinned: Keys stored ahead of ``epoch`` that must equal the loader's own value (not restored).
    """

    format: str
    position: tuple[str, ...]
    progress: str
    label: str = "loader state"
    pinned: tuple[str, ...] = ()

    @property
    def keys(self) -> tuple[str, ...]:
        return ("format", "fingerprint", "seed", *self.pinned, "epoch", *self.position)

    def example(self, pins: dict[str, int]) -> str:
        values = {"format": repr(self.format), "fingerprint": "'<16 hex>'"}
        body = ", ".join(f"'{k}': {values.get(k, pins.get(k, 0))}" for k in self.keys)
        return "{" + body + "}"


def validate_state(
    state: Any, spec: StateSpec, epochs: int | None, epoch_rows: int, pins: dict[str, int] | None = None
) -> None:
    """Refuse a state that ``state_dict`` did not write, that another plan wrote, or that points past the end.

    Args:
        state: What the trainer passed to ``load_state_dict``.
        spec: The layout of this loader's state.
        epochs: The loader's epochs (``None``: endless).
        epoch_rows: Rows (samples) in one epoch.
        pins: The loader's own values of ``spec.pinned`` (e.g. ``{"global_batch_size": 64}``).

    Raises:
        ValueError: The message names the missing or invalid key and shows a valid state.
    """
    pins = pins or {}
    example = spec.example(pins)
    if not isinstance(state, dict):
        raise ValueError(f"a {spec.label} is a dict like {example}, got {type(state).__name__}")
    if state.get("format") != spec.format:
        raise ValueError(
            f"not an fm_loader {spec.label} (format {state.get('format')!r}, expected {spec.format!r}): {example}"
        )
    for key in spec.keys:
        kind = str if key in ("format", "fingerprint") else int
        if key not in state:
            raise ValueError(f"{spec.label} has no {key!r}; a state_dict() looks like {example}")
        if not isinstance(state[key], kind) or isinstance(state[key], bool):
            raise ValueError(f"{spec.label} {key!r} must be {kind.__name__}, got {state[key]!r}")
    for key, mine in pins.items():
        if state[key] != mine:
            raise ValueError(
                f"the state was saved with {key} {state[key]}, this loader has {mine}: bucketed batches depend "
                f"on it, so resume with the same {key} (any world size works)"
            )
    progress = state[spec.progress]
    if state["epoch"] < 0 or any(state[k] < 0 for k in spec.position) or progress > epoch_rows:
        raise ValueError(
            f"{spec.label} position (epoch {state['epoch']}, row {progress}) is outside the stream "
            f"(epochs of {epoch_rows} rows)"
        )
    position = (state["epoch"], progress)
    if epochs is not None and position > (epochs, 0):
        raise ValueError(
            f"{spec.label} is past the end: epoch {state['epoch']} row {progress}, but this loader has {epochs} "
            f"epoch(s) of {epoch_rows} rows; nothing would be left to read (raise epochs=, or start from a fresh "
            "state)"
        )
    if epochs is not None and position == (epochs, 0):
        logger.warning("%s is at the end of its %d epoch(s): this loader yields no batch", spec.label, epochs)
