"""``ModalityMixture``: text and media loaders in one deterministic schedule of global batches.

A trainer that alternates modalities (text steps and image-text steps, say) needs every rank to agree on the
modality of step ``k``, and a resumed run to continue the same sequence. Here the modality of global batch
``k`` is a pure function of (weights, seed, k): the weights become exact integer counts over a period
(largest remainder, :func:`fm_loader.mixture.apportion`), and the period is merged by the text loader's
interleave (:class:`fm_loader.order.Interleave`): loader ``i``'s ``j``-th slot of the period sits at
``(j + 0.5) / count_i``, so every prefix holds each modality's share to within one batch. The seed shifts
where in the period step 0 falls and the order in which ties are broken.

Each loader keeps its own stream and state; the mixture's state is theirs plus ``k``. Restoring it (with the
loaders rebuilt under any world size) continues the identical sequence of (modality, batch). Iteration ends
when the loader whose turn it is has no batch left: use endless loaders (``epochs=None``) for long runs.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from fractions import Fraction
from typing import Any, Protocol

import numpy as np

from fm_loader.mixture import apportion
from fm_loader.order import Interleave

STATE_FORMAT = "fm_loader.modality-mixture/1"


class ResumableLoader(Protocol):
    """What the mixture needs of a loader: :class:`fm_loader.Loader` and :class:`MediaLoader` both fit."""

    def __iter__(self) -> Iterator[Any]: ...
    def state_dict(self) -> dict[str, Any]: ...
    def load_state_dict(self, state: dict[str, Any], strict: bool = True) -> None: ...


def _period_counts(weights: list[float], max_period: int) -> list[int]:
    """Exact integer counts per period: the smallest integer ratio when there is one within ``max_period``."""
    ratios = [Fraction(w).limit_denominator(max_period) for w in weights]
    scale = np.lcm.reduce([r.denominator for r in ratios])
    counts = [int(r * scale) for r in ratios]
    divisor = int(np.gcd.reduce(counts))
    counts = [c // divisor for c in counts]
    return counts if sum(counts) <= max_period else apportion(weights, max_period)


class ModalityMixture:
    """Yields ``(name, batch)``: each global batch from the loader the schedule names (module docstring).

    Attributes:
        names: The loaders' names, in the order given.
        counts: Batches of each loader per period of the schedule.
        batches: Global batches handed out so far (``k``; part of the state).
    """

    def __init__(
        self,
        loaders: Mapping[str, ResumableLoader],
        weights: Mapping[str, float],
        seed: int = 0,
        max_period: int = 1000,
    ) -> None:
        """Args:
        loaders: Name -> loader (e.g. ``{"text": Loader(...), "image": MediaLoader(...)}``).
        weights: Name -> share of the global batches (positive; same names as ``loaders``).
        seed: Shifts the schedule's phase and tie order.
        max_period: Longest schedule period; weights without a small integer ratio are rounded to it.

        Raises:
            ValueError: Names of ``loaders`` and ``weights`` differ, or a weight is not positive.
        """
        if set(loaders) != set(weights) or not loaders:
            raise ValueError(
                f"loaders {sorted(loaders)} and weights {sorted(weights)} must name the same sources"
            )
        for name, weight in weights.items():
            if isinstance(weight, bool) or not isinstance(weight, (int, float)):
                raise ValueError(f"source {name!r}: weight must be a number > 0, got {weight!r}")
            if not math.isfinite(weight) or not weight > 0:
                raise ValueError(f"source {name!r}: weight must be a finite number > 0, got {weight!r}")
        self.names = list(loaders)
        self.loaders = dict(loaders)
        self.weights = {name: float(weights[name]) for name in self.names}
        self.seed = int(seed)
        rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([self.seed, 0x6D6978])))
        # the interleave breaks ties by source index: the seed picks the order
        self._order = [self.names[i] for i in rng.permutation(len(self.names))]
        self.counts = dict(
            zip(self._order, _period_counts([self.weights[n] for n in self._order], max_period), strict=True)
        )
        self._interleave = Interleave([self.counts[n] for n in self._order])
        self._phase = int(rng.integers(self._interleave.total))
        self.batches = 0
        self._iters: dict[str, Iterator[Any]] = {}

    def modality_of(self, k: int) -> str:
        """Name of the loader that gives global batch ``k``."""
        position = (k + self._phase) % self._interleave.total
        source, _ = self._interleave.items(position, 1)
        return self._order[int(source[0])]

    def __iter__(self) -> Iterator[tuple[str, Any]]:
        """Yield ``(name, batch)`` from the current position until the scheduled loader runs out."""
        while True:
            name = self.modality_of(self.batches)
            it = self._iters.get(name)
            if it is None:
                it = self._iters[name] = iter(self.loaders[name])
            try:
                batch = next(it)
            except StopIteration:
                return
            self.batches += 1
            yield name, batch

    def state_dict(self) -> dict[str, Any]:
        """``{format, seed, weights, batches, loaders: {name: state}}``, plain JSON-serialisable values."""
        return {
            "format": STATE_FORMAT,
            "seed": self.seed,
            "weights": dict(self.weights),
            "batches": self.batches,
            "loaders": {name: self.loaders[name].state_dict() for name in self.names},
        }

    def load_state_dict(self, state: dict[str, Any], strict: bool = True) -> None:
        """Continue from :meth:`state_dict`'s position (each loader restores its own, under any world size).

        Raises:
            ValueError: Not a mixture state, other loader names, or other weights or seed (the schedule would
                differ).
        """
        if not isinstance(state, dict) or state.get("format") != STATE_FORMAT:
            raise ValueError(f"not a modality mixture state (expected format {STATE_FORMAT!r})")
        if set(state.get("loaders", {})) != set(self.names):
            raise ValueError(
                f"state has loaders {sorted(state.get('loaders', {}))}, this mixture has {sorted(self.names)}"
            )
        if state.get("weights") != self.weights or state.get("seed") != self.seed:
            raise ValueError(
                f"state was saved with weights {state.get('weights')} seed {state.get('seed')}, this mixture has "
                f"{self.weights} seed {self.seed}: the schedule would differ"
            )
        batches = state.get("batches")
        if not isinstance(batches, int) or isinstance(batches, bool) or batches < 0:
            raise ValueError(f"mixture state 'batches' must be an int >= 0, got {batches!r}")
        for name in self.names:
            self.loaders[name].load_state_dict(state["loaders"][name], strict=strict)
        self.batches = batches
        self._iters.clear()
