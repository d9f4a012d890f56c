"""What the dashboard shows, read once from a `StoreReader` into plain records.

One pass over the store (its columnar read, `series_columns`, when it has one) builds every series
(a benchmark on one machine: numbers from different GPUs are never mixed in one line), the
regressions (stored verdicts plus detected change points), the suspected regressions of the newest
commits (`ci.verdicts.suspects`), each series' noise threshold per commit (a change is coloured only
past it) and the acknowledgements. Pages are rendered from this snapshot only, so the store is
queried a fixed number of times however many pages there are.
"""

from __future__ import annotations

import hashlib
import io
import itertools
import json
import math
import zipfile
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from ci.forking import fork_map, fork_workers
from ci.records import (
    Acknowledgement,
    Benchmark,
    Commit,
    Direction,
    Kind,
    Machine,
    Outcome,
    Result,
    SeriesColumns,
    StoreReader,
    Verdict,
    current_version,
)
from ci.records import is_worse as records_is_worse
from ci.verdicts import (
    MAX_ABS_DIFF_LIMIT,
    TOP1_AGREEMENT_LIMIT,
    AlertGroup,
    ChangePoint,
    Suspect,
    SuspectState,
    SuspectTrack,
    change_points,
    commit_levels,
    detect_all,
    exact_steps,
    expire,
    group_changes,
    judge_levels,
)

# Correctness gates drawn on the charts, with ci.verdicts.gates' limits (one source of truth for the PR
# verdict and the dashboard). unit -> (limit, True when the value must stay strictly below it).
GATES: dict[str, tuple[float, bool]] = {
    "max abs diff": (MAX_ABS_DIFF_LIMIT, True),
    "top-1 agreement": (TOP1_AGREEMENT_LIMIT, False),
}

# Suspicions withdrawn or confirmed within this many of the newest commits are still listed on the
# overview (older ones stay on their series page and the regressions page).
RECENT_COMMITS = 5


class Point(NamedTuple):
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
    fixed_by: str = ""  # a later change point that brought the level back (change points only)
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
    it); `threshold` is what the next commit will need. A change is coloured only past them.
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
                f"threshold={self.threshold!r})")

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
        return GATES.get(self.benchmark.unit) if self.benchmark.kind == Kind.CORRECTNESS else None


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


@dataclass
class Snapshot:
    """Everything the pages need, read from the store in a fixed number of queries."""

    machines: list[Machine]
    commits: list[Commit]
    position: dict[str, int]
    series: list[Series]
    verdicts_by_sha: dict[str, list[Verdict]]
    regressions: list[Regression]
    acks: dict[tuple[str, str], Acknowledgement]
    environments: dict[str, dict[tuple[str, str], tuple[tuple[str, str], ...]]]  # sha -> (machine, run) -> env
    baseline_sha: str | None
    # sha -> points asv recorded as failed or skipped: (benchmark, machine, status). Read from
    # `store.failures()` when the store has it (ci.store.Store does; it is not in StoreReader).
    failures_by_sha: dict[str, list[tuple[Benchmark, str, str]]] = field(default_factory=dict)
    # The store's columns as this snapshot read them, for the next render (`ColumnsCache`); None for
    # a store without columns.
    columns: ColumnsCache | None = field(default=None, repr=False, compare=False)
    # Each series' suspicion test as this snapshot left it (`ci.verdicts.SuspectTrack`, by
    # `track_name`), for the next render.
    tracks: dict[str, SuspectTrack] = field(default_factory=dict, repr=False, compare=False)
    # The crowds of change points: many series stepping at one commit of a machine, one alert each
    # (`ci.verdicts.group_changes`), newest first.
    groups: list[AlertGroup] = field(default_factory=list)

    def recent(self, sha: str) -> bool:
        """Whether `sha` is among the RECENT_COMMITS newest commits."""
        return self.position.get(sha, -1) >= len(self.commits) - RECENT_COMMITS

    @property
    def open_suspects(self) -> list[Suspect]:
        """Suspected regressions not (yet) covered by an open regression of the same series and
        commit, newest first: what the overview's banner counts beside the regressions."""
        covered = {(r.benchmark.key, m, r.sha) for r in self.regressions if r.is_open for m in r.machines}
        out = [x for s in self.series for x in s.suspects if x.state == SuspectState.SUSPECTED
               and (x.benchmark.key, x.machine, x.commit_sha) not in covered]
        return sorted(out, key=lambda x: (-self.position[x.commit_sha], x.benchmark.key, x.machine))

    def not_reporting(self) -> tuple[list[NotReporting], list[NotReporting]]:
        """Series a reader must not take for fine: those failing at their machine's newest measured
        commit ("failing since" the first of that streak of failures; a correctness check skipped
        where it ran before counts: a check that did not run is not a pass), and those that stopped
        reporting (no result and no failure at the machine's two newest measured commits: "no
        results since" their last result). Newest first.

        Returns:
            (failing, stopped).
        """
        pos = self.position
        runs: dict[str, set[str]] = defaultdict(set)  # machine -> the commits it measured
        for sha, envs in self.environments.items():
            for machine, _ in envs:
                runs[machine].add(sha)
        failed_at: dict[tuple[str, str], set[str]] = defaultdict(set)  # (series key, machine) -> commits
        benches: dict[str, Benchmark] = {}
        has_results = {(s.benchmark.key, s.machine) for s in self.series if len(s)}
        for sha, fails in self.failures_by_sha.items():
            for bench, machine, status in fails:
                runs[machine].add(sha)
                if status == "failed" or (bench.kind == Kind.CORRECTNESS and (bench.key, machine) in has_results):
                    failed_at[(bench.key, machine)].add(sha)
                    benches[bench.key] = bench
        order = {m: sorted(shas, key=pos.__getitem__) for m, shas in runs.items() if shas}
        failing = []
        for (key, machine), shas in failed_at.items():
            seq = order[machine]
            if seq[-1] not in shas:
                continue
            k = len(seq) - 1
            while k > 0 and seq[k - 1] in shas:
                k -= 1
            failing.append(NotReporting(benches[key], machine, seq[k], seq[-1]))
        stopped = []
        for s in self.series:
            seq = order.get(s.machine, [])
            if not len(s) or len(seq) < 3 or (s.benchmark.key, s.machine) in failed_at:
                continue
            last = s.shas[-1]
            if pos[last] < pos[seq[-2]]:
                stopped.append(NotReporting(s.benchmark, s.machine, last, seq[-1]))
        key = lambda x: (-pos[x.since], x.benchmark.key, x.machine)  # noqa: E731
        return sorted(failing, key=key), sorted(stopped, key=key)

    def resolved_suspects(self, *, recent_only: bool) -> list[Suspect]:
        """Suspicions confirmed or withdrawn, newest first; `recent_only`: resolved by one of the
        RECENT_COMMITS newest commits."""
        out = [x for s in self.series for x in s.suspects if x.state != SuspectState.SUSPECTED
               and (not recent_only or self.recent(x.resolved_sha))]
        return sorted(out, key=lambda x: (-self.position[x.commit_sha], x.benchmark.key, x.machine))


