"""The one exception every media decode or validation failure raises: ``MediaError(reason, details)``.

Stages catch it and turn it into a reject (reason code + JSON-able details); nothing from Pillow,
libsndfile or numpy escapes a media transform undescribed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

# Reason codes (snake_case, stable: they end up in rejects tables and audit reports).
NOT_AN_IMAGE = "not_an_image"
TRUNCATED_IMAGE = "truncated_image"
CORRUPT_IMAGE = "corrupt_image"
DECOMPRESSION_BOMB = "decompression_bomb"
UNSUPPORTED_FORMAT = "unsupported_format"
INVALID_DIMENSIONS = "invalid_dimensions"
NOT_AUDIO = "not_audio"
ZERO_LENGTH_AUDIO = "zero_length_audio"
UNSUPPORTED_CODEC = "unsupported_codec"
CORRUPT_AUDIO = "corrupt_audio"
AUDIO_TOO_LARGE = "audio_too_large"
ENCODE_FAILED = "encode_failed"

_ADDRESS = re.compile(r"<[^<>]* at 0x[0-9a-fA-F]+>")
ERROR_TEXT_CHARS = 200


def error_text(exc: BaseException) -> str:
    """A library exception's message for ``details``: object addresses removed (they differ per run), capped."""
    return _ADDRESS.sub("<data>", str(exc))[:ERROR_TEXT_CHARS]


class MediaError(Exception):
    """A media input that cannot be used, with a stable ``reason`` code and JSON-able ``details``."""

    def __init__(self, reason: str, details: Mapping[str, Any] | None = None) -> None:
        self.reason = reason
        self.details: dict[str, Any] = dict(details or {})
        super().__init__(reason, self.details)

    def __str__(self) -> str:
        if not self.details:
            return self.reason
        return f"{self.reason}: {json.dumps(self.details, sort_keys=True, default=str)}"

    def __reduce__(self) -> tuple[Any, ...]:
        # Survive pickling across process pools with both fields intact.
        return (type(self), (self.reason, self.details))
