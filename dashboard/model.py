"""What the dashboard shows, read once from a `StoreReader` into plain records.

One pass over the store builds every series (a benchmark on one machine: numbers from different
GPUs are never mixed in one line), the regressions (stored verdicts plus, when `ci.verdicts.history` is
present, detected change points) and the acknowledgements. Pages are rendered from this
snapshot only, so the store is queried a fixed number of times however many pages there are.
"""

from __future__ import annotations

import hashlib
import math
import multiprocessing
import os
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ci.records import (
    Acknowledgement,
    Benchmark,
    Commit,
    Direction,
    Kind,
    Machine,
    Outcome,
    Result,
    StoreReader,
    Verdict,
    current_version,
)
from ci.records import is_worse as records_is_worse
from ci.verdicts import MAX_ABS_DIFF_LIMIT, TOP1_AGREEMENT_LIMIT, change_points

# Correctness gates drawn on the charts, with ci.verdicts.gates' limits (one source of truth for the PR
# verdict and the dashboard). unit -> (limit, True when the value must stay strictly below it).
GATES: dict[str, tuple[float, bool]] = {
    "max abs diff": (MAX_ABS_DIFF_LIMIT, True),
    "top-1 agreement": (TOP1_AGREEMENT_LIMIT, False),
}

# A relative change smaller than this is shown as neutral: it is inside the run-to-run noise of
# every series we have seen, and colouring it would make the overview flicker red and green.
NEUTRAL_BAND = 0.01


class Point(NamedTuple):
    """One run of a series: where it sits in history, its value and interquartile range.

    `value` is the median of the samples, except for correctness series, where it is the worst
    sample: ci.verdicts.gates judges the worst repeat, and the dashboard must show what was judged.
    A NamedTuple rather than a frozen dataclass: a full history holds 500,000 of them and a
    tuple is built about 3x faster.
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

    @property
    def is_open(self) -> bool:
        return self.ack is None and not self.fixed_by


@dataclass(frozen=True)
class ChangeMark:
    """A step found in the history by `ci.verdicts.history.change_points`."""

    sha: str
    ratio: float
    outcome: Outcome


@dataclass
class Series:
    """A benchmark on one machine, its points in history order."""

    benchmark: Benchmark
    machine: str
    points: list[Point] = field(default_factory=list)
    changes: list[ChangeMark] = field(default_factory=list)

    @property
    def slug(self) -> str:
        return series_slug(self.benchmark.key, self.machine)

    @property
    def gate(self) -> tuple[float, bool] | None:
        return GATES.get(self.benchmark.unit) if self.benchmark.kind == Kind.CORRECTNESS else None


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


def load_snapshot(store: StoreReader, *, branch: str | None = None, baseline_sha: str | None = None) -> Snapshot:
    """Read the whole history once and arrange it by series and by commit.

    Args:
        store: any `StoreReader`.
        branch: only this branch's commits (and the results on them); None for all.
        baseline_sha: the commit to compare against on the overview (full sha or unique prefix);
            None means each series' first run.

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

    by_series: dict[tuple[str, str], Series] = {}
    environments: dict[str, dict[tuple[str, str], tuple[tuple[str, str], ...]]] = defaultdict(dict)
    raw: dict[tuple[str, str], list[Result]] = {}
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
    for r in results:
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
        med, lo, hi, n, smallest, largest = median_iqr(r.samples)
        gate = GATES.get(r.benchmark.unit) if r.benchmark.kind == Kind.CORRECTNESS else None
        if gate is not None:
            med = largest if gate[1] else smallest
        s.points.append(Point(pos, r.commit_sha, med, lo, hi, n))
        if r.benchmark.kind != Kind.CORRECTNESS:  # the gates judge those, not steps
            raw.setdefault(key, []).append(r)
        env_key = (r.machine, r.run_id)
        if env_key not in environments[r.commit_sha]:
            environments[r.commit_sha][env_key] = r.environment
    for s in by_series.values():
        # The protocol promises history order; sorting again is cheap and keeps a loose store honest.
        s.points.sort(key=lambda p: p.index)
    for rs in (raw or {}).values():
        rs.sort(key=lambda r: position[r.commit_sha])  # change_points reads them oldest first
    series = sorted(by_series.values(), key=lambda s: (s.benchmark.suite, s.benchmark.key, s.machine))

    acks = {(a.benchmark_key, a.commit_sha): a for a in store.acknowledgements()}
    machines_at: dict[tuple[str, str], list[str]] = defaultdict(list)
    for s in series:
        for p in s.points:
            ms = machines_at[(s.benchmark.key, p.sha)]
            if not ms or ms[-1] != s.machine:
                ms.append(s.machine)

    verdicts_by_sha: dict[str, list[Verdict]] = defaultdict(list)
    regressions: list[Regression] = []
    for v in store.verdicts():
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

    _add_change_points(series, raw, acks, regressions)
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
                    environments=dict(environments), baseline_sha=baseline_sha, failures_by_sha=dict(failures_by_sha))


