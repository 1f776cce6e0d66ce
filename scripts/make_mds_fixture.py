"""Write the small MosaicML MDS fixtures under tests/fixtures/mds with MosaicML's own ``MDSWriter``.

Needs ``streaming-community`` (or ``mosaicml-streaming``) installed; CI does not, it reads the committed
output. Run: ``python scripts/make_mds_fixture.py``. Output is deterministic for a given streaming version.

* ``tokens/``  - column ``tokens`` (``ndarray:uint16``), zstd-compressed shards, 60 samples of <= 32 tokens.
* ``text/``    - column ``text`` (``str``), uncompressed, 40 short documents.
* ``documents/`` - column ``tokens`` (``ndarray:uint16``), zstd, 30 whole documents of 50-3,000 tokens (some
  longer than a 2,048-token row): what a pre-tokenized document dataset looks like.
* ``tokens_expected.json`` / ``text_expected.json`` - what was written, for the tests to compare against.
* ``tokenizer.json`` - a tiny BPE trained on the text documents with ``tokenizers``.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import types

import numpy as np

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "mds")


def _import_streaming():
    """Import ``streaming``; its vision submodule needs torchvision, which a CPU-only torch may lack."""
    try:
        import torchvision  # noqa: F401
    except Exception:  # torchvision missing or built against another torch: stub the two names it imports
        import transformers  # noqa: F401 - let transformers probe torchvision before the stub exists

        tv = types.ModuleType("torchvision")
        datasets = types.ModuleType("torchvision.datasets")
        transforms = types.ModuleType("torchvision.transforms")
        functional = types.ModuleType("torchvision.transforms.functional")
        datasets.VisionDataset = type("VisionDataset", (), {})
        functional.to_tensor = lambda x: x
        tv.datasets, tv.transforms, transforms.functional = datasets, transforms, functional
        sys.modules.update(
            {
                "torchvision": tv,
                "torchvision.datasets": datasets,
                "torchvision.transforms": transforms,
                "torchvision.transforms.functional": functional,
            }
        )
    import streaming

    return streaming


WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "epsilon",
    "zeta",
    "eta",
    "theta",
    "iota",
    "kappa",
    "lambda",
    "mu",
    "nu",
    "xi",
    "omicron",
    "pi",
    "rho",
    "sigma",
]


def main() -> None:
    streaming = _import_streaming()
    rng = np.random.default_rng(1234)
    out = os.path.abspath(OUT)
    for sub in ("tokens", "text", "documents"):
        shutil.rmtree(os.path.join(out, sub), ignore_errors=True)

    with streaming.MDSWriter(
        out=os.path.join(out, "tokens"),
        columns={"tokens": "ndarray:uint16"},
        compression="zstd",
        hashes=["sha1", "xxh64"],
        size_limit=600,
    ) as writer:
        samples = [rng.integers(0, 1000, int(rng.integers(1, 33))).astype(np.uint16) for _ in range(60)]
        for sample in samples:
            writer.write({"tokens": sample})
    with open(os.path.join(out, "tokens_expected.json"), "w") as f:
        json.dump([s.tolist() for s in samples], f)

    texts = [" ".join(rng.choice(WORDS, int(rng.integers(3, 40))).tolist()) for _ in range(40)]
    with streaming.MDSWriter(
        out=os.path.join(out, "text"), columns={"text": "str"}, size_limit=1500
    ) as writer:
        for text in texts:
            writer.write({"text": text})
    with open(os.path.join(out, "text_expected.json"), "w") as f:
        json.dump(texts, f)

    with streaming.MDSWriter(
        out=os.path.join(out, "documents"),
        columns={"tokens": "ndarray:uint16"},
        compression="zstd",
        hashes=["xxh64"],
        size_limit=40_000,
    ) as writer:
        documents = [rng.integers(0, 50000, int(rng.integers(50, 3001))).astype(np.uint16) for _ in range(30)]
        for document in documents:
            writer.write({"tokens": document})
    with open(os.path.join(out, "documents_expected.json"), "w") as f:
        json.dump([d.tolist() for d in documents], f)

    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE(unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.train_from_iterator(
        texts, trainers.BpeTrainer(vocab_size=200, special_tokens=["[UNK]", "[EOS]"])
    )
    tokenizer.save(os.path.join(out, "tokenizer.json"))
    print(f"wrote MDS fixtures to {out} with streaming {streaming.__version__}")


if __name__ == "__main__":
    main()
