"""Rebuild ``eval_python_tutorial.jsonl.gz``: sections of five Python tutorial chapters as eval passages.

Maintenance script, not used at run time: ``python -m fm_assets.data.build_eval_set``. It downloads
the Debian ``python3.11-doc`` package (same path as ``fm sample-data``), extracts the chosen pages
with the sample-data HTML extractor, and cuts each page at its numbered section headings.
"""

from __future__ import annotations

import gzip
import json
import re
import sys
import tempfile
from pathlib import Path

from fm_assets.sample_data.debian import _apt_download, iter_deb_files
from fm_assets.sample_data.page_text import extract_html

PACKAGE = "python3.11-doc"
PAGES = ("controlflow", "datastructures", "errors", "classes", "inputoutput")
OUT = Path(__file__).with_name("eval_python_tutorial.jsonl.gz")
_SECTION = re.compile(r"(?m)^(\d+(?:\.\d+)+)\. \S.*$")


def build(deb: Path) -> list[dict]:
    wanted = {f"/usr/share/doc/python3.11/html/tutorial/{page}.html" for page in PAGES}
    pages = dict(iter_deb_files(deb, wanted.__contains__))
    items: list[dict] = []
    for path in sorted(pages):
        _, text = extract_html(pages[path])
        heads = list(_SECTION.finditer(text))
        for i, head in enumerate(heads):
            end = heads[i + 1].start() if i + 1 < len(heads) else len(text)
            passage = text[head.start() : end].strip()
            if len(passage.split()) >= 40:
                items.append(
                    {
                        "id": f"{path.rsplit('/', 1)[1]}#{head.group(1)}",
                        "text": passage,
                        "source": f"deb://{PACKAGE}{path}",
                        "package_version": deb.name,
                        "license": "PSF-2.0",
                    }
                )
    return items


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        debs = _apt_download([PACKAGE], Path(tmp))
        if PACKAGE not in debs:
            print(f"could not download {PACKAGE}", file=sys.stderr)
            return 1
        items = build(debs[PACKAGE])
    payload = "".join(json.dumps(item, ensure_ascii=False, sort_keys=True) + "\n" for item in items)
    OUT.write_bytes(gzip.compress(payload.encode("utf-8"), mtime=0))
    print(json.dumps({"items": len(items), "bytes": len(payload), "out": str(OUT)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