_HEX = frozenset("0123456789abcdef")


def verdict_machines(v: Verdict) -> frozenset[str]:
    """The machines whose series a verdict is about; empty for a verdict stored without a machine
    (it applies to every machine's series, as before verdicts had one).

    Args:
        v: a stored verdict (`machine` may list several, comma-joined, for a pooled comparison).

    Returns:
        The machine names.
    """
    return frozenset(m for m in v.machine.split(",") if m)


def series_slug(benchmark_key: str, machine: str) -> str:
    """File-name-safe identity of a series: names can hold any character, so hash them.

    Args:
        benchmark_key: `Benchmark.key`.
        machine: the machine name.

    Returns:
        16 hex characters, stable across processes and runs.
    """
    return hashlib.sha256(f"{benchmark_key}\0{machine}".encode()).hexdigest()[:16]


def commit_slug(sha: str) -> str:
    """File name stem for a commit page: the sha when it is plain hex, else a hash of it.

    Args:
        sha: the commit id as stored.

    Returns:
        The lowercase hex sha itself, or "x" + 16 hex characters for anything else.
    """
    if 4 <= len(sha) <= 64 and _HEX.issuperset(sha):
        return sha
    return "x" + hashlib.sha256(sha.encode()).hexdigest()[:16]


def median_iqr(samples: tuple[float, ...]) -> tuple[float, float, float, int, float, float]:
    """Median, q25, q75, count, min and max of the finite samples (`Result.value` / `Result.spread`).

    Same formulas as `statistics.median` and `statistics.quantiles(n=4, method="inclusive")`,
    written out because the statistics module costs ~10 us per call and a full history has
    500,000 results.

    Args:
        samples: raw samples; NaN and inf are ignored.

    Returns:
        (median, q25, q75, n_finite, min, max); NaNs and 0 when nothing finite was measured.
    """
    data = sorted(samples)
    if not math.isfinite(sum(data)):  # NaN/inf propagate through the sum; filter only then (rare)
        data = [s for s in data if math.isfinite(s)]
    n = len(data)
    if n == 0:
        return math.nan, math.nan, math.nan, 0, math.nan, math.nan
    mid = n // 2
    med = data[mid] if n % 2 else (data[mid - 1] + data[mid]) / 2
    if n < 2:
        return med, med, med, n, med, med
    m = n - 1
    j1, d1 = divmod(m, 4)
    j3, d3 = divmod(3 * m, 4)
    q1 = (data[j1] * (4 - d1) + data[j1 + 1] * d1) / 4 if d1 else data[j1]
    q3 = (data[j3] * (4 - d3) + data[j3 + 1] * d3) / 4 if d3 else data[j3]
    return med, q1, q3, n, data[0], data[-1]


def median_iqr_all(samples: Sequence[tuple[float, ...]]) -> list[tuple[float, float, float, int, float, float]]:
    """`median_iqr` of many sample tuples at once, with numpy for the rows of one length that are
    all finite (the same formulas, so the same bits); the others one at a time.

    Args:
        samples: the results' samples.

    Returns:
        One `median_iqr` tuple per entry, in order.
    """
    out: list[Any] = [None] * len(samples)
    by_len: dict[int, list[int]] = defaultdict(list)
    for i, s in enumerate(samples):
        by_len[len(s)].append(i)
    for n, idx in by_len.items():
        if n < 2:
            for i in idx:
                out[i] = median_iqr(samples[i])
            continue
        for i, row in zip(idx, _median_iqr_rows(np.array([samples[i] for i in idx], dtype=float)), strict=True):
            out[i] = row
    return out


def _median_iqr_rows(data: np.ndarray) -> list[tuple[float, float, float, int, float, float]]:
    """`median_iqr` of each row of a (results x n samples) matrix, n >= 2, as rows."""
    return list(zip(*_median_iqr_columns(data), strict=True))


