"""Reads every file named on the command line with the tar and media readers under a memory limit and
prints one JSON line per file (what came out, or the exception that escaped) and a final line with the peak
RSS. Run as a subprocess: ``python tests/hostile/fuzz_readers.py LIMIT_BYTES FILE...``."""

from __future__ import annotations

import json
import resource
import sys
from collections import Counter
from pathlib import Path


def peak_rss_bytes() -> int:
    """The high-water RSS of this process's own address space (VmHWM). Not ``ru_maxrss``: Linux keeps that
    across execve, so a child started from a large pytest process reports the parent's RSS at the fork."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def main(argv: list[str]) -> int:
    limit = int(argv[0])
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    from fm_assets.transforms.audio.decode import decode_audio
    from fm_assets.transforms.image.decode import decode_image
    from fm_assets.transforms.media_errors import MediaError
    from fm_assets.transforms.readers.media_samples import MediaItem, iter_tar_samples
    from fm_assets.transforms.readers.media_types import AUDIO, modality_of

    for name in argv[1:]:
        path = Path(name)
        try:
            kinds: Counter[str] = Counter()
            for item in iter_tar_samples(path.name, path):
                if not isinstance(item, MediaItem):
                    kinds[item.reason] += 1
                    continue
                try:  # the media decoders on whatever bytes the tar held: a MediaError is a reject
                    (decode_audio if modality_of(item.media_ext) == AUDIO else decode_image)(item.media)
                    kinds["ok"] += 1
                except MediaError as exc:
                    kinds[f"media:{exc.reason}"] += 1
            print(json.dumps({"file": path.name, "outcomes": kinds}), flush=True)
        except BaseException as exc:  # what the fuzz test counts as an escape
            print(
                json.dumps({"file": path.name, "escaped": f"{type(exc).__name__}: {exc}"[:300]}), flush=True
            )
    print(json.dumps({"peak_rss_bytes": peak_rss_bytes()}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
