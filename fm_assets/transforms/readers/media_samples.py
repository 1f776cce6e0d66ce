"""Media samples in a landed batch: which files are media, how they group into samples, and reading them.

Three ways to deliver image-text, audio-text and video-text samples, one rule each:

* **files grouped by key**: ``dir/key.jpg`` (or any image/audio/video extension: ``.mp4``, ``.webm``,
  ``.ogv``, ``.mkv``, ``.mov``) with ``dir/key.txt`` or
  ``dir/key.json`` beside it (the key is the path without its last suffix). The ``.txt`` holds the caption
  or transcript; a ``.json`` holds it under ``caption``, ``text``, ``alt`` or ``transcript``.
* **a tar** (plain or WebDataset): consecutive members sharing a WebDataset key (the member path up to the
  first dot of its file name) form one sample, e.g. ``0001.jpg`` + ``0001.txt``.
* **JSON lines naming media** (``*.media.jsonl``): one object per line with ``image``, ``audio`` or ``video`` (a path
  relative to the JSONL file's folder, landed in the same batch) and ``caption``/``text``/``transcript``.

Everything here is claimed by the media chain (``media_claims``); the text ``land`` stage records those files
as media instead of reading them as documents. Readers never raise for bad content: a sample without its
media or its text, an unreadable caption, a truncated tar, a decompression bomb, an unsafe member name or a
link member is a ``MediaProblem`` with a reason, and the samples before a break still come out. Memory holds
one sample's members at a time, never more than ``DecompressionLimits.max_member_bytes``.
"""

from __future__ import annotations

import json
import tarfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from .bounded import (
    ARCHIVE_BOMB,
    CODEC_ERRORS,
    DEFAULT_LIMITS,
    DecompressionBombError,
    DecompressionLimits,
    open_guarded,
)
from .media_types import (
    AUDIO,
    MEDIA_JSONL_SUFFIX,
    TAR_EXTENSION,
    TEXT_EXTENSIONS,
    extension,
    modality_of,
)
from .types import raw_prefix

TEXT_FIELDS = ("caption", "text", "alt", "transcript")
MEDIA_FIELDS = ("image", "audio", "video", "path")

# reject reasons (stable names: rejects tables and audit reports key on them)
MISSING_MEDIA = "missing_media"
MISSING_CAPTION = "missing_caption"
MISSING_TRANSCRIPT = "missing_transcript"
UNREADABLE_TEXT = "unreadable_text"
MALFORMED_JSON = "malformed_json"
TRUNCATED_ARCHIVE = "truncated_archive"
UNSAFE_MEMBER_NAME = "unsafe_member_name"  # a tar member named absolute or with '..'
LINK_MEMBER = "link_member"  # the sample's media or text was a link (or device) member, skipped
MEMBER_TOO_LARGE = "member_too_large"  # a member (or a sample's members) above DecompressionLimits

GroupKind = Literal["files", "tar", "jsonl"]


@dataclass(frozen=True)
class MediaGroup:
    """The landed files one piece of media input needs: a media file and its text companions, a tar, or a
    media JSONL followed by every landed file it names. Groups never share a media file."""

    kind: GroupKind
    paths: tuple[str, ...]  # paths inside the batch; the first is the media file or the container
    key: str


@dataclass
class MediaItem:
    """One sample read from landed input: its media bytes and its text."""

    key: str
    record_index: int  # sample number inside its container (0 for a file grouped by key)
    origin: str  # landed path, plus "#key" inside a tar or JSONL
    media_ext: str
    media: bytes
    text: str
    media_path: str | None = None  # the landed file that holds the media bytes, when not inside a tar


@dataclass
class MediaProblem:
    """A sample (or a container) that cannot become a record; ``reason`` is a stable reject name."""

    key: str
    record_index: int
    origin: str
    reason: str
    details: dict[str, Any] = field(default_factory=dict)
    raw_prefix: str = ""


def _key_of_file(path: str) -> str:
    return str(PurePosixPath(path).with_suffix(""))


def is_media_jsonl(path: str) -> bool:
    return path.lower().endswith(MEDIA_JSONL_SUFFIX)