def _median_iqr_columns(data: np.ndarray) -> tuple[list[float], list[float], list[float], list[int], list[float],
                                                    list[float]]:
    """`median_iqr` of each row of a (results x n samples) matrix, n >= 2, as six columns: numpy
    for the rows that are all finite (the same formulas as `median_iqr`, so the same bits),
    `median_iqr` for the others."""
    n = data.shape[1]
    ok = np.isfinite(data).all(axis=1)
    good = np.sort(data[ok], axis=1)
    mid, m = n // 2, n - 1
    med = good[:, mid] if n % 2 else (good[:, mid - 1] + good[:, mid]) / 2
    j1, d1 = divmod(m, 4)
    j3, d3 = divmod(3 * m, 4)
    q1 = good[:, j1] if not d1 else (good[:, j1] * (4 - d1) + good[:, j1 + 1] * d1) / 4
    q3 = good[:, j3] if not d3 else (good[:, j3] * (4 - d3) + good[:, j3 + 1] * d3) / 4
    cols = (med.tolist(), q1.tolist(), q3.tolist(), [n] * len(med), good[:, 0].tolist(), good[:, -1].tolist())
    if ok.all():
        return cols
    rows = iter(zip(*cols, strict=True))
    out = [next(rows) if keep else median_iqr(tuple(data[i].tolist())) for i, keep in enumerate(ok.tolist())]
    return tuple(map(list, zip(*out, strict=True)))  # type: ignore[return-value]


def resolve_sha(commits: list[Commit], sha: str) -> str:
    """The full sha of the one commit that `sha` names (a full sha or a unique prefix).

    Args:
        commits: the history.
        sha: a full sha or a prefix.

    Returns:
        The full sha.

    Raises:
        ValueError: when no commit or several commits match.
    """
    if not isinstance(sha, str) or not sha:
        raise ValueError(f"baseline commit must be a non-empty sha string, got {sha!r}")
    matches = [c.sha for c in commits if c.sha == sha] or [c.sha for c in commits if c.sha.startswith(sha)]
    if not matches:
        raise ValueError(f"baseline commit {sha!r} is not in the store's history")
    if len(set(matches)) > 1:
        raise ValueError(f"baseline commit {sha!r} is ambiguous: matches {', '.join(sorted(set(matches))[:5])}")
    return matches[0]


_Built = tuple[dict[tuple[str, str], Series], dict[tuple[str, str], list[Result]],
               dict[str, dict[tuple[str, str], tuple[tuple[str, str], ...]]]]


def _from_results(store: StoreReader, position: dict[str, int], branch: str | None) -> _Built:
    """The series from `store.results()`, one record per result: (series by key, each timing
    series' current-version results for the change points, environments by commit and run)."""
    by_series: dict[tuple[str, str], Series] = {}
    environments: dict[str, dict[tuple[str, str], tuple[tuple[str, str], ...]]] = defaultdict(dict)
    raw: dict[tuple[str, str], list[Result]] = {}
    collected: dict[tuple[str, str], list[tuple[int, str, float, float, float, int]]] = defaultdict(list)
    key_of: dict[int, str] = {}  # Benchmark.key rebuilds its text on every call; results share Benchmark objects
    # As asv does, a series shows only its current benchmark version (that of its newest result):
    # older results were measured by other benchmark code.
    grouped: dict[tuple[int, str], list[Result]] = defaultdict(list)
    for r in store.results():
        grouped[(id(r.benchmark), r.machine)].append(r)
    results: list[Result] = []
    for rs in grouped.values():
        rs.sort(key=lambda r: position.get(r.commit_sha, -1))
        results.extend(current_version(rs))
    stats = median_iqr_all([r.samples for r in results])
    for r, (med, lo, hi, n, smallest, largest) in zip(results, stats, strict=True):
        bench_id = id(r.benchmark)
        bench_key = key_of.get(bench_id)
        if bench_key is None:
            bench_key = key_of[bench_id] = r.benchmark.key
        pos = position.get(r.commit_sha)
        if pos is None:
            if branch is not None:
                continue  # a result on another branch's commit
            raise ValueError(f"result for {bench_key!r} on {r.machine!r} names commit {r.commit_sha!r}, "
                             "which the store's commit history does not contain")
        key = (bench_key, r.machine)
        s = by_series.get(key)
        if s is None:
            s = by_series[key] = Series(r.benchmark, r.machine)
        gate = GATES.get(r.benchmark.unit) if r.benchmark.kind == Kind.CORRECTNESS else None
        if gate is not None:
            med = largest if gate[1] else smallest
        collected[key].append((pos, r.commit_sha, med, lo, hi, n))
        if r.benchmark.kind != Kind.CORRECTNESS:  # the gates judge those, not steps
            raw.setdefault(key, []).append(r)
        env_key = (r.machine, r.run_id)
        if env_key not in environments[r.commit_sha]:
            environments[r.commit_sha][env_key] = r.environment
    for key, s in by_series.items():
        # The protocol promises history order; sorting again is cheap and keeps a loose store honest.
        at, shas, med, lo, hi, n = zip(*collected[key], strict=True)
        s.set_runs(np.array(at), list(shas), np.array(med), np.array(lo), np.array(hi), np.array(n))
    for rs in (raw or {}).values():
        rs.sort(key=lambda r: position[r.commit_sha])  # change_points reads them oldest first
    return by_series, raw, environments


class _Stale(Exception):
    """The kept columns (`ColumnsCache`) cannot give this snapshot: read the store in full."""


@dataclass
class _Stats:
    """One series' every result (before the version and branch filters) as columns: its run (index
    into the machine's runs), version, value (the median, or the worst sample for a gated series),
    quartiles and sample count; `col` holds the samples when they were read now in full (a series
    with several runs of one commit pools them, `commit_levels`)."""

    benchmark: Benchmark
    runs: np.ndarray  # int64
    versions: list[str | None]
    values: np.ndarray
    q1: np.ndarray
    q3: np.ndarray
    ns: np.ndarray  # int64
    col: SeriesColumns | None

    def __post_init__(self) -> None:
        self.runs, self.ns = np.asarray(self.runs, dtype=np.int64), np.asarray(self.ns, dtype=np.int64)
        self.values, self.q1, self.q3 = (np.asarray(a, dtype=float) for a in (self.values, self.q1, self.q3))


