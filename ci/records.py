"""Typed records shared by the whole service: ingest writes them, the store mirrors them in
SQLAlchemy models, and the verdict code, the PR comment and the dashboard read them.
`ParsedRun` (one asv result file, as `ci.ingest` parses it) is what the store's write side takes.

Plain frozen dataclasses, no torch, no SQLAlchemy: everything downstream of the store can be
tested on hand-built records.
"""

from __future__ import annotations

import math
import statistics
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import StrEnum
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Protocol


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


class Outcome(StrEnum):
    REGRESSED = "regressed"
    IMPROVED = "improved"
    UNCHANGED = "unchanged"
    INCONCLUSIVE = "inconclusive"  # not enough evidence either way: ask for more samples
    FAILED = "failed"  # a correctness gate failed, or a benchmark failed to run on head: no statistics apply
    CHANGED = "changed"  # an exact series moved (any size is a change); not a regression by itself


# Reasons of the verdicts on series measured on one side only, or crashed, or of unknown direction
# (`ci.verdicts`); the PR comment groups by them.
NEW_SERIES = "new series: no base measurement to compare with"
MISSING_ON_HEAD = "missing on head: removed, renamed or skipped"
FAILED_ON_HEAD = "failed to run on head: asv recorded an error (see the job log)"
UNKNOWN_DIRECTION = "unknown direction: the benchmark declares no `direction` and its unit is not one the service knows"
# A series with no measurement on base (it failed there, on head too or not): nothing to compare it
# with. Not a pass: the comment lists it as not compared.
NOT_ON_BASE = "not compared: failed to run on base"
FAILED_BOTH = f"{NOT_ON_BASE} and on head (see the job log)"
NO_BASE_SAMPLES = f"{NOT_ON_BASE}: base has no finite samples (benchmark failed or skipped there)"
# A slower tail (the upper quartile or the mean past the threshold) that the rule cannot confirm as a
# regression (`ci.verdicts.ab`): a slowdown shown as such, never "unchanged", whatever the median says.
UNCONFIRMED_SLOWDOWN = "unconfirmed slowdown"
# A series whose base and head were not measured in one job, and whose between-job drift the
# history cannot tell (`ci.verdicts.jobs`): no in-job test can judge it.
WITHHELD_OTHER_JOB = (
    "withheld: base and head were not measured in one job and this series' between-job drift is unknown"
)

# The key of a run's environment that names the job which measured it: one asv invocation of the
# runner, unique to it (`ci.runner.config.call_marker`). The runner records it in the commit's GPU
# sidecar beside the sha256 of each result file that invocation wrote, and ingest sets it only on a
# run whose file still has that digest (`ci.ingest.asv_files.read_gpu_sidecar`; `ci.verdicts.jobs`).
# Not "job", the key of the markers written before they were bound to their files: a per-commit
# marker that any later `asv run` of the commit inherited, so a store's "job" values prove nothing.
JOB_KEY = "asv_call"


@dataclass(frozen=True)
class Machine:
    """Where a series is measured: one asv machine name, one asv environment, one host. asv keys a
    result by machine and environment (`conda-py3.11-...`, `virtualenv-py3.12`), and one machine name
    may be given to several hosts: results of two environments or two hosts are never one series.

    `name` is the store's key of it: asv's machine name for the first environment and host a store
    saw under that name, "<machine> [<environment>]" for another environment and
    "<machine> [<environment>, host <k>]" for another host (`ci.store.hosts`); `label` is what a
    reader is shown. The GPU fields come from the GPU sidecar (asv's machine file has none).
    A record built by hand with only a name is its own asv machine, environment unknown.
    """

    name: str
    gpu: str = ""
    driver: str = ""
    cuda: str = ""
    torch: str = ""
    triton: str = ""
    cpu: str = ""
    extra: tuple[tuple[str, str], ...] = ()
    asv_name: str = ""  # asv's machine name ("": the same as `name`)
    env_name: str = ""  # asv's environment name ("": unknown)
    host: tuple[tuple[str, str], ...] = ()  # `ci.store.hosts.host_fingerprint` of the host

    @property
    def machine_name(self) -> str:
        """asv's machine name."""
        return self.asv_name or self.name


