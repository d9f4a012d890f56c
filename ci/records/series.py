"""Series records: what a benchmark is (`Benchmark`: its name, parameters, unit, direction and
kind), one measurement of it (`Result`), and how a benchmark's declaration says which way is better
(`declared_semantics`, `is_worse`).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import StrEnum
from functools import cached_property, lru_cache


class Direction(StrEnum):
    """Which way is better for a benchmark's value."""

    LOWER = "lower"  # latency, error, memory
    HIGHER = "higher"  # throughput, agreement
    # Neither declared nor implied by asv's type or a known unit: a change is reported with its
    # size, never judged better or worse (`is_worse` answers None).
    UNKNOWN = "unknown"


class Kind(StrEnum):
    LATENCY = "latency"
    THROUGHPUT = "throughput"
    CORRECTNESS = "correctness"
    MEMORY = "memory"
    OTHER = "other"  # a tracked value whose unit the service does not know
    # A value the suite declares exact (`exact = True` beside `direction`: a count, a size, the same on
    # every run and machine): compared without noise thresholds or statistics (`ci.verdicts.exact`).
    EXACT = "exact"


@dataclass(frozen=True)
class Benchmark:
    """One series identity: an asv benchmark name plus one point of its parameter grid."""

    name: str  # asv name, e.g. "bench_attention.GPUTime.time_gpu"
    params: tuple[tuple[str, str], ...] = ()  # (param_name, value) in asv's declared order
    unit: str = "seconds"
    direction: Direction = Direction.LOWER
    kind: Kind = Kind.LATENCY

    @property
    def suite(self) -> str:
        """The benchmark file (asv module), used to group series on the dashboard."""
        return self.name.split(".", 1)[0]

    @property
    def judged(self) -> bool:
        """Whether its changes are judged better or worse against its noise: a performance series of
        known direction (correctness and exact series have rules of their own)."""
        return self.kind not in (Kind.CORRECTNESS, Kind.EXACT) and self.direction != Direction.UNKNOWN

    # Cached on the instance (a frozen dataclass's __dict__ takes it; equality, hashing and repr
    # see only the fields): every result of a history names its series by key, and rebuilding the
    # text cost ~1 us a call, 500,000 calls per change-point pass and per dashboard render (2026-12-01).
    @cached_property
    def params_label(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.params)

    @cached_property
    def key(self) -> str:
        """Stable text identity of the series (name plus params)."""
        return f"{self.name}({self.params_label})" if self.params else self.name

    def __reduce__(self) -> tuple[object, tuple[object, ...]]:
        # Pickled as its fields' texts, unpickled through a cache of instances: a parsed result
        # file names ~500 series, and the default pickle (a dict per instance, each enum member
        # looked up by value) made unpickling a parsed run cost ~9 ms, ~4.6 ms so (2026-12-02,
        # 2-core box). Ingest's blocks cross in a compacter form (`ci.ingest.reading._wire`);
        # this serves the points checked one by one and the dashboard pools' returns.
        return _benchmark, (self.name, self.params, self.unit, str(self.direction), str(self.kind))


@lru_cache(maxsize=65536)
def _benchmark(name: str, params: tuple[tuple[str, str], ...], unit: str, direction: str, kind: str) -> Benchmark:
    """A Benchmark from its pickled fields; the same instance for the same fields (it is frozen)."""
    return Benchmark(name, params, unit, Direction(direction), Kind(kind))


# The order of asv's statistics of a point: `PointBlock.stats` columns, the store's result columns
# and `Result.stats`.
STAT_NAMES = ("ci_99_a", "ci_99_b", "q_25", "q_75", "number", "repeat")
# The statistics that are values of the measured quantity (scaled with it); number and repeat are counts.
_VALUE_STATS = frozenset({"ci_99_a", "ci_99_b", "q_25", "q_75"})
_NO_SPREAD = (math.nan, math.nan, math.nan)
# asv rounds the statistics it records to 5 significant digits: a relative error of up to 5e-5.
RECORDED_ROUNDING = 1e-4


