"""Forked workers: how many a piece of work is split over (the one rule shared by the dashboard's
pools, judging series and rendering series pages, and ingest's forked parser), and `fork_map`,
which runs the dashboard's chunks in them.

Not `multiprocessing.Pool`: a pool worker killed (the kernel's OOM killer sends SIGKILL) leaves its
task's result waited for forever, and `ci run` renders inside the host's GPU lock, so every other
GPU job waited for the workflow's timeout behind it. `concurrent.futures.ProcessPoolExecutor` sees
the worker die and fails its futures (`BrokenProcessPool`); ingest's parsers use it too
(`ci.ingest.reading`).
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import sys
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import TypeVar

_C = TypeVar("_C")
_R = TypeVar("_R")
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def die_with_parent(parent: int) -> None:
    """A forked worker's first step: on Linux, ask the kernel to kill it when `parent` (the process that
    forked it) dies, and exit now if that has happened already. A parent killed alone (SIGTERM to its
    pid, the OOM killer's SIGKILL) left its workers blocked forever on a full pipe, holding the job's
    stdout and the SQLite file open: `ci ingest ... | tee log` never ended (2026-12-06). Elsewhere a
    no-op (the workers end when their pipe to the parent breaks, or not)."""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            return
    if os.getppid() != parent:
        os._exit(1)  # the parent died between the fork and the request: nothing to work for


class WorkerLost(RuntimeError):
    """A forked worker stopped (killed, out of memory) before its share of the work came back."""


def fork_workers(items: int, least: int) -> int:
    """How many forked workers to split `items` independent pieces of work over: every CPU this
    process may use (at most 8), or 1 (do it here) on one CPU, for fewer than `least` items, or
    where there is no fork (macOS, Windows)."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    if cpus < 2 or items < least or "fork" not in multiprocessing.get_all_start_methods():
        return 1
    return min(cpus, 8)


def fork_map(
    fn: Callable[[_C], _R],
    chunks: Sequence[_C],
    workers: int,
    *,
    names: Callable[[_C], Iterable[str]],
    lost: str,
    meanwhile: Callable[[], None] = lambda: None,
) -> list[_R]:
    """`fn` of each chunk in forked worker processes (what this process holds now is theirs, nothing
    pickled on the way in; each result is pickled back), while this process runs `meanwhile`.

    Args:
        fn: a module-level function (the workers call it by name).
        chunks: one task each.
        workers: processes to fork (`fork_workers`).
        names: the names of a chunk's items, for the error.
        lost: what the items of a chunk without a result are, for the error ("series pages not rendered").
        meanwhile: work for this process while the workers run.

    Returns:
        fn(chunk) for each chunk, in order.

    Raises:
        WorkerLost: a worker died (SIGKILL, out of memory): "... stopped ...; 12 <lost>: a, b, c and 9
            more". The other workers are stopped; none is left running.
        Exception: what `fn` raised in a worker, or `meanwhile` here.
    """
    pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"), initializer=die_with_parent,
                               initargs=(os.getpid(),))
    try:
        futures = [pool.submit(fn, chunk) for chunk in chunks]
        meanwhile()
        out: list[_R] = []
        missing: list[str] = []
        for chunk, future in zip(chunks, futures, strict=True):
            try:
                out.append(future.result())
            except BrokenProcessPool:
                missing.extend(names(chunk))
        if missing:
            more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
            raise WorkerLost(f"a forked worker stopped (killed? out of memory?); {len(missing)} {lost}: "
                             f"{', '.join(missing[:3])}{more}")
        return out
    finally:
        # A broken pool has stopped its workers already; otherwise wait for those still running
        # (`meanwhile` raised) and drop the tasks not started.
        pool.shutdown(wait=True, cancel_futures=True)
