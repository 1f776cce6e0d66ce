"""Fetch real public text for demos and tests: Debian documentation packages, as JSONL.

``fetch_sample_data`` downloads documentation ``.deb`` packages with ``apt-get download`` (no root
needed), reads the HTML / XHTML / Mallard ``.page`` files inside them with lxml, extracts the readable
text and writes ``dest/<package>/docs-<NNN>.jsonl``. When apt is not available it falls back to the
running Python installation's own standard library (module docstrings and bundled text/HTML files).

The corpora are multilingual and hold real exact and near duplicates (translations, repeated pages);
they are kept on purpose, the pipeline's dedup stages are meant to find them. Output is a pure
function of the package contents and arguments: traversal is sorted, caps pick evenly spaced files.
"""

from __future__ import annotations

import ast
import io
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from lxml import etree
from lxml import html as lxml_html

log = logging.getLogger(__name__)

DEFAULT_PACKAGES: tuple[str, ...] = ("debian-handbook", "gnome-user-docs", "python3.11-doc")
FALLBACK_PACKAGE = "python-stdlib"
FILES_PER_PACKAGE = 4

# Licences of the default packages (from their debian/copyright); others are read from the .deb.
KNOWN_LICENSES = {
    "debian-handbook": "GPL-2.0-or-later OR CC-BY-SA-3.0",
    "gnome-user-docs": "CC-BY-SA-3.0",
    "python3.11-doc": "PSF-2.0",
    FALLBACK_PACKAGE: "PSF-2.0",
}

Source = Literal["auto", "apt", "python"]


@dataclass(frozen=True)
class Document:
    text: str
    url: str
    title: str
    lang_hint: str
    package: str
    license: str

    def to_json(self) -> str:
        return json.dumps(
            {
                "text": self.text,
                "url": self.url,
                "title": self.title,
                "lang_hint": self.lang_hint,
                "package": self.package,
                "license": self.license,
            },
            ensure_ascii=False,
        )


# --------------------------------------------------------------------------------------------
# Text extraction


_HTML_BLOCKS = frozenset(
    [
        "address",
        "article",
        "aside",
        "blockquote",
        "body",
        "caption",
        "dd",
        "details",
        "div",
        "dl",
        "dt",
        "figcaption",
        "figure",
        "footer",
        "form",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "header",
        "hr",
        "li",
        "main",
        "ol",
        "p",
        "pre",
        "section",
        "table",
        "tbody",
        "td",
        "tfoot",
        "th",
        "thead",
        "tr",
        "ul",
        "br",
    ]
)
_MALLARD_BLOCKS = frozenset(
    [
        "page",
        "section",
        "title",
        "subtitle",
        "desc",
        "p",
        "item",
        "steps",
        "list",
        "terms",
        "tree",
        "note",
        "example",
        "quote",
        "synopsis",
        "screen",
        "listing",
        "table",
        "td",
        "th",
        "tr",
        "cite",
        "comment",
        "media",
        "figure",
        "links",
        "div",
    ]
)
# Mallard <code> is a block when it sits directly in a block container, inline inside a paragraph.
_MALLARD_BLOCK_CONTAINERS = frozenset(
    ["page", "section", "item", "note", "example", "td", "th", "figure", "listing", "div"]
)
_PRE_TAGS = frozenset({"pre", "screen", "listing"})
_DROP_TAGS = frozenset({"script", "style", "nav", "noscript", "template", "head", "svg", "button", "form"})
# Navigation chrome of Publican (debian-handbook) and Sphinx (python docs) pages.
_DROP_CLASSES = frozenset(
    {
        "docnav",
        "toc",
        "related",
        "sphinxsidebar",
        "footer",
        "headerlink",
        "breadcrumbs",
        "navheader",
        "navfooter",
        "mobile-nav",
        "skip-link",
    }
)
_DROP_IDS = frozenset({"banner", "title", "site-title", "breadcrumbs", "searchbox", "footer"})
_WS = re.compile(r"\s+")


