"""Fetch real public text for demos and tests: Debian documentation packages, as JSONL.

``fetch_sample_data`` downloads documentation ``.deb`` packages with ``apt-get download`` (no root
needed), reads the HTML / XHTML / Mallard ``.page`` files inside them with lxml, extracts the readable
text and writes ``dest/<package>/docs-<NNN>.jsonl``. When apt is not available it falls back to the
running Python installation's own standard library (module docstrings and bundled text/HTML files).

The corpora are multilingual and hold real exact and near duplicates (translations, repeated pages);
they are kept on purpose, the pipeline's dedup stages are meant to find them. Output is a pure
function of the package contents and arguments: traversal is sorted, caps pick evenly spaced files.

Image-text and audio-text samples (debian-handbook figures, Asterisk prompts) come from ``media.py``
(``fetch_media_sample_data``), written as key folders that ``fm land`` takes as they are.
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from fm_assets.sample_data.debian import _apt_download, documents_from_deb, evenly_spaced, iter_deb_files
from fm_assets.sample_data.document import (
    DEFAULT_PACKAGES,
    FALLBACK_PACKAGE,
    FILES_PER_PACKAGE,
    KNOWN_LICENSES,
    Document,
    Source,
)
from fm_assets.sample_data.page_text import extract_html, extract_mallard
from fm_assets.sample_data.python_docs import documents_from_python

log = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_PACKAGES", "FALLBACK_PACKAGE", "FILES_PER_PACKAGE", "KNOWN_LICENSES", "Document", "Source",
    "documents_from_deb", "documents_from_python", "evenly_spaced", "extract_html", "extract_mallard",
    "fetch_sample_data", "iter_deb_files",
]  # fmt: skip

# --------------------------------------------------------------------------------------------
# Writing


def _write_package(docs: list[Document], out_dir: Path, files: int) -> dict[str, Any]:
    out_dir.mkdir(parents=True, exist_ok=True)
    for stale in out_dir.glob("docs-*.jsonl"):
        stale.unlink()
    n_files = max(1, min(files, len(docs)))
    written: list[str] = []
    total_bytes = 0
    for i in range(n_files):
        chunk = docs[(i * len(docs)) // n_files : ((i + 1) * len(docs)) // n_files]
        payload = "".join(doc.to_json() + "\n" for doc in chunk).encode("utf-8")
        target = out_dir / f"docs-{i:03d}.jsonl"
        tmp = target.with_name(f".{target.name}.tmp")
        tmp.write_bytes(payload)
        os.replace(tmp, target)
        written.append(target.name)
        total_bytes += len(payload)
    return {"files": written, "bytes": total_bytes}


def _progress(items: Iterable[Document], enabled: bool, desc: str) -> Iterable[Document]:
    if not enabled:
        return items
    from tqdm import tqdm

    return tqdm(items, desc=desc, unit="doc", file=sys.stderr)


def fetch_sample_data(
    dest: Path,
    *,
    packages: Iterable[str] = DEFAULT_PACKAGES,
    max_docs: int | None = None,
    progress: bool = True,
    source: Source = "auto",
    files_per_package: int = FILES_PER_PACKAGE,
    deb_dir: Path | None = None,
) -> dict[str, Any]:
    """Write real public documents as ``dest/<package>/docs-<NNN>.jsonl`` and return a summary.

    ``max_docs`` caps documents *per package* (evenly spaced over the sorted file list, so the cap
    still spans all languages). ``source``: "apt" (Debian packages only), "python" (the stdlib
    fallback only) or "auto" (apt, then the fallback if apt gives no documents). ``deb_dir``: where
    to keep downloaded .debs (reused when present); a temporary folder when None.

    Summary: {"source": "apt"|"python-stdlib", "dest", "packages": {name: {"docs", "bytes", "files",
    "deb", "license"}}, "total_docs", "total_bytes", "errors"}.
    """
    dest = Path(dest)
    packages = tuple(packages)
    summary: dict[str, Any] = {"dest": str(dest), "packages": {}, "errors": []}

    if source in ("auto", "apt"):
        try:
            summary["packages"] = _fetch_from_apt(
                dest, packages, max_docs, progress, files_per_package, deb_dir
            )
        except (FileNotFoundError, OSError, RuntimeError, ValueError) as exc:
            summary["errors"].append(f"apt: {exc}")
            log.warning("apt source unavailable: %s", exc)
        summary["source"] = "apt"
        if not any(p["docs"] for p in summary["packages"].values()):
            if source == "apt":
                raise RuntimeError(f"no documents from apt packages {packages}: {summary['errors']}")
            summary["packages"] = {}
    if not summary["packages"]:
        log.info("using fallback source: the running Python's standard library (%s)", sys.base_prefix)
        docs = list(_progress(documents_from_python(max_docs), progress, FALLBACK_PACKAGE))
        info = _write_package(docs, dest / FALLBACK_PACKAGE, files_per_package)
        summary["packages"] = {FALLBACK_PACKAGE: {"docs": len(docs), "license": "PSF-2.0", **info}}
        summary["source"] = FALLBACK_PACKAGE
    summary["total_docs"] = sum(p["docs"] for p in summary["packages"].values())
    summary["total_bytes"] = sum(p["bytes"] for p in summary["packages"].values())
    log.info(
        "sample data from %s: %d docs, %d bytes in %s",
        summary["source"],
        summary["total_docs"],
        summary["total_bytes"],
        dest,
    )
    return summary


def _fetch_from_apt(
    dest: Path,
    packages: tuple[str, ...],
    max_docs: int | None,
    progress: bool,
    files_per_package: int,
    deb_dir: Path | None,
) -> dict[str, dict[str, Any]]:
    with tempfile.TemporaryDirectory(prefix="fm-debs-") as tmp:
        workdir = Path(deb_dir) if deb_dir is not None else Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        debs = {
            pkg: sorted(workdir.glob(f"{pkg}_*.deb"))[-1]
            for pkg in packages
            if list(workdir.glob(f"{pkg}_*.deb"))
        }
        missing = [pkg for pkg in packages if pkg not in debs]
        if missing:
            debs.update(_apt_download(missing, workdir))
        result: dict[str, dict[str, Any]] = {}
        for pkg in packages:
            if pkg not in debs:
                log.warning("package %s could not be downloaded", pkg)
                continue
            docs = list(_progress(documents_from_deb(debs[pkg], pkg, max_docs), progress, pkg))
            info = _write_package(docs, dest / pkg, files_per_package) if docs else {"files": [], "bytes": 0}
            license_id = docs[0].license if docs else KNOWN_LICENSES.get(pkg, "")
            result[pkg] = {"docs": len(docs), "deb": debs[pkg].name, "license": license_id, **info}
            log.info("%s: %d docs from %s", pkg, len(docs), debs[pkg].name)
        return result