def media_claims(paths: Iterable[str]) -> dict[str, str]:
    """Every path the media chain reads, with why: ``media``, ``caption`` (a text companion of a media file
    with the same key), ``tar`` or ``media_jsonl``. The text chain leaves these alone."""
    paths = list(paths)
    media_keys = {_key_of_file(p) for p in paths if modality_of(extension(p))}
    claims: dict[str, str] = {}
    for path in paths:
        ext = extension(path)
        if modality_of(ext):
            claims[path] = "media"
        elif ext == TAR_EXTENSION:
            claims[path] = "tar"
        elif is_media_jsonl(path):
            claims[path] = "media_jsonl"
        elif ext in TEXT_EXTENSIONS and _key_of_file(path) in media_keys:
            claims[path] = "caption"
    return claims


def group_media(paths: Sequence[str], jsonl_refs: Mapping[str, Sequence[str]]) -> list[MediaGroup]:
    """The media groups of a batch in path order; ``jsonl_refs`` maps each media JSONL to the landed paths it
    names (those files belong to the JSONL's group, not to a group of their own)."""
    present = set(paths)
    referenced = {ref for refs in jsonl_refs.values() for ref in refs if ref in present}
    companions: dict[str, list[str]] = {}
    for path in sorted(paths):
        if extension(path) in TEXT_EXTENSIONS:
            companions.setdefault(_key_of_file(path), []).append(path)
    groups: list[MediaGroup] = []
    for path in sorted(paths):
        ext = extension(path)
        if ext == TAR_EXTENSION:
            groups.append(MediaGroup("tar", (path,), path))
        elif is_media_jsonl(path):
            refs = tuple(ref for ref in dict.fromkeys(jsonl_refs.get(path, ())) if ref in present)
            groups.append(MediaGroup("jsonl", (path, *refs), path))
        elif modality_of(ext) and path not in referenced:
            key = _key_of_file(path)
            groups.append(MediaGroup("files", (path, *companions.get(key, ())), key))
    return groups


def resolve_reference(jsonl_path: str, ref: str) -> str:
    """A path named inside a media JSONL, as a path inside the batch (relative to the JSONL's folder)."""
    parent = PurePosixPath(jsonl_path).parent
    parts: list[str] = []
    for part in (parent / ref).parts:
        if part == "..":
            if parts:
                parts.pop()
        elif part not in (".", ""):
            parts.append(part)
    return "/".join(parts)


def _media_ref(obj: Mapping[str, Any]) -> str | None:
    for name in MEDIA_FIELDS:
        value = obj.get(name)
        if isinstance(value, str) and value:
            return value
    return None


def _text_field(obj: Mapping[str, Any]) -> str | None:
    for name in TEXT_FIELDS:
        value = obj.get(name)
        if isinstance(value, str):
            return value
    return None


def jsonl_references(jsonl_path: str, local: Path) -> list[str]:
    """The batch paths a media JSONL names (lines that do not parse name nothing)."""
    refs = []
    with open(local, "rb") as handle:
        for line in handle:
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            ref = _media_ref(obj) if isinstance(obj, dict) else None
            if ref:
                refs.append(resolve_reference(jsonl_path, ref))
    return refs


def _missing_text_reason(ext: str) -> str:
    return MISSING_TRANSCRIPT if modality_of(ext) == AUDIO else MISSING_CAPTION


def text_from_companion(ext: str, data: bytes) -> tuple[str | None, str]:
    """(text, problem): the caption in a ``.txt`` or ``.json`` companion, or None and why it is unreadable."""
    try:
        decoded = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, f"invalid utf-8 at byte {exc.start}"
    if ext == "txt":
        return decoded.strip(), ""
    try:
        obj = json.loads(decoded)
    except ValueError as exc:
        return None, f"malformed JSON: {exc}"
    text = _text_field(obj) if isinstance(obj, dict) else None
    if text is None:
        return None, f"no {'/'.join(TEXT_FIELDS)} field"
    return text.strip(), ""