@dataclass
class ColumnsCache:
    """What a render keeps of the store's columns for the next one: per machine its runs in history
    order as (run key, result file digest) and each run's commit, per series `_Stats` without the
    samples. The next render reads only the runs after these (`series_columns(runs_after=...)`) when
    the store's runs still begin with exactly these; else it reads everything (`_from_columns`).

    Kept as one file in the output folder's bookkeeping (`to_bytes`/`from_bytes`, numpy's npz with
    no pickles), checked there by a digest in the manifest (`dashboard.writer.PageWriter.blob`).
    32 bytes per result (16 MB at 1,000 commits x 500 series, 2026-12-02); the samples stay in the store.
    """

    runs: dict[str, list[tuple[str, str]]]
    run_shas: dict[str, list[str]]
    series: dict[tuple[str, str], _Stats]

    def to_bytes(self) -> bytes:
        keys = sorted(self.series)
        stats = [self.series[k] for k in keys]
        meta = {
            "runs": self.runs, "run_shas": self.run_shas,
            "series": [[m, _bench_json(st.benchmark), len(st.runs), _run_lengths(st.versions)]
                       for (_, m), st in zip(keys, stats, strict=True)],
        }

        def cat(name: str, dtype: str) -> np.ndarray:
            return np.concatenate([np.asarray(getattr(st, name), dtype=dtype) for st in stats]) if stats else \
                np.zeros(0, dtype=dtype)

        buf = io.BytesIO()
        np.savez(buf, meta=np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8), runs=cat("runs", "<i4"),
                 ns=cat("ns", "<i4"), values=cat("values", "<f8"), q1=cat("q1", "<f8"), q3=cat("q3", "<f8"))
        return buf.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> ColumnsCache | None:
        """The cache `to_bytes` wrote, None when `data` is not one (a damaged file costs a full read)."""
        try:
            with np.load(io.BytesIO(data), allow_pickle=False) as z:
                meta = json.loads(z["meta"].tobytes())
                arrays = {k: z[k] for k in ("runs", "ns", "values", "q1", "q3")}
            runs = {m: [(str(k), str(d)) for k, d in rs] for m, rs in meta["runs"].items()}
            run_shas = {m: [str(s) for s in ss] for m, ss in meta["run_shas"].items()}
            series: dict[tuple[str, str], _Stats] = {}
            at = 0
            for machine, bench, n, versions in meta["series"]:
                b, end = _bench_of(bench), at + int(n)
                st = _Stats(b, arrays["runs"][at:end], _versions_of(versions), arrays["values"][at:end],
                            arrays["q1"][at:end], arrays["q3"][at:end], arrays["ns"][at:end], None)
                if end > len(arrays["runs"]) or len(st.versions) != len(st.runs):
                    return None
                if st.runs.size and not 0 <= int(st.runs.min()) <= int(st.runs.max()) < len(run_shas[machine]):
                    return None
                series[(b.key, str(machine))] = st
                at = end
            if at != len(arrays["runs"]) or set(run_shas) != set(runs):
                return None
            return cls(runs, run_shas, series)
        except (ValueError, KeyError, TypeError, OSError, EOFError, zipfile.BadZipFile):
            return None


def _bench_json(b: Benchmark) -> list[Any]:
    return [b.name, [list(p) for p in b.params], b.unit, b.direction.value, b.kind.value]


def _bench_of(row: list[Any]) -> Benchmark:
    name, params, unit, direction, kind = row
    return Benchmark(str(name), tuple((str(k), str(v)) for k, v in params), str(unit), Direction(direction),
                     Kind(kind))


def _run_lengths(versions: list[str | None]) -> list[list[Any]]:
    return [[v, sum(1 for _ in group)] for v, group in itertools.groupby(versions)]


def _versions_of(lengths: list[list[Any]]) -> list[str | None]:
    out: list[str | None] = []
    for v, n in lengths:  # list repetition: one version per result, 500,000 of them at 500 series
        out += [None if v is None else str(v)] * int(n)
    return out


_STATS_COLUMNS = ("values", "q1", "q3", "ns")
_Read = tuple[dict[tuple[str, str], "_Stats"], dict[str, list[tuple[str, str]]], dict[str, list[str]]]


def _read_columns(store: Any, cache: ColumnsCache | None) -> _Read:
    """Every series' `_Stats`, the machines' runs and each run's commit: the runs after `cache`'s
    read from the store and appended to it when the store's runs begin with the cached ones, else
    all read from the store (`_Stale` when what was read contradicts the cache)."""
    hists = store.series_columns(runs_after={m: len(rs) for m, rs in cache.runs.items()} if cache else None)
    if cache is not None:
        names = {h.machine for h in hists}
        if not names >= set(cache.runs) or any(list(h.runs[:len(cache.runs.get(h.machine, []))])
                                               != cache.runs.get(h.machine, []) for h in hists):
            raise _Stale
    series = dict(cache.series) if cache else {}
    runs = {h.machine: list(h.runs) for h in hists}
    run_shas = {h.machine: (list(cache.run_shas.get(h.machine, [])) if cache else []) for h in hists}
    for hist in hists:
        shas = run_shas[hist.machine]
        shas.extend([""] * (len(hist.runs) - len(shas)))
        for col in hist.series:
            for run, sha in zip(col.runs, col.commit_shas, strict=True):
                shas[run] = sha
            med, q1, q3, ns, smallest, largest = _column_stats(col, list(range(len(col.counts))))
            bench = col.benchmark
            gate = GATES.get(bench.unit) if bench.kind == Kind.CORRECTNESS else None
            if gate is not None:
                med = largest if gate[1] else smallest
            key = (bench.key, hist.machine)
            new = _Stats(bench, col.runs, list(col.versions), med, q1, q3, ns, col)
            old = series.get(key)
            if old is not None and cache is not None:
                if old.benchmark != bench:
                    raise _Stale
                new = _Stats(bench, np.concatenate([old.runs, new.runs]), old.versions + new.versions,
                             *(np.concatenate([getattr(old, a), getattr(new, a)]) for a in _STATS_COLUMNS), None)
            series[key] = new
    return series, runs, run_shas


