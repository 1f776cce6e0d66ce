"""Where a stage's work units run: in-process, on a pool of local worker processes, or as Spark tasks.

The executor (``engine.run``) hands this module a *unit job* (an object with ``compute(unit, commit=...)``
that reads the unit's inputs, writes its files and commits its marker, exactly as the in-process path
does) and a list of ``UnitTask``; results come back to ``on_done`` in completion order and the executor
puts them in unit order, so ``_SUCCESS.json`` and the data version do not depend on the worker count.

Process model (chosen, not defaulted):

* **forkserver, never fork.** The process running a stage may hold a JVM (py4j sockets whose
  finalizers would write into the parent's gateway from a forked child), Dagster's threads, tqdm's
  monitor, fsspec's event-loop thread and Arrow/tokenizers thread pools; ``fork()`` copies their
  locks in whatever state they are. Workers are forked from a clean single-threaded fork server.
* **the job is pickled once per worker per stage run**, not per unit: the parent writes it to a local
  temporary file, a worker loads it on its first unit of that run and caches it. The job carries the
  parent's environment (a child sees the variables the parent has now, as with ``spawn``). The stage
  context crosses without its resources (``engine.run`` strips them): a Spark session or any other engine
  handle is not usable in a child, so stages do engine work in ``prepare`` and units only read and write.
* **one pool per process and worker count, reused across stage runs** and closed after
  ``POOL_IDLE_SECONDS`` without work. Starting a worker means importing the stage's modules, so a pool
  per stage run would pay that for every stage of every batch. The fork server preloads the pipeline
  modules the parent has already imported, plus the heavy libraries stages name in
  ``Stage.worker_modules`` (the language model's package for filter;
  registered with ``preload_in_workers`` before the first pool starts): they are imported once, in the
  fork server, and every worker forked from it starts with them, instead of each worker importing them
  on its first unit (seconds per worker, which made validate slower with more workers). The driver
  itself never imports them. The server freezes what it imported (``fork_server_freeze``, last in the list),
  so neither the workers' collections nor the server's exit walk that heap.
* **native thread pools sized to the worker's share of the cores** (``thread_budget``): pyarrow, the Rust
  tokenizers and BLAS would each start one thread per host core in every worker.
* **one task per unit** (units are thousands of records; the per-task cost is the pickled ``WorkUnit``
  and marker, well under a millisecond), so the progress bar advances per unit and load balances; the
  executor submits a stage's units largest first (``run.largest_first``), so the small ones end the stage.
* a worker watches its parent's sentinel and SIGKILLs itself when the parent dies, so ``kill -9`` of
  the stage process stops its units too; a re-run skips what was committed, as with one process.
* **the pools are shut down when the process exits, before anything joins the workers.** Pool workers are
  non-daemonic children. A process that is itself a ``multiprocessing`` child (Dagster's code server runs
  every run worker as a ``spawn`` child) runs ``multiprocessing.util._exit_function`` as soon as its target
  returns: it joins every live child *before* the interpreter's shutdown, where ``concurrent.futures``
  would have told idle workers to stop, so a run worker that used the pool waited for its idle workers
  forever (~1.9 GB per finished run). A ``multiprocessing.util.Finalize`` with an exit priority runs first
  in that handler (and at a plain interpreter exit): it stops every pool and waits for its workers.
* like every ``spawn``/``forkserver`` child, a worker imports the parent's ``__main__`` (as
  ``__mp_main__``) once when it starts: a script that runs stages needs ``if __name__ == "__main__":``.
* a stage whose methods were replaced at run time (a test's monkeypatch) would run its original code in a
  worker, which re-imports the class: ``engine.run`` refuses to pickle it and its units run in-process,
  as does any job that does not pickle (logged as a warning).

An exception in a unit is caught where it happens and sent back as a ``UnitFailure`` (unit id, type,
message, formatted traceback, pickled original when it pickles); the parent re-raises contract errors
as themselves and anything else as ``UnitFailedError`` naming the unit, with the worker's traceback.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import logging
import multiprocessing
import multiprocessing.connection
import multiprocessing.forkserver
import multiprocessing.util
import os
import pickle
import signal
import socket
import sys
import tempfile
import threading
import time
import traceback
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn, Protocol, TypeVar

from fm_assets.engine.collector import tune_for_batch_work
from fm_assets.engine.records import UnitMarker
from fm_assets.engine.stage import WorkUnit
from fm_assets.engine.thread_budget import apply_thread_budget, threads_per_worker

log = logging.getLogger(__name__)

POOL_IDLE_SECONDS = 120.0  # a pool without work for this long is shut down
JOB_CACHE_SIZE = 2  # unit jobs a worker keeps loaded (concurrent stage runs share a pool)
# modules of the layers units run in; the fork server imports those the parent has already imported
PRELOAD_PREFIXES = (
    "fm_assets.settings",
    "fm_assets.engine",
    "fm_assets.transforms",
    "fm_assets.side_inputs",
    "fm_assets.stages",
    "fm_loader",
)


_WORKER_PRELOAD: set[str] = set()  # heavy modules units use (Stage.worker_modules); see preload_in_workers
# imported by every unit but not by the pipeline modules' own imports: pyarrow imports pandas on the first
# Python-to-Arrow conversion (a unit writer's first flush), seconds per worker under load
UNIT_LIBRARIES = ("pandas",)


def preload_in_workers(modules: Sequence[str]) -> None:
    """Have worker processes start with ``modules`` imported: the fork server imports them once when it
    starts (the first pool of this process), not this process and not each worker. Names registered after
    the fork server started are imported by each worker on first use, as before."""
    _WORKER_PRELOAD.update(modules)


# imported after everything else the fork server preloads: freezes it (see the module)
FREEZE_PRELOADED = "fm_assets.engine.fork_server_freeze"


def preload_modules(also: Sequence[str] = ()) -> list[str]:
    """What the fork server imports, in order: the pipeline modules this process has loaded, the registered
    ones and ``also``, then ``FREEZE_PRELOADED``."""
    loaded = {name for name in list(sys.modules) if name.startswith(PRELOAD_PREFIXES)}
    modules = sorted((loaded | _WORKER_PRELOAD | set(UNIT_LIBRARIES)) - {FREEZE_PRELOADED})
    return [*modules, *also, FREEZE_PRELOADED]


def start_fork_server(also: Sequence[str] = ()) -> None:
    """Start this process's fork server now, so that it imports the preloaded modules (seconds) while this
    process does other work, instead of when the first stage with several units needs workers. The preload
    list is read here: the pipeline modules imported so far, the registered ones and ``also`` (modules this
    process has not imported yet); a no-op when the server already runs."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(preload_modules(also))
    multiprocessing.forkserver.ensure_running()  # returns once the server is spawned, not when it is ready


