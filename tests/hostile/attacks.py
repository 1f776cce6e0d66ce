"""Hostile inputs shared by the property and fuzz tests and ``bench/hostile_figures.py``: a root with a
sibling folder to snapshot, `fm` commands fed hostile identifiers and reasons, and a corpus of hostile
archives (bombs, unsafe member names, links, truncation, random bytes)."""

from __future__ import annotations

import contextlib
import gzip
import io
import os
import random
import tarfile
import traceback
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

HOSTILE_IDS = [
    "x/../../../victim/poetry", "../victim/poetry", "/tmp/abs", "..", ".", "", " ", "a b", "x\n", "x\x00y",
    "[/bold]", "[red]x", "<script>", "a/b", "C:\\x", "~root", "$(id)", "é", "a" * 200, "-x", "--help",
]  # fmt: skip
UNSAFE_NAMES = ["../../escape.jpg", "/abs.jpg", "a/../../b.txt", "x\\..\\y.jpg"]
HOSTILE_TEXT = [
    "[/bold]", "[red]x[/blue]", "<script>alert(1)</script>", "**x** | `y` # z", "line\nbreak", "\x1b[31mred",
    "[link=file:///etc/passwd]x[/link]", "&amp; <!-- -->", "](javascript:alert(1))",
]  # fmt: skip


def snapshot(folder: Path) -> dict[str, int]:
    """Every path under ``folder`` with its size (-1 for folders)."""
    if not folder.exists():
        return {}
    return {str(p.relative_to(folder)): p.stat().st_size if p.is_file() else -1 for p in folder.rglob("*")}


def bytes_changed(before: dict[str, int], after: dict[str, int]) -> int:
    """Bytes written between two snapshots: new files, grown or rewritten files (by size), new folders as 1."""
    changed = 0
    for path, size in after.items():
        if path not in before:
            changed += max(size, 1)
        elif size != before[path]:
            changed += max(abs(size - before[path]), 1)
    return changed + sum(1 for path in before if path not in after)


@dataclass
class Outcome:
    code: int | None  # None: an exception escaped main()
    out: str
    err: str

    @property
    def traceback(self) -> bool:
        return self.code is None or "Traceback" in self.err or "Traceback" in self.out

    @property
    def clear_error(self) -> bool:
        """Refused with a one-line message (exit 2), no traceback."""
        lines = [
            line
            for line in self.err.splitlines()
            if line.strip() and not line.startswith(("WARNING", "INFO"))
        ]
        return self.code == 2 and not self.traceback and len(lines) == 1


def run_fm(root: Path, *args: str) -> Outcome:
    """``fm --root ROOT ARGS`` in this process, its output captured; an escaping exception is recorded."""
    from fm_assets.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code: int | None = main(["--root", str(root), *args])
        except SystemExit as exc:  # argparse refusing an argument: a clear error too
            code = exc.code if isinstance(exc.code, int) else 2
        except Exception:
            code = None
            err.write(traceback.format_exc())
    return Outcome(code, out.getvalue(), err.getvalue())


def commands(batch: str, source: str, text: str, src: Path) -> list[list[str]]:
    """Every command that takes a batch id, a source name, a reason or a reviewer, fed hostile values."""
    return [
        ["run", batch], ["repair", batch], ["rejects", batch], ["report", batch],
        ["quarantine", "promote", batch, "--to", "cloud", "--reviewer", text, "--reason", text],
        ["quarantine", "reject", batch, "--reviewer", text, "--reason", text],
        ["land", str(src), "--source", source, "--license", "MIT"],
        ["revoke", "--source", source, "--reason", text],
        ["card", batch, "--name", source],
    ]  # fmt: skip