def _from_columns(store: Any, position: dict[str, int], branch: str | None,
                  cache: ColumnsCache | None = None) -> tuple[_Built, ColumnsCache]:
    """`_from_results` from the store's columnar read (`series_columns`: a series' samples are one
    float64 array) and its runs' environments, with medians and IQR per series in numpy: the same
    points, bit for bit, without a `Result` per result (they were ~10 of the 18 s of a render after
    one new commit at 1,000 commits x 500 series, 2026-12-02). The change points come from the
    store's kept states, so the raw results are built only for a series with several runs of one
    commit (its levels pool them, `ci.verdicts.commit_levels`).

    With `cache` (the previous render's `ColumnsCache`), only the runs after it are read from the
    store; the snapshot is the same as from a full read (`tests/dashboard/test_store.py`), and any
    doubt (the store's earlier runs differ, a series needs its samples) falls back to the full read.
    Also returns the cache for the next render."""
    if cache is not None:
        try:
            return _columns_built(store, position, branch, cache)
        except _Stale:
            pass
    return _columns_built(store, position, branch, None)


def _columns_built(store: Any, position: dict[str, int], branch: str | None,
                   cache: ColumnsCache | None) -> tuple[_Built, ColumnsCache]:
    stats, runs, run_shas = _read_columns(store, cache)
    envs = store.run_environments()
    by_series: dict[tuple[str, str], Series] = {}
    raw: dict[tuple[str, str], list[Result]] = {}
    environments: dict[str, dict[tuple[str, str], tuple[tuple[str, str], ...]]] = defaultdict(dict)
    by_machine: dict[str, list[tuple[str, _Stats]]] = defaultdict(list)
    for (key, machine), st in stats.items():
        by_machine[machine].append((key, st))
    # Every branch's results, as `_from_results` reads them: the current version is that of the
    # series' newest result in the history shown, results on other branches' commits count first.
    for machine in sorted(by_machine):
        shas_of = run_shas[machine]
        pos_of = np.array([position.get(sha, -1) for sha in shas_of], dtype=np.int64)  # per run
        used: list[np.ndarray] = []  # each series' runs shown, for the environments
        for _, st in sorted(by_machine[machine], key=lambda t: t[0]):
            bench = st.benchmark
            at = pos_of[st.runs]
            keep = np.arange(at.size)
            if branch is not None and at.size and at.min() < 0:
                keep = np.argsort(at, kind="stable")
            versions = set(st.versions) - {None}
            if len(versions) > 1:  # as `current_version`: the newest version's results (and unknown ones)
                latest = next(st.versions[i] for i in reversed(keep.tolist()) if st.versions[i] is not None)
                keep = np.array([i for i in keep.tolist() if st.versions[i] in (latest, None)], dtype=np.int64)
            missing = np.flatnonzero(at[keep] < 0)
            if missing.size and branch is None:
                sha = shas_of[int(st.runs[keep[missing[0]]])]
                raise ValueError(f"result for {bench.key!r} on {machine!r} names commit {sha!r}, "
                                 "which the store's commit history does not contain")
            if missing.size:
                keep = keep[at[keep] >= 0]  # a result on another branch's commit
            if not keep.size:
                continue
            runs_kept = st.runs[keep]
            shas = [shas_of[r] for r in runs_kept.tolist()]
            s = by_series[(bench.key, machine)] = Series(bench, machine)
            s.set_runs(at[keep], shas, st.values[keep], st.q1[keep], st.q3[keep], st.ns[keep])
            if bench.kind != Kind.CORRECTNESS and len(set(shas)) != len(shas):
                if st.col is None:
                    raise _Stale  # its levels pool the samples, which the cache does not hold
                raw[(bench.key, machine)] = _column_results(st.col, keep.tolist(), position)
            used.append(runs_kept)
        # The runs with a result shown, each once, in the order the series first show them.
        for run in dict.fromkeys(np.concatenate(used).tolist() if used else []):
            run_key = runs[machine][run][0]
            environments[shas_of[run]][(machine, run_key)] = envs.get(run_key, ())
    kept = ColumnsCache(runs, run_shas, {k: _Stats(st.benchmark, st.runs, st.versions, st.values, st.q1, st.q3, st.ns,
                                                   None) for k, st in stats.items()})
    return (by_series, raw, environments), kept


def _column_stats(col: SeriesColumns, keep: list[int]) -> tuple[list[float], list[float], list[float], list[int],
                                                                 list[float], list[float]]:
    """`median_iqr` of the results `keep` of a series read as columns, as six columns."""
    counts = np.asarray(col.counts, dtype=np.int64)
    samples = np.frombuffer(col.samples, dtype=np.float64) if len(col.samples) else np.zeros(0)
    k = int(counts[0]) if counts.size else 0
    if k >= 2 and (counts == k).all():  # every result has k samples: one matrix
        return _median_iqr_columns(samples.reshape(-1, k)[keep])
    ends = np.cumsum(counts).tolist()
    starts = [0, *ends[:-1]]
    rows = median_iqr_all([tuple(samples[starts[i]:ends[i]].tolist()) for i in keep])
    return tuple(map(list, zip(*rows, strict=True)))  # type: ignore[return-value]


