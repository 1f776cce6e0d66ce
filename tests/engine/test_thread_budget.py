"""Unit workers size the native libraries' thread pools to their share of the host's cores."""

from __future__ import annotations

import os

import pytest

from fm_assets.engine.pool import map_on_workers, resolve_workers, spread_over
from fm_assets.engine.thread_budget import apply_thread_budget, thread_environment, threads_per_worker


@pytest.mark.parametrize(
    ("cores", "workers", "threads"), [(16, 1, 16), (16, 4, 4), (16, 5, 3), (16, 16, 1), (2, 16, 1), (8, 0, 8)]
)
def test_each_worker_gets_its_share_of_the_cores(cores: int, workers: int, threads: int) -> None:
    assert threads_per_worker(cores, workers) == threads


def test_one_thread_also_turns_off_hf_tokenizers_parallelism() -> None:
    assert thread_environment(1)["TOKENIZERS_PARALLELISM"] == "false"
    assert "TOKENIZERS_PARALLELISM" not in thread_environment(4)
    assert thread_environment(4)["RAYON_NUM_THREADS"] == "4"


def test_a_setting_the_user_made_is_kept() -> None:
    environ = {"RAYON_NUM_THREADS": "7"}
    apply_thread_budget(2, environ)
    assert environ["RAYON_NUM_THREADS"] == "7"
    assert environ["OMP_NUM_THREADS"] == "2"


def worker_threads(_: int) -> tuple[str | None, int, int]:
    import pyarrow

    return os.environ.get("RAYON_NUM_THREADS"), pyarrow.cpu_count(), os.getpid()


def test_pool_workers_run_with_their_share(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("RAYON_NUM_THREADS", "OMP_NUM_THREADS"):
        monkeypatch.delenv(name, raising=False)
    expected = threads_per_worker(resolve_workers(0), 3)
    with spread_over(3):
        seen = map_on_workers(worker_threads, list(range(6)))
    assert {pid for _, _, pid in seen} - {os.getpid()}, "the calls ran on pool workers"
    assert {(rayon, arrow) for rayon, arrow, _ in seen} == {(str(expected), expected)}
    assert "RAYON_NUM_THREADS" not in os.environ  # the driver keeps the libraries' defaults
