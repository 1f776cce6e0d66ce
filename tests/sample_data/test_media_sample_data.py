"""Media sample data: debian-handbook figures and Asterisk prompts as key folders, from built .debs; real apt (slow)."""

import gzip
import hashlib
import json
import shutil
from pathlib import Path

import pytest
from media_fixtures import deb_package, png_image, telephone_wav

from fm_assets.sample_data.asterisk_audio import parse_transcripts
from fm_assets.sample_data.media import fetch_media_sample_data

HB = "/usr/share/doc/debian-handbook/html"
COPYRIGHT = (
    b"Format: x\n\nFiles: *\nCopyright: someone\nLicense: CC-BY-SA-3.0\n\nFiles: debian/*\nLicense: GPL-2+\n"
)


def page(*bodies: str) -> bytes:
    return f"<html><body>{''.join(bodies)}</body></html>".encode()


def figure(src: str, alt: str, title: str) -> str:
    return (
        f'<div class="figure"><div class="figure-contents"><div class="mediaobject"><img src="{src}" alt="{alt}"/>'
        f'</div></div><p class="title"><strong>{title}</strong></p></div>'
    )


def build_debs(folder: Path) -> dict[str, bytes]:
    images = {"webmin": png_image(120, 90, seed=1), "gdm": png_image(100, 100, seed=2)}
    handbook = deb_package(
        {
            f"{HB}/en-US/images/webmin.png": images["webmin"],
            f"{HB}/en-US/images/inst.gdm.png": images["gdm"],
            f"{HB}/en-US/Common_Content/images/note.png": png_image(32, 32),
            f"{HB}/en-US/admin.html": page(
                figure("images/webmin.png", "Webmin dashboard", "Figure 9.5. Webmin dashboard"),
                '<img src="Common_Content/images/note.png" alt="Note"/>',
                figure("images/inst.gdm.png", "", "Figure 4.2. First boot"),
            ),
            f"{HB}/en-US/zz-again.html": page(figure("images/webmin.png", "Webmin again", "Figure 9.9. x")),
            f"{HB}/de-DE/admin.html": page(
                figure("images/webmin.png", "Webmin-Übersicht", "Abbildung 9.5. x")
            ),
        },
        hard_links={f"{HB}/de-DE/images/webmin.png": f"{HB}/en-US/images/webmin.png"},
    )
    sounds = "/usr/share/asterisk/sounds/en_US_f_Allison"
    transcripts = (
        b"; Core Asterisk Sounds in English\n\nactivated: Activated.\nbeep: [a beep tone]\ndigits/1: one\n"
    )
    (folder / "debian-handbook_11.1_all.deb").write_bytes(handbook)
    (folder / "asterisk-core-sounds-en_1.6_all.deb").write_bytes(
        deb_package(
            {
                "/usr/share/doc/asterisk-core-sounds-en/core-sounds-en.txt.gz": gzip.compress(
                    transcripts, mtime=0
                )
            }
        )
    )
    (folder / "asterisk-core-sounds-en-wav_1.6_all.deb").write_bytes(
        deb_package(
            {
                f"{sounds}/activated.wav": telephone_wav(1.0, seed=1),
                f"{sounds}/beep.wav": telephone_wav(0.5, seed=2),
                f"{sounds}/digits/1.wav": telephone_wav(0.6, seed=3),
                f"{sounds}/no-transcript.wav": telephone_wav(0.6, seed=4),
                "/usr/share/doc/asterisk-core-sounds-en-wav/copyright": COPYRIGHT,
            }
        )
    )
    return images


def test_transcript_list_parsing():
    text = "; comment\n\nactivated: Activated.\nbeep: [this is a beep]\ndigits/10: ten\nbad line\nx:   \n"
    assert parse_transcripts(text) == {"activated": "Activated.", "digits/10": "ten"}


