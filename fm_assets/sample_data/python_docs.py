"""Fallback corpus when apt is unavailable: the running Python's own standard library docs."""

from __future__ import annotations

import ast
import logging
import os
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path

from lxml import etree

from fm_assets.sample_data.debian import evenly_spaced
from fm_assets.sample_data.document import FALLBACK_PACKAGE, Document
from fm_assets.sample_data.page_text import extract_html

log = logging.getLogger(__name__)

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
