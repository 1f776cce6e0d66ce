"""Cost of the PII detectors and the quality scorer on real documents; prints one JSON object.

One process, one core (``time.process_time``: CPU seconds of this process only): the regex PII pass on every
document, the NER pass (Presidio + spaCy ``en_core_web_sm``) on every document and on the regex-flagged ones
as the ``flagged`` policy mode runs it, and the quality model (``--quality-model``, a registered model file)
scoring every document. Documents come from ``fm sample-data`` JSONL under ``--data``.

Usage: python bench/pii_quality.py --data DIR [--docs 400] [--quality-model FILE]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any


def load_docs(folder: Path, limit: int) -> list[str]:
    docs = []
    for path in sorted(folder.rglob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            docs.append(json.loads(line)["text"])
    step = max(1, len(docs) // limit)
    return docs[::step][:limit]


def timed(function, docs: list[str]) -> dict[str, Any]:
    start = time.process_time()
    for text in docs:
        function(text)
    seconds = time.process_time() - start
    chars = sum(len(t) for t in docs)
    return {
        "docs": len(docs),
        "cpu_seconds": round(seconds, 3),
        "docs_per_cpu_second": round(len(docs) / seconds, 1) if seconds else None,
        "mb_per_cpu_second": round(chars / 1e6 / seconds, 3) if seconds else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--docs", type=int, default=400)
    parser.add_argument("--quality-model", type=Path)
    args = parser.parse_args()
    docs = load_docs(args.data, args.docs)
    from fm_assets.transforms.text.pii import find_pii_spans

    result: dict = {"mean_chars_per_doc": round(sum(map(len, docs)) / len(docs))}
    result["regex_pii"] = timed(find_pii_spans, docs)
    flagged = [t for t in docs if find_pii_spans(t)]
    try:
        from fm_assets.transforms.text.pii_ner import find_entities

        find_entities("warm up the model once")
        result["ner_every_doc"] = timed(find_entities, docs)
        result["ner_flagged_docs_only"] = {
            **timed(find_entities, flagged),
            "flagged_fraction": len(flagged) / len(docs),
        }
    except RuntimeError as exc:  # NerUnavailableError: the ner extra is not installed
        result["ner"] = str(exc)
    if args.quality_model:
        from fm_assets.side_inputs.quality_model import load_model_file

        model = load_model_file(args.quality_model)
        result["quality_model"] = timed(model.score, docs)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