def test_handbook_and_asterisk_become_key_folders(tmp_path):
    debs = tmp_path / "debs"
    debs.mkdir()
    images = build_debs(debs)
    summary = fetch_media_sample_data(tmp_path / "out", audio_languages=("en",), deb_dir=debs)
    assert summary["errors"] == []
    handbook = summary["packages"]["debian-handbook"]
    assert (handbook["samples"], handbook["license"]) == (3, "GPL-2.0-or-later OR CC-BY-SA-3.0")
    root = tmp_path / "out" / "image" / "debian-handbook"
    assert sorted(p.relative_to(root).as_posix() for p in root.rglob("*.png")) == [
        "de-DE/webmin.png",
        "en-US/inst_gdm.png",  # no dots inside a key
        "en-US/webmin.png",
    ]
    assert (root / "de-DE" / "webmin.png").read_bytes() == images["webmin"]  # through the hard link
    assert (root / "en-US" / "webmin.txt").read_text() == "Webmin dashboard"  # the first page wins
    assert (root / "en-US" / "inst_gdm.txt").read_text() == "First boot"  # no alt: the figure title
    meta = json.loads((root / "de-DE" / "webmin.json").read_text())
    assert (
        meta["caption"] == "Webmin-Übersicht" and meta["lang"] == "de" and meta["package_version"] == "11.1"
    )
    assert (
        meta["original_path"] == f"{HB}/de-DE/images/webmin.png"
        and meta["source_package"] == "debian-handbook"
    )

    audio = summary["packages"]["asterisk-core-sounds-en-wav"]
    assert (audio["samples"], audio["license"], audio["modality"]) == (2, "CC-BY-SA-3.0", "audio")
    root = tmp_path / "out" / "audio" / "asterisk-core-sounds-en-wav"
    assert (root / "digits" / "1.txt").read_text() == "one"
    assert not (root / "beep.wav").exists() and not (root / "no-transcript.wav").exists()
    meta = json.loads((root / "activated.json").read_text())
    assert meta["transcript"] == "Activated." and meta["voice"] == "en_US_f_Allison" and meta["lang"] == "en"
    assert summary["total_samples"] == 5


def digest(folder: Path) -> dict[str, str]:
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in folder.rglob("*.*")
    }


def test_output_is_reproducible_and_capped(tmp_path):
    debs = tmp_path / "debs"
    debs.mkdir()
    build_debs(debs)
    first = fetch_media_sample_data(tmp_path / "a", modalities=("image",), deb_dir=debs, max_samples=2)
    fetch_media_sample_data(tmp_path / "b", modalities=("image",), deb_dir=debs, max_samples=2)
    assert (
        first["packages"]["debian-handbook"]["samples"] == 2
        and "asterisk-core-sounds-en-wav" not in first["packages"]
    )
    assert digest(tmp_path / "a") == digest(tmp_path / "b") and len(digest(tmp_path / "a")) == 6
    with pytest.raises(ValueError):
        fetch_media_sample_data(tmp_path / "c", modalities=("hologram",), deb_dir=debs)


@pytest.mark.slow
def test_real_debian_packages(tmp_path):
    if not shutil.which("apt-get"):
        pytest.skip("apt-get not available")
    summary = fetch_media_sample_data(tmp_path, audio_languages=("en",))
    if "debian-handbook" not in summary["packages"]:
        pytest.skip(f"Debian archive not reachable: {summary['errors']}")
    images = list((tmp_path / "image" / "debian-handbook").rglob("*.png"))
    assert len(images) == summary["packages"]["debian-handbook"]["samples"] >= 1000
    assert len({hashlib.sha256(p.read_bytes()).hexdigest() for p in images}) >= 300
    assert summary["packages"]["asterisk-core-sounds-en-wav"]["samples"] >= 500


@pytest.mark.slow
def test_cli_sample_data_audio_modality(tmp_path):
    if not shutil.which("apt-get"):
        pytest.skip("apt-get not available")
    from fm_assets.cli.main import main

    code = main(["sample-data", str(tmp_path), "--modality", "audio", "--max-samples", "5"])
    folders = sorted(p.name for p in (tmp_path / "audio").iterdir()) if (tmp_path / "audio").exists() else []
    if code == 1 and not folders:
        pytest.skip("Debian archive not reachable")
    assert code == 0
    assert folders == [
        "asterisk-core-sounds-en-wav",
        "asterisk-core-sounds-es-wav",
        "asterisk-core-sounds-fr-wav",
    ]
    for folder in folders:
        wavs = list((tmp_path / "audio" / folder).rglob("*.wav"))
        assert len(wavs) == 5 and all(w.with_suffix(".txt").read_text().strip() for w in wavs)
    assert not list(tmp_path.glob("*/docs-*.jsonl"))  # --modality audio fetches no text
