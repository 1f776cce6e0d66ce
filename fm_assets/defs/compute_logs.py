"""Dagster's local compute logs (a run's stdout and stderr in files the UI shows), copied back to the terminal
by a thread instead of by ``tail`` processes.

Dagster's ``LocalComputeLogManager`` points the process's stdout and stderr at the log files and, per stream,
starts ``tail -F`` to copy the file back to the terminal and a Python watcher that stops the tail if the
process dies: four processes for every run (`fm run` makes two runs: preprocess and release), each stopped
and waited for when the run ends (~50 ms of a run on this box). ``tail`` also polls once a second, so a
line written less than a second before the run ends may never reach the terminal (Dagster's comment on it
cites dagster#23336).

Here the descriptors are redirected to the same files the same way, and one daemon thread per stream follows
each file and writes what is new to the stream's original descriptor; when the capture ends it copies what
is left and stops. Nothing is started as a process, nothing outlives the process, and every line reaches
both the file and the terminal. The files, their names and the completion marker are Dagster's own, so the
UI reads them as before.

Configured in ``deploy/local/dagster.yaml``::

    compute_logs:
      module: fm_assets.defs.compute_logs
      class: ThreadedComputeLogManager
      config:
        base_dir: ...
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import threading
from collections.abc import Iterator, Sequence
from typing import IO, Any

from dagster._core.execution.compute_logs import redirect_to_file
from dagster._core.storage.compute_log_manager import CapturedLogContext, ComputeIOType
from dagster._core.storage.local_compute_log_manager import IO_TYPE_EXTENSION, LocalComputeLogManager
from dagster._serdes import ConfigurableClassData
from dagster._utils import ensure_file, touch_file

FOLLOW_INTERVAL_SECONDS = 0.05  # how often a follower looks for new bytes (the terminal lags this much)
CHUNK_BYTES = 1 << 16


def _descriptor(stream: IO[Any]) -> int | None:
    """The stream's file descriptor; None for one without (a test runner's in-memory capture)."""
    try:
        return stream.fileno()
    except (AttributeError, io.UnsupportedOperation, ValueError):
        return None


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


@contextlib.contextmanager
def follow_to_descriptor(path: str, fd: int) -> Iterator[None]:
    """Copy what is appended to ``path`` to ``fd`` on a daemon thread while the block runs, then the rest."""
    stop = threading.Event()

    def follow() -> None:
        with open(path, "rb") as source:
            while True:
                stopping = stop.is_set()  # read once more after the stop: what was written before it
                while chunk := source.read(CHUNK_BYTES):
                    _write_all(fd, chunk)
                if stopping:
                    return
                stop.wait(FOLLOW_INTERVAL_SECONDS)

    thread = threading.Thread(target=follow, name="fm-compute-log-follower", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


@contextlib.contextmanager
def capture_stream(stream: IO[Any], path: str) -> Iterator[None]:
    """``stream``'s descriptor redirected to ``path`` (Dagster's way) while a thread copies the file back to
    where the stream pointed before; a stream without a descriptor is left alone."""
    ensure_file(path)
    fd = _descriptor(stream)
    if fd is None:
        yield
        return
    original = os.dup(fd)
    try:
        with follow_to_descriptor(path, original), redirect_to_file(stream, path):
            yield
    finally:
        os.close(original)


class ThreadedComputeLogManager(LocalComputeLogManager):
    """``LocalComputeLogManager`` with the terminal copy made by threads (see the module docstring)."""

    @contextlib.contextmanager
    def capture_logs(self, log_key: Sequence[str]) -> Iterator[CapturedLogContext]:
        outpath = self.get_captured_local_path(log_key, IO_TYPE_EXTENSION[ComputeIOType.STDOUT])
        errpath = self.get_captured_local_path(log_key, IO_TYPE_EXTENSION[ComputeIOType.STDERR])
        with capture_stream(sys.stdout, outpath), capture_stream(sys.stderr, errpath):
            yield CapturedLogContext(log_key)
        touch_file(self.complete_artifact_path(log_key))  # Dagster's marker: the capture is complete

    @classmethod
    def from_config_value(
        cls, inst_data: ConfigurableClassData | None, config_value: dict[str, Any]
    ) -> ThreadedComputeLogManager:
        return cls(inst_data=inst_data, **config_value)
