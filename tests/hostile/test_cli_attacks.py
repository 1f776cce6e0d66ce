"""Issue 18 items 1, 3 and 4 through the `fm` command: hostile batch ids and source names never reach a path
outside the root, markup in reasons, reviewers and file names is printed as written (and escaped in
Markdown), and a revocation that matches nothing is an error."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fm_assets.cli.main import main

ESCAPES = ["x/../../../victim/poetry", "../victim/poetry", "/tmp/abs", "a b", "x\n", "..", "[/bold]"]
MARKUP = "[/bold][red]<script>alert(1)</script> **boom** | `x`"


def snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    """Every path under ``folder`` with its size and mtime (what a stray write changes)."""
    return {
        str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns) if p.is_file() else (-1, 0)
        for p in sorted(folder.rglob("*"))
    }


@pytest.fixture
def world(tmp_path: Path, monkeypatch) -> dict:
    """A root with one landed batch, and a victim folder beside it holding a lock file the attack aims at."""
    root, victim = tmp_path / "root", tmp_path / "victim"
    victim.mkdir()
    (victim / "poetry.lock").write_text("precious\n")
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dh"))
    (tmp_path / "dh").mkdir()
    src = tmp_path / "src"
    src.mkdir()
    (src / "docs.jsonl").write_text('{"text": "one document of docsc"}\n')
    (src / "[").mkdir()
    (src / "[" / ".b]").write_text("x")  # skipped (hidden) as "[/.b]": a closing tag to rich; printed as is
    os.symlink("/etc/hostname", src / "[red]link")  # skipped (outside the source): printed
    return {"root": root, "victim": victim, "src": src, "tmp": tmp_path}


def fm(world: dict, *args: str) -> int:
    return main(["--root", str(world["root"]), *args])


@pytest.mark.parametrize("bad", ESCAPES)
def test_hostile_batch_ids_are_refused_before_any_file_is_touched(world, capsys, bad):
    assert fm(world, "land", str(world["src"]), "--source", "docsc", "--license", "MIT") == 0
    outside = {p: snapshot(p) for p in (world["victim"], world["tmp"] / "dh")}
    inside = snapshot(world["root"])
    capsys.readouterr()
    for args in (
        ["run", bad],
        ["repair", bad],
        ["rejects", bad],
        ["report", bad],
        ["quarantine", "promote", bad, "--to", "cloud", "--reviewer", "r", "--reason", "r"],
        ["quarantine", "reject", bad, "--reviewer", "r", "--reason", "r"],
        ["land", str(world["src"]), "--source", bad, "--license", "MIT"],
        ["revoke", "--source", bad, "--reason", "r"],
    ):
        assert fm(world, *args) == 2, args
        err = capsys.readouterr().err
        assert "is not valid" in err and "Traceback" not in err, (args, err)
    assert {p: snapshot(p) for p in outside} == outside
    assert snapshot(world["root"]) == inside  # no lock file, no record: nothing was touched
    assert (world["victim"] / "poetry.lock").read_text() == "precious\n"


def test_an_unknown_but_well_formed_batch_takes_no_lock(world, capsys):
    assert fm(world, "land", str(world["src"]), "--source", "docsc", "--license", "MIT") == 0
    assert fm(world, "run", "20990101T000000000000Z-nope") == 2
    assert "not complete landing batches" in capsys.readouterr().err
    assert not (world["root"] / "locks").exists()


def test_markup_in_names_reasons_and_reviewers_never_breaks_a_command(world, capsys):
    assert fm(world, "land", str(world["src"]), "--source", "docsc", "--license", "MIT") == 0
    landed = capsys.readouterr()
    assert "[/.b]: hidden" in landed.err and "[red]link" in landed.err  # printed as written
    assert fm(world, "land", str(world["src"]), "--source", "forum", "--license", "MIT", "--namespace",
              "quarantine") == 0  # fmt: skip
    batch = capsys.readouterr().out.strip()
    assert (
        fm(world, "quarantine", "promote", batch, "--to", "cloud", "--reviewer", MARKUP, "--reason", MARKUP)
        == 0
    )
    assert MARKUP in capsys.readouterr().out  # the result, on stdout, printed as written
    assert fm(world, "quarantine", "list") == 0
    assert "<script>alert(1)</script>" in capsys.readouterr().out.replace("\n", "")
    assert (
        fm(world, "revoke", "--source", "docsc", "--reason", MARKUP, "--requested-by", MARKUP, "--no-run")
        == 0
    )
    capsys.readouterr()
    assert fm(world, "audit") == 0
    assert "[/bold][red]<script>" in capsys.readouterr().out
    assert fm(world, "audit", "--format", "md") == 0
    report = capsys.readouterr().out
    assert (
        "<script>" not in report
        and "&lt;script&gt;alert(1)&lt;/script&gt; \\*\\*boom\\*\\* \\| \\`x\\`" in report
    )
    (record,) = (world["root"] / "compliance" / "revocations").glob("*/report.md")
    assert "<script>" not in record.read_text() and "\\[/bold\\]\\[red\\]&lt;script&gt;" in record.read_text()


def test_a_revocation_that_matches_nothing_is_an_error_unless_allowed(world, capsys):
    assert fm(world, "land", str(world["src"]), "--source", "docsc", "--license", "MIT") == 0
    capsys.readouterr()
    assert fm(world, "revoke", "--source", "DocsC", "--reason", "typo") == 2
    typo = capsys.readouterr()
    assert typo.out == "" and len(typo.err.strip().splitlines()) == 1
    assert "matches no landed document" in typo.err and "docsc (MIT)" in typo.err
    assert (
        fm(world, "revoke", "--source", "docsc", "--license", "GPL-3.0-only", "--reason", "wrong licence")
        == 2
    )
    assert "matches no landed document" in capsys.readouterr().err
    assert not (world["root"] / "compliance").exists()  # nothing recorded
    assert fm(world, "revoke", "--source", "DocsC", "--reason", "typo", "--allow-empty") == 0
    allowed = capsys.readouterr()
    assert "nothing matched" in allowed.out and "VERIFIED" not in allowed.out
    (report,) = (world["root"] / "compliance" / "revocations").glob("*/report.md")
    assert "NOTHING MATCHED" in report.read_text() and "VERIFIED:" not in report.read_text()


def test_the_same_revocation_request_resumes_under_the_same_id(world, capsys):
    assert fm(world, "land", str(world["src"]), "--source", "docsc", "--license", "MIT") == 0
    args = ("revoke", "--source", "docsc", "--reason", "LEGAL-1", "--no-run")
    capsys.readouterr()
    assert fm(world, *args) == 0
    first = capsys.readouterr()
    assert fm(world, *args) == 0
    second = capsys.readouterr()
    assert "recorded revocation" in first.err and "resuming revocation" in second.err
    assert len(list((world["root"] / "compliance" / "revocations").glob("*.json"))) == 1
    assert first.out.splitlines()[0] == second.out.splitlines()[0]  # the result goes to stdout, same id


def test_the_sensor_and_the_listing_never_take_a_folder_that_is_not_a_batch_id(world):
    from fm_assets.defs.sensors import LandingCursor, scan_landing
    from fm_assets.engine.landing import list_complete_batches
    from fm_assets.engine.store import ObjectStore

    assert fm(world, "land", str(world["src"]), "--source", "docsc", "--license", "MIT") == 0
    store = ObjectStore(str(world["root"]))
    for name in (
        "a b",
        "[red]x",
        "x;rm -rf y",
    ):  # put there by another tool: complete-looking, not a batch id
        (world["root"] / "landing" / name).mkdir()
        (world["root"] / "landing" / name / "_batch.json").write_text("{}")
    (batch,) = list_complete_batches(store)
    assert scan_landing(store, LandingCursor(), lambda: set()).new == [batch]