def machine_labels(machines: Sequence[Machine]) -> dict[str, str]:
    """What a reader is shown for each machine key: asv's machine name where that name has one
    environment and one host in `machines`, else the name with the environment (and, for a second
    host under one name, the key's host number).

    Args:
        machines: the store's machines (`StoreReader.machines`).

    Returns:
        machine key -> label.
    """
    by_name: dict[str, list[Machine]] = {}
    for m in machines:
        by_name.setdefault(m.machine_name, []).append(m)
    out = {}
    for name, group in by_name.items():
        for m in group:
            if len(group) == 1 or m.name != name or not m.env_name:
                out[m.name] = name if len(group) == 1 else m.name  # a second one's key names it already
            else:  # the first environment and host seen under the name, among others
                out[m.name] = f"{name} [{m.env_name}]"
    return out


@dataclass(frozen=True)
class Commit:
    """A commit as the store knows it. `position` is its place in git's history, read by ingest from a
    checkout (`ci.ingest.git`: its generation, which grows along every line of history); None where
    no git metadata was read. History order is by position, by `time` only among commits without one."""

    sha: str
    parents: tuple[str, ...] = ()
    branch: str = ""
    time: datetime | None = None
    subject: str = ""
    position: int | None = None


@dataclass(frozen=True)
class Project:
    """What the project's asv.conf.json says that the service uses: its name, its URLs and the
    thresholds of its regressions. Kept in the store's settings by ingest (`ci.project`), so the
    commands that decide or write (compare, comment, the runner, the dashboard) read one set.

    Attributes:
        name: the project's name (asv's `project`); "" unknown.
        url: its home page (`project_url`); "" none.
        commit_url: prefix of a commit's web page, the sha appended (`show_commit_url`); "" none.
        thresholds: `regressions_thresholds` as (regex, relative change) pairs in the file's order.
        source: the file they were read from ("" none: the built-in defaults).
    """

    name: str = ""
    url: str = ""
    commit_url: str = ""
    thresholds: tuple[tuple[str, float], ...] = ()
    source: str = ""

    @property
    def title(self) -> str:
        """What the comment's heading and the dashboard's pages call the project's benchmarks."""
        return f"{self.name} benchmarks" if self.name else "Benchmarks"

    @classmethod
    def from_asv_conf(cls, conf: object, source: str = "") -> Project:
        """The project of an asv.conf.json's parsed content (its other keys are ignored).

        Args:
            conf: the file's top-level object, as asv's loader returns it.
            source: where it came from, named in errors and kept on the record.

        Returns:
            A Project; a URL that is not http(s) (asv's default "#", a relative path) reads as none.

        Raises:
            ValueError: not an object, a name or URL that is not a string, or `regressions_thresholds`
                that is not an object of regex -> non-negative finite number.
        """
        where = f"{source}: " if source else ""
        if not isinstance(conf, dict):
            raise ValueError(f"{where}asv.conf.json must hold an object, got {type(conf).__name__}")
        text = {}
        for key in ("project", "project_url", "show_commit_url"):
            value = conf.get(key, "")
            if value is None:
                value = ""
            if not isinstance(value, str):
                raise ValueError(f"{where}{key} must be a string, got {value!r}")
            text[key] = value.strip()
        raw = conf.get("regressions_thresholds") or {}
        if not isinstance(raw, dict):
            raise ValueError(f"{where}regressions_thresholds must be an object of regex -> number, got {raw!r}")
        pairs = []
        for pattern, value in raw.items():
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
                raise ValueError(f"{where}regressions_thresholds: {pattern!r} must map to a non-negative number, "
                                 f"got {value!r}")
            pairs.append((str(pattern), float(value)))

        def link(url: str) -> str:
            return url if url.startswith(("http://", "https://")) else ""

        return cls(name=text["project"], url=link(text["project_url"]), commit_url=link(text["show_commit_url"]),
                   thresholds=tuple(pairs), source=source)  # fmt: skip

    def as_asv_conf(self) -> dict[str, object]:
        """The inverse of `from_asv_conf`: these fields under asv.conf.json's names (and `source`)."""
        return {"project": self.name, "project_url": self.url, "show_commit_url": self.commit_url,
                "regressions_thresholds": dict(self.thresholds), "source": self.source}  # fmt: skip


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
        # 2-core box). Ingest's blocks cross in a compacter form (`ci.ingest.results_dir._wire`);
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
        them to `asv._stats.is_different`); None when its 99 % interval was not recorded."""
        st = self.stats
        if st is None or len(st) != len(STAT_NAMES) or not (math.isfinite(st[0]) and math.isfinite(st[1])):
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


@dataclass(frozen=True, kw_only=True)
class Verdict:
    """The decision about one series between a base and a head (A/B) or at a change point."""

    benchmark: Benchmark
    outcome: Outcome
    base_value: float
    head_value: float
    ratio: float  # head / base (for either direction; the outcome applies the direction)
    ci_low: float = math.nan  # confidence interval of the ratio
    ci_high: float = math.nan
    p_value: float = math.nan
    threshold: float = math.nan  # the relative change this series needed, adapted to its noise
    base_sha: str = ""
    head_sha: str = ""
    reason: str = ""
    # The machine whose results were judged ("" for a verdict stored before verdicts had one,
    # which applies to every machine's series). Fields are keyword-only: 13 of them read wrongly by position.
    machine: str = ""


@dataclass(frozen=True)
class Acknowledgement:
    """A maintainer's note that a regression is expected (or fixed elsewhere)."""

    benchmark_key: str
    commit_sha: str
    who: str
    why: str
    when: datetime


