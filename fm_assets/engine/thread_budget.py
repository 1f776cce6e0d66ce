"""Threads per unit worker: the host's cores shared out among the pool's worker processes.

The native libraries a unit calls size their thread pools to the whole host, not to the process: pyarrow
(Parquet decoding, Arrow-to-pandas), the Rust tokenizers (rayon: gigatoken, fastokens, HF ``tokenizers``)
and OpenMP/BLAS. With one worker per core, each of N workers would start N threads: N x N threads time-slicing
N cores, each pool's threads descheduled in turn, their caches evicted by the other workers'. A pool worker
therefore gets ``cores // workers`` threads (at least 1), as data loaders' workers commonly do; the process
that runs units in-process (``workers=1``) keeps the libraries' defaults and so uses more than one core in
the stages whose libraries run threads (tokenize: 1.2 cores on a 2-core host).

A variable the user set explicitly in the environment is left as it is. Thread counts change no output: the
libraries return the same ids and bytes whatever their parallelism.
"""

from __future__ import annotations

import os
import sys

# the thread-pool sizes read by the libraries units call, each when its pool is first used
THREAD_VARIABLES: tuple[str, ...] = (
    "RAYON_NUM_THREADS",
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
)


def threads_per_worker(cores: int, workers: int) -> int:
    """Threads each of ``workers`` processes may use on ``cores`` cores (at least one)."""
    return max(1, cores // max(1, workers))


def thread_environment(threads: int) -> dict[str, str]:
    """The variables that cap the native thread pools at ``threads``."""
    env: dict[str, str] = dict.fromkeys(THREAD_VARIABLES, str(threads))
    if threads == 1:  # HF tokenizers' own switch; rayon's variable alone still lets it warn about forks
        env["TOKENIZERS_PARALLELISM"] = "false"
    return env


def apply_thread_budget(threads: int, environ: dict[str, str] | os._Environ[str] = os.environ) -> None:
    """Cap this process's native thread pools at ``threads`` (variables already set are kept), and size
    pyarrow's CPU pool to match when pyarrow is imported (it is in every unit worker)."""
    for name, value in thread_environment(threads).items():
        environ.setdefault(name, value)
    pyarrow = sys.modules.get("pyarrow")
    if pyarrow is not None and environ is os.environ:
        pyarrow.set_cpu_count(threads)
