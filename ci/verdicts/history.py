"""Change points on the main branch's history: which commit made a series step up or down.

Method (Otava/Hunter-style split then merge, shared/reference/ci-services.md §3.2):

1. Per series (one benchmark on one machine, commits oldest first), the per-commit value is the
   median of that commit's samples, on a log scale so a step is a ratio.
2. Split: penalised least-squares segmentation by `ruptures.KernelCPD(kernel="linear")` (PELT in
   C, about 1 ms for 1,000 commits) on the log values divided by a robust noise sigma (MAD of
   successive differences / sqrt(2), which steps barely move), with a BIC-like penalty
   `penalty * log(n)`.
3. Merge: every candidate step must pass a Mann-Whitney U test between the per-commit values of
   its two neighbouring segments (p < max_pvalue) and a practical size
   `|ratio - 1| >= max(floor, noise_k * sigma)`; the weakest failing candidate is removed and its
   neighbours re-tested until all pass, as Otava's weak change points are.
   On a short history the per-commit test cannot reach `max_pvalue` at all (4 vs 5 commits: the
   smallest two-sided p is 2/C(9,4) = 0.016), so when the segments are too short for it, the test
   runs on the raw samples pooled per segment instead; the practical-size guard (floor and
   commit-to-commit noise) still applies, which keeps drift between commits from passing as a step.
   (Seen on the H200 history of 2026-11-29: a 13% kernel speed-up over 9 commits went unreported.)
4. Direction-aware outcome: for LOWER-is-better a rise is REGRESSED, for HIGHER-is-better a fall;
   a series of unknown direction gets INCONCLUSIVE steps (reported, never judged).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import ruptures
from scipy import stats

from ci.records import Benchmark, Kind, Outcome, Result, StoreReader, current_version, is_worse


@dataclass(frozen=True)
class HistorySettings:
    """Knobs of the history detector.

    Attributes:
        penalty: BIC-like penalty per change point, in units of log(n) (n = commits); larger
            finds fewer steps.
        min_size: fewest commits on each side of a step.
        floor: smallest relative step reported (0.02 = 2 %).
        noise_k: a step must also be at least `noise_k` robust sigmas of commit-to-commit noise.
        max_pvalue: Mann-Whitney p-value a step's two segments must reach (Otava's default 0.001).
        min_points: series with fewer commits are not analysed.
    """

    penalty: float = 3.0
    min_size: int = 3
    floor: float = 0.02
    noise_k: float = 3.0
    max_pvalue: float = 0.001
    min_points: int = 8

    def __post_init__(self) -> None:
        if self.penalty <= 0:
            raise ValueError(f"penalty must be > 0, got {self.penalty!r}")
        if self.min_size < 2:
            raise ValueError(f"min_size must be >= 2, got {self.min_size!r}")
        if not 0.0 <= self.floor < 1.0:
            raise ValueError(f"floor must be in [0, 1), got {self.floor!r}")
        if self.noise_k < 0:
            raise ValueError(f"noise_k must be >= 0, got {self.noise_k!r}")
        if not 0.0 < self.max_pvalue < 1.0:
            raise ValueError(f"max_pvalue must be in (0, 1), got {self.max_pvalue!r}")
        if self.min_points < 2 * self.min_size:
            raise ValueError(f"min_points ({self.min_points}) must be >= 2 * min_size ({2 * self.min_size})")


@dataclass(frozen=True)
class ChangePoint:
    """A step in one series' history.

    Attributes:
        benchmark: the series.
        commit_sha: the first commit after the step (the suspect).
        before: median per-commit value of the segment before the step.
        after: median per-commit value of the segment after it.
        ratio: after / before.
        outcome: REGRESSED or IMPROVED (direction-aware); INCONCLUSIVE when the direction is unknown.
        previous_sha: the last commit before the step (the range to bisect is previous..commit).
        p_value: Mann-Whitney p between the two segments' per-commit values.
        machine: where the series was measured.
        index: position of `commit_sha` in the analysed series.
    """

    benchmark: Benchmark
    commit_sha: str
    before: float
    after: float
    ratio: float
    outcome: Outcome
    previous_sha: str = ""
    p_value: float = math.nan
    machine: str = ""
    index: int = -1


def _per_commit(series: Sequence[Result]) -> tuple[list[str], np.ndarray, list[np.ndarray], Benchmark, str]:
    if isinstance(series, (str, bytes)) or not isinstance(series, Sequence):
        raise TypeError(f"series must be a sequence of Result, got {type(series).__name__}")
    shas: list[str] = []
    pooled: dict[str, list[float]] = {}
    keys, machines = set(), set()
    for r in series:
        if not isinstance(r, Result):
            raise TypeError(f"series must contain only Result records, got {type(r).__name__}")
        keys.add(r.benchmark.key)
        machines.add(r.machine)
        if r.commit_sha not in pooled:
            shas.append(r.commit_sha)
            pooled[r.commit_sha] = []
        pooled[r.commit_sha].extend(s for s in r.samples if math.isfinite(s))
    if len(keys) > 1:
        raise ValueError(f"series mixes several benchmarks: {sorted(keys)[:3]}; pass one series (see detect_all)")
    if len(machines) > 1:
        raise ValueError(f"series mixes machines {sorted(machines)}: steps between machines are not code changes")
    # statistics.median: ~4x cheaper than np.median on these short lists (dashboard profiling).
    medians = {s: statistics.median(v) for s, v in pooled.items() if v}
    kept = [s for s in shas if medians.get(s, 0.0) > 0]  # failed/skipped commits carry no level
    values = np.array([medians[s] for s in kept], dtype=float)
    samples = [np.asarray(pooled[s], dtype=float) for s in kept]
    bench = series[0].benchmark if series else Benchmark("")
    machine = next(iter(machines)) if machines else ""
    return kept, values, samples, bench, machine


def _robust_sigma(y: np.ndarray) -> float:
    """Commit-to-commit noise from successive differences: their MAD (steps barely move it), or,
    when most differences are exactly 0 (coarse timers, byte counts: medians that repeat) and the
    MAD is 0, their mean absolute deviation, so values that flip between a few levels still count
    as noise."""
    d = np.diff(y)
    if not d.size:
        return 0.0
    dev = np.abs(d - np.median(d))
    mad = float(np.median(dev))
    if mad > 0:
        return 1.4826 * mad / math.sqrt(2)
    return float(np.mean(dev)) * math.sqrt(math.pi / 2) / math.sqrt(2)


def _segment_test(
    y: np.ndarray, samples: list[np.ndarray], lo: int, mid: int, hi: int, max_pvalue: float
) -> tuple[float, float]:
    """(log ratio of segment medians, MWU p) for the step at `mid` between [lo, mid) and [mid, hi).

    The test runs on per-commit values when the segments are long enough for it to reach
    `max_pvalue` (smallest two-sided p = 2 / C(m+n, m)); otherwise on the pooled raw samples."""
    a, b = y[lo:mid], y[mid:hi]
    log_ratio = float(np.median(b) - np.median(a))
    if 2.0 / math.comb(a.size + b.size, a.size) >= max_pvalue:
        pa, pb = np.concatenate(samples[lo:mid]), np.concatenate(samples[mid:hi])
        if pa.size and pb.size and np.ptp(np.concatenate([pa, pb])) > 0:
            return log_ratio, float(stats.mannwhitneyu(pa, pb, alternative="two-sided").pvalue)
        return log_ratio, 1.0
    if np.ptp(np.concatenate([a, b])) == 0:
        return log_ratio, 1.0
    return log_ratio, float(stats.mannwhitneyu(a, b, alternative="two-sided").pvalue)


def change_points(
    series: Sequence[Result],
    *,
    settings: HistorySettings | None = None,
) -> list[ChangePoint]:
    """Find the steps in one series' history.

    Args:
        series: results of one benchmark on one machine, oldest commit first (a store returns them
            in history order). Several results of one commit pool their samples; commits with no
            finite positive sample are skipped.
        settings: detector settings; `HistorySettings()` when None.

    Returns:
        Change points oldest first, each naming the first commit after the step.

    Raises:
        TypeError: `series` is not a sequence of Result.
        ValueError: `series` mixes benchmarks or machines.
    """
    settings = settings or HistorySettings()
    shas, values, samples, bench, machine = _per_commit(series)
    n = values.size
    if n < settings.min_points:
        return []
    y = np.log(values)
    sigma = _robust_sigma(y)
    # Segment at no finer a scale than the smallest step the size guard can pass (floor / noise_k
    # sigmas): with a near-zero sigma (coarse timers, byte counts: most successive medians equal)
    # PELT would propose hundreds of candidate steps that the merge then removes one pass at a time
    # (quadratic: 10 s for one 1,000-commit series). A noiseless series (sigma 0, floor 0) still
    # gets a positive scale.
    floor_scale = math.log1p(settings.floor) / settings.noise_k if settings.noise_k > 0 else 0.0
    scale = max(sigma, floor_scale)
    if scale <= 0:
        scale = max(1e-9, float(np.std(y)) * 1e-3, 1e-12)
    algo = ruptures.KernelCPD(kernel="linear", min_size=settings.min_size, jump=1)
    bkps = [b for b in algo.fit((y / scale).reshape(-1, 1)).predict(pen=settings.penalty * math.log(n)) if b < n]
    min_log = math.log1p(max(settings.floor, settings.noise_k * sigma))

    while True:
        bounds = [0, *bkps, n]
        tested = [
            _segment_test(y, samples, bounds[i], bounds[i + 1], bounds[i + 2], settings.max_pvalue)
            for i in range(len(bkps))
        ]
        failing = [
            (p, abs(lr), i) for i, (lr, p) in enumerate(tested) if p >= settings.max_pvalue or abs(lr) < min_log
        ]
        if not failing:
            break
        # Weakest first: the highest p-value, then the smallest step.
        _, _, worst = max(failing, key=lambda t: (t[0], -t[1]))
        del bkps[worst]

    out = []
    for b, (log_ratio, p) in zip(bkps, tested, strict=True):
        ratio = math.exp(log_ratio)
        worse = is_worse(bench.direction, ratio)  # None: unknown direction, a step reported as such
        bounds_i = [0, *bkps, n]
        j = bounds_i.index(b)
        before = float(np.median(values[bounds_i[j - 1]:b]))
        after = float(np.median(values[b:bounds_i[j + 1]]))
        out.append(
            ChangePoint(
                bench, shas[b], before, after, after / before,
                Outcome.INCONCLUSIVE if worse is None else Outcome.REGRESSED if worse else Outcome.IMPROVED,
                previous_sha=shas[b - 1], p_value=p, machine=machine, index=b,
            )
        )
    return out


def _is_store(source: object) -> bool:
    return all(callable(getattr(source, name, None)) for name in ("results", "benchmarks", "commits", "machines"))


def detect_all(
    source: StoreReader | Sequence[Result],
    *,
    machine: str | None = None,
    branch: str | None = None,
    settings: HistorySettings | None = None,
    include_correctness: bool = False,
) -> list[ChangePoint]:
    """Change points of every series (benchmark x machine) in a store or a list of results.

    Args:
        source: a `StoreReader` (results come back in history order) or results already in
            history order (oldest first).
        machine: only this machine's series.
        branch: with a store, only commits of this branch (e.g. "main"); ignored for a list.
        settings: detector settings.
        include_correctness: also analyse correctness series (off: the gates judge those).

    Returns:
        All change points, grouped by series key then machine, oldest first within a series.

    Raises:
        TypeError: `source` is neither a store nor a sequence of Result.
    """
    settings = settings or HistorySettings()
    groups: dict[tuple[str, str], list[Result]] = {}
    if _is_store(source):
        allowed = {c.sha for c in source.commits(branch)} if branch else None  # type: ignore[union-attr]
        for bench in source.benchmarks():  # type: ignore[union-attr]
            if bench.kind == Kind.CORRECTNESS and not include_correctness:
                continue
            for r in source.results(benchmark_key=bench.key, machine=machine):  # type: ignore[union-attr]
                if allowed is None or r.commit_sha in allowed:
                    groups.setdefault((bench.key, r.machine), []).append(r)
    elif isinstance(source, Sequence) and not isinstance(source, (str, bytes)):
        for r in source:
            if not isinstance(r, Result):
                raise TypeError(f"source must contain only Result records, got {type(r).__name__}")
            if r.benchmark.kind == Kind.CORRECTNESS and not include_correctness:
                continue
            if machine is None or r.machine == machine:
                groups.setdefault((r.benchmark.key, r.machine), []).append(r)
    else:
        raise TypeError(f"source must be a StoreReader or a sequence of Result, got {type(source).__name__}")
    out: list[ChangePoint] = []
    for key in sorted(groups):
        # A step where the benchmark's code changed is not the library's: judge the current version only.
        out.extend(change_points(current_version(groups[key]), settings=settings))
    return out


def newly_detected(
    results: Sequence[Result],
    new_commits: set[str] | frozenset[str],
    *,
    settings: HistorySettings | None = None,
) -> list[ChangePoint]:
    """The change points this job's commits made detectable: found in the history with
    `new_commits`, not found without them.

    A step needs `min_size` commits on its far side before it can be found, so the commit that
    made it is usually measured a job or two before the step shows: filtering change points by
    "at a commit of this job" would miss almost every regression of a one-commit push job. This
    reports each step once, in the first job that can see it (again only if more data moves it).

    Args:
        results: one machine's history, oldest commit first (as `detect_all` takes a list).
        new_commits: full shas measured by this job.
        settings: detector settings.

    Returns:
        Change points as `detect_all` gives them, only those that are new.
    """
    now = detect_all(results, settings=settings)
    if not now:
        return []
    seen = {(c.benchmark.key, c.machine, c.commit_sha)
            for c in detect_all([r for r in results if r.commit_sha not in new_commits], settings=settings)}
    return [c for c in now if (c.benchmark.key, c.machine, c.commit_sha) not in seen]
