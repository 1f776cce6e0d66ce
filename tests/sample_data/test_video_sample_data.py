"""Video sample data: GNOME help videos with their Mallard captions, from built .debs (symlinked translations,
a <media> caption, a section title, a commented-out <media> that falls back to the page's desc)."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

from video_fixtures import clip_video

from fm_assets.sample_data.gnome_videos import gnome_video_samples
from fm_assets.sample_data.media import fetch_media_sample_data

HELP = "usr/share/help"
MALLARD = 'xmlns="http://projectmallard.org/1.0/" xmlns:tt="http://www.w3.org/ns/ttml"'


def mallard(title: str, body: str, desc: str = "") -> bytes:
    info = f"<info><desc>{desc}</desc></info>" if desc else ""
    return f'<page {MALLARD} id="p">{info}<title>{title}</title>{body}</page>'.encode()


def deb(files: dict[str, bytes], symlinks: dict[str, str]) -> bytes:
    """A minimal .deb whose data tar holds ``files`` and symbolic links ``{link: relative target}``."""
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w:gz", format=tarfile.GNU_FORMAT) as tar:
        for name, content in files.items():
            info = tarfile.TarInfo("./" + name)
            info.size = len(content)
            tar.addfile(info, io.BytesIO(content))
        for link, target in symlinks.items():
            info = tarfile.TarInfo("./" + link)
            info.type, info.linkname = tarfile.SYMTYPE, target
            tar.addfile(info)
    control = io.BytesIO()
    with tarfile.open(fileobj=control, mode="w:gz") as tar:
        body = b"Package: t\nVersion: 1\nArchitecture: all\nMaintainer: t <t@t.org>\nDescription: t\n"
        info = tarfile.TarInfo("./control")
        info.size = len(body)
        tar.addfile(info, io.BytesIO(body))
    out = io.BytesIO(b"!<arch>\n")
    out.seek(0, 2)
    for name, payload in (
        ("debian-binary", b"2.0\n"),
        ("control.tar.gz", control.getvalue()),
        ("data.tar.gz", data.getvalue()),
    ):
        out.write(f"{name:<16}{0:<12}{0:<6}{0:<6}{'100644':<8}{len(payload):<10}`\n".encode())
        out.write(payload + (b"\n" if len(payload) % 2 else b""))
    return out.getvalue()


def mahjongg_deb(video: bytes) -> bytes:
    subtitles = (
        "<tt:tt><tt:body><tt:div><tt:p>Press <key>Ctrl</key> H for a hint.</tt:p></tt:div></tt:body></tt:tt>"
    )
    fr_subtitles = subtitles.replace("Press", "Appuyez sur").replace("for a hint", "pour un indice")
    return deb(
        {
            f"{HELP}/C/gnome-mahjongg/figures/hints-video.ogv": video,
            f"{HELP}/C/gnome-mahjongg/figures/game.ogv": video[::-1],  # never referenced: not a sample
            f"{HELP}/C/gnome-mahjongg/hints.page": mallard(
                "Hints",
                f'<section><title>Video</title><media type="video" src="figures/hints-video.ogv">'
                f"{subtitles}</media></section>",
            ),
            f"{HELP}/fr/gnome-mahjongg/hints.page": mallard(
                "Astuces", f'<media type="video" src="figures/hints-video.ogv">{fr_subtitles}</media>'
            ),
            f"{HELP}/C/gnome-mahjongg/other.page": mallard("Other", "<p>no video</p>"),
        },
        {
            f"{HELP}/fr/gnome-mahjongg/figures/hints-video.ogv": "../../../C/gnome-mahjongg/figures/hints-video.ogv"
        },
    )


def user_docs_deb(video: bytes) -> bytes:
    return deb(
        {
            f"{HELP}/C/gnome-help/figures/dual.webm": video,
            f"{HELP}/C/gnome-help/dual.page": mallard(
                "Connect another monitor",
                "<!-- <media type='video' src='figures/dual.webm'/> -->",
                desc="Set up an additional monitor.",
            ),
        },
        {},
    )


def test_captions_come_from_the_media_element_the_section_or_the_page(tmp_path):
    video = clip_video(3.0, container="webm", codec="libvpx")
    (tmp_path / "m.deb").write_bytes(mahjongg_deb(video))
    samples = list(gnome_video_samples(tmp_path / "m.deb", "gnome-mahjongg", "1"))
    assert [(s.key, s.text, s.media == video) for s in samples] == [
        ("C/gnome-mahjongg/hints-video", "Press Ctrl H for a hint.", True),
        ("fr/gnome-mahjongg/hints-video", "Appuyez sur Ctrl H pour un indice.", True),  # symlinked bytes
    ]
    assert samples[1].meta["lang"] == "fr" and samples[1].meta["license"] == "CC-BY-SA-3.0"
    (tmp_path / "u.deb").write_bytes(user_docs_deb(video))
    (sample,) = gnome_video_samples(tmp_path / "u.deb", "gnome-user-docs", "1")
    assert sample.text == "Connect another monitor. Set up an additional monitor." and sample.ext == "webm"


def test_fetch_writes_landable_key_folders(tmp_path):
    debs = tmp_path / "debs"
    debs.mkdir()
    video = clip_video(3.0, container="webm", codec="libvpx")
    (debs / "gnome-mahjongg_1_all.deb").write_bytes(mahjongg_deb(video))
    (debs / "gnome-user-docs_1_all.deb").write_bytes(user_docs_deb(video))
    (debs / "gnome-devel-docs_1_all.deb").write_bytes(deb({}, {}))
    summary = fetch_media_sample_data(tmp_path / "out", modalities=["video"], deb_dir=debs)
    assert {name: info["samples"] for name, info in summary["packages"].items()} == {
        "gnome-user-docs": 1,
        "gnome-mahjongg": 2,
        "gnome-devel-docs": 0,
    }
    folder = Path(summary["packages"]["gnome-mahjongg"]["folder"])
    sidecar = json.loads((folder / "fr/gnome-mahjongg/hints-video.json").read_text())
    assert (
        sidecar["caption"].startswith("Appuyez") and (folder / "fr/gnome-mahjongg/hints-video.ogv").exists()
    )