def _column_results(col: SeriesColumns, keep: list[int], position: dict[str, int]) -> list[Result]:
    """The results `keep` of a series read as columns, as records with their samples (what
    `commit_levels` reads), oldest commit first."""
    ends = np.cumsum(np.asarray(col.counts, dtype=np.int64)).tolist()
    starts = [0, *ends[:-1]]
    out = [Result(col.benchmark, col.commit_shas[i], col.machine, tuple(col.samples[starts[i]:ends[i]]))
           for i in keep]
    out.sort(key=lambda r: position[r.commit_sha])
    return out


def load_snapshot(store: StoreReader, *, branch: str | None = None, baseline_sha: str | None = None,
                  columns: ColumnsCache | None = None, tracks: dict[str, SuspectTrack] | None = None,
                  floor_for: Callable[[str], float] | None = None) -> Snapshot:
    """Read the whole history once and arrange it by series and by commit.

    Args:
        store: any `StoreReader`.
        branch: only this branch's commits (and the results on them); None for all.
        baseline_sha: the commit to compare against on the overview (full sha or unique prefix);
            None means each series' first run.
        columns: the previous snapshot's `Snapshot.columns` (of the same `branch`), so that only the
            store's runs after it are read; the snapshot is the same without it.
        tracks: the previous snapshot's `Snapshot.tracks`, so that each series' suspicions and
            thresholds are judged for its new commits only; the snapshot is the same without them.
        floor_for: each series' threshold from the project (`ci.project.ProjectSettings.floor_for`):
            smaller steps and suspicions are not shown, as the A/B verdicts call them unchanged.
            None: every step the detector finds.

    Returns:
        The snapshot the pages are rendered from.

    Raises:
        ValueError: a result names a commit the store does not list, or `baseline_sha` is unknown.
    """
    commits = store.commits(branch)
    position = {c.sha: i for i, c in enumerate(commits)}
    if baseline_sha is not None:
        baseline_sha = resolve_sha(commits, baseline_sha)
    machines = sorted(store.machines(), key=lambda m: m.name)

    stored = _stored_change_points(store, branch, floor_for)
    kept = None
    if stored is not None:  # a ci.store.Store: its results as columns, no record per result
        (by_series, raw, environments), kept = _from_columns(store, position, branch, columns)
    else:
        by_series, raw, environments = _from_results(store, position, branch)
    series = sorted(by_series.values(), key=lambda s: (s.benchmark.suite, s.benchmark.key, s.machine))

    acks = {(a.benchmark_key, a.commit_sha): a for a in store.acknowledgements()}
    verdicts = store.verdicts()
    judged = {v.benchmark.key for v in verdicts}
    machines_at: dict[tuple[str, str], list[str]] = defaultdict(list)  # (series key, sha) -> machines measured
    for s in series:
        key = s.benchmark.key
        if key not in judged:
            continue  # only the series a verdict is about (500,000 runs otherwise)
        for sha in s.shas:
            ms = machines_at[(key, sha)]
            if not ms or ms[-1] != s.machine:
                ms.append(s.machine)

    verdicts_by_sha: dict[str, list[Verdict]] = defaultdict(list)
    regressions: list[Regression] = []
    for v in verdicts:
        if v.head_sha not in position:
            continue  # an A/B verdict about a commit outside this history (another branch)
        verdicts_by_sha[v.head_sha].append(v)
        if v.outcome in (Outcome.REGRESSED, Outcome.FAILED):
            on = machines_at.get((v.benchmark.key, v.head_sha), [])
            if v.machine:
                # Runners share the history: a verdict judged one machine's series, not its siblings'.
                own = verdict_machines(v)
                on = [m for m in on if m in own]
            regressions.append(Regression(
                benchmark=v.benchmark, sha=v.head_sha, outcome=v.outcome, ratio=v.ratio, base_value=v.base_value,
                head_value=v.head_value, source="verdict", machines=tuple(on), base_sha=v.base_sha,
                p_value=v.p_value, reason=v.reason, ack=acks.get((v.benchmark.key, v.head_sha))))

    kept_tracks, groups = _add_history_verdicts(series, raw, acks, regressions, stored, tracks,
                                                _runs_order(environments, position), floor_for)
    seen: set[tuple[str, str, str, tuple[str, ...]]] = set()
    unique = []
    for reg in regressions:
        k = (reg.benchmark.key, reg.sha, reg.source, reg.machines)
        if k not in seen:
            seen.add(k)
            unique.append(reg)
    unique.sort(key=lambda g: (-position[g.sha], g.benchmark.key))
    failures_by_sha: dict[str, list[tuple[Benchmark, str, str]]] = defaultdict(list)
    failures = getattr(store, "failures", None)
    if callable(failures):
        for f in failures():
            if f.commit_sha in position:
                failures_by_sha[f.commit_sha].append((f.benchmark, f.machine, f.status))
    return Snapshot(machines=machines, commits=commits, position=position, series=series,
                    verdicts_by_sha=dict(verdicts_by_sha), regressions=unique, acks=acks,
                    environments=dict(environments), baseline_sha=baseline_sha, failures_by_sha=dict(failures_by_sha),
                    columns=kept, tracks=kept_tracks, groups=groups)


