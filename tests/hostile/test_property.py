"""Issue 18, beyond the list: random batch ids, source names, reasons and archive member names fed to every
command that takes them; nothing is written outside the root (a sibling folder is snapshotted) and no
traceback escapes."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import PurePosixPath

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fm_assets.transforms.readers.media_samples import MediaItem, iter_tar_samples

from .attacks import HOSTILE_IDS, HOSTILE_TEXT, bytes_changed, commands, run_fm, snapshot

ALPHABET = st.characters(codec="utf-8", exclude_categories=("Cs",))  # surrogates cannot reach argv
IDS = st.one_of(st.sampled_from(HOSTILE_IDS), st.text(ALPHABET, max_size=40),
                st.text("./\\ab-_[]", min_size=1, max_size=20))  # fmt: skip
TEXT = st.one_of(st.sampled_from(HOSTILE_TEXT), st.text(ALPHABET, min_size=1, max_size=60))
MEMBER_NAMES = st.one_of(
    st.text("./\\ab.jpgtx", min_size=1, max_size=24), st.text(ALPHABET, min_size=1, max_size=24)
)
ARGV_SAFE = st.text(ALPHABET, max_size=40).filter(lambda s: "\x00" not in s)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("property")
    root, victim, src = tmp / "root", tmp / "victim", tmp / "src"
    victim.mkdir()
    (victim / "poetry.lock").write_text("precious\n")
    src.mkdir()
    (src / "docs.jsonl").write_text('{"text": "a document"}\n')
    with pytest.MonkeyPatch.context() as env:
        env.setenv("DAGSTER_HOME", str(tmp / "dh"))
        (tmp / "dh").mkdir()
        assert run_fm(root, "land", str(src), "--source", "docsc", "--license", "MIT").code == 0
        yield {"tmp": tmp, "root": root, "src": src}


def outside(world) -> dict[str, int]:
    """What lies outside the root: every sibling of it except the Dagster home (DAGSTER_HOME, where the
    instance is configured to keep its run records: `fm revoke` names the runs from there)."""
    found: dict[str, int] = {}
    for entry in world["tmp"].iterdir():
        if entry not in (world["root"], world["tmp"] / "dh"):
            found |= {f"{entry.name}/{k}": v for k, v in snapshot(entry).items()} | {entry.name: -1}
    return found


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    batch=IDS.filter(lambda s: "\x00" not in s), source=ARGV_SAFE, text=TEXT.filter(lambda s: "\x00" not in s)
)
def test_random_identifiers_and_reasons_never_escape_the_root_or_raise(world, batch, source, text):
    before = outside(world)
    for args in commands(batch, source, text, world["src"]):
        result = run_fm(world["root"], *args)
        assert not result.traceback, (args, result.err[-2000:])
        assert result.code in (0, 1, 2), (args, result.code, result.err)
    assert bytes_changed(before, outside(world)) == 0
    assert (world["tmp"] / "victim" / "poetry.lock").read_text() == "precious\n"


@settings(max_examples=150, deadline=None)
@given(names=st.lists(MEMBER_NAMES, min_size=1, max_size=6), data=st.binary(max_size=64))
def test_random_member_names_become_safe_keys_or_rejects(tmp_path_factory, names, data):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in names:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    path = tmp_path_factory.mktemp("tar") / "x.tar"
    path.write_bytes(buffer.getvalue())
    for item in iter_tar_samples("x.tar", path):
        if isinstance(item, MediaItem):
            parts = PurePosixPath(item.key).parts
            assert ".." not in parts and not item.key.startswith("/") and "\\" not in item.key, item.key
    assert os.path.exists(path)