def _local(tag: object) -> str:
    if not isinstance(tag, str):  # comments, processing instructions
        return ""
    return tag.rsplit("}", 1)[-1].lower()


def _is_chrome(el: etree._Element) -> bool:
    tag = _local(el.tag)
    if not tag or tag in _DROP_TAGS:
        return True
    classes = set((el.get("class") or "").split())
    return bool(classes & _DROP_CLASSES) or el.get("id") in _DROP_IDS or el.get("role") == "navigation"


def _collect_text(
    root: etree._Element,
    drop: Callable[[etree._Element], bool],
    is_block: Callable[[etree._Element, str], bool],
) -> str:
    """Readable text of ``root``: block elements start lines, inline whitespace collapses, pre keeps it."""
    parts: list[str] = []

    def walk(el: etree._Element, in_pre: bool) -> None:
        tag = _local(el.tag)
        if drop(el):
            return
        block = is_block(el, tag)
        pre = in_pre or tag in _PRE_TAGS or (block and tag == "code")
        if block:
            parts.append("\n")
        if el.text:
            parts.append(el.text if pre else _WS.sub(" ", el.text))
        for child in el:
            walk(child, pre)
            if child.tail:
                parts.append(child.tail if pre else _WS.sub(" ", child.tail))
        if block:
            parts.append("\n")

    walk(root, False)
    lines = (line.rstrip() for line in "".join(parts).split("\n"))
    text = "\n".join(line if line.strip() else "" for line in lines)
    text = re.sub(r"\n{3,}", "\n\n", text)
    # A leading space left by collapsed inline whitespace is not indentation.
    text = re.sub(r"(?m)^ (?=\S)", "", text)
    return text.strip()


def extract_html(data: bytes) -> tuple[str, str]:
    """(title, text) of an HTML/XHTML page, without scripts, styles and navigation chrome."""
    doc = lxml_html.document_fromstring(data)
    title_el = doc.find(".//title")
    title = _WS.sub(" ", title_el.text_content()).strip() if title_el is not None else ""
    main = doc.xpath("//*[@role='main']") or doc.xpath("//div[contains(concat(' ', @class, ' '), ' body ')]")
    root = main[0] if main else (doc.find("body") if doc.find("body") is not None else doc)
    return title, _collect_text(root, _is_chrome, lambda _el, tag: tag in _HTML_BLOCKS)


def extract_mallard(data: bytes) -> tuple[str, str]:
    """(title, text) of a Mallard ``.page`` (GNOME help); the <info> block (credits, links) is metadata."""
    parser = etree.XMLParser(resolve_entities=False, no_network=True, recover=True)
    root = etree.fromstring(data, parser=parser)
    if root is None:
        return "", ""
    title = ""
    for el in root:
        if _local(el.tag) == "title":
            title = _WS.sub(" ", "".join(el.itertext())).strip()
            break

    def drop(el: etree._Element) -> bool:
        tag = _local(el.tag)
        return not tag or tag in {"info", "include"}

    def is_block(el: etree._Element, tag: str) -> bool:
        if tag == "code":
            parent = el.getparent()
            return parent is not None and _local(parent.tag) in _MALLARD_BLOCK_CONTAINERS
        return tag in _MALLARD_BLOCKS

    return title, _collect_text(root, drop, is_block)


# --------------------------------------------------------------------------------------------
# .deb reading


def _iter_tar(
    fileobj: io.BufferedIOBase, mode: str, want: Callable[[str], bool]
) -> Iterator[tuple[str, bytes]]:
    with tarfile.open(fileobj=fileobj, mode=mode) as tar:
        for member in tar:
            name = member.name.lstrip("./")
            name = "/" + name if not name.startswith("/") else name
            if member.isfile() and want(name):
                handle = tar.extractfile(member)
                if handle is not None:
                    yield name, handle.read()


