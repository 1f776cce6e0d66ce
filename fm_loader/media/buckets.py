"""Aspect-ratio buckets: a fixed set of (height, width) shapes of about the same pixel count.

Every image-text global batch is drawn from one bucket and every image in it is resized (cover) and
center-cropped to that bucket's shape, so a batch has one fixed shape and little of any image is cut away.
An image belongs to the bucket whose aspect ratio is nearest to its own on a log scale (ties go to the
lower bucket index).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from itertools import pairwise

import numpy as np

DEFAULT_ASPECT_RATIOS: tuple[tuple[int, int], ...] = (
    (2, 5),
    (1, 2),
    (2, 3),
    (3, 4),
    (1, 1),
    (4, 3),
    (3, 2),
    (2, 1),
    (5, 2),
)
"""Width:height ratios of the default buckets, portrait to landscape, symmetric around square."""


@dataclass(frozen=True)
class BucketSet:
    """The buckets, as (height, width) shapes ordered by aspect ratio (width / height), narrowest first.

    Attributes:
        shapes: One ``(height, width)`` per bucket, distinct, ordered by increasing width / height.
    """

    shapes: tuple[tuple[int, int], ...]

    def __post_init__(self) -> None:
        if not self.shapes:
            raise ValueError("a BucketSet needs at least one (height, width) shape")
        if any(h <= 0 or w <= 0 for h, w in self.shapes):
            raise ValueError(f"bucket shapes must be positive, got {self.shapes}")
        ratios = [w / h for h, w in self.shapes]
        if any(b <= a for a, b in pairwise(ratios)):
            raise ValueError(f"bucket shapes must have strictly increasing width/height, got {self.shapes}")

    @classmethod
    def for_area(
        cls,
        area: int = 256 * 256,
        multiple: int = 32,
        ratios: tuple[tuple[int, int], ...] = DEFAULT_ASPECT_RATIOS,
    ) -> BucketSet:
        """Buckets of about ``area`` pixels with sides that are multiples of ``multiple``.

        Args:
            area: Target pixels per image (height * width), e.g. ``256 * 256``.
            multiple: Every side is a positive multiple of this (32 or 64 suit most vision encoders).
            ratios: ``(width, height)`` aspect ratios, one bucket each.

        Returns:
            The bucket set; ratios that round to the same shape give one bucket.
        """
        shapes: set[tuple[int, int]] = set()
        for rw, rh in ratios:
            r = rw / rh
            width = max(multiple, round(math.sqrt(area * r) / multiple) * multiple)
            height = max(multiple, round(math.sqrt(area / r) / multiple) * multiple)
            shapes.add((height, width))
        return cls(tuple(sorted(shapes, key=lambda s: s[1] / s[0])))

    def __len__(self) -> int:
        return len(self.shapes)

    @property
    def fingerprint(self) -> str:
        """Identifies the shapes (part of the image stream's fingerprint: other buckets, other batches)."""
        return hashlib.sha256(repr(self.shapes).encode()).hexdigest()[:16]

    def _log_ratios(self) -> np.ndarray:
        return np.log(np.array([w / h for h, w in self.shapes]))

    def bucket_ids(self, widths: np.ndarray, heights: np.ndarray) -> np.ndarray:
        """Bucket index of every image (int64), from its width and height in pixels.

        Raises:
            ValueError: A width or height is not positive.
        """
        widths = np.asarray(widths, dtype=np.float64)
        heights = np.asarray(heights, dtype=np.float64)
        if widths.size and (widths.min() <= 0 or heights.min() <= 0):
            raise ValueError("image width and height must be positive to pick a bucket")
        # Bucket boundaries are the midpoints (in log ratio) between neighbouring buckets.
        logs = self._log_ratios()
        edges = (logs[1:] + logs[:-1]) / 2
        return np.searchsorted(edges, np.log(widths / heights), side="left").astype(np.int64)

    def bucket_of(self, width: int, height: int) -> int:
        """Bucket index of one image of ``width`` x ``height`` pixels."""
        return int(self.bucket_ids(np.array([width]), np.array([height]))[0])

    def histogram(self, widths: np.ndarray, heights: np.ndarray) -> list[int]:
        """Number of images per bucket."""
        return np.bincount(self.bucket_ids(widths, heights), minlength=len(self)).tolist()


DEFAULT_BUCKETS = BucketSet.for_area()
"""Nine buckets of about 256 * 256 pixels, sides multiples of 32 (160x416 portrait to 416x160 landscape)."""