class AlertKind(StrEnum):
    """What a history job alerts on."""

    REGRESSION = "regression"  # a change point of the history detector that made a series worse
    GATE = "gate"  # a failed correctness gate at one commit


class AlertState(StrEnum):
    """Where an alert is: found and kept until a job exits 1 with it (reported), or closed by `ci ack`."""

    DETECTED = "detected"
    REPORTED = "reported"
    ACKNOWLEDGED = "acknowledged"


@dataclass(frozen=True)
class Alert:
    """A regression change point or a failed correctness gate of a history, kept by the store from
    the moment it is found until a history job has reported it (exit 1) or a maintainer has
    acknowledged it, so that a job that stops after ingesting loses none (`ci.runner.alerts`).

    One per (kind, series, machine, commit): a step the detector moves to another commit as more
    commits are measured is another alert.
    """

    kind: AlertKind
    benchmark: Benchmark
    machine: str  # the machine key whose series it is (`Machine.name`)
    commit_sha: str  # the first commit after the step (a regression), the commit judged (a gate)
    state: AlertState = AlertState.DETECTED
    previous_sha: str = ""  # a regression: the last commit before the step ("" for a gate)
    ratio: float = math.nan  # a regression: after / before; a gate: worst value / limit
    p_value: float = math.nan
    reason: str = ""  # what was found, in words
    detected_at: datetime | None = None  # set by the store
    reported_at: datetime | None = None
    acknowledged_at: datetime | None = None

    @property
    def key(self) -> tuple[str, str, str, str]:
        """(kind, series key, machine, commit): what makes two alerts the same one."""
        return (str(self.kind), self.benchmark.key, self.machine, self.commit_sha)


@dataclass(frozen=True)
class RunReplacement:
    """A stored run (one asv result file: machine x commit x environment) replaced by another file's.

    asv rewriting its own file in place (`--append-samples`, a re-run) replaces the run from the same
    source; a file of another results folder replaces it only when the user says so (`ci ingest
    --replace`: `forced`). The store keeps a record of each.
    """

    run_key: str
    old_source: str  # the file the replaced run was ingested from
    new_source: str  # the file that replaced it
    old_digest: str  # their sha256
    new_digest: str
    forced: bool  # from another source, by `--replace`
    when: datetime


