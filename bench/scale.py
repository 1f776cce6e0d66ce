"""Scale benchmark: end-to-end MB/s with 1 and 2 workers, per-stage fixed seconds vs seconds per MB, growth
1x/2x/4x, a 100-doc batch end to end, step start-up seconds, and datatrove's equivalent text pipeline on the
same documents in the same run. Prints one JSON object.

    python bench/scale.py [--workdir DIR] [--docs-per-package N] [--skip-datatrove]
    python bench/scale.py --workers-only [--reps N] [--packages a,b,c] [--fresh-roots]  # 1 vs 2 workers only
    python bench/scale.py --workers-only --large --workers 1,16  # the 16-core target: a batch over 100 MB
    python bench/scale.py --large --export-corpus big.jsonl.xz  # then on a host without network: --corpus big.jsonl.xz
    python bench/scale.py --workers-only --huge  # ~300 MB: how the serial seconds grow with the batch

Documents come from held-out Debian documentation packages (``HELD_OUT``: none of them is in the demo's
sample data, nobody tuned rules for them); ``--packages`` picks others.

Per stage and worker count it reports (``stage_split``): wall (the materialization), units wall (the time
units were running), driver seconds (wall minus units wall, and minus what the driver's own code spread over
the workers, ``spread_task_s`` / ``spread_tasks``, such as near_dedup's exact scoring: planning, prepare,
upstream checks, complete, commit), unit seconds (the sum of every unit's own wall), units, where they ran, the serial fraction
``driver / (driver + unit seconds)`` and an Amdahl projection of the stage to 16 / 64 / 512 cores
(``driver + unit seconds / n``, capped by the unit count), and beside it ``scheduled_wall_s``: the units'
measured seconds handed to n workers in waves, largest input first as the executor does (``unit_s_max`` is
the slowest unit); the gap between the two is what uneven waves cost. The run's own fixed cost (Dagster run set-up,
event writes, release, views: the run's wall minus its stages' walls) is reported as ``outside_stages_s``
and counted as serial in the whole-run projection; ``batch_path`` is the same projection without the release
run, what each batch pays when releases are coalesced (the daemon's ``release_after_preprocess`` sensor, a
backfill's one ``fm run``). A host without pyspark runs near_dedup in-process, as any
host does while a batch plus its earlier batches stay under ``local_max_docs`` (the in-process path imports no
pyspark); only a root over that limit, whose near_dedup would need Spark, runs it as a pass-through. A host
without lance skips the Lance views. What was skipped is named in ``notes``.

Every pipeline run is a fresh ``fm run`` process on a new root (the tokenizer is pinned from a file trained
once up front, so BPE training is not measured). The 1 vs 2 worker comparison first runs a small batch of
other held-out documents on each root, as a root that already processed batches would have (``--fresh-roots``:
not; then every measured run also pays the root's one-time set-up); CPU seconds are the child process tree's user+sys time.
datatrove runs in its own venv (created under the workdir on first use) with its Gopher quality, C4 quality
and Gopher repetition filters, its 4-step MinHash dedup and its HF-tokenizers DocumentTokenizer.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
# held-out documentation (HTML / Mallard): not the demo's sample packages
HELD_OUT = ("git-doc", "debian-reference-en", "developers-reference", "maint-guide", "debian-faq",
            "gnome-devel-docs", "postgresql-doc-15", "apache2-doc")  # fmt: skip
# more held-out documentation, for a batch over 100 MB (--large: the 16-core target's batch size)
MORE_HELD_OUT = ("nodejs-doc", "gimp-help-en", "vim-doc", "kicad-doc-en", "octave-doc", "erlang-doc",
                 "python-django-doc", "cmake-doc", "python-sqlalchemy-doc", "gnucash-docs", "zsh-doc",
                 "sphinx-doc", "bind9-doc", "python-pandas-doc", "debian-policy", "python-sympy-doc",
                 "python-pytest-doc", "python-lxml-doc")  # fmt: skip
# and more, for a batch of ~300 MB (--huge: how the serial seconds grow with the batch); API references
# (rustdoc, javadoc, numpydoc) among them, templated pages as crawled documentation is
EVEN_MORE_HELD_OUT = ("python3.11-doc", "python-sklearn-doc", "python-scipy-doc", "python-astropy-doc",
                      "libreoffice-help-en-us", "sqlite3-doc", "lilypond-doc-html", "libgtk-3-doc",
                      "qt5-doc-html", "rust-doc", "openjdk-17-doc", "texlive-latex-base-doc",
                      "python-requests-doc", "python-setuptools-doc", "bash-doc")  # fmt: skip
CORES = (16, 64, 512)
PYTHON = sys.executable
FM = [PYTHON, "-m", "fm_assets.cli.main"]


def child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def load_docs(workdir: Path, per_package: int | None, packages: tuple[str, ...] = HELD_OUT) -> list[dict]:
    """The documents of ``packages`` (fetched once per package set and cap, then read from the workdir)."""
    import hashlib

    from fm_assets.sample_data import fetch_sample_data

    if packages == HELD_OUT and per_package is None:
        dest = workdir / "sample"  # the folder earlier versions of this bench wrote
    else:
        key = hashlib.sha256(repr((sorted(packages), per_package)).encode()).hexdigest()[:12]
        dest = workdir / f"sample-{key}"
    summary_file = dest / "summary.json"
    if not summary_file.exists():
        summary = fetch_sample_data(
            dest,
            packages=packages,
            max_docs=per_package,
            progress=False,
            source="apt",
            deb_dir=workdir / "debs",
        )
        summary_file.write_text(json.dumps(summary))
    docs = []
    for path in sorted(dest.rglob("docs-*.jsonl")):
        docs += [
            json.loads(line) for line in path.read_text(encoding="utf-8").split("\n") if line
        ]  # not splitlines: a text may hold U+2028
    return docs


def read_corpus(path: Path) -> list[dict]:
    """Documents from a JSONL file (``.jsonl``, ``.jsonl.gz`` or ``.jsonl.xz``), one {"text", "url"} object per
    line: how a host without network (the 16-core device host) gets the held-out corpus (``--export-corpus``)."""
    import gzip
    import lzma

    opener = {".gz": gzip.open, ".xz": lzma.open}.get(path.suffix, open)
    with opener(path, "rt", encoding="utf-8") as lines:
        docs = [json.loads(line) for line in lines if line.strip()]
    missing = [i for i, d in enumerate(docs) if not isinstance(d.get("text"), str) or "url" not in d]
    if missing:
        raise SystemExit(f"{path}: line {missing[0] + 1} has no string 'text' or no 'url'")
    return docs


def write_corpus(path: Path, docs: list[dict]) -> float:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"text": d["text"], "url": d["url"]}) + "\n" for d in docs))
    return path.stat().st_size / 1e6


def train_tokenizer(workdir: Path, docs: list[dict]) -> Path:
    from fm_assets.engine.store import ObjectStore
    from fm_assets.side_inputs.tokenizer import TokenizerRegistry

    out = workdir / "tokenizer.json"
    if not out.exists():
        registry = TokenizerRegistry(ObjectStore(str(workdir / "tok")))
        sha = registry.train_bpe((d["text"] for d in docs), vocab_size=8192)
        out.write_bytes(registry.store.read_bytes(f"tokenizers/{sha}.json"))
    return out


def optional_parts(docs: int = 0) -> tuple[dict[str, str], list[str]]:
    """Settings for what this host lacks, in a root of at most ``docs`` documents (all batches): without
    pyspark, near_dedup's in-process limit raised above ``docs`` where a batch plus its earlier batches could
    reach ``local_max_docs`` (its Spark path); without lance, the Lance views skipped."""
    from fm_assets.transforms.dedup.near_dup.config import NearDedupConfig

    env: dict[str, str] = {}
    notes = []
    if importlib.util.find_spec("pyspark") is None:
        limit = NearDedupConfig().local_max_docs
        if docs >= limit:
            # where near_dedup runs, not what it writes: in process it needs no pyspark (and no JVM)
            env["FM_NEAR_DEDUP_LOCAL_MAX_DOCS"] = str(docs + 1)
            notes.append(
                f"pyspark is not installed and a root holds {docs} >= local_max_docs ({limit}) documents: "
                f"near_dedup ran in-process (FM_NEAR_DEDUP_LOCAL_MAX_DOCS={docs + 1}), where a host with "
                "Spark may run it on Spark"
            )
        else:
            notes.append(
                "pyspark is not installed: near_dedup ran in-process (every batch under local_max_docs)"
            )
    if importlib.util.find_spec("lance") is None:
        env["FM_LANCE_VIEWS"] = "false"
        notes.append("lance is not installed: the Lance views were not written (not measured)")
    return env, notes


def fm_env(root: Path, tokenizer: Path, workers: int, docs: int = 0) -> dict[str, str]:
    """The environment of every ``fm`` command on ``root``, which will hold ``docs`` documents in all."""
    # Python's bytecode cache on, as on a default install: a host that sets PYTHONDONTWRITEBYTECODE would
    # otherwise recompile the project's ~200 modules (they are not installed as compiled files) in every run
    inherited = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return {
        **inherited,
        **optional_parts(docs)[0],
        "FM_ROOT": str(root),
        "DAGSTER_HOME": str(root / "dagster_home"),
        "FM_TOKENIZER_FILE": str(tokenizer),
        "FM_WORKERS": str(workers),
        "FM_PROGRESS": "0",
    }


def land(root: Path, corpus: Path, source: str, env: dict[str, str]) -> str:
    landed = subprocess.run([*FM, "land", str(corpus), "--source", source, "--license", "CC-BY-SA-3.0"],
                            env=env, check=True, capture_output=True, text=True)  # fmt: skip
    return landed.stdout.strip().splitlines()[-1]


def _steps(instance: Any, run_id: str) -> tuple[dict[str, float], float, float, float]:
    """(step -> seconds, RUN_START, RUN_SUCCESS/FAILURE, creation) timestamps of one run."""
    from dagster import DagsterEventType

    starts: dict[str, float] = {}
    steps: dict[str, float] = {}
    run_start = run_end = 0.0
    for entry in instance.all_logs(run_id):
        event = entry.dagster_event
        if event is None:
            continue
        if event.event_type == DagsterEventType.RUN_START:
            run_start = entry.timestamp
        elif event.event_type in (DagsterEventType.RUN_SUCCESS, DagsterEventType.RUN_FAILURE):
            run_end = entry.timestamp
        elif event.event_type == DagsterEventType.STEP_START and entry.step_key:
            starts[entry.step_key] = entry.timestamp
        elif event.event_type == DagsterEventType.STEP_SUCCESS and entry.step_key in starts:
            steps[entry.step_key] = entry.timestamp - starts[entry.step_key]
    created = instance.get_run_record_by_id(run_id).create_timestamp.timestamp()
    return steps, run_start, run_end, created


def timeline(env: dict[str, str], started: float, ended: float, stage_wall: float) -> dict[str, Any]:
    """Where one ``fm run``'s seconds went, from its two Dagster runs' event logs: process start to the first
    run's creation, each run's set-up, the preprocess steps and Dagster's seconds around the stages (step wall
    minus ``stage_wall``: checks, events), the gaps, the release's steps by name, and the exit."""
    from dagster import DagsterInstance

    with DagsterInstance.from_config(env["DAGSTER_HOME"]) as instance:
        runs = sorted(instance.get_runs(limit=2), key=lambda run: run.job_name != "preprocess")
        (pre_steps, pre_start, pre_end, pre_created), (rel_steps, rel_start, rel_end, rel_created) = (
            _steps(instance, run.run_id) for run in runs
        )
    pre_step_s = sum(pre_steps.values())
    return {
        "start_to_first_run_s": round(pre_created - started, 3),
        "preprocess_setup_s": round(pre_start - pre_created, 3),
        "preprocess_steps_s": round(pre_step_s, 3),
        "dagster_around_stages_s": round(pre_step_s - stage_wall, 3),
        "preprocess_between_steps_s": round(pre_end - pre_start - pre_step_s, 3),
        "between_runs_s": round(rel_created - pre_end, 3),
        "release_setup_s": round(rel_start - rel_created, 3),
        "release_steps_s": {step: round(seconds, 3) for step, seconds in sorted(rel_steps.items())},
        "release_between_steps_s": round(rel_end - rel_start - sum(rel_steps.values()), 3),
        "last_run_to_exit_s": round(ended - rel_end, 3),
        # the batch's own part (start-up and its preprocess run) and what the release run added after it
        "until_preprocess_end_s": round(pre_end - started, 3),
        "release_run_s": round(ended - pre_end, 3),
    }