# Below this many series, starting worker processes costs more than it saves (~0.1 s).
_PARALLEL_MIN_SERIES = 64
# The fork children read the series from here (inherited memory, nothing pickled on the way in).
_Inputs = tuple[Benchmark, str, list[Result], list[str], np.ndarray, list[ChangePoint] | None,
                SuspectTrack | None, float]
_FORK_INPUT: dict[tuple[str, str], _Inputs] = {}


_Judged = tuple[list[Any], list[Suspect], list[float], SuspectTrack]


def _judge(bench: Benchmark, machine: str, results: list[Result], shas: list[str], levels: np.ndarray,
           cps: list[ChangePoint] | None = None, track: SuspectTrack | None = None, floor: float = 0.0) -> _Judged:
    """A series' change points (computed from `results` unless given), suspicions and per-commit
    noise thresholds (one more at the end: what the next commit will need), the last two only for
    the commits after `track` when it still matches (`ci.verdicts.judge_levels`); `floor` is the
    series' threshold from the project."""
    if cps is None:
        cps = change_points(results, floor=floor)
    found, thresholds, track = judge_levels(bench, machine, shas, levels, cps, track=track, floor=floor)
    return cps, found, thresholds.tolist(), track


def _judge_chunk(keys: list[tuple[str, str]]) -> list[tuple[tuple[str, str], _Judged]]:
    return [(k, _judge(*_FORK_INPUT[k])) for k in keys]


def _judge_all(
    inputs: dict[tuple[str, str], _Inputs],
) -> dict[tuple[str, str], _Judged]:
    """Change points (`ci.verdicts.change_points`, where not already known), suspicions and noise
    thresholds of every series, over all CPUs this process may use.

    Computed here, change points were most of a full render's CPU (5.4 ms per 1,000-commit series
    on an idle box, 2026-11-29; a store that keeps states now gives them, docs/performance.md
    "Dashboard render"); the work is independent per series, so it is split across forked workers;
    without fork (macOS/Windows), for few series, or when the previous render's tracks leave only
    the new commits to judge (0.1 s for 500 series after one commit, 2026-12-02) it runs here.
    """
    global _FORK_INPUT
    keys = sorted(inputs)
    workers = fork_workers(sum(inputs[k][6] is None for k in keys), _PARALLEL_MIN_SERIES)
    if workers == 1:
        return {k: _judge(*inputs[k]) for k in keys}
    _FORK_INPUT = inputs
    try:
        parts = fork_map(_judge_chunk, [keys[i::workers] for i in range(workers)], workers,
                         names=lambda chunk: (f"{key} on {machine}" for key, machine in chunk),
                         lost="series not judged (change points, suspicions)")
    finally:
        _FORK_INPUT = {}
    return {k: out for part in parts for k, out in part}


def _levels(s: Series, raw: list[Result] | None) -> tuple[list[str], np.ndarray]:
    """The series' per-commit levels as `ci.verdicts` reads them: from the runs' medians when
    every commit has one result (no second median per result), else pooled from the raw samples."""
    if raw is None or len(set(s.shas)) == len(s.shas):
        kept = np.flatnonzero(s.values > 0)  # NaN compares False: dropped too
        return [s.shas[i] for i in kept.tolist()], s.values[kept]
    return commit_levels(raw)


def _stored_change_points(store: StoreReader, branch: str | None, floor_for: Callable[[str], float] | None = None
                          ) -> dict[tuple[str, str], list[ChangePoint]] | None:
    """Every series' change points from `ci.verdicts.detect_all` over a store that keeps the
    detector's states (`ci.records.HistoryStore`, i.e. `ci.store.Store`), by (series key, machine);
    None for a store without them (each series is then computed from its results).

    `detect_all` reads only the runs after its stored states and saves the extended states back, so a
    render after one new commit examines that commit's tail of each series, not 1,000 commits of 500
    series; its answer is exactly that of `change_points` over the series' current-version results
    (ci.verdicts.history; `tests/dashboard/test_store.py` compares the two through the dashboard).
    """
    names = ("series_columns", "change_point_states", "save_change_point_states")
    if not all(callable(getattr(store, name, None)) for name in names):
        return None
    out: dict[tuple[str, str], list[ChangePoint]] = defaultdict(list)
    for cp in detect_all(store, branch=branch, floor_for=floor_for):  # type: ignore[arg-type]
        out[(cp.benchmark.key, cp.machine)].append(cp)
    return out


def track_name(benchmark_key: str, machine: str) -> str:
    """The name a series' `SuspectTrack` is kept under (`Snapshot.tracks`)."""
    return f"{benchmark_key}\0{machine}"


def _runs_order(environments: dict[str, dict[tuple[str, str], tuple[tuple[str, str], ...]]],
                position: dict[str, int]) -> tuple[dict[str, list[str]], dict[tuple[str, str], dict[str, str]]]:
    """Each machine's measured commits in history order, and the environment its run recorded at
    each (the first run's, where a commit has several): what alert groups are read against."""
    order: dict[str, list[str]] = defaultdict(list)
    envs: dict[tuple[str, str], dict[str, str]] = {}
    for sha in sorted(environments, key=position.__getitem__):
        for machine, _run in environments[sha]:
            if (machine, sha) not in envs:
                order[machine].append(sha)
                envs[(machine, sha)] = dict(environments[sha][(machine, _run)])
    return dict(order), envs