def _ready(rendezvous: str, workers: int) -> int:
    """Hold this worker until ``workers`` workers have checked in under ``rendezvous``. The executor forks a
    worker per submit only while none is idle, so a warm-up task that returned at once could let a later
    submit reuse the first worker and leave the pool short (seen on a loaded 2-core box)."""
    Path(rendezvous, str(os.getpid())).touch()
    deadline = time.monotonic() + _RENDEZVOUS_SECONDS
    while len(os.listdir(rendezvous)) < workers and time.monotonic() < deadline:
        time.sleep(0.01)
    return os.getpid()


_RENDEZVOUS_SECONDS = 30.0  # a worker that cannot fork is reported by the first stage, not waited for


def start_workers(workers: int) -> threading.Thread | None:
    """Start the shared pool of ``workers`` processes on a background thread (after ``start_fork_server``):
    a worker process can only be forked once the fork server has imported its modules (about a second), so
    the thread waits for that while this process sets up its run, and the first stage with several units
    finds the workers running. None (nothing started) for fewer than 2 workers."""
    if workers < 2 or can_start_processes() is not None:
        return None

    def start() -> None:
        try:
            with (
                shared_pool(workers) as pool,
                tempfile.TemporaryDirectory(prefix="fm-pool-ready-") as rendezvous,
            ):
                ready = [pool.executor.submit(_ready, rendezvous, workers) for _ in range(workers)]
                cf.wait(ready)  # the directory must outlive the workers' check-in
        except Exception:  # the first stage that needs the pool reports it
            log.warning(
                "unit pool: starting %d workers ahead of the first stage failed", workers, exc_info=True
            )

    thread = threading.Thread(target=start, name="fm-start-unit-workers", daemon=True)
    thread.start()
    return thread


