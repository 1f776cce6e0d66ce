"""Audio-text pairs from Asterisk's core prompts: ``asterisk-core-sounds-<lang>-wav`` plus their transcripts.

The ``-wav`` package holds the prompts (8 kHz, 16-bit mono PCM) under ``/usr/share/asterisk/sounds/<voice>/``;
the language's base package ``asterisk-core-sounds-<lang>`` ships ``core-sounds-<lang>.txt.gz``, one
``name: transcript`` line per prompt (``digits/7: seven``). Each prompt with a transcript becomes a sample;
descriptions of non-speech sounds (``beep: [this is a simple beep tone]``) are left out.
"""

from __future__ import annotations

import gzip
import logging
import re
from collections.abc import Iterator
from pathlib import Path

from fm_assets.sample_data.debian import iter_deb_files, license_from_copyright
from fm_assets.sample_data.media_sample import MediaSample, sample_key

log = logging.getLogger(__name__)

LANGUAGES = ("en", "fr", "es")
SOUNDS_ROOT = "/usr/share/asterisk/sounds/"
_LINE = re.compile(r"^([^\s:;][^:]*?):\s*(.*\S)\s*$")


def wav_package(lang: str) -> str:
    return f"asterisk-core-sounds-{lang}-wav"


def transcript_package(lang: str) -> str:
    return f"asterisk-core-sounds-{lang}"


def parse_transcripts(text: str) -> dict[str, str]:
    """{prompt name: transcript} from a core-sounds list; comments (";") and bracketed non-speech skipped."""
    transcripts: dict[str, str] = {}
    for line in text.splitlines():
        match = _LINE.match(line)
        if not match:
            continue
        name, transcript = match.group(1).strip(), match.group(2).strip()
        if transcript.startswith("[") and transcript.endswith("]"):
            continue
        transcripts.setdefault(name, transcript)
    return transcripts


def read_transcripts(deb: Path, lang: str) -> dict[str, str]:
    """The transcript list shipped by the language's base package."""
    wanted = f"/usr/share/doc/{transcript_package(lang)}/core-sounds-{lang}.txt.gz"
    for _, data in iter_deb_files(deb, lambda path: path == wanted):
        return parse_transcripts(gzip.decompress(data).decode("utf-8", "replace"))
    raise ValueError(f"{deb.name} has no {wanted}")


def asterisk_audio_samples(
    wav_deb: Path, transcripts: dict[str, str], lang: str, package_version: str
) -> Iterator[MediaSample]:
    """One sample per prompt WAV that has a transcript, in sorted key order."""
    package = wav_package(lang)
    copyright_path = f"/usr/share/doc/{package}/copyright"
    prompts: dict[str, tuple[str, bytes]] = {}
    license_id = ""
    for path, data in iter_deb_files(
        wav_deb, lambda p: p == copyright_path or (p.startswith(SOUNDS_ROOT) and p.endswith(".wav"))
    ):
        if path == copyright_path:
            license_id = license_from_copyright(data.decode("utf-8", "replace"))
            continue
        voice, _, name = path[len(SOUNDS_ROOT) :].partition("/")
        prompts[name.removesuffix(".wav")] = (f"{voice}", data)
    missing = sorted(set(transcripts) - set(prompts))
    if missing:
        log.info("%s: %d transcripts without a prompt file (e.g. %s)", package, len(missing), missing[:3])
    for name in sorted(set(prompts) & set(transcripts)):
        voice, data = prompts[name]
        yield MediaSample(
            key=sample_key(*name.split("/")),
            ext="wav",
            media=data,
            text=transcripts[name],
            meta={
                "license": license_id,
                "source_package": package,
                "package_version": package_version,
                "transcript_package": transcript_package(lang),
                "original_path": f"{SOUNDS_ROOT}{voice}/{name}.wav",
                "voice": voice,
                "lang": lang,
            },
        )