def run_pipeline(root: Path, env: dict[str, str], *batches: str) -> dict:
    """One ``fm run`` (the given batches, default all, + release); wall, CPU and the per-stage report, and
    (``started_at``/``ended_at``) when it ran, for :func:`timeline`."""
    cpu_before = child_cpu()
    started_at = time.time()
    started = time.perf_counter()
    proc = subprocess.run([*FM, "run", *batches], env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    ended_at = time.time()
    if proc.returncode != 0:
        raise RuntimeError(f"fm run failed:\n{proc.stderr[-3000:]}")
    report = subprocess.run([*FM, "report", "--json"], env=env, capture_output=True, text=True, check=True)
    return {"wall_s": wall, "cpu_s": child_cpu() - cpu_before, "stages": json.loads(report.stdout),
            "split": stage_split(root), "started_at": started_at, "ended_at": ended_at}  # fmt: skip


def amdahl(
    driver: float,
    unit_seconds: float,
    units: int,
    cores: int,
    aux_s: float = 0.0,
    aux_units: int = 0,
    spread_s: float = 0.0,
    spread_tasks: int = 0,
) -> float:
    """Projected wall on ``cores``: the driver's seconds stay, unit seconds spread over min(cores, units), and
    the units of the stage's auxiliary outputs (run before its own, e.g. near_dedup's signatures) likewise, as
    do the tasks its driver hands to ``pool.map_on_workers`` (``spread_s``: near_dedup's exact scoring)."""
    return (
        driver
        + unit_seconds / max(1, min(cores, units))
        + aux_s / max(1, min(cores, aux_units))
        + spread_s / max(1, min(cores, spread_tasks))
    )


def list_schedule(units: Sequence[tuple[int, float]], workers: int) -> float:
    """Wall of ``units`` ((expected cost, seconds) each) on ``workers`` processes handed out as the executor
    does, largest expected cost first (``run.largest_first``: bytes read plus a weight per row read), each to
    the first worker free: the waves a stage's units really make, where ``amdahl`` assumes they spread
    evenly."""
    import heapq

    free = [0.0] * max(1, workers)
    for _, seconds in sorted(units, key=lambda unit: -unit[0]):
        heapq.heapreplace(free, free[0] + seconds)
    return max(free)


def stage_split(root: Path, only: tuple[str, ...] = ()) -> dict[str, dict]:
    """Per stage (summed over batches, or over ``only``): wall, units wall, driver s, unit s, units, where,
    serial fraction, Amdahl projections, read from the refs and ``_SUCCESS.json`` the run wrote. Units of a
    stage's auxiliary outputs (``aux_outputs``: they run inside its wall) count as its ``aux_unit_s`` /
    ``aux_units``, and the tasks its driver spread over the workers (``pool.map_on_workers``, metered in
    ``_SUCCESS.json``'s ``driver_spread_*`` cost) as its ``spread_task_s`` / ``spread_tasks``: not as driver
    time. ``unit_check_s``: the part of ``unit_s`` its units spent on the stage's in-unit checks
    (``StageCheck.in_unit``)."""
    from fm_assets.engine import layout
    from fm_assets.engine.refs import read_ref, read_success
    from fm_assets.engine.run import ROW_WEIGHT_BYTES
    from fm_assets.engine.store import ObjectStore
    from fm_assets.stages.registry import CHAIN_NAMES

    store = ObjectStore(str(root))
    batches = (
        sorted(p.name for p in (root / "stages" / "land").iterdir())
        if (root / "stages" / "land").exists()
        else []
    )
    if only:
        batches = [batch for batch in batches if batch in only]
    split: dict[str, dict] = {}
    for stage in CHAIN_NAMES["text"]:
        row = {"wall_s": 0.0, "units_wall_s": 0.0, "driver_s": 0.0, "unit_s": 0.0, "units": 0, "where": set()}
        row["unit_list"] = []
        row["unit_cpu_s"] = 0.0  # above unit_s: a unit's libraries ran threads (tokenizers, pyarrow)
        row |= {"aux_unit_s": 0.0, "aux_units": 0, "check_wall_s": 0.0, "check_task_s": 0.0, "check_tasks": 0}
        row |= {"spread_task_s": 0.0, "spread_tasks": 0, "unit_check_s": 0.0}  # unit_check_s: within unit_s
        for batch in batches:
            ref = read_ref(store, stage, batch)
            if ref is None:
                continue
            success = read_success(store, stage, batch)
            wall = ref.last_wall_seconds or 0.0
            units_wall = float(success.cost.get("units_wall_seconds", 0.0))
            for prefix in success.artifacts.get("aux_outputs") or []:
                aux = store.read_json(f"{prefix}/_SUCCESS.json")
                units_wall += float(aux["cost"].get("units_wall_seconds", 0.0))
                row["aux_unit_s"] += float(aux["cost"].get("unit_seconds", 0.0))
                row["aux_units"] += len(aux["units"])
            spread_wall = float(success.cost.get("driver_spread_wall_seconds", 0.0))
            row["spread_task_s"] += float(success.cost.get("driver_spread_task_seconds", 0.0))
            row["spread_tasks"] += int(success.cost.get("driver_spread_tasks", 0))
            row["wall_s"] += wall
            row["units_wall_s"] += units_wall
            row["driver_s"] += max(0.0, wall - units_wall - spread_wall)
            row["unit_s"] += float(success.cost.get("unit_seconds", 0.0))
            row["unit_check_s"] += float(success.cost.get("unit_check_seconds", 0.0))
            row["unit_cpu_s"] += float(success.cost.get("cpu_seconds", 0.0))
            row["units"] += len(success.units)
            row["where"].add(success.cost.get("units_where", "?"))
            for unit in success.units:
                marker = store.read_json(layout.unit_marker(success.prefix, unit))
                # the executor's order: bytes read plus ROW_WEIGHT_BYTES a row read (rows known past land)
                rows_read = int(marker.get("records_in", 0)) if stage != "land" else 0
                expected = int(marker.get("bytes_read", 0)) + ROW_WEIGHT_BYTES * rows_read
                row["unit_list"].append((expected, float(marker["seconds"])))
            costs_rel = layout.check_costs(success.prefix)  # written when the checks were evaluated
            for cost in (store.read_json(costs_rel) if store.exists(costs_rel) else {}).values():
                row["check_wall_s"] += float(cost["wall_seconds"])
                row["check_task_s"] += float(cost["task_seconds"])
                row["check_tasks"] += int(cost["tasks"])
        total = row["driver_s"] + row["unit_s"] + row["aux_unit_s"] + row["spread_task_s"]
        row["where"] = sorted(row["where"])
        row["serial_fraction"] = round(row["driver_s"] / total, 4) if total else None
        row["amdahl_wall_s"] = {
            n: round(
                amdahl(
                    row["driver_s"],
                    row["unit_s"],
                    row["units"],
                    n,
                    row["aux_unit_s"],
                    row["aux_units"],
                    row["spread_task_s"],
                    row["spread_tasks"],
                ),
                3,
            )
            for n in CORES
        }
        unit_list = row.pop("unit_list")
        row["unit_s_max"] = max((seconds for _, seconds in unit_list), default=0.0)
        # as amdahl_wall_s, but the units in the waves they make on n workers (their measured seconds)
        row["scheduled_wall_s"] = {
            n: round(
                row["driver_s"]
                + list_schedule(unit_list, n)
                + row["aux_unit_s"] / max(1, min(n, row["aux_units"]))
                + row["spread_task_s"] / max(1, min(n, row["spread_tasks"])),
                3,
            )
            for n in CORES
        }
        split[stage] = {k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()}
    return split


def spread_outside_stages(root: Path, split: dict[str, dict], workers: int) -> list[dict]:
    """The work outside the stages' walls that spreads over the workers (``pool.map_on_workers``): each stage's
    checks (``_checks_cost.json``: their wall, their tasks' seconds) and the release's Iceberg data files and
    Lance rows (the last ``curated_documents`` / ``documents_lance`` materialization's ``spread_*`` metadata;
    their wall there estimated as task seconds over min(workers, tasks)). Each item: wall_s (what it took in
    the run), task_s, tasks."""
    items = [
        {
            "what": f"{stage} checks",
            "wall_s": row["check_wall_s"],
            "task_s": row["check_task_s"],
            "tasks": row["check_tasks"],
        }
        for stage, row in split.items()
        if row.get("check_tasks")
    ]
    from dagster import AssetKey, DagsterInstance

    with DagsterInstance.from_config(str(root / "dagster_home")) as instance:
        for asset in ("curated_documents", "documents_lance"):  # the data files; the rows' text read
            event = instance.get_latest_materialization_event(AssetKey(asset))
            metadata = event.asset_materialization.metadata if event and event.asset_materialization else {}
            if "spread_tasks" not in metadata or not metadata["spread_tasks"].value:
                continue
            tasks = int(metadata["spread_tasks"].value)
            task_s = float(metadata["spread_task_seconds"].value)
            wall_s = task_s / max(1, min(workers, tasks))
            items.append({"what": asset, "wall_s": wall_s, "task_s": task_s, "tasks": tasks})
    return items


def run_projection(
    wall: float, split: dict[str, dict], spread: Sequence[dict] = (), workers: int = 1
) -> dict:
    """The whole run: what is outside the stages (run set-up, release, views) is serial except what spreads
    over the workers (``spread``: checks, the release's data files: their task seconds over their tasks, the
    rest of their wall serial), and each stage follows its own Amdahl projection (its driver seconds serial,
    its unit seconds over its units)."""
    stage_wall = sum(row["wall_s"] for row in split.values())
    outside = max(0.0, wall - stage_wall)
    serial_outside = max(0.0, outside - sum(item["wall_s"] for item in spread))
    spread_driver = [
        max(0.0, item["wall_s"] - item["task_s"] / max(1, min(workers, item["tasks"]))) for item in spread
    ]
    driver = serial_outside + sum(row["driver_s"] for row in split.values()) + sum(spread_driver)
    unit_s = sum(row["unit_s"] + row["aux_unit_s"] + row["spread_task_s"] for row in split.values()) + sum(
        i["task_s"] for i in spread
    )
    serial_total = driver + unit_s
    projected = {
        n: serial_outside
        + sum(row["amdahl_wall_s"][n] for row in split.values())
        + sum(
            d + i["task_s"] / max(1, min(n, i["tasks"])) for d, i in zip(spread_driver, spread, strict=True)
        )
        for n in CORES
    }
    scheduled = {
        n: projected[n] - sum(row["amdahl_wall_s"][n] - row["scheduled_wall_s"][n] for row in split.values())
        for n in CORES
    }
    return {
        "outside_stages_s": round(outside, 3),
        "outside_stages_serial_s": round(serial_outside, 3),
        "spread_outside_stages": [
            {k: round(v, 3) if isinstance(v, float) else v for k, v in i.items()} for i in spread
        ],
        "driver_s": round(driver, 3),
        "unit_s": round(unit_s, 3),
        "serial_fraction": round(driver / (driver + unit_s), 4) if driver + unit_s else None,
        "amdahl_wall_s": {n: round(t, 2) for n, t in projected.items()},
        "amdahl_speedup": {n: round(serial_total / t, 2) if t else None for n, t in projected.items()},
        "scheduled_wall_s": {n: round(t, 2) for n, t in scheduled.items()},  # the stages' units in waves
        "scheduled_speedup": {n: round(serial_total / t, 2) if t else None for n, t in scheduled.items()},
    }


# the spread_outside_stages items that run inside the release run
RELEASE_SPREAD = ("curated_documents", "documents_lance")


def batch_path_projection(
    wall: float, split: dict[str, dict], spread: Sequence[dict], workers: int, timeline: dict[str, Any]
) -> dict | None:
    """``run_projection`` of the run without its release run (from the preprocess run's end to the release
    run's end; the exit stays): what each batch pays when releases are coalesced, as the daemon's
    ``release_after_preprocess`` sensor and a backfill's one ``fm run`` do. None without a release run."""
    release = timeline.get("release_run_s")
    if release is None:
        return None
    batch_wall = wall - release + float(timeline.get("last_run_to_exit_s") or 0.0)
    kept = [item for item in spread if item["what"] not in RELEASE_SPREAD]
    return run_projection(batch_wall, split, kept, workers)


def start_up_seconds(env: dict[str, str]) -> float:
    """What a fresh process pays before a step can run: importing the code location and building Definitions."""
    code = "import fm_assets.definitions"
    started = time.perf_counter()
    subprocess.run([PYTHON, "-c", code], env=env, check=True, capture_output=True)
    return time.perf_counter() - started


WARM_UP_DOCS = 200  # documents of the batch that warms a root before the measured one (not measured)


def workers_case(
    workdir: Path,
    docs: list[dict],
    tokenizer: Path,
    reps: int,
    warm: bool = True,
    counts: tuple[int, int] = (1, 2),
) -> dict:
    """``counts`` workers (1 and 2 by default) on the same held-out corpus, interleaved ``reps`` times; shard
    bytes compared.

    ``warm``: each root first lands and runs a small batch of other held-out documents (``WARM_UP_DOCS``,
    the corpus's last ones, not in the measured batch), so the measured ``fm run <batch>`` finds what a root
    that already processed batches has: the Dagster instance's storage created, the tokenizer pinned, the eval
    index stored, an earlier near-dup index to join against. Without it every run also pays a fresh root's
    one-time set-up (the instance's SQLite schemas alone take ~1 s)."""
    warm_docs, measured = (docs[-WARM_UP_DOCS:], docs[:-WARM_UP_DOCS]) if warm else ([], docs)
    few, many = counts
    walls: dict[int, list[float]] = {few: [], many: []}
    cpus: dict[int, list[float]] = {few: [], many: []}
    splits: dict[int, dict] = {}
    timelines: dict[int, dict] = {}
    shards: dict[int, dict[str, str]] = {}
    for rep in range(reps):
        for workers in counts:
            name = f"workers_{workers}_r{rep}"
            case = pipeline_case(workdir, name, measured, tokenizer, workers, warm_docs)
            walls[workers].append(case["wall_s"])
            cpus[workers].append(case["cpu_s"])
            root = workdir / "roots" / name
            spread = spread_outside_stages(root, case["split"], workers)
            run = run_projection(case["wall_s"], case["split"], spread, workers)
            batch_path = batch_path_projection(
                case["wall_s"], case["split"], spread, workers, case["timeline"]
            )
            splits[workers] = {"stages": case["split"], "run": run, "batch_path": batch_path}
            timelines[workers] = case["timeline"]
            shards[workers] = shard_digests(workdir / "roots" / name, case["batch"])
    ratios = sorted(one / other for one, other in zip(walls[few], walls[many], strict=True))
    target = (
        "2 workers >= 1.6x 1 worker on >= 30 MB"
        if counts == (1, 2)
        else "16 workers >= 10x 1 worker on >= 100 MB, serial fraction <= 5%"
        if counts == (1, 16)
        else "none set for these worker counts"
    )
    return {
        "root": "warm (one earlier batch run)" if warm else "fresh",
        "corpus_mb": round(sum(len(d["text"].encode()) for d in measured) / 1e6, 2),
        "docs": len(measured),
        "cpus": os.cpu_count(),
        "wall_s": {w: [round(x, 2) for x in v] for w, v in walls.items()},
        # CPU seconds of the fm run process and the children it reaped: the whole run with 1 worker (whose units'
        # libraries still run threads: cpu_s / wall_s above 1 means the 1-worker run is not one core's work),
        # but not the unit workers of a pool, which the fork server forks; their CPU is in unit_cpu_s
        "cpu_s": {w: [round(x, 2) for x in v] for w, v in cpus.items()},
        # the units' own CPU seconds (their markers; the last rep), for any worker count
        "unit_cpu_s": {
            w: round(sum(row["unit_cpu_s"] for row in split["stages"].values()), 2)
            for w, split in splits.items()
        },
        f"speedup_{many}_vs_{few}": {
            "min": round(ratios[0], 3),
            "median": round(statistics.median(ratios), 3),
        },
        # the last rep's pair from each run's start to its preprocess run's end: the release run and the exit
        # left out, as a batch pays when releases are coalesced (measured, where batch_path projects)
        f"speedup_{many}_vs_{few}_until_preprocess_end": round(
            timelines[few]["until_preprocess_end_s"] / timelines[many]["until_preprocess_end_s"], 3
        ),
        "identical_shard_bytes": bool(shards[few]) and shards[few] == shards[many],
        "split": splits,
        # where the seconds outside the stages went (the last rep's runs): start-up, Dagster set-up and the
        # seconds around the stages (checks, events), the release's steps, exit
        "timeline": timelines,
        "target": target,
    }


def shard_digests(root: Path, batch: str | None = None) -> dict[str, str]:
    """sha256 of every shard (of ``batch`` only, when given) by file name."""
    import hashlib

    folder = root / "stages" / "shard" / batch if batch else root / "stages" / "shard"
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*.tar"))}


def pipeline_case(
    workdir: Path,
    name: str,
    docs: list[dict],
    tokenizer: Path,
    workers: int,
    warm_docs: list[dict] | None = None,
) -> dict:
    """One ``fm run`` of ``docs`` as one batch on a new root (first warmed with a run of ``warm_docs``, when
    given: only the measured batch's run is timed and split)."""
    root = workdir / "roots" / name
    subprocess.run(["rm", "-rf", str(root)], check=True)
    env = fm_env(root, tokenizer, workers, len(docs) + len(warm_docs or []))
    if warm_docs:
        write_corpus(workdir / "corpora" / f"{name}-warm.jsonl", warm_docs)
        run_pipeline(root, env, land(root, workdir / "corpora" / f"{name}-warm.jsonl", "warm-up", env))
    mb = write_corpus(workdir / "corpora" / f"{name}.jsonl", docs)
    # one source name for every case: the batch and source columns count towards the bytes at which a unit's
    # output rolls into its next part, so a longer name would move part boundaries and change shard bytes
    batch = land(root, workdir / "corpora" / f"{name}.jsonl", "held-out", env)
    result = run_pipeline(root, env, batch)
    result["split"] = stage_split(root, only=(batch,))
    stage_wall = sum(row["wall_s"] for row in result["split"].values())
    result["timeline"] = timeline(env, result.pop("started_at"), result.pop("ended_at"), stage_wall)
    per_stage = {}
    for row in result.pop("stages"):
        if row.get("batch", batch) == batch:
            per_stage[row["stage"]] = per_stage.get(row["stage"], 0.0) + (row["wall_seconds"] or 0.0)
    return {"docs": len(docs), "mb": round(mb, 3), "workers": workers, "batch": batch, **result,
            "stage_wall_s": per_stage, "mb_per_s": round(mb / result["wall_s"], 4),
            "docs_per_cpu_s": round(len(docs) / result["cpu_s"], 2)}  # fmt: skip


def linear_fit(points: list[tuple[float, float]]) -> tuple[float, float]:
    """Least squares y = a + b x: (fixed seconds, seconds per MB)."""
    n = len(points)
    mean_x = sum(x for x, _ in points) / n
    mean_y = sum(y for _, y in points) / n
    var = sum((x - mean_x) ** 2 for x, _ in points) or 1e-12
    slope = sum((x - mean_x) * (y - mean_y) for x, y in points) / var
    return mean_y - slope * mean_x, slope


DATATROVE_SCRIPT = """
import sys, time
from datatrove.executor import LocalPipelineExecutor
from datatrove.pipeline.dedup import MinhashDedupBuckets, MinhashDedupCluster, MinhashDedupFilter, MinhashDedupSignature
from datatrove.pipeline.dedup.minhash import MinhashConfig
from datatrove.pipeline.filters import C4QualityFilter, GopherQualityFilter, GopherRepetitionFilter
from datatrove.pipeline.readers import JsonlReader
from datatrove.pipeline.tokens import DocumentTokenizer
from datatrove.pipeline.writers import JsonlWriter

corpus, work, tokenizer = sys.argv[1], sys.argv[2], sys.argv[3]
cfg = MinhashConfig()
def run(steps):
    LocalPipelineExecutor(pipeline=steps, tasks=1, workers=1, logging_dir=f"{work}/logs/{len(steps)}-{time.time()}").run()
run([JsonlReader(corpus, glob_pattern="*.jsonl"), GopherRepetitionFilter(), GopherQualityFilter(), C4QualityFilter(),
     JsonlWriter(f"{work}/filtered"), MinhashDedupSignature(f"{work}/sigs", config=cfg)])
LocalPipelineExecutor(pipeline=[MinhashDedupBuckets(f"{work}/sigs", f"{work}/buckets", config=cfg)], tasks=cfg.num_buckets,
                      workers=1, logging_dir=f"{work}/logs/buckets").run()
run([MinhashDedupCluster(f"{work}/buckets", f"{work}/remove_ids", config=cfg)])
run([JsonlReader(f"{work}/filtered"), MinhashDedupFilter(f"{work}/remove_ids"),
     DocumentTokenizer(f"{work}/tokens", tokenizer_name_or_path=tokenizer, eos_token="<|endoftext|>")])
"""


def datatrove_case(workdir: Path, docs: list[dict], tokenizer: Path) -> dict:
    venv = workdir / ".venv-datatrove"
    if not (venv / "bin" / "python").exists():
        subprocess.run([PYTHON, "-m", "venv", str(venv)], check=True)
        subprocess.run(
            [str(venv / "bin" / "pip"), "install", "-q", "datatrove[io,processing]", "orjson", "spacy"],
            check=True,
        )
    corpus_dir = workdir / "datatrove_in"
    corpus_dir.mkdir(parents=True, exist_ok=True)
    write_corpus(corpus_dir / "docs.jsonl", docs)
    with tempfile.TemporaryDirectory(dir=workdir) as work:
        cpu_before = child_cpu()
        started = time.perf_counter()
        proc = subprocess.run([str(venv / "bin" / "python"), "-c", DATATROVE_SCRIPT, str(corpus_dir), work, str(tokenizer)],
                              capture_output=True, text=True)  # fmt: skip
        wall = time.perf_counter() - started
        if proc.returncode != 0:
            raise RuntimeError(f"datatrove failed:\n{proc.stderr[-3000:]}")
    cpu = child_cpu() - cpu_before
    return {"docs": len(docs), "wall_s": wall, "cpu_s": cpu, "docs_per_cpu_s": round(len(docs) / cpu, 2)}


def peer_case(workdir: Path, docs: list[dict], tokenizer: Path, reps: int) -> dict:
    """``fm run`` with one worker and datatrove's equivalent pipeline on the same documents, interleaved
    ``reps`` times: documents per CPU-second of each and their ratio per pair (both single-process)."""
    pairs = []
    for rep in range(reps):
        ours = pipeline_case(workdir, f"peer_{rep}", docs, tokenizer, workers=1)
        peer = datatrove_case(workdir, docs, tokenizer)
        pairs.append({
            "ours_docs_per_cpu_s": ours["docs_per_cpu_s"], "ours_cpu_s": ours.get("cpu_s"), "ours_wall_s": ours["wall_s"],
            "datatrove_docs_per_cpu_s": peer["docs_per_cpu_s"], "datatrove_cpu_s": round(peer["cpu_s"], 2),
            "datatrove_wall_s": round(peer["wall_s"], 2), "ratio": round(ours["docs_per_cpu_s"] / peer["docs_per_cpu_s"], 3),
            "load": os.getloadavg(),
        })  # fmt: skip
    return {"docs": len(docs), "pairs": pairs, "median_ratio": statistics.median(p["ratio"] for p in pairs),
            "target": ">= 3"}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--workdir", type=Path, default=REPO / "bench" / "results" / "scale")
    parser.add_argument("--docs-per-package", type=int, default=1500)
    parser.add_argument("--skip-datatrove", action="store_true")
    parser.add_argument("--workers-only", action="store_true", help="only the 1 vs 2 worker comparison")
    parser.add_argument(
        "--fresh-roots",
        action="store_true",
        help="--workers-only on fresh roots (each run also pays a root's one-time set-up), not warmed ones",
    )
    parser.add_argument(
        "--peer-only",
        action="store_true",
        help="only fm run (1 worker) vs datatrove, --reps times interleaved",
    )
    parser.add_argument(
        "--reps", type=int, default=2, help="interleaved repetitions of the worker comparison"
    )
    parser.add_argument(
        "--packages", default=",".join(HELD_OUT), help="Debian documentation packages to read"
    )
    parser.add_argument(
        "--large",
        action="store_true",
        help=f"read {len(HELD_OUT) + len(MORE_HELD_OUT)} held-out packages (a batch over 100 MB) instead of --packages",
    )
    parser.add_argument(
        "--corpus",
        type=Path,
        help="read the documents from this JSONL(.gz/.xz) file instead of Debian packages",
    )
    parser.add_argument(
        "--export-corpus",
        type=Path,
        help="write the documents to this .jsonl.xz file and stop (for --corpus)",
    )
    parser.add_argument(
        "--huge",
        action="store_true",
        help=f"read {len(HELD_OUT) + len(MORE_HELD_OUT) + len(EVEN_MORE_HELD_OUT)} held-out packages (a batch "
        "of ~300 MB) instead of --packages",
    )
    parser.add_argument(
        "--workers", default="1,2", help="--workers-only: the two worker counts compared (default 1,2)"
    )
    args = parser.parse_args()
    workdir: Path = args.workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)

    if args.huge:
        packages = HELD_OUT + MORE_HELD_OUT + EVEN_MORE_HELD_OUT
    elif args.large:
        packages = HELD_OUT + MORE_HELD_OUT
    else:
        packages = tuple(p for p in args.packages.split(",") if p)
    counts = tuple(int(n) for n in args.workers.split(","))
    if len(counts) != 2 or min(counts) < 1:
        parser.error("--workers takes two worker counts, for example 1,16")
    if args.corpus or args.export_corpus or args.workers_only or args.peer_only:
        docs = read_corpus(args.corpus) if args.corpus else load_docs(workdir, None, packages)
    if args.export_corpus:
        import lzma

        lines = "".join(json.dumps({"text": d["text"], "url": d["url"]}) + "\n" for d in docs)
        args.export_corpus.write_bytes(lzma.compress(lines.encode("utf-8")))
        print(json.dumps({"exported": str(args.export_corpus), "docs": len(docs),
                          "bytes": args.export_corpus.stat().st_size}))  # fmt: skip
        return
    if args.workers_only:
        notes = optional_parts(len(docs))[1]  # every root of this mode holds the whole corpus
        tokenizer = train_tokenizer(workdir, docs)
        result = {
            "load": os.getloadavg(),
            "notes": notes,
            **workers_case(workdir, docs, tokenizer, args.reps, not args.fresh_roots, (counts[0], counts[1])),
        }
        json.dump(result, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return
    if args.peer_only:
        notes = optional_parts(len(docs))[1]
        tokenizer = train_tokenizer(workdir, docs)
        json.dump({"load": os.getloadavg(), "notes": notes, **peer_case(workdir, docs, tokenizer, args.reps)},
                  sys.stdout, indent=2)  # fmt: skip
        sys.stdout.write("\n")
        return
    if not args.corpus:
        docs = load_docs(workdir, args.docs_per_package, packages)
    largest_root = max(len(docs), len(docs) // 4 + 100)  # growth_4x's, or growth_1x's with the small batch
    notes = optional_parts(largest_root)[1]
    tokenizer = train_tokenizer(workdir, docs)
    quarter = len(docs) // 4
    growth = {f"{k}x": pipeline_case(workdir, f"growth_{k}x", docs[: quarter * k], tokenizer, workers=2)
              for k in (1, 2, 4)}  # fmt: skip
    # the largest corpus amortizes the fixed costs best: the worker comparison and the peer run use it
    one_worker = pipeline_case(workdir, "workers_1", docs[: quarter * 4], tokenizer, workers=1)

    # a 100-doc batch landed into a root whose earlier batch already ran (warm: tokenizer pinned, caches hot),
    # run the way the sensor runs it: that partition, then the release
    warm_root = workdir / "roots" / "growth_1x"
    env = fm_env(warm_root, tokenizer, 2, quarter + 100)
    write_corpus(workdir / "corpora" / "small.jsonl", docs[-100:])
    small_batch = land(warm_root, workdir / "corpora" / "small.jsonl", "small-batch", env)
    small = run_pipeline(warm_root, env, small_batch)
    small.pop("stages")

    stages = sorted({s for case in growth.values() for s in case["stage_wall_s"]})
    fits = {}
    for stage in stages:
        fixed, per_mb = linear_fit(
            [(case["mb"], case["stage_wall_s"].get(stage, 0.0)) for case in growth.values()]
        )
        fits[stage] = {"fixed_s": round(fixed, 3), "s_per_mb": round(per_mb, 3)}
    result = {
        "notes": notes,
        "load": os.getloadavg(),
        "docs_total": len(docs),
        "stage_split_1_worker": one_worker["split"],
        "run_projection_1_worker": run_projection(one_worker["wall_s"], one_worker["split"]),
        "growth": growth,
        "workers_1_vs_2": {
            "mb_per_s_1": one_worker["mb_per_s"],
            "mb_per_s_2": growth["4x"]["mb_per_s"],
            "speedup": round(growth["4x"]["mb_per_s"] / one_worker["mb_per_s"], 3),
            "corpus_mb": growth["4x"]["mb"],
            "target": ">= 1.8",
        },
        "growth_4x_time_ratio": round(growth["4x"]["wall_s"] / growth["1x"]["wall_s"], 3),
        "growth_target": "4x data <= 4.4x time",
        "stage_fixed_vs_per_mb": fits,
        "small_batch_100_docs_warm_s": round(small["wall_s"], 2),
        "small_batch_target": "< 10 s",
        "step_start_up_s": round(start_up_seconds(env), 2),
    }
    if not args.skip_datatrove:
        peer = datatrove_case(workdir, docs[: quarter * 4], tokenizer)
        # one worker against datatrove's one: the CPU of pool workers (forkserver grandchildren) is not in
        # RUSAGE_CHILDREN, so multi-worker docs/CPU-s would flatter us
        ours = one_worker["docs_per_cpu_s"]
        result["datatrove"] = {**peer, "ours_docs_per_cpu_s": ours, "ratio": round(ours / peer["docs_per_cpu_s"], 3),
                               "target": ">= 3"}  # fmt: skip
    json.dump(result, sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