class UnitJob(Protocol):
    """What runs one unit: read its inputs, write its files, commit its marker (``commit=False``: verify)."""

    @property
    def label(self) -> str: ...  # "stage[batch]", for messages

    def compute(self, unit: WorkUnit, *, commit: bool) -> UnitMarker: ...


@dataclass(frozen=True)
class UnitTask:
    index: int  # position in the stage's unit list
    unit: WorkUnit
    commit: bool = True  # False: recompute a committed unit to compare (FM_VERIFY_COMMITTED_UNITS)


@dataclass(frozen=True)
class UnitFailure:
    """An exception raised by a unit in a worker, as plain data (always picklable)."""

    unit_id: str
    error_type: str  # module.qualname
    message: str
    traceback: str
    where: str  # "pid 123 on host"
    exception: bytes | None = None  # the pickled original, when it pickles

    def original(self) -> BaseException | None:
        if self.exception is None:
            return None
        try:
            loaded = pickle.loads(self.exception)
        except Exception:  # a class that does not unpickle with its args: keep the text only
            return None
        return loaded if isinstance(loaded, BaseException) else None


class RemoteTraceback(Exception):
    """The worker's formatted traceback, attached as ``__cause__`` of the error raised in the parent."""

    def __init__(self, tb: str) -> None:
        super().__init__(tb)
        self.tb = tb

    def __str__(self) -> str:
        return self.tb


class UnitFailedError(RuntimeError):
    """A unit raised in a worker process or Spark task; the message names the unit and holds its traceback."""

    def __init__(self, label: str, failure: UnitFailure) -> None:
        self.label = label
        self.failure = failure
        self.unit_id = failure.unit_id
        self.error_type = failure.error_type
        self.remote_traceback = failure.traceback
        super().__init__(
            f"{label} unit {failure.unit_id} failed in {failure.where}: {failure.error_type}: {failure.message}\n\n"
            f"Traceback in the worker:\n{failure.traceback}"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.label, self.failure))


class WorkerLostError(RuntimeError):
    """A worker process died (killed, out of memory) while it held units; they were not committed."""


OnDone = Callable[[UnitTask, UnitMarker], None]  # a unit's marker, in completion order
Advance = Callable[[int], None]  # this many more units finished (the progress bar)
Outcome = UnitMarker | UnitFailure


def resolve_workers(setting: int) -> int:
    """Worker processes for a ``workers`` setting: 0 means every core this process may use (its CPU
    affinity, capped by a cgroup v2 CPU quota such as a Kubernetes CPU limit)."""
    if setting > 0:
        return setting
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    quota = cgroup_cpu_quota()
    return max(1, min(cores, quota) if quota else cores)


