"""Measure per-rule quality drop rates, language-ID agreement and PII/contamination hits on fetched sample data.

Not a test (pytest does not collect it): ``python tests/transforms/text/measure_quality_rates.py DEST`` where DEST
is a folder written by ``fetch_sample_data``. Prints one JSON object.
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

from fm_assets.transforms.text.decontam import load_default_eval_index
from fm_assets.transforms.text.langid import detect_language
from fm_assets.transforms.text.normalize import normalize_text
from fm_assets.transforms.text.pii import find_pii
from fm_assets.transforms.text.quality import QualityConfig, evaluate_quality


def main(root: Path) -> dict:
    cfg = QualityConfig()
    index = load_default_eval_index()
    stats: dict[str, Counter] = defaultdict(Counter)
    timings = Counter()
    for path in sorted(root.glob("*/docs-*.jsonl")):
        for line in path.open(encoding="utf-8"):
            doc = json.loads(line)
            s = stats[doc["package"]]
            t0 = time.perf_counter()
            text = normalize_text(doc["text"])
            t1 = time.perf_counter()
            lang, _ = detect_language(text)
            t2 = time.perf_counter()
            result = evaluate_quality(text, lang, cfg)
            t3 = time.perf_counter()
            pii = find_pii(text)
            t4 = time.perf_counter()
            matches, _ = index.check(text)
            t5 = time.perf_counter()
            for name, dt in zip(
                ("normalize", "langid", "quality", "pii", "decontam"),
                (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4),
                strict=True,
            ):
                timings[name] += dt
            timings["chars"] += len(text)
            s["docs"] += 1
            s["lang_agrees_with_path"] += lang == doc["lang_hint"]
            s["dropped"] += bool(result.failed)
            s["pii_flagged"] += bool(pii)
            s["contaminated"] += matches > 0
            for rule, _ in result.failed:
                s["rule:" + rule] += 1
    out: dict = {"quality_config": cfg.fingerprint(), "eval_index": index.fingerprint()}
    out["seconds"] = {k: round(v, 2) for k, v in timings.items() if k != "chars"}
    out["mb"] = round(timings["chars"] / 1e6, 1)
    for pkg, s in sorted(stats.items()):
        n = s["docs"]
        out[pkg] = {
            "docs": n,
            **{
                k: round(s[k] / n, 4)
                for k in ("dropped", "lang_agrees_with_path", "pii_flagged", "contaminated")
            },
            "per_rule": {k[5:]: round(v / n, 4) for k, v in sorted(s.items()) if k.startswith("rule:")},
        }
    return out


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1])), indent=1))
