"""Debian documentation packages as documents: ``apt-get download``, reading ``.deb`` members, choosing pages
and their language."""

from __future__ import annotations

import io
import logging
import os
import re
import shutil
import subprocess
import tarfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from lxml import etree

from fm_assets.sample_data.document import KNOWN_LICENSES, Document
from fm_assets.sample_data.page_text import extract_html, extract_mallard

log = logging.getLogger(__name__)

# --------------------------------------------------------------------------------------------
# .deb reading


def _member_path(name: str) -> str:
    name = name.lstrip("./")
    return "/" + name if not name.startswith("/") else name


def _iter_tar(
    fileobj: io.BufferedIOBase, mode: str, want: Callable[[str], bool], hard_links: bool = False
) -> Iterator[tuple[str, bytes]]:
    # A streamed tar cannot seek back to a hard link's target, so with ``hard_links`` the wanted files'
    # bytes are kept by path and a link to one of them yields those bytes again under the link's path.
    seen: dict[str, bytes] = {}
    with tarfile.open(fileobj=fileobj, mode=mode) as tar:
        for member in tar:
            name = _member_path(member.name)
            if hard_links and member.islnk() and want(name):
                target = seen.get(_member_path(member.linkname))
                if target is not None:
                    yield name, target
            elif member.isfile() and want(name):
                handle = tar.extractfile(member)
                if handle is not None:
                    data = handle.read()
                    if hard_links:
                        seen[name] = data
                    yield name, data


def _iter_deb_python(
    deb: Path, want: Callable[[str], bool], hard_links: bool = False
) -> Iterator[tuple[str, bytes]]:
    """Read a .deb (an ``ar`` archive) without dpkg: find data.tar.* and stream it."""
    with deb.open("rb") as fh:
        if fh.read(8) != b"!<arch>\n":
            raise ValueError(f"{deb} is not an ar archive")
        while header := fh.read(60):
            name = header[:16].decode().strip().rstrip("/")
            size = int(header[48:58].decode().strip())
            if name.startswith("data.tar"):
                payload = io.BytesIO(fh.read(size))
                if name.endswith(".zst"):
                    import zstandard

                    stream = zstandard.ZstdDecompressor().stream_reader(payload)
                    yield from _iter_tar(stream, "r|", want, hard_links)
                else:
                    yield from _iter_tar(payload, "r|*", want, hard_links)
                return
            fh.seek(size + (size % 2), os.SEEK_CUR)
    raise ValueError(f"{deb} has no data.tar member")


def iter_deb_files(
    deb: Path, want: Callable[[str], bool], *, hard_links: bool = False
) -> Iterator[tuple[str, bytes]]:
    """Yield (absolute path inside the package, bytes) for wanted regular files of a .deb.

    ``hard_links``: also yield wanted hard links (packages such as debian-handbook link identical
    images across languages) with their target's bytes, when the target was wanted too."""
    if shutil.which("dpkg-deb"):
        proc = subprocess.Popen(["dpkg-deb", "--fsys-tarfile", str(deb)], stdout=subprocess.PIPE)
        assert proc.stdout is not None
        try:
            yield from _iter_tar(proc.stdout, "r|", want, hard_links)
        finally:
            proc.stdout.close()
            if proc.wait() != 0:
                raise RuntimeError(f"dpkg-deb --fsys-tarfile {deb} failed with {proc.returncode}")
    else:
        yield from _iter_deb_python(deb, want, hard_links)


def _apt_download(packages: Iterable[str], workdir: Path) -> dict[str, Path]:
    """Download .debs into ``workdir``; return {package: deb path} for those that arrived."""
    packages = list(packages)
    if not shutil.which("apt-get"):
        raise FileNotFoundError("apt-get not found")
    cmd = ["apt-get", "download", *packages]
    result = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, check=False)
    if result.returncode != 0 and hasattr(os, "geteuid") and os.geteuid() == 0:
        log.info("apt-get download failed (%s); running apt-get update once", result.stderr.strip()[-300:])
        subprocess.run(["apt-get", "update"], capture_output=True, text=True, check=False)
        result = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        log.warning("apt-get download %s failed: %s", " ".join(packages), result.stderr.strip()[-500:])
    found: dict[str, Path] = {}
    for pkg in packages:
        debs = sorted(workdir.glob(f"{pkg}_*.deb"))
        if debs:
            found[pkg] = debs[-1]
    return found


# --------------------------------------------------------------------------------------------
# Package-specific selection: which files hold documents, and their language


_LANG_DIR = re.compile(r"^/usr/share/(?:help|doc/debian-handbook/html)/([^/]+)/")
_PY_SKIP = re.compile(r"/(_static|_sources|_images|_downloads)/|/(genindex[^/]*|search|py-modindex)\.html$")


def lang_from_path(path: str) -> str:
    match = _LANG_DIR.match(path)
    if not match:
        return "en"
    locale = match.group(1)
    if locale in ("C", "POSIX"):
        return "en"
    return re.split(r"[-_@.]", locale)[0].lower()


def _wanted(path: str) -> bool:
    if path.endswith(".page"):
        return path.startswith("/usr/share/help/")
    if path.endswith((".html", ".xhtml", ".htm")):
        return "/Common_Content/" not in path and not _PY_SKIP.search(path)
    return path.endswith("/copyright") and path.startswith("/usr/share/doc/")


def license_from_copyright(text: str) -> str:
    for stanza in text.split("\n\n"):
        if re.search(r"(?m)^Files:\s*\*\s*$", stanza):
            match = re.search(r"(?m)^License:\s*(\S.*)$", stanza)
            if match:
                return match.group(1).strip()
    return "LicenseRef-see-debian-copyright"


def evenly_spaced(items: list[Any], k: int | None) -> list[Any]:
    """A deterministic, evenly spread subset of ``k`` items (all of them when k is None or large)."""
    if k is None or k >= len(items):
        return list(items)
    if k <= 0:
        return []
    n = len(items)
    return [items[(i * n) // k] for i in range(k)]


def documents_from_deb(deb: Path, package: str, max_docs: int | None = None) -> Iterator[Document]:
    files: dict[str, bytes] = {}
    license_text = ""
    for path, data in iter_deb_files(deb, _wanted):
        if path.endswith("/copyright"):
            if path == f"/usr/share/doc/{package}/copyright":
                license_text = data.decode("utf-8", "replace")
        else:
            files[path] = data
    license_id = KNOWN_LICENSES.get(package) or license_from_copyright(license_text)
    for path in evenly_spaced(sorted(files), max_docs):
        data = files[path]
        try:
            title, text = extract_mallard(data) if path.endswith(".page") else extract_html(data)
        except (etree.ParserError, etree.XMLSyntaxError, ValueError) as exc:
            log.warning("skipping unparsable %s:%s (%s)", package, path, exc)
            continue
        if text:
            yield Document(text, f"deb://{package}{path}", title, lang_from_path(path), package, license_id)
