"""Sample-data fetcher: the Python-stdlib fallback (always), .deb reading, HTML/Mallard extraction; apt (slow)."""

import io
import json
import shutil
import subprocess
import tarfile

import pytest

from fm_assets.sample_data import (
    evenly_spaced,
    extract_html,
    extract_mallard,
    fetch_sample_data,
    iter_deb_files,
)
from fm_assets.sample_data.debian import _iter_deb_python

KEYS = {"text", "url", "title", "lang_hint", "package", "license"}


def read_jsonl(folder):
    return [
        json.loads(line) for f in sorted(folder.glob("docs-*.jsonl")) for line in f.read_text().splitlines()
    ]


def test_python_fallback_writes_jsonl_deterministically(tmp_path):
    summary = fetch_sample_data(tmp_path / "a", source="python", max_docs=40, progress=False)
    assert summary["source"] == "python-stdlib"
    info = summary["packages"]["python-stdlib"]
    assert 20 <= info["docs"] <= 40 and info["files"] == [f"docs-00{i}.jsonl" for i in range(4)]
    docs = read_jsonl(tmp_path / "a" / "python-stdlib")
    assert len(docs) == info["docs"] == summary["total_docs"]
    assert all(set(d) == KEYS and d["text"].strip() and d["url"].startswith("pystdlib://") for d in docs)
    assert len({d["url"] for d in docs}) == len(docs)
    assert sum((tmp_path / "a" / "python-stdlib" / f).stat().st_size for f in info["files"]) == info["bytes"]

    fetch_sample_data(tmp_path / "b", source="python", max_docs=40, progress=False)
    for name in info["files"]:
        assert (tmp_path / "a" / "python-stdlib" / name).read_bytes() == (
            tmp_path / "b" / "python-stdlib" / name
        ).read_bytes()


def test_auto_falls_back_when_apt_gives_nothing(tmp_path):
    summary = fetch_sample_data(
        tmp_path, packages=("no-such-package-fm-test",), source="auto", max_docs=5, progress=False
    )
    assert summary["source"] == "python-stdlib"
    assert summary["total_docs"] > 0
    assert not (tmp_path / "no-such-package-fm-test").exists()


def test_extract_html_drops_chrome_and_keeps_structure():
    page = b"""<html><head><title>Ch 6. APT</title><style>p{color:red}</style></head><body>
    <div id="banner">Download the ebook</div><ul class="docnav"><li>Prev</li></ul>
    <div class="related" role="navigation">index</div>
    <div class="body" role="main"><h1>APT <a class="headerlink">#</a></h1>
    <p>APT is   the <code>Advanced
    Packaging</code> Tool.</p><pre>$ apt-get   install\n    foo</pre><script>track()</script></div>
    </body></html>"""
    title, text = extract_html(page)
    assert title == "Ch 6. APT"
    assert text == "APT\n\nAPT is the Advanced Packaging Tool.\n\n$ apt-get   install\n    foo"


def test_extract_mallard_skips_info_and_keeps_inline_code_inline():
    page = b"""<page xmlns="http://projectmallard.org/1.0/" id="x"><info><credit><name>A</name>
    <email>a@b.org</email></credit><desc>d</desc></info><title>Turn on keys</title>
    <p>Press <gui>Settings</gui> and run <code>ls</code>.</p><steps><item><p>One.</p></item></steps>
    <code mime="text/x-shellscript">$ a\n  b</code></page>"""
    title, text = extract_mallard(page)
    assert title == "Turn on keys"
    assert text == "Turn on keys\n\nPress Settings and run ls.\n\nOne.\n\n$ a\n  b"


def test_evenly_spaced_is_deterministic_and_spread():
    items = list(range(100))
    assert evenly_spaced(items, 4) == [0, 25, 50, 75]
    assert evenly_spaced(items, None) == items and evenly_spaced(items, 500) == items
    assert evenly_spaced(items, 0) == []


def _make_deb(path, files):
    """A minimal .deb: ar archive with debian-binary, control.tar.gz and data.tar.xz."""
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w:xz") as tar:
        for name, content in files.items():
            info = tarfile.TarInfo("./" + name.lstrip("/"))
            info.size = len(content)
            tar.addfile(info, io.BytesIO(content))
    control = io.BytesIO()
    with tarfile.open(fileobj=control, mode="w:gz") as tar:
        body = b"Package: fm-test\nVersion: 1\nArchitecture: all\nMaintainer: t <t@t.org>\nDescription: t\n"
        info = tarfile.TarInfo("./control")
        info.size = len(body)
        tar.addfile(info, io.BytesIO(body))
    members = [
        ("debian-binary", b"2.0\n"),
        ("control.tar.gz", control.getvalue()),
        ("data.tar.xz", data.getvalue()),
    ]
    with open(path, "wb") as fh:
        fh.write(b"!<arch>\n")
        for name, payload in members:
            fh.write(f"{name:<16}{0:<12}{0:<6}{0:<6}{'100644':<8}{len(payload):<10}`\n".encode())
            fh.write(payload + (b"\n" if len(payload) % 2 else b""))


def test_deb_reader_without_dpkg_matches_dpkg(tmp_path):
    deb = tmp_path / "fm-test_1_all.deb"
    files = {
        "/usr/share/help/de/x/a.page": b"<page/>",
        "/usr/share/doc/fm-test/b.html": b"<p>b</p>",
        "/etc/c": b"c",
    }
    _make_deb(deb, files)
    want = lambda path: path.startswith("/usr/share/")  # noqa: E731
    ours = dict(_iter_deb_python(deb, want))
    assert ours == {k: v for k, v in files.items() if k.startswith("/usr/share/")}
    if shutil.which("dpkg-deb"):
        assert subprocess.run(["dpkg-deb", "--info", str(deb)], capture_output=True).returncode == 0
        assert dict(iter_deb_files(deb, want)) == ours


@pytest.mark.slow
def test_apt_packages_real_download(tmp_path):
    if not shutil.which("apt-get"):
        pytest.skip("apt-get not available here; the fallback test covers this machine")
    summary = fetch_sample_data(tmp_path, max_docs=12, progress=False, source="auto")
    if summary["source"] != "apt":
        pytest.skip(f"Debian archive not reachable: {summary['errors']}")
    assert set(summary["packages"]) == {"debian-handbook", "gnome-user-docs", "python3.11-doc"}
    for pkg, info in summary["packages"].items():
        docs = read_jsonl(tmp_path / pkg)
        assert len(docs) == info["docs"] == 12
        assert all(
            set(d) == KEYS and d["package"] == pkg and d["url"].startswith(f"deb://{pkg}/") for d in docs
        )
    gnome_langs = {d["lang_hint"] for d in read_jsonl(tmp_path / "gnome-user-docs")}
    assert len(gnome_langs) >= 6  # the evenly spaced cap still spans many languages
    assert summary["packages"]["python3.11-doc"]["license"] == "PSF-2.0"