def read_file_group(group: MediaGroup, local: Callable[[str], Path]) -> MediaItem | MediaProblem:
    """The sample of a ``files`` group; ``local(path)`` gives a readable copy of a landed file."""
    media_path = group.paths[0]
    ext = extension(media_path)
    by_ext = {extension(p): p for p in group.paths[1:]}
    companion = next((by_ext[e] for e in TEXT_EXTENSIONS if e in by_ext), None)
    if companion is None:
        return MediaProblem(
            group.key, 0, media_path, _missing_text_reason(ext), {"looked_for": list(TEXT_EXTENSIONS)}
        )
    raw = local(companion).read_bytes()
    text, problem = text_from_companion(extension(companion), raw)
    if text is None:
        return MediaProblem(
            group.key, 0, media_path, UNREADABLE_TEXT, {"file": companion, "error": problem}, raw_prefix(raw)
        )
    return MediaItem(group.key, 0, media_path, ext, local(media_path).read_bytes(), text, media_path)


def _tar_key(name: str) -> tuple[str, str]:
    """WebDataset's split of a member name: (key, extension), the key ending at the file name's first dot."""
    path = PurePosixPath(name)
    stem, _, ext = path.name.partition(".")
    return str(path.parent / stem) if str(path.parent) != "." else stem, ext.lower()


def _tar_sample(
    path: str, key: str, index: int, members: dict[str, bytes], skipped: dict[str, dict[str, Any]]
) -> MediaItem | MediaProblem:
    """The sample of one key's members; ``skipped`` holds the members not read (links, oversized) by extension."""
    origin = f"{path}#{key}"
    too_large = {ext: info for ext, info in skipped.items() if info["type"] == "too_large"}
    if too_large:
        return MediaProblem(key, index, origin, MEMBER_TOO_LARGE, {"members": [i["member"] for i in too_large.values()],
                                                                   "bytes": [i["bytes"] for i in too_large.values()]})  # fmt: skip
    media_ext = next((e for e in members if modality_of(e.rsplit(".", 1)[-1])), None)
    text_ext = next((e for e in TEXT_EXTENSIONS if e in members), None)
    if (media_ext is None or text_ext is None) and skipped:  # what is missing was a link: say so
        return MediaProblem(
            key, index, origin, LINK_MEMBER, {"skipped": list(skipped.values()), "members": sorted(members)}
        )
    if media_ext is None:
        return MediaProblem(key, index, origin, MISSING_MEDIA, {"members": sorted(members)})
    ext = media_ext.rsplit(".", 1)[-1]
    if text_ext is None:
        return MediaProblem(key, index, origin, _missing_text_reason(ext), {"members": sorted(members)})
    text, problem = text_from_companion(text_ext, members[text_ext])
    if text is None:
        return MediaProblem(
            key, index, origin, UNREADABLE_TEXT, {"member": f"{key}.{text_ext}", "error": problem}
        )
    return MediaItem(key, index, origin, ext, members[media_ext], text)


def unsafe_member_name(name: str) -> str | None:
    """Why a tar member name cannot be a sample key (absolute, ``..``, empty, backslashes), else None."""
    if not name.strip("/").strip():
        return "empty name"
    if name.startswith("/") or "\\" in name or "\0" in name:
        return "absolute path or backslash"
    if ".." in PurePosixPath(name).parts:
        return "a '..' component"
    return None


def _skipped_member(member: tarfile.TarInfo) -> dict[str, Any]:
    kind = "symlink" if member.issym() else "hardlink" if member.islnk() else "special_file"
    return {"member": member.name, "type": kind, "target": member.linkname}