def recorded_spread(stats: Sequence[float] | None) -> tuple[float, float, float]:
    """(q25, q75, samples) of a point asv kept one value of, from its statistics in `STAT_NAMES`
    order: the quartiles asv computed of its `repeat` samples. NaNs where it recorded no ordered pair
    of quartiles (a track_ benchmark, a point with raw samples: `stats` None); samples NaN where
    `repeat` is missing or not a count."""
    if stats is None or len(stats) != len(STAT_NAMES):
        return _NO_SPREAD
    q25, q75, reps = stats[2], stats[3], stats[5]
    if not (math.isfinite(q25) and math.isfinite(q75) and q25 <= q75):
        return _NO_SPREAD
    return (q25, q75, reps if math.isfinite(reps) and reps >= 1 and reps == int(reps) else math.nan)


@dataclass(frozen=True)
class Result:
    """One measurement of one series on one commit and machine, with its raw samples.

    `stats` is what asv recorded of a point without raw samples besides its value, in `STAT_NAMES`
    order (the 99 % interval of the median, the quartiles, `number` and `repeat`), NaN where asv
    recorded none. Most CI histories record one value per point (asv without `--record-samples`):
    then `samples` is `(value,)` and these statistics are all that is known of the point's own noise
    (`ci.verdicts.ab` decides with them as asv compare does). None where the point has raw samples
    (the evidence itself; asv computed its statistics from them) or the source kept none (a record
    built by hand).
    """

    benchmark: Benchmark
    commit_sha: str
    machine: str
    samples: tuple[float, ...]
    run_id: str = ""  # one asv result file (commit × machine × environment × time)
    started_at: datetime | None = None
    environment: tuple[tuple[str, str], ...] = field(default=(), compare=False)
    # asv's `version` of the benchmark code that measured it (None: unknown). A benchmark whose
    # version changed measures something else: asv drops the older results, and so do we.
    benchmark_version: str | None = field(default=None, compare=False)
    stats: tuple[float, ...] | None = field(default=None, compare=False)

    def asv_stats(self) -> dict[str, float] | None:
        """asv's `stats` dict of the point (the recorded statistics by name, as asv compare passes
        them to `asv._stats.is_different`); None when its 99 % interval was not recorded, or does not
        hold the point's value (asv's interval is of the median it records, to 5 significant digits:
        every one of 17,879 points of three real histories holds its value; a file whose value was
        rewritten without its statistics was "improved 0.642x" beside an interval of [1.020, 1.158])."""
        st = self.stats
        if st is None or len(st) != len(STAT_NAMES) or not (math.isfinite(st[0]) and math.isfinite(st[1])):
            return None
        value, slack = self.value, RECORDED_ROUNDING * max(abs(st[0]), abs(st[1]))
        if not st[0] - slack <= value <= st[1] + slack:
            return None
        return {name: x for name, x in zip(STAT_NAMES, st, strict=True) if math.isfinite(x)}

    def scaled(self, factor: float) -> Result:
        """This result with every measured value times `factor`: its samples and the statistics that
        are values (interval, quartiles; `number` and `repeat` kept). What a step of that size would
        have recorded."""
        stats = self.stats
        if stats is not None:
            stats = tuple(x * factor if name in _VALUE_STATS else x for name, x in zip(STAT_NAMES, stats, strict=False))
        return replace(self, samples=tuple(x * factor for x in self.samples), stats=stats)

    @property
    def value(self) -> float:
        """The median of the samples (asv's reported value), NaN when nothing was measured."""
        finite = [s for s in self.samples if math.isfinite(s)]
        return statistics.median(finite) if finite else math.nan

    @property
    def spread(self) -> tuple[float, float]:
        """Interquartile range of the samples, (q25, q75); (value, value) for one sample."""
        finite = sorted(s for s in self.samples if math.isfinite(s))
        if len(finite) < 2:
            return (self.value, self.value)
        q = statistics.quantiles(finite, n=4, method="inclusive")
        return (q[0], q[2])


def current_version(series: Sequence[Result]) -> list[Result]:
    """The results of one series measured by its newest benchmark version (that of the last result
    in history order), as asv keeps only the current version's results; results of an unknown
    version (None) count as the current one.

    Args:
        series: results of one series, oldest first.

    Returns:
        The results to analyse, order kept.
    """
    _, keep = current_versions([r.benchmark_version for r in series])
    return list(series) if keep is None else [r for r in series if r.benchmark_version in keep]


def current_versions(versions: Sequence[str | None]) -> tuple[str | None, frozenset[str | None] | None]:
    """`current_version`'s rule over a series' benchmark versions alone (one per result, oldest first),
    for the readers of columns (`ci.store` series columns) rather than of Results.

    Returns:
        (the current version: the newest known one, None where none is known; the versions whose
        results count: None where all do, at most one version being known, else the current one and
        None).
    """
    latest = next((v for v in reversed(versions) if v is not None), None)
    if len(set(versions) - {None}) <= 1:
        return latest, None
    return latest, frozenset({latest, None})