@dataclass(frozen=True)
class ParsedPoint:
    """One point of a benchmark's parameter grid in one run."""

    benchmark: Benchmark
    status: str  # "ok", "failed" (asv null) or "skipped" (asv NaN)
    samples: tuple[float, ...]  # raw samples; (value,) when asv ran without --record-samples
    has_raw_samples: bool
    value: float | None  # asv's reported value (the median); None unless status == "ok"
    stats: dict[str, float]  # ci_99_a, ci_99_b, q_25, q_75, number, repeat when asv recorded them
    benchmark_version: str | None
    started_at: datetime | None
    duration: float | None
    key: str = ""  # benchmark.key, computed once per grid instead of once per point

    def __post_init__(self) -> None:
        if not self.key:
            object.__setattr__(self, "key", self.benchmark.key)


@dataclass(frozen=True)
class PointBlock:
    """The points of one benchmark's parameter grid in one run, kept as columns: what the parse
    gives for the common case (every point "ok" and checked column by column), instead of one
    `ParsedPoint` each (2026-12-02: the per-point records and stats dicts were a third of the parse).
    `ParsedRun.all_points()` turns a block into the `ParsedPoint`s it stands for."""

    benches: tuple[tuple[Benchmark, str], ...]  # per point: its series and the series' key
    values: Sequence[float]  # asv's reported value (the median) per point
    samples: Sequence[Sequence[float]]  # per point its raw samples; (value,) when asv recorded none
    has_raw_samples: bool
    stats: tuple[Sequence[float | None], ...]  # per `STAT_NAMES` column, a value (None: not recorded) per point
    benchmark_version: str | None
    started_at: datetime | None
    duration: float | None
    # The store's column values of this block (`ci.store.codec.pack_block`) when they were made
    # already (by ingest's forked parser, `ci.ingest.results_dir`): the same as packing the fields.
    packed: tuple[bytes, bytes, bytes, bytes] | None = field(default=None, compare=False, repr=False)

    def __len__(self) -> int:
        return len(self.benches)

    def points(self) -> list[ParsedPoint]:
        """The block as `ParsedPoint`s, in grid order."""
        rows = zip(*self.stats, strict=True)
        return [
            ParsedPoint(bench, "ok", tuple(samples), self.has_raw_samples, value,
                        {s: x for s, x in zip(STAT_NAMES, row, strict=True) if x is not None},
                        self.benchmark_version, self.started_at, self.duration, key)
            for (bench, key), value, samples, row in zip(self.benches, self.values, self.samples, rows, strict=True)
        ]  # fmt: skip


@dataclass(frozen=True)
class ParsedRun:
    """One asv result file: a run of the suite on one commit, machine and environment."""

    path: Path
    run_key: str  # "<machine>/<commit_hash>/<env_name>": asv overwrites the same file for the same key
    digest: str  # sha256 of the file bytes: re-ingesting identical bytes is a no-op
    machine: str
    commit_hash: str
    commit_time: datetime | None  # asv's "date": the commit's time, not the run's
    env_name: str
    started_at: datetime | None  # earliest benchmark start in the file
    environment: tuple[tuple[str, str], ...]
    points: tuple[ParsedPoint, ...]
    skipped_unknown: tuple[str, ...]  # benchmark names absent from benchmarks.json (asv ignores them too)
    skipped_stale: tuple[str, ...]  # results whose benchmark version differs from benchmarks.json
    # The run's other points, a benchmark's grid per block (`PointBlock`): `points` holds only those
    # the parse checked one by one (failed or skipped points, ints, a missing statistic, ...).
    blocks: tuple[PointBlock, ...] = ()
    # asv's machine fields recorded in the file itself (`params`: arch, cpu, num_cpu, os, ram), which
    # describe the host at the time of the run (machine.json holds the latest `asv machine`'s).
    host_info: tuple[tuple[str, str], ...] = ()

    @property
    def n_points(self) -> int:
        """How many points the run holds, in `points` and `blocks` together."""
        return len(self.points) + sum(map(len, self.blocks))

    def all_points(self) -> list[ParsedPoint]:
        """Every point of the run as a `ParsedPoint`: the blocks' (in file order), then `points`."""
        out = [p for block in self.blocks for p in block.points()]
        out.extend(self.points)
        return out


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


