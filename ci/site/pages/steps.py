"""Each run's change against the run before it, for a whole series at once (numpy: 500,000 runs in a
full render): what the series tables colour, and what the commit and structure pages list."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from ci.records import Direction, Kind
from ci.site.model import Series
from ci.verdicts import passes_gate


@dataclass(frozen=True)
class Steps:
    """Per run of a series: the ratio to the run before (the last one with a value) and that run's value, the change's
    colour class code (1 worse, -1 better, 2 past the threshold but of unknown direction, so never
    coloured; 0 inside the series' noise threshold at that commit), that threshold, and whether the
    run failed its correctness gate."""

    ratio: np.ndarray
    prev: np.ndarray
    code: np.ndarray
    threshold: np.ndarray
    failed: np.ndarray

    def cls(self, i: int) -> str:
        return CLASS[int(self.code[i])]


# A run's colour class by its `Steps.code`.
CLASS = {0: "", 1: "worse", -1: "better", 2: "moved"}


def steps_of(s: Series) -> Steps:
    """The changes of every run of `s` at once (numpy: 500,000 runs in a full render)."""
    n = len(s)
    values = s.values
    thr = np.fromiter(map(s.thresholds.get, s.shas, itertools.repeat(math.nan, n)), dtype=float, count=n)
    finite = np.isfinite(values)
    last = np.maximum.accumulate(np.where(finite, np.arange(n), -1))  # last run with a value, up to i
    before = np.concatenate(([-1], last[:-1])) if n else last
    with np.errstate(divide="ignore", invalid="ignore"):
        prev = np.where(before >= 0, values[np.maximum(before, 0)], np.nan)
        ratio = np.where((prev != 0) & finite, values / prev, np.nan)
        size = np.abs(np.log(ratio))
        beyond = np.isfinite(size) & np.isfinite(thr) & (size > np.log1p(thr))
    worse = (ratio > 1) == (s.benchmark.direction == Direction.LOWER)
    if s.by_difference:  # at or through zero: its thresholds are differences (ci.verdicts.by_difference)
        ratio = np.where((prev > 0) & (values > 0), ratio, np.nan)
        beyond = finite & (before >= 0) & np.isfinite(thr) & (np.abs(values - prev) > thr)
        worse = (values > prev) == (s.benchmark.direction == Direction.LOWER)
    if s.benchmark.kind == Kind.EXACT:  # any change is a change (ci.verdicts.exact), also to or from zero
        beyond = finite & (before >= 0) & (values != prev)
        worse = (values > prev) == (s.benchmark.direction == Direction.LOWER)
    # A series of unknown direction: a change past its noise is listed (code 2), never coloured either way.
    judged = np.where(worse, 1, -1) if s.benchmark.direction != Direction.UNKNOWN else 2
    code = np.where(beyond, judged, 0)
    failed = np.zeros(n, dtype=bool)
    if s.gate is not None:
        # as `gate_ok`: a value that is not finite neither passes nor fails
        failed = finite & ~passes_gate(values, s.gate)
    return Steps(ratio, prev, code, thr, failed)


def typical(values: np.ndarray) -> float:
    """The median of the finite values (what a chart's axis is scaled to), NaN when none."""
    vals = np.sort(values[np.isfinite(values)], kind="stable")
    return float(vals[len(vals) // 2]) if vals.size else math.nan