def _add_history_verdicts(series: list[Series], raw: dict[tuple[str, str], list[Result]],
                          acks: dict[tuple[str, str], Acknowledgement], regressions: list[Regression],
                          stored: dict[tuple[str, str], list[ChangePoint]] | None = None,
                          tracks: dict[str, SuspectTrack] | None = None,
                          runs: tuple[dict[str, list[str]], dict[tuple[str, str], dict[str, str]]] | None = None,
                          floor_for: Callable[[str], float] | None = None,
                          ) -> tuple[dict[str, SuspectTrack], list[AlertGroup]]:
    """Each series' change marks, suspicions and thresholds, and the change-point regressions;
    returns the series' suspicion tracks for the next snapshot and the crowds of change points
    (`ci.verdicts.group_changes` over `runs`: each machine's commits and their environments), whose
    members at a change of the recorded environment are labelled with it instead of left open."""
    tracks = tracks or {}
    inputs = {}
    for s in series:
        key = (s.benchmark.key, s.machine)
        if s.benchmark.kind == Kind.CORRECTNESS:
            continue  # the gates judge those, not steps
        if s.benchmark.kind == Kind.EXACT:  # no noise: a step wherever the value moved (ci.verdicts.exact)
            s.changes.extend(ChangeMark(s.shas[i], after / before if before else math.nan, Outcome.CHANGED)
                             for i, before, after in exact_steps(s.shas, s.values.tolist()))
            continue
        shas, levels = _levels(s, raw.get(key))
        if levels.size:
            inputs[key] = (s.benchmark, s.machine, raw.get(key, []), shas, levels,
                           None if stored is None else stored.get(key, []), tracks.get(track_name(*key)),
                           floor_for(s.benchmark.key) if floor_for is not None else 0.0)
    found = _judge_all(inputs)
    order, envs = runs if runs is not None else ({}, {})
    groups = [g for g in group_changes([cp for key in found for cp in found[key][0]], order, envs if runs else None)
              if g.crowd]
    changed = {(cp.benchmark.key, cp.machine, cp.commit_sha): "; ".join(g.environment)
               for g in groups if g.environment_change for cp in g.members}
    kept: dict[str, SuspectTrack] = {}
    for s in series:
        key = (s.benchmark.key, s.machine)
        if key not in found:
            continue
        cps, s.suspects, thr, kept[track_name(*key)] = found[key]
        machine_commits = order.get(s.machine, [])
        if s.suspects and s.shas and s.shas[-1] in machine_commits:
            # A series that stopped reporting: its open suspicions expire, listed, never open for years.
            s.suspects = expire(s.suspects, s.shas[-1], machine_commits[machine_commits.index(s.shas[-1]) + 1:])
        s.thresholds = dict(zip(inputs[key][3], thr[:-1], strict=True))
        s.threshold = thr[-1]
        for i, cp in enumerate(cps):
            s.changes.append(ChangeMark(cp.commit_sha, cp.ratio, cp.outcome))
            if cp.outcome in (Outcome.REGRESSED, Outcome.FAILED):
                regressions.append(Regression(
                    benchmark=s.benchmark, sha=cp.commit_sha, outcome=cp.outcome, ratio=cp.ratio,
                    base_value=cp.before, head_value=cp.after, source="change point", machines=(s.machine,),
                    ack=acks.get((s.benchmark.key, cp.commit_sha)),
                    fixed_by=recovery(cp.before, cp.after, cps[i + 1:], s.benchmark.direction),
                    environment=changed.get((s.benchmark.key, s.machine, cp.commit_sha), "")))
    return kept, groups


def recovery(before: float, after: float, later: Sequence[Any], direction: Direction) -> str:
    """The first later change point that brought the level back (at least three quarters of the way
    to the level the regression left), or "": a regression is fixed only when its level returns. A
    later step that leaves the level where the regression put it, or higher, fixes nothing; nor does
    a series' noise: on a noisy runner a threshold of 37% "closed" +10% regressions whose level
    stayed up (96 of 124 on a real GitHub-hosted history, 2026-12-05). A change-point regression is
    shown open (`Regression.is_open`, unless acknowledged) exactly when this is "" (its `fixed_by`).

    Args:
        before: the regression's level before its step (`ChangePoint.before`).
        after: its level after the step (`ChangePoint.after`).
        later: the series' change points after it, oldest first (anything with `after` and `commit_sha`).
        direction: which way is better for the series (unknown: read as lower is better).

    Returns:
        The sha of the change point that undid the step, or "".
    """
    if not (before > 0 and after > 0):
        return ""
    sign = -1.0 if direction == Direction.HIGHER else 1.0
    rise = sign * math.log(after / before)  # how far worse the regression took the level (> 0)
    for cp in later:
        if cp.after > 0 and sign * math.log(cp.after / before) <= rise / 4:
            return cp.commit_sha
    return ""


def is_worse(ratio: float, direction: Direction, threshold: float) -> bool | None:
    """Whether a change is bad for this series, for colouring (not a verdict: ci.verdicts decides).

    Args:
        ratio: new / old.
        direction: which way is better.
        threshold: the relative change the series' own noise allows (`Series.thresholds`); NaN
            when its noise is not known yet (too few runs), which colours nothing.

    Returns:
        True when worse beyond the threshold, False when better beyond it (both in log terms, so
        +10% and -9.1% weigh alike), None inside it, when the ratio or threshold is not finite or
        when the direction is unknown.
    """
    if not (math.isfinite(ratio) and ratio > 0 and math.isfinite(threshold)):
        return None
    if abs(math.log(ratio)) <= math.log1p(threshold):
        return None
    return records_is_worse(direction, ratio)  # None for an unknown direction: shown, never judged


def gate_ok(value: float, gate: tuple[float, bool] | None) -> bool | None:
    """Whether a correctness value passes its gate.

    Args:
        value: the run's worst sample (see `Point`).
        gate: (limit, strictly-below) from GATES, or None.

    Returns:
        True/False, or None when there is no gate or no finite value.
    """
    if gate is None or not math.isfinite(value):
        return None
    limit, below = gate
    return value < limit if below else value >= limit
