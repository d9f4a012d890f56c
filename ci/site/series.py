"""The records a dashboard snapshot is made of: a series (a benchmark on one machine) and its runs
(`Point`), the steps found in it (`ChangeMark`), regressions, series that stopped reporting, and the
correctness gate of each (`Series.gate`: `ci.verdicts.gates`' rules, which the charts draw)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ci.records import (
    Acknowledgement,
    Benchmark,
    Outcome,
    Verdict,
)
from ci.site.stats import series_slug
from ci.verdicts import Suspect, gate_of

# Suspicions withdrawn or confirmed within this many of the newest commits are still listed on the
# overview (older ones stay on their series page and the regressions page).
RECENT_COMMITS = 5


@dataclass(frozen=True, slots=True)
class Point:
    """One run of a series: where it sits in history, its value and interquartile range.

    `value` is the median of the samples, except for correctness series, where it is the worst
    sample: ci.verdicts.gates judges the worst repeat, and the dashboard must show what was judged.
    A series keeps its runs as columns (`Series`); these records are built on demand (`Series.points`,
    `Series.point`) for the few readers that want one run at a time.
    """

    index: int  # position of the commit in history (0 = oldest)
    sha: str
    value: float
    low: float
    high: float
    n: int


@dataclass(frozen=True)
class Regression:
    """A regression (or failed correctness gate) on one series at one commit, open or acknowledged."""

    benchmark: Benchmark
    sha: str
    outcome: Outcome
    ratio: float
    base_value: float
    head_value: float
    source: str  # "verdict" or "change point"
    # Machines whose series it flags: a verdict's own machine; every machine whose series holds that
    # commit for a verdict stored without one (before verdicts had a machine) or for a change point.
    machines: tuple[str, ...]
    base_sha: str = ""
    p_value: float = math.nan
    reason: str = ""
    ack: Acknowledgement | None = None
    # A later change point that brought the level back; for a verdict's failure, the next commit at which
    # the benchmark ran again.
    fixed_by: str = ""
    # A change point in a crowd of series stepping where the runs' recorded environment changed
    # (`ci.verdicts.AlertGroup.environment_change`): what changed; not blamed on the commit.
    environment: str = ""

    @property
    def is_open(self) -> bool:
        return self.ack is None and not self.fixed_by and not self.environment


@dataclass(frozen=True)
class ChangeMark:
    """A step found in the history by `ci.verdicts.history.change_points`."""

    sha: str
    ratio: float
    outcome: Outcome


_NO_INTS = np.zeros(0, dtype=np.int64)
_NO_FLOATS = np.zeros(0)


@dataclass(eq=False)
class Series:
    """A benchmark on one machine, its runs in history order as columns: `at` (the commit's position
    in history), `shas`, `values`, `lows`, `highs` and `ns` (see `Point`; `points` gives them as
    records). Columns, not 500,000 `Point` records: the pages read them whole (numpy) or a few rows.

    `thresholds` maps a commit sha to the relative change its series' recent noise allowed there
    (`ci.verdicts.noise_thresholds`: the change-point detector's size guard on the window before
    it); `threshold` is what the next commit will need. A change is coloured only past them. A
    series at or through zero (`by_difference`, `ci.verdicts.by_difference`) has no ratio: its
    thresholds are differences in its unit, and its changes are judged by difference.
    """

    benchmark: Benchmark
    machine: str
    at: np.ndarray = field(default_factory=lambda: _NO_INTS)
    shas: list[str] = field(default_factory=list)
    values: np.ndarray = field(default_factory=lambda: _NO_FLOATS)
    lows: np.ndarray = field(default_factory=lambda: _NO_FLOATS)
    highs: np.ndarray = field(default_factory=lambda: _NO_FLOATS)
    ns: np.ndarray = field(default_factory=lambda: _NO_INTS)
    changes: list[ChangeMark] = field(default_factory=list)
    suspects: list[Suspect] = field(default_factory=list)
    thresholds: dict[str, float] = field(default_factory=dict)
    threshold: float = math.nan
    by_difference: bool = False

    @property
    def points(self) -> list[Point]:
        """The runs as records, oldest first."""
        return list(map(Point, self.at.tolist(), self.shas, self.values.tolist(), self.lows.tolist(),
                        self.highs.tolist(), self.ns.tolist()))

    def point(self, i: int) -> Point:
        """Run `i` as a record."""
        return Point(int(self.at[i]), self.shas[i], float(self.values[i]), float(self.lows[i]), float(self.highs[i]),
                     int(self.ns[i]))

    def __len__(self) -> int:
        return len(self.shas)

    def __repr__(self) -> str:  # the runs as records: a snapshot's repr compares what a page shows
        return (f"Series(benchmark={self.benchmark!r}, machine={self.machine!r}, points={self.points!r}, "
                f"changes={self.changes!r}, suspects={self.suspects!r}, thresholds={self.thresholds!r}, "
                f"threshold={self.threshold!r}, by_difference={self.by_difference!r})")

    def set_runs(self, at: np.ndarray, shas: list[str], values: np.ndarray, lows: np.ndarray, highs: np.ndarray,
                 ns: np.ndarray) -> None:
        """Set the runs, sorted by position in history (a stable sort: runs of one commit keep their order)."""
        at = np.asarray(at, dtype=np.int64)
        cols = [np.asarray(values, dtype=float), np.asarray(lows, dtype=float), np.asarray(highs, dtype=float),
                np.asarray(ns, dtype=np.int64)]
        if at.size > 1 and (np.diff(at) < 0).any():
            order = np.argsort(at, kind="stable")
            at, cols = at[order], [c[order] for c in cols]
            shas = [shas[i] for i in order.tolist()]
        self.at, self.shas = at, list(shas)
        self.values, self.lows, self.highs, self.ns = cols

    @property
    def slug(self) -> str:
        return series_slug(self.benchmark.key, self.machine)

    @property
    def gate(self) -> tuple[float, bool] | None:
        return gate_of(self.benchmark)


@dataclass(frozen=True)
class NotReporting:
    """A series without a value at its machine's newest measured commit (`Snapshot.not_reporting`).

    Attributes:
        benchmark: the series.
        machine: its machine.
        since: failing: the first commit of its streak of failures; stopped: its last result.
        latest: the machine's newest measured commit.
    """

    benchmark: Benchmark
    machine: str
    since: str
    latest: str


def verdict_machines(v: Verdict) -> frozenset[str]:
    """The machines whose series a verdict is about; empty for a verdict stored without a machine
    (it applies to every machine's series, as before verdicts had one).

    Args:
        v: a stored verdict (`machine` may list several, comma-joined, for a pooled comparison).

    Returns:
        The machine names.
    """
    return frozenset(m for m in v.machine.split(",") if m)
