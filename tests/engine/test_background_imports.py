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