def _iter_deb_python(deb: Path, want: Callable[[str], bool]) -> Iterator[tuple[str, bytes]]:
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
                    yield from _iter_tar(stream, "r|", want)
                else:
                    yield from _iter_tar(payload, "r|*", want)
                return
            fh.seek(size + (size % 2), os.SEEK_CUR)
    raise ValueError(f"{deb} has no data.tar member")


def iter_deb_files(deb: Path, want: Callable[[str], bool]) -> Iterator[tuple[str, bytes]]:
    """Yield (absolute path inside the package, bytes) for wanted regular files of a .deb."""
    if shutil.which("dpkg-deb"):
        proc = subprocess.Popen(["dpkg-deb", "--fsys-tarfile", str(deb)], stdout=subprocess.PIPE)
        assert proc.stdout is not None
        try:
            yield from _iter_tar(proc.stdout, "r|", want)
        finally:
            proc.stdout.close()
            if proc.wait() != 0:
                raise RuntimeError(f"dpkg-deb --fsys-tarfile {deb} failed with {proc.returncode}")
    else:
        yield from _iter_deb_python(deb, want)


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


def _lang_from_path(path: str) -> str:
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


def _license_from_copyright(text: str) -> str:
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
    license_id = KNOWN_LICENSES.get(package) or _license_from_copyright(license_text)
    for path in evenly_spaced(sorted(files), max_docs):
        data = files[path]
        try:
            title, text = extract_mallard(data) if path.endswith(".page") else extract_html(data)
        except (etree.ParserError, etree.XMLSyntaxError, ValueError) as exc:
            log.warning("skipping unparsable %s:%s (%s)", package, path, exc)
            continue
        if text:
            yield Document(text, f"deb://{package}{path}", title, _lang_from_path(path), package, license_id)


# --------------------------------------------------------------------------------------------
# Fallback: the running Python's own standard library


def _module_text(source: str) -> tuple[str, str]:
    """Module, class and function docstrings of a Python source file, as readable text."""
    tree = ast.parse(source)
    chunks: list[str] = []
    module_doc = ast.get_docstring(tree) or ""
    if module_doc:
        chunks.append(module_doc)
    for node in ast.walk(tree):
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node)
            if doc and len(doc) > 40 and not node.name.startswith("_"):
                kind = "class" if isinstance(node, ast.ClassDef) else "def"
                chunks.append(f"{kind} {node.name}\n\n{doc}")
    title = module_doc.splitlines()[0] if module_doc else ""
    return title, "\n\n".join(chunks)


def documents_from_python(max_docs: int | None = None) -> Iterator[Document]:
    stdlib = Path(sysconfig.get_paths()["stdlib"]).resolve()
    roots = [stdlib, Path(sys.base_prefix) / "share" / "doc"]
    skip_dirs = {"site-packages", "dist-packages", "test", "tests", "__pycache__", "idle_test"}
    candidates: list[tuple[str, Path]] = []
    for root in roots:
        if not root.is_dir():
            continue
        for folder, dirs, files in os.walk(root):
            dirs[:] = sorted(d for d in dirs if d not in skip_dirs)
            for name in sorted(files):
                path = Path(folder) / name
                if path.suffix in {".py", ".rst", ".txt", ".html"}:
                    candidates.append((f"{root.name}/{path.relative_to(root).as_posix()}", path))
    candidates.sort()
    for rel, path in evenly_spaced(candidates, max_docs):
        try:
            raw = path.read_bytes()
            if path.suffix == ".py":
                title, text = _module_text(raw.decode("utf-8"))
            elif path.suffix == ".html":
                title, text = extract_html(raw)
            else:
                text = raw.decode("utf-8")
                title = text.strip().splitlines()[0][:200] if text.strip() else ""
        except (SyntaxError, UnicodeDecodeError, ValueError, etree.ParserError) as exc:
            log.debug("skipping %s (%s)", path, exc)
            continue
        if text.strip():
            yield Document(text.strip(), f"pystdlib://{rel}", title, "en", FALLBACK_PACKAGE, "PSF-2.0")


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