# The units the asv suite uses for `track_*` benchmarks, which way is better for each and what
# kind of value it is. Shared contract between benchmarks/ (which sets `unit` and `direction`) and
# ci/ (which reads asv's benchmarks.json): time_* is seconds/lower, peakmem_* bytes/lower. A result
# file written before the suite declared `direction` is read through this table.
UNIT_SEMANTICS: dict[str, tuple[Direction, Kind]] = {
    "seconds": (Direction.LOWER, Kind.LATENCY),
    "bytes": (Direction.LOWER, Kind.MEMORY),
    "images/s": (Direction.HIGHER, Kind.THROUGHPUT),
    "tokens/s": (Direction.HIGHER, Kind.THROUGHPUT),
    "TFLOP/s": (Direction.HIGHER, Kind.THROUGHPUT),
    "max abs diff": (Direction.LOWER, Kind.CORRECTNESS),
    "top-1 agreement": (Direction.HIGHER, Kind.CORRECTNESS),
}
# asv's benchmark types (asv_runner 0.3 writes time, track, memory, peakmemory; older asv mem, peakmem).
_TIME_TYPES = frozenset({"time", "timeraw"})
_MEMORY_TYPES = frozenset({"memory", "peakmemory", "mem", "peakmem"})


def declared_semantics(bench_type: str, unit: str, direction: object = None, exact: object = None
                       ) -> tuple[Direction, Kind]:
    """Direction and kind of an asv benchmark from its declaration, never a guess.

    Args:
        bench_type: asv's `type` (time and memory benchmarks: lower is better, by what they measure).
        unit: asv's `unit` (a unit on `UNIT_SEMANTICS` implies a direction and a kind).
        direction: the suite's explicit `direction` attribute ("higher" / "lower"; None when the
            benchmark declares none, e.g. in result files written before the suite had it).
        exact: the suite's `exact` attribute (True: the value is exact, `Kind.EXACT`; anything else,
            or a benchmark type other than track: not).

    Returns:
        (direction, kind): the explicit direction wins over the unit's; `Direction.UNKNOWN` when
        neither the declaration, the type nor the unit says, or the declared value is not
        "higher"/"lower"; `Kind.OTHER` for a unit the service does not know; `Kind.EXACT` for a track
        benchmark declared exact.
    """
    if bench_type in _TIME_TYPES:
        return Direction.LOWER, Kind.LATENCY
    if bench_type in _MEMORY_TYPES:
        return Direction.LOWER, Kind.MEMORY
    implied, kind = UNIT_SEMANTICS.get(unit, (Direction.UNKNOWN, Kind.OTHER))
    if exact is True:
        kind = Kind.EXACT
    if direction is None:
        return implied, kind
    declared = direction.lower() if isinstance(direction, str) else None
    if declared in (Direction.LOWER, Direction.HIGHER):
        return Direction(declared), kind
    return Direction.UNKNOWN, kind


def is_worse(direction: Direction, ratio: float, threshold: float | None = None) -> bool | None:
    """Whether `ratio` (new / old) is a change for the worse: True, False, or None when the
    direction is unknown (the change is reported, not judged). The one "worse" of the verdicts, the
    PR comment and the dashboard.

    With `threshold` (the relative change a series' noise allows; the dashboard's colours): None also
    inside it (in log terms, so +10% and -9.1% weigh alike) and where the ratio or the threshold is
    not finite (a NaN threshold: the noise is not known yet, which colours nothing).
    """
    if threshold is not None:
        if not (math.isfinite(ratio) and ratio > 0 and math.isfinite(threshold)):
            return None
        if abs(math.log(ratio)) <= math.log1p(threshold):
            return None
    if direction == Direction.LOWER:
        return ratio > 1.0
    if direction == Direction.HIGHER:
        return ratio < 1.0
    return None


def is_worse_step(direction: Direction, before: float, after: float) -> bool | None:
    """`is_worse` for a change from level `before` to `after` where a ratio may not exist (a series
    at or through zero, judged by difference): True, False, or None when the direction is unknown."""
    if direction == Direction.LOWER:
        return after > before
    if direction == Direction.HIGHER:
        return after < before
    return None
