"""import_in_background: modules are imported on a daemon thread; one that fails is skipped, not raised."""

from __future__ import annotations

import sys

from fm_assets.engine.background_imports import import_in_background


def test_modules_are_imported_and_a_broken_one_is_skipped(tmp_path, monkeypatch):
    (tmp_path / "fm_bg_broken.py").write_text("raise ImportError('not installed here')\n")
    (tmp_path / "fm_bg_present.py").write_text("VALUE = 42\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("fm_bg_broken", "fm_bg_present"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    thread = import_in_background(["fm_bg_broken", "fm_bg_present"])
    thread.join(timeout=30)
    assert thread.daemon and not thread.is_alive()
    assert "fm_bg_broken" not in sys.modules
    assert sys.modules["fm_bg_present"].VALUE == 42


def test_idle_work_starts_once_when_the_driver_waits_on_workers_and_never_in_process() -> None:
    from pool_helpers import ModulesJob

    from fm_assets.engine.pool import UnitTask, dump_job, run_in_process, run_on_processes, when_driver_waits
    from fm_assets.engine.stage import WorkUnit

    tasks = [UnitTask(i, WorkUnit(f"u{i}", ())) for i in range(3)]
    started: list[str] = []
    with when_driver_waits(lambda: started.append("release imports")):
        run_in_process(ModulesJob(), tasks, lambda t, m: None, lambda n: None)
        assert started == []  # units in this process: no idle time to fill
        for _ in range(2):
            run_on_processes(
                "modules[b]", dump_job(ModulesJob()), tasks, 2, lambda t, m: None, lambda n: None
            )
    assert started == ["release imports"]
    with when_driver_waits(lambda: started.append("never")):
        pass
    run_on_processes("modules[b]", dump_job(ModulesJob()), tasks, 2, lambda t, m: None, lambda n: None)
    assert started == ["release imports"]  # registered work does not outlive its block


def test_first_here_modules_are_imported_before_the_thread_starts(tmp_path, monkeypatch):
    """A library whose import hooks into one other threads are using (``sqlalchemy.orm`` into SQLAlchemy
    core) is imported on the calling thread: it is complete when ``import_in_background`` returns, whatever
    the background thread is doing."""
    import threading

    gate = threading.Event()
    (tmp_path / "fm_bg_hooks.py").write_text("import threading\nTHREAD = threading.current_thread().name\n")
    (tmp_path / "fm_bg_slow.py").write_text(
        "import fm_bg_gate\nfm_bg_gate.GATE.wait(30)\nimport threading\nTHREAD = threading.current_thread().name\n"
    )
    gate_module = type(sys)("fm_bg_gate")
    gate_module.GATE = gate  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "fm_bg_gate", gate_module)
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("fm_bg_hooks", "fm_bg_slow"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    thread = import_in_background(["fm_bg_slow"], first_here=["fm_bg_hooks", "fm_bg_not_installed"])
    assert threading.current_thread().name == sys.modules["fm_bg_hooks"].THREAD  # done, on this thread
    assert thread.is_alive()  # while the background import is still held at its gate
    gate.set()
    thread.join(timeout=30)
    assert sys.modules["fm_bg_slow"].THREAD == "fm-background-imports"
    assert "fm_bg_not_installed" not in sys.modules


def test_the_release_imports_sqlalchemy_orm_on_the_calling_thread() -> None:
    from fm_assets.datasets.views import VIEW_LIBRARIES, VIEW_LIBRARIES_FIRST

    assert "pyiceberg.catalog.sql" in VIEW_LIBRARIES  # imports sqlalchemy.orm ...
    assert (
        "sqlalchemy.orm" in VIEW_LIBRARIES_FIRST
    )  # ... which must not be half-imported while Dagster writes


def test_paced_work_goes_on_only_while_the_driver_waits_on_its_workers(tmp_path, monkeypatch) -> None:
    """``pace_with_driver`` holds a background thread while the driver works and lets it go while the driver
    waits on its pool (units, or tasks it spread); past its bound the thread goes on anyway."""
    import threading
    import time

    from pool_helpers import pid_after_sleeping

    from fm_assets.engine.pool import map_on_workers, pace_with_driver, spread_over

    assert pace_with_driver(0.05) is False  # nobody waits on a pool: held until the bound, then told so
    released = threading.Event()

    def paced() -> None:
        if pace_with_driver(30):
            released.set()

    thread = threading.Thread(target=paced, daemon=True)
    thread.start()
    time.sleep(0.3)
    assert not released.is_set()  # the driver is busy (here: sleeping) and not waiting on workers
    with spread_over(2):
        map_on_workers(pid_after_sleeping, [0.5, 0.5])
        assert released.is_set()  # let go while the driver waited on the two tasks
    thread.join(timeout=5)
    assert pace_with_driver(0.05) is False  # the wait is over: held again

    (tmp_path / "fm_bg_paced.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "fm_bg_paced", raising=False)
    calls: list[str] = []
    imported = import_in_background(["fm_bg_paced", "fm_bg_paced_missing"], pace=lambda: calls.append("pace"))
    imported.join(timeout=30)
    assert calls == ["pace", "pace"] and sys.modules["fm_bg_paced"].VALUE == 1  # paced before each module
