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
