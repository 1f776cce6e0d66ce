"""Fetch real public image-, audio- and video-text samples from Debian packages, as landing-ready folders.

Images: ``debian-handbook`` figures with their captions (``handbook_images``). Audio: Asterisk's core
prompts in English, French and Spanish with their transcripts (``asterisk_audio``). Video: the video figures
of GNOME's help (``gnome-user-docs``, ``gnome-mahjongg``, ``gnome-devel-docs``) with the Mallard text that
describes them (``gnome_videos``). Each package is
written to ``dest/<modality>/<package>/`` as ``key.<ext>`` + ``key.txt`` + ``key.json``, one folder per
licence, so each can be landed as its own batch (``fm land dest/image/debian-handbook --license ...``).
Output is a pure function of the package contents and the arguments (sorted keys, evenly spaced caps).
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from fm_assets.sample_data.asterisk_audio import (
    LANGUAGES,
    asterisk_audio_samples,
    read_transcripts,
    transcript_package,
    wav_package,
)
from fm_assets.sample_data.debian import _apt_download, evenly_spaced
from fm_assets.sample_data.gnome_videos import PACKAGES as VIDEO_PACKAGES
from fm_assets.sample_data.gnome_videos import gnome_video_samples
from fm_assets.sample_data.handbook_images import PACKAGE as HANDBOOK
from fm_assets.sample_data.handbook_images import handbook_image_samples
from fm_assets.sample_data.media_sample import AUDIO, IMAGE, VIDEO, MediaSample, write_media_samples

log = logging.getLogger(__name__)

MEDIA_MODALITIES = (IMAGE, AUDIO, VIDEO)


def package_version(deb: Path) -> str:
    """The version part of a ``name_version_arch.deb`` file name."""
    parts = deb.stem.split("_")
    return parts[1] if len(parts) >= 3 else ""


def _debs(packages: list[str], workdir: Path) -> dict[str, Path]:
    found = {
        pkg: sorted(workdir.glob(f"{pkg}_*.deb"))[-1]
        for pkg in packages
        if list(workdir.glob(f"{pkg}_*.deb"))
    }
    missing = [pkg for pkg in packages if pkg not in found]
    if missing:
        found.update(_apt_download(missing, workdir))
    return found


def _write(
    samples: list[MediaSample], folder: Path, modality: str, deb: Path, max_samples: int | None
) -> dict[str, Any]:
    chosen = evenly_spaced(samples, max_samples)
    info = write_media_samples(chosen, folder, "transcript" if modality == AUDIO else "caption")
    license_id = chosen[0].meta["license"] if chosen else ""
    return {"modality": modality, "deb": deb.name, "license": license_id, "folder": str(folder), **info}


def fetch_media_sample_data(
    dest: Path,
    *,
    modalities: Iterable[str] = (IMAGE, AUDIO),
    max_samples: int | None = None,
    audio_languages: Iterable[str] = LANGUAGES,
    deb_dir: Path | None = None,
) -> dict[str, Any]:
    """Write image-, audio- and/or video-text samples under ``dest`` and return a summary (by default images
    and audio, as before videos were added; ``MEDIA_MODALITIES`` is every kind).

    ``max_samples`` caps samples per package (evenly spaced over the sorted keys, so a cap still spans
    languages). ``deb_dir``: where to keep downloaded .debs (reused when present); a temporary folder
    when None. Summary: {"dest", "packages": {package: {"modality", "samples", "media_bytes", "license",
    "deb", "folder"}}, "total_samples", "errors"}.
    """
    dest = Path(dest)
    modalities = tuple(modalities)
    unknown = set(modalities) - set(MEDIA_MODALITIES)
    if unknown:
        raise ValueError(f"unknown media modalities {sorted(unknown)}; expected {MEDIA_MODALITIES}")
    languages = tuple(audio_languages)
    wanted: list[str] = []
    if IMAGE in modalities:
        wanted.append(HANDBOOK)
    if AUDIO in modalities:
        wanted += [pkg for lang in languages for pkg in (wav_package(lang), transcript_package(lang))]
    if VIDEO in modalities:
        wanted += list(VIDEO_PACKAGES)
    summary: dict[str, Any] = {"dest": str(dest), "packages": {}, "errors": []}
    with tempfile.TemporaryDirectory(prefix="fm-debs-") as tmp:
        workdir = Path(deb_dir) if deb_dir is not None else Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        try:
            debs = _debs(wanted, workdir)
        except (FileNotFoundError, OSError) as exc:
            summary["errors"].append(f"apt: {exc}")
            log.warning("apt unavailable, no media sample data: %s", exc)
            debs = {}
        summary["errors"] += [f"{pkg}: not downloaded" for pkg in wanted if pkg not in debs]
        if HANDBOOK in debs:
            deb = debs[HANDBOOK]
            samples = list(handbook_image_samples(deb, package_version(deb)))
            summary["packages"][HANDBOOK] = _write(samples, dest / IMAGE / HANDBOOK, IMAGE, deb, max_samples)
        for lang in languages if AUDIO in modalities else ():
            wav, text = wav_package(lang), transcript_package(lang)
            if wav not in debs or text not in debs:
                continue
            transcripts = read_transcripts(debs[text], lang)
            samples = list(asterisk_audio_samples(debs[wav], transcripts, lang, package_version(debs[wav])))
            summary["packages"][wav] = _write(samples, dest / AUDIO / wav, AUDIO, debs[wav], max_samples)
        for pkg in VIDEO_PACKAGES if VIDEO in modalities else ():
            if pkg in debs:
                samples = list(gnome_video_samples(debs[pkg], pkg, package_version(debs[pkg])))
                summary["packages"][pkg] = _write(samples, dest / VIDEO / pkg, VIDEO, debs[pkg], max_samples)
    summary["total_samples"] = sum(p["samples"] for p in summary["packages"].values())
    for name, info in summary["packages"].items():
        log.info("%s: %d %s samples in %s", name, info["samples"], info["modality"], info["folder"])
    return summary
