"""How many forked workers a piece of work is split over: the one rule shared by the dashboard's
pools (judging series, rendering series pages) and ingest's forked parser."""

from __future__ import annotations

import multiprocessing
import os


def fork_workers(items: int, least: int) -> int:
    """How many forked workers to split `items` independent pieces of work over: every CPU this
    process may use (at most 8), or 1 (do it here) on one CPU, for fewer than `least` items, or
    where there is no fork (macOS, Windows)."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    if cpus < 2 or items < least or "fork" not in multiprocessing.get_all_start_methods():
        return 1
    return min(cpus, 8)