# Below this many series, starting worker processes costs more than it saves (~0.1 s).
_PARALLEL_MIN_SERIES = 64
# The fork children read the series from here (inherited memory, nothing pickled on the way in).
_FORK_INPUT: dict[tuple[str, str], list[Result]] = {}


def _detect_chunk(keys: list[tuple[str, str]]) -> list[tuple[tuple[str, str], list[Any]]]:
    return [(k, change_points(_FORK_INPUT[k])) for k in keys]


def _detect_all(raw: dict[tuple[str, str], list[Result]]) -> dict[tuple[str, str], list[Any]]:
    """`ci.verdicts.history.change_points` of every series, over all CPUs this process may use.

    Change points are ~60 % of a full render's CPU (23 ms per 1,000-commit series, measured
    2026-11-29, docs/performance.md "Dashboard render") and independent per series, so they are split
    across forked workers; without fork (macOS/Windows) or for few series they run here.
    """
    global _FORK_INPUT
    keys = sorted(raw)
    workers = min(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1, 8)
    if workers < 2 or len(keys) < _PARALLEL_MIN_SERIES or "fork" not in multiprocessing.get_all_start_methods():
        return {k: change_points(raw[k]) for k in keys}
    _FORK_INPUT = raw
    try:
        with multiprocessing.get_context("fork").Pool(workers) as pool:
            parts = pool.map(_detect_chunk, [keys[i::workers] for i in range(workers)])
    finally:
        _FORK_INPUT = {}
    return {k: cps for part in parts for k, cps in part}


def _add_change_points(series: list[Series], raw: dict[tuple[str, str], list[Result]],
                       acks: dict[tuple[str, str], Acknowledgement], regressions: list[Regression]) -> None:
    found = _detect_all(raw)
    for s in series:
        cps = found.get((s.benchmark.key, s.machine))
        if not cps:
            continue
        for i, cp in enumerate(cps):
            s.changes.append(ChangeMark(cp.commit_sha, cp.ratio, cp.outcome))
            if cp.outcome in (Outcome.REGRESSED, Outcome.FAILED):
                regressions.append(Regression(
                    benchmark=s.benchmark, sha=cp.commit_sha, outcome=cp.outcome, ratio=cp.ratio,
                    base_value=cp.before, head_value=cp.after, source="change point", machines=(s.machine,),
                    ack=acks.get((s.benchmark.key, cp.commit_sha)),
                    fixed_by=_recovery(cp.before, cps[i + 1:], s.benchmark.direction)))


def _recovery(before: float, later: Sequence[Any], direction: Direction) -> str:
    """The first later change point whose level is back within the neutral band of `before` (the
    level the regression left), or "": a step that was undone should not stay flagged as open."""
    for cp in later:
        r = cp.after / before if before else math.nan
        if is_worse(r, direction) is not True and math.isfinite(r):
            return cp.commit_sha
    return ""


def is_worse(ratio: float, direction: Direction) -> bool | None:
    """Whether a change is bad for this series, for colouring (not a verdict: ci.verdicts decides).

    Args:
        ratio: new / old.
        direction: which way is better.

    Returns:
        True when worse beyond NEUTRAL_BAND, False when better beyond it, None inside it, when
        the ratio is not finite or when the direction is unknown.
    """
    if not math.isfinite(ratio):
        return None
    if abs(ratio - 1.0) <= NEUTRAL_BAND:
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
