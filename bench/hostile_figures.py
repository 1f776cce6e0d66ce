"""Issue 18's figures: hostile inputs thrown at the `fm` commands and the readers; prints one JSON object.

Groups of attacks (each counted as tried; held = no traceback, nothing written outside the root and the
expected outcome; clear error = refused with exit 2 and at most a usage line plus one message line):

- ``identifiers``: every hostile batch id / source name in ``tests/hostile/attacks.HOSTILE_IDS`` given to every
  command that takes one (run, repair, rejects, report, quarantine promote/reject, land, revoke, card);
- ``markup``: hostile reasons and reviewers (rich markup, HTML, Markdown) recorded by ``fm quarantine promote``
  and ``fm revoke``, then ``fm quarantine list``, ``fm audit`` and ``fm audit --format md`` (held: exit 0 and
  no raw ``<`` from a reason in the Markdown);
- ``revoke_typos``: revocations that match nothing (wrong case, wrong licence);
- ``archives``: the hostile archive corpus (``archive_corpus``) read by the tar and media readers in a
  subprocess under RLIMIT_AS 2 GiB; held = no exception escaped; peak RSS reported;
- ``text_bomb``: a gzip JSONL decoding to 300 MB (ratio ~1000);
- ``disk_full``: ``fm land`` onto a 1 MB tmpfs (skipped where mounting is not allowed);
- ``verbose_s3``: ``fm -v land`` / ``report`` against a local S3 server (moto) with an AWS-style key id.

Bytes written outside the root: a snapshot of every sibling of the root (victim folder with a lock file,
the landing source) before and after, excluding DAGSTER_HOME (the instance's configured home).

Usage: python bench/hostile_figures.py [--fuzz-count 40]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from hostile.attacks import (  # noqa: E402
    HOSTILE_IDS,
    HOSTILE_TEXT,
    Outcome,
    archive_corpus,
    bytes_changed,
    commands,
    run_fm,
    snapshot,
)

KEY_ID = "AKIAIOSFODNN7EXAMPLE"


class Tally:
    def __init__(self) -> None:
        self.groups: dict[str, dict[str, int]] = {}

    def add(self, group: str, *, held: bool, clear: bool = False, traceback: bool = False) -> None:
        row = self.groups.setdefault(group, {"tried": 0, "held": 0, "clear_errors": 0, "tracebacks": 0})
        row["tried"] += 1
        row["held"] += held
        row["clear_errors"] += clear
        row["tracebacks"] += traceback

    def total(self, key: str) -> int:
        return sum(row[key] for row in self.groups.values())


def clear_error(result: Outcome) -> bool:
    """Exit 2, no traceback, and one message line (argparse's usage block before its ``error:`` line aside)."""
    lines = [
        line for line in result.err.splitlines() if line.strip() and not line.startswith(("WARNING", "INFO"))
    ]
    if lines and ": error: " in lines[-1]:
        lines = lines[-1:]  # argparse: usage block, then the one error line
    return result.code == 2 and not result.traceback and len(lines) == 1


def outside(tmp: Path, root: Path) -> dict[str, int]:
    found: dict[str, int] = {}
    for entry in tmp.iterdir():
        if entry not in (root, tmp / "dh", tmp / "archives"):
            found |= {f"{entry.name}/{k}": v for k, v in snapshot(entry).items()} | {entry.name: -1}
    return found


def identifiers(tally: Tally, root: Path, src: Path) -> None:
    for bad in HOSTILE_IDS:
        for args in commands(bad, bad, "a reason", src):
            result = run_fm(root, *args)
            refused = result.code == 2 or (result.code == 0 and "--help" in args)
            tally.add("identifiers", held=refused and not result.traceback, clear=clear_error(result),
                      traceback=result.traceback)  # fmt: skip


def markup(tally: Tally, root: Path, src: Path) -> None:
    for index, text in enumerate(HOSTILE_TEXT):
        landed = run_fm(root, "land", str(src), "--source", f"forum{index}", "--license", "MIT",
                        "--namespace", "quarantine")  # fmt: skip
        batch = landed.out.strip()
        steps = [run_fm(root, "quarantine", "promote", batch, "--to", "cloud", "--reviewer", text, "--reason", text),
                 run_fm(root, "revoke", "--source", f"forum{index}", "--reason", text, "--requested-by", text,
                        "--no-run"),
                 run_fm(root, "quarantine", "list"), run_fm(root, "audit")]  # fmt: skip
        report = run_fm(root, "audit", "--format", "md")
        safe_md = "<script" not in report.out and "<!--" not in report.out
        for result in [*steps, report]:
            tally.add("markup", held=result.code == 0 and not result.traceback and safe_md,
                      traceback=result.traceback)  # fmt: skip


def revoke_typos(tally: Tally, root: Path) -> None:
    for args in (["--source", "DocsC"], ["--source", "docsc", "--license", "GPL-3.0-only"], ["--license", "0BSD"],
                 ["--doc-hash", "0" * 64]):  # fmt: skip
        result = run_fm(root, "revoke", *args, "--reason", "typo")
        tally.add("revoke_typos", held=result.code == 2 and "matches no landed document" in result.err,
                  clear=clear_error(result), traceback=result.traceback)  # fmt: skip


def archives(tally: Tally, folder: Path, count: int) -> dict[str, object]:
    folder.mkdir()
    files = []
    for name, data in archive_corpus(count=count):
        files.append(folder / name)
        files[-1].write_bytes(data)
    done = subprocess.run(
        [sys.executable, str(REPO / "tests/hostile/fuzz_readers.py"), str(2 << 30), *map(str, files)],
        capture_output=True, text=True, timeout=1800, env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    results, peak = lines[:-1], lines[-1]["peak_rss_bytes"] if lines else None
    for result in results:
        tally.add("archives", held="escaped" not in result, traceback="escaped" in result)
    for _ in range(len(files) - len(results)):  # the subprocess died before reading them (OOM: rc 137)
        tally.add("archives", held=False, traceback=True)
    return {"files": len(files), "escaped": sum("escaped" in r for r in results), "returncode": done.returncode,
            "corpus_bytes": sum(f.stat().st_size for f in files), "peak_rss_mib": round((peak or 0) / 2**20, 1),
            "rlimit_as_gib": 2}  # fmt: skip


def text_bomb(tally: Tally, folder: Path) -> None:
    from fm_assets.transforms.readers import iter_raw_records

    path = folder / "bomb.jsonl.gz"
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    with open(path, "wb") as out:
        line = b'{"text": "' + b"a" * (1 << 20) + b'"}\n'
        for _ in range(300):
            out.write(compressor.compress(line))
        out.write(compressor.flush())
    reasons = [getattr(r, "reason", None) for r in iter_raw_records(path)]
    tally.add("text_bomb", held=reasons == ["archive_bomb"])


def disk_full(tally: Tally, tmp: Path, src: Path) -> str:
    mount = tmp / "disk"
    mount.mkdir()
    if subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], capture_output=True
    ).returncode:
        return "skipped (cannot mount a tmpfs)"
    try:
        big = tmp / "big"
        big.mkdir()
        (big / "big.jsonl").write_bytes(b'{"text": "' + b"x" * (3 << 20) + b'"}\n')
        result = run_fm(mount / "root", "land", str(big), "--source", "web", "--license", "MIT")
        left = [p for p in (mount / "root").rglob("*") if p.is_file()]
        tally.add("disk_full", held=result.code == 2 and not left, clear=clear_error(result),
                  traceback=result.traceback)  # fmt: skip
        return "ran"
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def verbose_s3(tally: Tally, tmp: Path, src: Path) -> str:
    try:
        import boto3
        from moto.server import ThreadedMotoServer
    except ImportError:
        return "skipped (moto not installed)"
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    with contextlib.redirect_stdout(sys.stderr):  # moto announces itself on stdout: keep it JSON only
        server.start()
    try:
        host, port = server._server.server_address[:2]  # type: ignore[union-attr]
        endpoint = f"http://{host}:{port}"
        env = {"AWS_ACCESS_KEY_ID": KEY_ID, "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
               "AWS_DEFAULT_REGION": "us-east-1", "FM_S3_ENDPOINT_URL": endpoint, "DAGSTER_HOME": str(tmp / "dh")}  # fmt: skip
        boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id=KEY_ID,
                     aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"]).create_bucket(Bucket="fm-hostile")  # fmt: skip
        for args in (["land", str(src), "--source", "web", "--license", "MIT"], ["report"]):
            done = subprocess.run([sys.executable, "-m", "fm_assets.cli.main", "-v", "--root", "s3://fm-hostile/x", *args],
                                  capture_output=True, text=True, timeout=300,
                                  env={**os.environ, **env, "PYTHONPATH": str(REPO)})  # fmt: skip
            logged = done.stdout + done.stderr
            leaked = KEY_ID in logged or bool(re.search(r"Signature=[0-9a-f]{16}", logged))
            tally.add("verbose_s3", held=done.returncode == 0 and not leaked, traceback="Traceback" in logged)
        return "ran"
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fuzz-count", type=int, default=40, help="random mutations in the archive corpus")
    args = parser.parse_args()
    tally = Tally()
    with tempfile.TemporaryDirectory(prefix="fm-hostile-") as scratch:
        tmp = Path(scratch)
        root, victim, src = tmp / "root", tmp / "victim", tmp / "src"
        victim.mkdir()
        (victim / "poetry.lock").write_text("precious\n")
        src.mkdir()
        (src / "docs.jsonl").write_text('{"text": "one document of docsc"}\n')
        os.environ["DAGSTER_HOME"] = str(tmp / "dh")
        (tmp / "dh").mkdir()
        assert run_fm(root, "land", str(src), "--source", "docsc", "--license", "MIT").code == 0
        before = outside(tmp, root)
        identifiers(tally, root, src)
        markup(tally, root, src)
        revoke_typos(tally, root)
        written = bytes_changed(before, outside(tmp, root))
        fuzz = archives(tally, tmp / "archives", args.fuzz_count)
        text_bomb(tally, tmp / "archives")
        disk = disk_full(tally, tmp / "archives", src)
        verbose = verbose_s3(tally, tmp, src)
    print(json.dumps({
        "attacks_tried": tally.total("tried"), "held": tally.total("held"),
        "clear_errors": tally.total("clear_errors"), "tracebacks": tally.total("tracebacks"),
        "bytes_written_outside_root": written, "archive_fuzz": fuzz, "disk_full": disk, "verbose_s3": verbose,
        "by_group": tally.groups,
    }, indent=2))  # fmt: skip


if __name__ == "__main__":
    main()