def iter_tar_samples(
    path: str, local: Path, limits: DecompressionLimits = DEFAULT_LIMITS
) -> Iterator[MediaItem | MediaProblem]:
    """Samples of a landed tar in member order (consecutive members with one key form a sample).

    The tar may be compressed (gzip, bzip2, xz, zstd: chosen by its leading bytes); it is streamed through
    ``bounded.open_guarded`` (size and ratio caps: ``archive_bomb``), a member or sample larger than
    ``limits.max_member_bytes`` is not read (``member_too_large``), an unsafe member name is its own reject
    (``unsafe_member_name``), and a sample whose media or text was a link says so (``link_member``)."""
    index = 0
    key: str | None = None
    members: dict[str, bytes] = {}
    skipped: dict[str, dict[str, Any]] = {}
    sample_bytes = 0
    with open_guarded(local, limits) as stream:
        try:
            with tarfile.open(fileobj=stream, mode="r|") as tar:  # type: ignore[call-overload]
                for member in tar:
                    if member.isdir():
                        continue
                    why = unsafe_member_name(member.name)
                    if why is not None:
                        if key is not None:
                            yield _tar_sample(path, key, index, members, skipped)
                            index += 1
                        key, members, skipped, sample_bytes = None, {}, {}, 0
                        yield MediaProblem(member.name[:200], index, f"{path}#{member.name[:200]}",
                                           UNSAFE_MEMBER_NAME, {"member": member.name[:1000], "why": why})  # fmt: skip
                        index += 1
                        continue
                    member_key, ext = _tar_key(member.name)
                    if key is not None and member_key != key:
                        yield _tar_sample(path, key, index, members, skipped)
                        index += 1
                        members, skipped, sample_bytes = {}, {}, 0
                    key = member_key
                    if not member.isfile():
                        skipped[ext] = _skipped_member(member)
                        continue
                    if sample_bytes + member.size > limits.max_member_bytes:
                        skipped[ext] = {"member": member.name, "type": "too_large", "bytes": member.size}
                        continue  # never read: tarfile skips it through the guarded stream
                    handle = tar.extractfile(member)
                    members[ext] = handle.read() if handle is not None else b""
                    sample_bytes += len(members[ext])
                end = tar.offset
            marker = stream.bytes_at(end, 1024)
        except DecompressionBombError as exc:
            yield MediaProblem(
                key or "", index, path, ARCHIVE_BOMB, {"error": str(exc), "samples_read": index}
            )
            return
        except (tarfile.TarError, *CODEC_ERRORS) as exc:
            yield MediaProblem(
                key or "", index, path, TRUNCATED_ARCHIVE, {"error": str(exc), "samples_read": index}
            )
            return
    # tarfile reads a tar cut at a member boundary as a shorter complete one: the end-of-archive marker (two
    # zero blocks, in the decoded stream) must follow, else the last sample may be cut short: keep none of it
    if len(marker) != 1024 or marker.strip(b"\0"):
        yield MediaProblem(
            key or "",
            index,
            path,
            TRUNCATED_ARCHIVE,
            {"error": "no end-of-archive marker", "samples_read": index},
        )
        return
    if key is not None:
        yield _tar_sample(path, key, index, members, skipped)


def iter_jsonl_samples(
    path: str, local: Path, landed: Callable[[str], Path | None]
) -> Iterator[MediaItem | MediaProblem]:
    """Samples of a media JSONL, one per line; ``landed(batch_path)`` is a local copy of a landed file or
    None when the batch does not hold it."""
    with open(local, "rb") as handle:
        for index, line in enumerate(handle):
            origin = f"{path}#{index}"
            try:
                obj = json.loads(line)
            except ValueError as exc:
                yield MediaProblem(
                    str(index), index, origin, MALFORMED_JSON, {"error": str(exc)}, raw_prefix(line)
                )
                continue
            ref = _media_ref(obj) if isinstance(obj, dict) else None
            if ref is None or not isinstance(obj, dict):
                yield MediaProblem(
                    str(index), index, origin, MISSING_MEDIA, {"fields": list(MEDIA_FIELDS)}, raw_prefix(line)
                )
                continue
            key = str(obj.get("key") or _key_of_file(ref))
            media_path = resolve_reference(path, ref)
            ext = extension(media_path)
            copy = landed(media_path)
            if copy is None or modality_of(ext) is None:
                why = "not landed in this batch" if copy is None else "not an image, audio or video extension"
                yield MediaProblem(
                    key, index, origin, MISSING_MEDIA, {"path": media_path, "why": why}, raw_prefix(line)
                )
                continue
            text = _text_field(obj)
            if text is None:
                yield MediaProblem(
                    key,
                    index,
                    origin,
                    _missing_text_reason(ext),
                    {"fields": list(TEXT_FIELDS)},
                    raw_prefix(line),
                )
                continue
            yield MediaItem(key, index, origin, ext, copy.read_bytes(), text.strip(), media_path)