class StoreReader(Protocol):
    """What the verdict code, the PR comment and the dashboard read from the store.

    Implemented by `ci.store.StoreReads`, the store's read side (so by `ci.store.Store`); tests and
    tools may implement it in memory (`tools.fixtures.MemoryStore`).
    """

    def machines(self) -> list[Machine]: ...

    def commits(self, branch: str | None = None) -> list[Commit]:
        """Commits in history order (oldest first: git's topology, `Commit.position`, and commit time
        only for commits without one); with `branch`, only that branch's."""
        ...

    def benchmarks(self) -> list[Benchmark]: ...

    def results(
        self,
        *,
        benchmark_key: str | None = None,
        machine: str | None = None,
        commit_sha: str | None = None,
    ) -> list[Result]:
        """Results filtered by any combination of series key, machine and commit, in commit
        history order (oldest first)."""
        ...

    def verdicts(self, *, head_sha: str | None = None) -> list[Verdict]: ...

    def acknowledgements(self) -> list[Acknowledgement]: ...

    def project(self) -> Project | None:
        """What the project's asv.conf.json said at the last ingest that found one; None: nothing known."""
        ...


@dataclass(frozen=True)
class SeriesColumns:
    """One series (a benchmark on one machine) as columns, its results in history order: what the
    history detector reads instead of one `Result` record per measurement.

    Attributes:
        benchmark: the series' identity.
        machine: where it was measured.
        commit_shas: per result, its commit (results of one commit are adjacent).
        runs: per result, the index of its run in the machine's `MachineHistory.runs`.
        counts: per result, how many samples it has in `samples`.
        samples: every result's samples, concatenated in result order (float64, native byte order).
        versions: per result, asv's benchmark version (None: unknown).
    """

    benchmark: Benchmark
    machine: str
    commit_shas: tuple[str, ...]
    runs: tuple[int, ...]
    counts: tuple[int, ...]
    samples: array
    versions: tuple[str | None, ...]


@dataclass(frozen=True)
class MachineHistory:
    """One machine's runs in history order, and its series as columns.

    Attributes:
        machine: the machine's name.
        runs: (run key, result file digest) of every run of this machine, history order; a series'
            results come from these runs.
        series: the series, by benchmark key; with `runs_after`, only results of the later runs.
    """

    machine: str
    runs: tuple[tuple[str, str], ...]
    series: tuple[SeriesColumns, ...]


class HistoryStore(StoreReader, Protocol):
    """A `StoreReader` that also serves series as columns and keeps the history detector's cached
    states (`ci.store.Store`); `ci.verdicts.history.detect_all` uses them when its source has them."""

    def series_columns(
        self,
        *,
        machine: str | None = None,
        branch: str | None = None,
        runs_after: dict[str, int] | None = None,
    ) -> list[MachineHistory]:
        """Every series as columns, per machine; `runs_after` {machine: k} leaves out the results of
        that machine's first k runs (in history order)."""
        ...

    def change_point_states(self, branch: str, settings: str) -> dict[tuple[str, str], tuple[int, str, bytes]]:
        """(benchmark key, machine) -> (runs covered, their digest chain, state bytes)."""
        ...

    def save_change_point_states(
        self, branch: str, settings: str, states: dict[tuple[str, str], tuple[int, str, bytes]]
    ) -> None:
        """Store states as `change_point_states` returns them, replacing older ones."""
        ...
