"""The eval registry on real text; prints one JSON object.

- scan: every page of a `fm sample-data` folder checked against the registry (documents flagged per
  benchmark, docs per CPU second of this process);
- planted: every registered HumanEval / gsm8k / mmlu / bbh passage of 20+ words inserted into a random real
  page (seeded), and whether the registry attributes it to its benchmark.

Usage: python bench/eval_registry.py --data DIR
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections import Counter
from pathlib import Path

from fm_assets.side_inputs.benchmarks import load_benchmark
from fm_assets.side_inputs.eval_registry import EvalRegistry
from fm_assets.side_inputs.quality_model import iter_sample_texts

PLANTED = ("humaneval", "lm_eval:gsm8k", "lm_eval:mmlu", "lm_eval:bbh")
MIN_WORDS = 20


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", type=Path, required=True)
    args = parser.parse_args()
    index = EvalRegistry().index()
    docs = list(iter_sample_texts(args.data))
    started = time.process_time()
    flagged: Counter[str] = Counter()
    for text in docs:
        if index.check(text)[0]:
            flagged.update(index.attribute(text).keys())
    seconds = time.process_time() - started
    rng = random.Random(0)
    planted: Counter[str] = Counter()
    found: Counter[str] = Counter()
    for name in PLANTED:
        for passage in load_benchmark(name).passages:
            if len(passage.split()) < MIN_WORDS:
                continue
            host = rng.choice(docs)
            planted[name] += 1
            found[name] += name in index.attribute(f"{host[:2000]}\n{passage}\n{host[2000:4000]}")
    result = {
        "scan": {
            "docs": len(docs),
            "docs_flagged_by_benchmark": dict(flagged),
            "docs_per_cpu_second": round(len(docs) / seconds, 1),
        },
        "planted": {name: {"planted": planted[name], "attributed": found[name]} for name in PLANTED},
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