# -- the archive corpus -------------------------------------------------------------------------------------
def _tar(members: list[tuple[str, bytes] | tarfile.TarInfo]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for entry in members:
            if isinstance(entry, tarfile.TarInfo):
                tar.addfile(entry)
            else:
                info = tarfile.TarInfo(entry[0])
                info.size = len(entry[1])
                tar.addfile(info, io.BytesIO(entry[1]))
    return buffer.getvalue()


def _zero_member_tar_gz(size: int, *, multi_member: bool = False) -> bytes:
    """A gzip-compressed tar holding one member of ``size`` zero bytes, built in bounded memory: one deflate
    stream (what `tar czf` writes; ratio ~1000), or a multi-member gzip repeating one compressed 16 MiB block."""
    header = tarfile.TarInfo("0000.jpg")
    header.size = size
    head, tail = header.tobuf(format=tarfile.GNU_FORMAT), bytes((-size) % 512 + 1024)
    block = 16 << 20
    if multi_member:
        full, rest = divmod(size, block)
        return b"".join(
            [gzip.compress(head), gzip.compress(bytes(block)) * full, gzip.compress(bytes(rest) + tail)]
        )
    compressor = zlib.compressobj(6, zlib.DEFLATED, 31)
    parts, zeros, left = [compressor.compress(head)], bytes(block), size
    while left:
        parts.append(compressor.compress(zeros[: min(left, block)]))
        left -= min(left, block)
    return b"".join([*parts, compressor.compress(tail), compressor.flush()])


def _png_chunk(kind: bytes, body: bytes) -> bytes:
    return len(body).to_bytes(4, "big") + kind + body + zlib.crc32(kind + body).to_bytes(4, "big")


def pixel_bomb_png(side: int = 20000) -> bytes:
    """A valid greyscale PNG of side x side zero pixels (side**2 bytes decoded from about side**2 / 1000)."""
    compressor = zlib.compressobj(9)
    row = bytes(side + 1)
    idat = b"".join(compressor.compress(row) for _ in range(side)) + compressor.flush()
    header = side.to_bytes(4, "big") * 2 + bytes([8, 0, 0, 0, 0])
    return (
        b"\x89PNG\r\n\x1a\n"
        + _png_chunk(b"IHDR", header)
        + _png_chunk(b"IDAT", idat)
        + _png_chunk(b"IEND", b"")
    )


def lying_wav(frames: int = 1 << 31) -> bytes:
    """A WAV header announcing ``frames`` 16-bit mono frames, followed by a few bytes."""
    data_bytes = min(frames * 2, 0xFFFFFFFF - 36)
    fmt = (1).to_bytes(2, "little") + (1).to_bytes(2, "little") + (16000).to_bytes(4, "little")
    fmt += (32000).to_bytes(4, "little") + (2).to_bytes(2, "little") + (16).to_bytes(2, "little")
    return (b"RIFF" + (36 + data_bytes).to_bytes(4, "little") + b"WAVEfmt " + (16).to_bytes(4, "little") + fmt
            + b"data" + data_bytes.to_bytes(4, "little") + bytes(64))  # fmt: skip


def archive_corpus(
    seed: int = 18, count: int = 40, *, largest_bomb: int = 4 << 30
) -> Iterator[tuple[str, bytes]]:
    """(name, bytes) of hostile archives: bombs of several sizes (tar and pixels), lying media headers,
    unsafe names, links, cuts, random mutations of valid tars."""
    rng = random.Random(seed)
    valid = _tar([(f"{i:04d}.{ext}", f"sample {i}".encode()) for i in range(4) for ext in ("jpg", "txt")])
    for size in (256 << 20, 1 << 30, 4 << 30):
        if size <= largest_bomb:
            yield f"gzip-bomb-{size >> 20}MB.tar", _zero_member_tar_gz(size)
    yield "gzip-multi-member-bomb-4096MB.tar", _zero_member_tar_gz(4 << 30, multi_member=True)
    yield "pixel-bomb.tar.gz", gzip.compress(_tar([("0100.png", pixel_bomb_png()), ("0100.txt", b"caption")]))
    yield "lying-wav.tar", _tar([("0200.wav", lying_wav()), ("0200.txt", b"transcript")])
    yield "nested-gzip.tar", gzip.compress(gzip.compress(valid))
    huge = tarfile.TarInfo("0300.jpg")
    huge.size = 8 << 30  # declared, not present
    yield "big-member-declared.tar", huge.tobuf(format=tarfile.GNU_FORMAT) + bytes(2048)
    link = tarfile.TarInfo("0001.jpg")
    link.type, link.linkname = tarfile.SYMTYPE, "/etc/shadow"
    yield "link.tar", _tar([("0000.jpg", b"x"), ("0000.txt", b"y"), link, ("0001.txt", b"z")])
    for index, name in enumerate([*UNSAFE_NAMES, "./0001.jpg", "0001.jpg/"]):
        yield f"name-{index}.tar", _tar([(name, b"x"), ("0002.txt", b"t")])
    for index in range(count):
        data = bytearray(rng.choice([valid, gzip.compress(valid)]))
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        if rng.random() < 0.3:
            data = data[: rng.randrange(1, len(data))]
        yield f"mutated-{index}.tar", bytes(data)
    yield "random.tar", os.urandom(4096)
    yield "empty.tar", b""