def cgroup_cpu_quota(path: Path = Path("/sys/fs/cgroup/cpu.max")) -> int | None:
    """CPUs allowed by the cgroup v2 quota (``cpu.max``: "<quota> <period>", rounded up), None if unlimited."""
    try:
        quota, period = path.read_text().split()[:2]
    except (OSError, ValueError):
        return None
    if quota == "max":
        return None
    return max(1, -(-int(quota) // int(period)))


# -- running one unit anywhere ------------------------------------------------------------------------


def failure_of(unit_id: str, exc: BaseException, prefix: str = "") -> UnitFailure:
    """``exc`` (raised here, for unit ``unit_id``) as a ``UnitFailure``."""
    try:
        pickled: bytes | None = pickle.dumps(exc)
    except Exception:
        pickled = None
    return UnitFailure(
        unit_id=unit_id,
        error_type=f"{type(exc).__module__}.{type(exc).__qualname__}",
        message=f"{prefix}{exc}",
        traceback="".join(traceback.format_exception(exc)),
        where=f"pid {os.getpid()} on {socket.gethostname()}",
        exception=pickled,
    )


def execute_unit(job: UnitJob, task: UnitTask) -> Outcome:
    """Run one unit in a worker; an exception comes back as a ``UnitFailure`` instead of propagating."""
    try:
        return job.compute(task.unit, commit=task.commit)
    except Exception as exc:
        return failure_of(task.unit.unit_id, exc)


def execute_loaded(key: str, read: Callable[[], bytes], task: UnitTask, *, apply_env: bool) -> Outcome:
    """Load job ``key`` in this worker (once) and run ``task``; a job that does not load is the unit's
    failure too (a module the worker cannot import, ...), not a crash of the worker."""
    try:
        job = load_job(key, read, apply_env=apply_env)
    except Exception as exc:
        return failure_of(task.unit.unit_id, exc, prefix="the unit job did not load in the worker: ")
    return execute_unit(job, task)


def raise_failure(label: str, failure: UnitFailure, passthrough: tuple[type[BaseException], ...]) -> NoReturn:
    """Raise a worker's failure in the parent: a ``passthrough`` type as itself, anything else wrapped."""
    cause = RemoteTraceback(failure.traceback)
    original = failure.original()
    if original is not None and isinstance(original, passthrough):
        raise original from cause
    raise UnitFailedError(label, failure) from cause


def run_in_process(job: UnitJob, tasks: Sequence[UnitTask], on_done: OnDone, advance: Advance) -> None:
    """Units one after another in this process (``workers=1``); exceptions propagate as raised."""
    for task in tasks:
        try:
            marker = job.compute(task.unit, commit=task.commit)
        except Exception as exc:
            exc.add_note(f"in {job.label} unit {task.unit.unit_id}")
            raise
        on_done(task, marker)
        advance(1)


def can_start_processes() -> str | None:
    """Why this process cannot have worker processes (a daemonic multiprocessing child), or None."""
    if multiprocessing.current_process().daemon:
        return "this is a daemonic process, which may not start children"
    return None


def dump_job(job: UnitJob) -> bytes | str:
    """The job pickled with this process's environment, or the reason it does not pickle."""
    try:
        return pickle.dumps(_Envelope(job, dict(os.environ)), protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as exc:  # an unpicklable prepare() result, a stage defined in a function, ...
        return f"{type(exc).__name__}: {exc}"


@dataclass(frozen=True)
class _Envelope:
    job: Any
    env: dict[str, str]


# -- the worker side ------------------------------------------------------------------------------------

_JOBS: OrderedDict[str, Any] = OrderedDict()  # job key -> loaded job (per worker process)
_ENV_APPLIED: list[str] = []  # key of the job whose environment this worker has


def load_job(key: str, read: Callable[[], bytes], *, apply_env: bool) -> UnitJob:
    """The job ``key`` in this worker (loaded once, then cached). ``apply_env``: give this worker the
    parent's environment (local workers: same machine and user; never on Spark executors)."""
    job = _JOBS.get(key)
    if job is None:
        envelope: _Envelope = pickle.loads(read())
        job = envelope.job
        _JOBS[key] = (job, envelope.env)
        while len(_JOBS) > JOB_CACHE_SIZE:
            _JOBS.popitem(last=False)
    else:
        _JOBS.move_to_end(key)
    job, env = _JOBS[key]
    if apply_env and (not _ENV_APPLIED or _ENV_APPLIED[-1] != key):
        os.environ.clear()
        os.environ.update(env)
        if _THREADS:
            apply_thread_budget(_THREADS[0])
        _ENV_APPLIED[:] = [key]
    return job


_THREADS: list[int] = []  # this pool worker's share of the host's cores (thread_budget)


def _worker_init(threads: int) -> None:
    """In each pool worker: leave Ctrl-C to the parent; die with the parent; rarer collections; native
    thread pools sized to this worker's share of the cores."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    tune_for_batch_work()
    _THREADS[:] = [threads]
    apply_thread_budget(threads)
    parent = multiprocessing.parent_process()
    if parent is None:
        return
    sentinel = parent.sentinel

    def watch() -> None:
        multiprocessing.connection.wait([sentinel])
        os.kill(os.getpid(), signal.SIGKILL)  # the parent is gone: nobody collects this unit

    threading.Thread(target=watch, name="fm-unit-parent-watch", daemon=True).start()


def _process_task(key: str, payload_path: str, task: UnitTask) -> Outcome:
    return execute_loaded(key, Path(payload_path).read_bytes, task, apply_env=True)


# -- the shared local pools -----------------------------------------------------------------------------


class _Pool:
    def __init__(self, workers: int) -> None:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(
            preload_modules()
        )  # only read when the fork server starts (once per process)
        self.workers = workers
        self.threads = threads_per_worker(resolve_workers(0), workers)
        self.executor = cf.ProcessPoolExecutor(
            workers, mp_context=context, initializer=_worker_init, initargs=(self.threads,)
        )
        self.users = 0
        self.idle_since = time.monotonic()
        self.broken = False


_POOLS: dict[int, _Pool] = {}
_POOLS_LOCK = threading.Lock()
_REAPER: list[threading.Timer] = []
_EXIT_HOOK: list[int] = []  # pid of the process whose exit handler stops its pools (registered once)
# above 0: multiprocessing's exit handler runs finalizers of priority >= 0 before it joins child processes
EXIT_PRIORITY = 100


def _stop_pools_at_exit() -> None:
    """Stop every pool of this process, busy or not, and wait for its workers (the process is exiting: a
    unit still running finishes and commits, queued ones are cancelled)."""
    with _POOLS_LOCK:
        pools = list(_POOLS.values())
        _POOLS.clear()
        for timer in _REAPER:
            timer.cancel()
    for pool in pools:
        pool.executor.shutdown(wait=True, cancel_futures=True)


def _register_exit_hook() -> None:
    """Once per process (a forked child inherits the list, not the registration): stop the pools when this
    process exits, before ``multiprocessing`` joins its children (see the module doc)."""
    if _EXIT_HOOK and _EXIT_HOOK[0] == os.getpid():
        return
    multiprocessing.util.Finalize(None, _stop_pools_at_exit, exitpriority=EXIT_PRIORITY)
    _EXIT_HOOK[:] = [os.getpid()]


@contextlib.contextmanager
def shared_pool(workers: int) -> Iterator[_Pool]:
    """The process-wide pool of ``workers`` processes (created on first use, reused across stage runs)."""
    with _POOLS_LOCK:
        pool = _POOLS.get(workers)
        if pool is None or pool.broken:
            _register_exit_hook()
            pool = _POOLS[workers] = _Pool(workers)
            log.info(
                "unit pool: %d worker processes (forkserver) of %d native threads each, started on first use",
                workers,
                pool.threads,
            )
        pool.users += 1
    try:
        yield pool
    finally:
        with _POOLS_LOCK:
            pool.users -= 1
            pool.idle_since = time.monotonic()
            if pool.broken and _POOLS.get(workers) is pool:
                del _POOLS[workers]
            if pool.broken and pool.users == 0:
                pool.executor.shutdown(wait=False, cancel_futures=True)
            _schedule_reaper()


def _schedule_reaper() -> None:
    for timer in _REAPER:
        timer.cancel()
    timer = threading.Timer(POOL_IDLE_SECONDS, _reap_idle)
    timer.daemon = True
    _REAPER[:] = [timer]
    timer.start()


def _reap_idle() -> None:
    now = time.monotonic()
    with _POOLS_LOCK:
        idle = [n for n, p in _POOLS.items() if p.users == 0 and now - p.idle_since >= POOL_IDLE_SECONDS - 1]
        pools = [_POOLS.pop(n) for n in idle]
    for pool in pools:
        log.info("unit pool: shutting down %d idle workers", pool.workers)
        pool.executor.shutdown(wait=True)


def shutdown_pools() -> None:
    """Stop every idle shared pool now (tests; a long-lived process that is done with stages)."""
    with _POOLS_LOCK:
        pools = [_POOLS.pop(n) for n, p in list(_POOLS.items()) if p.users == 0]
    for pool in pools:
        pool.executor.shutdown(wait=True)


T = TypeVar("T")
R = TypeVar("R")
_MAP_WORKERS: ContextVar[int] = ContextVar("fm_map_workers", default=1)


@contextlib.contextmanager
def spread_over(workers: int) -> Iterator[None]:
    """Let ``map_on_workers`` calls in this block use the shared pool of ``workers`` processes (a stage's
    checks run after its units, on the same pool)."""
    token = _MAP_WORKERS.set(workers)
    try:
        yield
    finally:
        _MAP_WORKERS.reset(token)


def _running_pool_size(workers: int) -> int:
    """The largest pool of this process already running with 2..``workers`` processes (a stage whose units
    were fewer than its workers has a smaller one), else ``workers``: driver-side work reuses the stage's
    pool instead of forking a second one."""
    with _POOLS_LOCK:
        running = [n for n, pool in _POOLS.items() if not pool.broken and 2 <= n <= workers]
    return max(running, default=workers)


@dataclass
class SpreadCost:
    """What ``map_on_workers`` ran inside a ``metered_spread`` block: its tasks and their own seconds (each
    task's wall where it ran: the work that spreads over workers, not the driver's waiting), and the wall of
    the calls (what the caller waited for them)."""

    tasks: int = 0
    task_seconds: float = 0.0
    wall_seconds: float = 0.0


_METERS: ContextVar[tuple[SpreadCost, ...]] = ContextVar("fm_spread_meters", default=())


@contextlib.contextmanager
def metered_spread(meter: SpreadCost | None = None) -> Iterator[SpreadCost]:
    """Count the tasks ``map_on_workers`` runs in this block (on the pool or in this process) and their
    seconds: what a check or a release step spreads over the workers, as opposed to its own serial work.
    ``meter``: add to this one (several blocks, one count) instead of a new one."""
    meter = meter if meter is not None else SpreadCost()
    token = _METERS.set((*_METERS.get(), meter))
    try:
        yield meter
    finally:
        _METERS.reset(token)


def _timed(fn: Callable[[T], R], item: T) -> tuple[R, float]:
    started = time.perf_counter()
    return fn(item), time.perf_counter() - started


def _metered(results: list[tuple[R, float]], started: float) -> list[R]:
    seconds = sum(took for _, took in results)
    wall = time.perf_counter() - started
    for meter in _METERS.get():
        meter.tasks += len(results)
        meter.task_seconds += seconds
        meter.wall_seconds += wall
    return [result for result, _ in results]


_DRIVER_WAITING = threading.Event()  # set while a thread of this process waits on its worker pool
_DRIVER_WAITS = [0]  # how many threads do (a stage's units, and what runs beside them)
_DRIVER_WAITS_LOCK = threading.Lock()
# what pace_with_driver waits at most: past it, work in the background goes on beside the driver's own
DRIVER_PACE_MAX_WAIT_SECONDS = 2.0


@contextlib.contextmanager
def _driver_waits() -> Iterator[None]:
    with _DRIVER_WAITS_LOCK:
        _DRIVER_WAITS[0] += 1
        _DRIVER_WAITING.set()
    try:
        yield
    finally:
        with _DRIVER_WAITS_LOCK:
            _DRIVER_WAITS[0] -= 1
            if not _DRIVER_WAITS[0]:
                _DRIVER_WAITING.clear()


def map_on_workers(fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
    """``fn`` over ``items``, results in item order: on the shared worker pool inside ``spread_over(n)`` with
    n >= 2, else in this process. ``fn`` is a module-level function and the items pickle; the first
    exception is raised here after the calls already running have finished, the rest are cancelled. Each
    call's seconds go to the enclosing ``metered_spread`` blocks."""
    workers = _MAP_WORKERS.get()
    started = time.perf_counter()
    if workers < 2 or len(items) < 2 or can_start_processes() is not None:
        return _metered([_timed(fn, item) for item in items], started)
    with shared_pool(_running_pool_size(workers)) as pool:
        futures = [pool.executor.submit(_timed, fn, item) for item in items]
        try:
            with _driver_waits():
                results = [future.result() for future in futures]
            return _metered(results, started)
        except cf.process.BrokenProcessPool:
            pool.broken = True
            raise
        finally:
            for future in futures:
                future.cancel()


_IDLE_WORK: list[Callable[[], object]] = []  # see when_driver_waits


@contextlib.contextmanager
def when_driver_waits(start: Callable[[], object]) -> Iterator[None]:
    """Inside this block, call ``start`` the first time this process hands units to its worker pool and waits
    for them (its own CPU is then free): for work that should overlap the units, not compete with the
    driver's own work. ``start`` must return at once (start a thread); without a pool it is never called."""
    _IDLE_WORK.append(start)
    try:
        yield
    finally:
        if start in _IDLE_WORK:
            _IDLE_WORK.remove(start)


def pace_with_driver(max_wait: float = DRIVER_PACE_MAX_WAIT_SECONDS) -> bool:
    """Block a background thread until this process's driver waits on its unit workers (at once while it
    does), at most ``max_wait`` seconds; True if it waits. Work started ``when_driver_waits`` calls it between
    its pieces, so that a piece (one module's import) holds the GIL while the driver is idle rather than while
    it runs a check or writes Dagster's events: at 16 workers a stage's units end within a second, and an
    import still running then had made the next check 7x slower."""
    return _DRIVER_WAITING.wait(max_wait)


def start_idle_work() -> None:
    """Call (once) what ``when_driver_waits`` registered; a failure is logged, never raised into the stage."""
    while _IDLE_WORK:
        start = _IDLE_WORK.pop(0)
        try:
            start()
        except Exception:
            log.warning("work registered to overlap the units failed to start", exc_info=True)


def run_on_processes(
    label: str,
    payload: bytes,
    tasks: Sequence[UnitTask],
    workers: int,
    on_done: OnDone,
    advance: Advance,
    passthrough: tuple[type[BaseException], ...] = (),
    scratch: Path | None = None,
) -> None:
    """Run ``tasks`` on the shared pool of ``workers`` processes; the first failure is raised after the
    units already running have finished (their commits are complete), the rest are cancelled. The workers
    read the unit job from a file in ``scratch`` (the root's scratch area, which ``fm run`` clears of a
    killed run's leftovers; default: the system temp folder)."""
    key = uuid.uuid4().hex
    fd, path = tempfile.mkstemp(prefix="fm-unit-job-", suffix=".pkl", dir=scratch)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
        with shared_pool(workers) as pool:
            futures: dict[cf.Future[Outcome], UnitTask] = {}
            try:
                for task in tasks:  # the first submits start the worker processes
                    futures[pool.executor.submit(_process_task, key, path, task)] = task
            except Exception as exc:
                pool.broken = True
                for pending in futures:
                    pending.cancel()
                raise WorkerLostError(f"{label}: could not start unit worker processes: {exc!r}") from exc
            failure: UnitFailure | None = None
            lost: list[str] = []
            start_idle_work()
            try:
                with _driver_waits():
                    for future in cf.as_completed(futures):
                        task = futures[future]
                        try:
                            outcome = future.result()
                        except cf.process.BrokenProcessPool:
                            pool.broken = True
                            lost.append(task.unit.unit_id)
                            continue
                        except cf.CancelledError:
                            continue
                        except Exception as exc:  # the task did not run (its arguments did not pickle, ...)
                            outcome = failure_of(task.unit.unit_id, exc)
                        if isinstance(outcome, UnitFailure):
                            if failure is None:
                                failure = outcome
                                for pending in futures:
                                    pending.cancel()
                            continue
                        if failure is None and not lost:
                            on_done(task, outcome)
                            advance(1)
            except BaseException:
                for pending in futures:
                    pending.cancel()
                raise
        if failure is not None:
            raise_failure(label, failure, passthrough)
        if lost:
            raise WorkerLostError(
                f"{label}: a worker process died (killed, out of memory, or it could not start: its stderr says "
                f"why); units {sorted(lost)} did not finish and were not committed, a re-run computes them"
            )
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)
