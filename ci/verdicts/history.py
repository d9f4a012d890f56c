"""Change points on the main branch's history: which commit made a series step up or down.

Method (Otava/Hunter-style split then merge):

1. Per series (one benchmark on one machine, commits oldest first), the per-commit value is the
   median of that commit's samples, on a log scale so a step is a ratio.
2. Split: penalised least-squares segmentation by `ruptures.KernelCPD(kernel="linear")` (PELT in
   C) on the log values divided by a robust noise sigma (MAD of successive differences / sqrt(2),
   which steps barely move), with a BIC-like penalty `penalty * log(n)`, on windows of `window`
   commits (stride half a window; each window proposes the steps in the half it owns, with its own
   sigma and n): a series shorter than a window is segmented whole, and a longer one, in pieces that
   never change once full, so that a new commit re-segments only the last window
   (`ci.verdicts.segments`).
3. Merge: every candidate step must pass a Mann-Whitney U test between the per-commit values of
   its two neighbouring segments, at most `span` commits of each (p < max_pvalue: a step is judged
   against the levels beside it, never against ever wider segments once its neighbours are gone),
   and a practical size `|ratio - 1| >= max(floor, noise_k * sigma)`; the weakest failing candidate
   is removed and its neighbours re-tested until all pass, as Otava's weak change points are. A
   step undone within `revert` commits (the level back at least half way), or within the longest
   stretch at another level of its size that the series took nearby and came back from
   (`ci.verdicts.segments.excursion_length`: a shared runner's slow hours), is an excursion of the
   runner: neither step is reported; a step that fewer than `revert + 1` commits hold is not
   reported yet (the next commit could still make it such an excursion).
   On a short history the per-commit test cannot reach `max_pvalue` at all (4 vs 5 commits: the
   smallest two-sided p is 2/C(9,4) = 0.016), so when the segments are too short for it, the test
   runs on the raw samples pooled per segment instead; the practical-size guard (floor and
   commit-to-commit noise) still applies, which keeps drift between commits from passing as a step.
   (Seen on the H200 history of 2026-11-29: a 13% kernel speed-up over 9 commits went unreported.)
4. Direction-aware outcome: for LOWER-is-better a rise is REGRESSED, for HIGHER-is-better a fall;
   a series of unknown direction gets INCONCLUSIVE steps (reported, never judged).
5. The project's rule: a step smaller than the series' threshold in the project's asv.conf.json
   (`regressions_thresholds`, the table `asv publish` and the service's A/B verdicts read) is not
   reported, where the caller passes it (`floor` / `floor_for`); the detector's own `floor` is the
   least it ever finds.

Exact series (`Kind.EXACT`) are not analysed here: their steps are the commits where the value moved
(`ci.verdicts.exact.exact_steps`), with no noise to test against.

Over a store that keeps states (`ci.records.HistoryStore`, i.e. `ci.store.Store`), `detect_all`
keeps each series' detector state in the store and, on the next call, reads and examines only the
runs after it; the result is exactly that of a computation from scratch (a state that cannot be
extended, or whose runs no longer match the history, is recomputed).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ci.records import (
    Benchmark,
    HistoryStore,
    Kind,
    MachineHistory,
    Outcome,
    Result,
    ResultSource,
    SeriesColumns,
    current_version,
    current_versions,
    is_worse,
    is_worse_step,
    run_chain,
)
from ci.verdicts.absolute import P_VALUE as ABSOLUTE_P
from ci.verdicts.absolute import RUN as ABSOLUTE_RUN
from ci.verdicts.absolute import AbsoluteTrack
from ci.verdicts.segments import ALGORITHM, Knobs, NeedFullHistory, SeriesState, safe_exp


@dataclass(frozen=True)
class HistorySettings:
    """Knobs of the history detector.

    Attributes:
        penalty: BIC-like penalty per change point, in units of log(n) (n = commits); larger
            finds fewer steps.
        min_size: fewest commits on each side of a step.
        floor: smallest relative step reported (0.02 = 2 %).
        noise_k: a step must also be at least `noise_k` robust sigmas of commit-to-commit noise
            (`long_noise_k` once it has held `long_side` commits each side; below).
        max_pvalue: Mann-Whitney p-value a step's two segments must reach. Otava's default is 0.001;
            0.01 found +10% steps injected into real histories within 2 commits 87% -> 91% (a Jenkins
            container's) and 86% -> 90% (GitHub-hosted runners'), 0 spurious steps on the synthetic
            history model either way (`tools.eval_history`, `tools.bench_verdicts`, 2026-12-05).
        min_points: series with fewer commits are not analysed.
        window: commits per segmentation window (a series at most this long is segmented whole).
        span: commits each side of a step that its test reads (the levels beside it; 0: all up to
            the neighbouring steps).
        revert: a step undone within this many commits is an excursion, not reported (0: off); so
            is one undone within the longest stretch of its size that the series took nearby at
            another level and came back from, seen twice or more (`segments.excursion_length`). On
            seeded series of a runner that sits 10% slower for stretches of 3-commit blocks, false
            steps per 1,000 commit-series 14.2 -> 5.4 (asv's fit 0, which finds none of their +10%
            steps either); on the real histories +10% found 340 -> 339 of 384 trials (MetPy) and
            +5% 114 -> 113 of 249 (uxarray), every other row the same (`tools.null_series`,
            `tools.eval_history --trials 3`, 2026-12-06).
        flip_pvalue: the p-value a step must reach when it is no larger than 1.5 x the flips of its
            series and a side of it is shorter than `span` (stretches of 2 or more commits off the
            series' median that ended, seen twice or more: the regimes of shared runners;
            `ci.verdicts.segments.flip_size`). 0: off. On uxarray's GitHub-hosted history with
            each series' commits shuffled (no step anywhere), regressions per 1,000
            commit-series 0.81 -> 0.12 (asv's own 0.47); MetPy's 0.13 either way (asv 0.00); +10%
            steps found 91% -> 90% and 90% -> 89% (`tools.eval_history`, 2026-12-05).
        noise_test: where a step's sides are too short for the rank test to reach `max_pvalue`
            (2 / C(m + n, m): 3 commits against 4 reach 0.057 at best), judge it against the
            series' commit-to-commit noise (`robust_sigma` of its whole history, a t-test whose
            degrees of freedom grow with the series; `ci.verdicts.segments.noise_pvalue`); on a
            series that flips between levels, only for a step more than 1.5x its flips, against noise
            of at least their size.
            90th-percentile delay of +10% steps 9 -> 5 commits (uxarray's history) and 6 -> 4
            (MetPy's), false alarms on the shuffled series unchanged (`tools.eval_history`,
            2026-12-05).
        long_side, long_noise_k, long_pvalue: a step held at least `long_side` commits on each side
            needs `long_noise_k` robust sigmas instead of `noise_k`, when the series' noise model also
            gives it p < `long_pvalue` (not on a series that flips between levels; `long_side` 0: off).
            On a quiet history of 400 Gaussian series with 2% noise, +5% steps found 12% -> 43%
            (the 5% threshold caps it near half); +10% found 89.6% -> 90.8% on uxarray's history and
            88.0% -> 88.5% on MetPy's, +5% 44.6% -> 45.8% and 43.8% -> 46.6%, at +1 and +2
            regressions on their real series (of 70 and 43: a +33% step split into the two steps of
            two crowds, a +6% step of 2.8 sigmas at p 6e-7) and none on their shuffled series
            (`tools.eval_history --trials 3`, 2026-12-06). Held 10 commits rather than 12 (2026-12-07):
            +5% found on the recorded H200 history 84.5% -> 85.7% (asv 85.7%), on MetPy's 46.4% ->
            46.9%, +10% on uxarray's 89.6% -> 90.0% (seed 1); regressions on the real and shuffled
            series and false steps on seeded null series (`tools.null_series`, seeds 7 and 8)
            unchanged. At 8 commits MetPy's real series gained a regression (45 -> 46 over 7,441
            commit-series) and the AR(1) and bimodal null series false steps (1.44 -> 1.49, 0.48 ->
            0.61 per 1,000).
    """

    penalty: float = 3.0
    min_size: int = 3
    floor: float = 0.02
    noise_k: float = 3.0
    max_pvalue: float = 0.01
    min_points: int = 8
    window: int = 128
    span: int = 32
    revert: int = 3
    flip_pvalue: float = 0.001
    noise_test: bool = True
    long_side: int = 10
    long_noise_k: float = 2.0
    long_pvalue: float = 0.001

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
        if not 0.0 <= self.flip_pvalue <= self.max_pvalue:
            raise ValueError(f"flip_pvalue must be in [0, max_pvalue], got {self.flip_pvalue!r}")
        if self.min_points < 2 * self.min_size:
            raise ValueError(f"min_points ({self.min_points}) must be >= 2 * min_size ({2 * self.min_size})")
        if not isinstance(self.noise_test, bool):
            raise ValueError(f"noise_test must be a bool, got {self.noise_test!r}")
        if not 0.0 <= self.long_noise_k <= self.noise_k:
            raise ValueError(f"long_noise_k must be in [0, noise_k], got {self.long_noise_k!r}")
        if not 0.0 <= self.long_pvalue <= self.max_pvalue:
            raise ValueError(f"long_pvalue must be in [0, max_pvalue], got {self.long_pvalue!r}")
        for name in ("span", "revert", "long_side"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be an int >= 0, got {value!r}")
        if 0 < self.span < self.min_size:
            raise ValueError(f"span must be 0 or >= min_size ({self.min_size}), got {self.span!r}")
        if isinstance(self.window, bool) or not isinstance(self.window, int) or self.window < 4 * self.min_size:
            raise ValueError(f"window must be an int >= 4 * min_size ({4 * self.min_size}), got {self.window!r}")

    @property
    def knobs(self) -> Knobs:
        """These settings as the detector's core takes them."""
        return Knobs(self.penalty, self.min_size, self.floor, self.noise_k, self.max_pvalue, self.min_points,
                     self.window, self.span, self.revert, self.flip_pvalue, self.noise_test,
                     self.long_side, self.long_noise_k, self.long_pvalue)  # fmt: skip

    @property
    def fingerprint(self) -> str:
        """The algorithm version and every knob: stored states are only reused under the same one."""
        k = self.knobs
        return (f"{ALGORITHM} penalty={k.penalty!r} min_size={k.min_size} floor={k.floor!r} noise_k={k.noise_k!r} "
                f"max_pvalue={k.max_pvalue!r} min_points={k.min_points} window={k.window} span={k.span} "
                f"revert={k.revert} flip_pvalue={k.flip_pvalue!r} noise_test={k.noise_test} "
                f"long_side={k.long_side} long_noise_k={k.long_noise_k!r} long_pvalue={k.long_pvalue!r}")  # fmt: skip


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


def _pooled(series: Sequence[Result]) -> tuple[list[tuple[str, np.ndarray]], list[float] | None, Benchmark, str]:
    """(sha, finite samples pooled) per commit in first-seen order, their medians when they came in
    one vectorised call (else None: `SeriesState.extend` takes them), the benchmark and the machine."""
    if isinstance(series, (str, bytes)) or not isinstance(series, Sequence):
        raise TypeError(f"series must be a sequence of Result, got {type(series).__name__}")
    pooled: dict[str, list[tuple[float, ...]]] = {}
    keys, machines = set(), set()
    last_bench = None
    for r in series:
        if not isinstance(r, Result):
            raise TypeError(f"series must contain only Result records, got {type(r).__name__}")
        if r.benchmark is not last_bench:  # a store's results share Benchmark objects; .key is built each call
            last_bench = r.benchmark
            keys.add(r.benchmark.key)
        machines.add(r.machine)
        got = pooled.get(r.commit_sha)
        if got is None:
            pooled[r.commit_sha] = [r.samples]
        else:
            got.append(r.samples)
    if len(keys) > 1:
        raise ValueError(f"series mixes several benchmarks: {sorted(keys)[:3]}; pass one series (see detect_all)")
    if len(machines) > 1:
        raise ValueError(f"series mixes machines {sorted(machines)}: steps between machines are not code changes")
    bench = series[0].benchmark if series else Benchmark("")
    machine = next(iter(machines)) if machines else ""
    rows = [parts[0] for parts in pooled.values() if len(parts) == 1]
    if len(rows) == len(pooled) and rows and len({len(r) for r in rows}) == 1:
        mat = np.array(rows, dtype=float)  # one result per commit, one sample count: one conversion
        if np.isfinite(mat).all():
            return list(zip(pooled, mat, strict=True)), np.median(mat, axis=1).tolist(), bench, machine
    commits = []
    for sha, parts in pooled.items():
        a = np.array(parts[0] if len(parts) == 1 else [x for p in parts for x in p], dtype=float)
        commits.append((sha, a if np.isfinite(a).all() else a[np.isfinite(a)]))
    return commits, None, bench, machine


def state_change_points(state: SeriesState, bench: Benchmark, machine: str, floor: float = 0.0) -> list[ChangePoint]:
    """The change points of a detector state (`ci.verdicts.segments.SeriesState`) as `change_points`
    reports them: a caller that extends a state commit by commit (a replay of a history) reads each
    prefix's change points here, the same as `change_points` over that prefix.

    Args:
        state: the series' state, extended with its commits so far.
        bench: the series (its direction decides each step's outcome).
        machine: where it was measured.
        floor: the series' threshold from the project (`ci.project.ProjectSettings.floor_for`: its
            asv.conf.json `regressions_thresholds`, the one table the A/B verdicts read too); a step
            smaller than it either way is not reported (0.0: every step the detector finds).

    Returns:
        Change points oldest first.
    """
    track = state.absolute
    if track is not None and track.nonpositive >= ABSOLUTE_RUN:
        # Judged by difference from its first level at or below zero; the ratio detector's steps before it stand.
        p0 = track.first_index + track.start
        before = [cp for cp in _ratio_change_points(state, bench, machine, floor) if cp.index < p0]
        return before + _absolute_change_points(track, bench, machine)
    return _ratio_change_points(state, bench, machine, floor)


def _ratio_change_points(state: SeriesState, bench: Benchmark, machine: str, floor: float) -> list[ChangePoint]:
    """The ratio detector's steps of a state, as `state_change_points` reports them."""
    out = []
    least = math.log1p(floor) if floor > 0 else 0.0
    # A step with at most `revert` commits after it may still turn out an excursion (the next commit
    # back at the old level undoes it): it is reported once `revert + 1` commits hold it. Reported at
    # `min_size` commits, 40 of MetPy's 88 regressions ever shown in a commit-by-commit replay were
    # gone again from the whole history, most after 1-2 commits (`tools.eval_history`, 2026-12-05).
    settle = state.k.revert
    for step in state.steps:
        if settle and state.n - step.index <= settle:
            continue
        if abs(step.log_ratio) < least:
            continue  # a step the project does not count, as `asv publish` drops a jump under its threshold
        ratio = safe_exp(step.log_ratio)
        worse = is_worse(bench.direction, ratio)  # None: unknown direction, a step reported as such
        out.append(
            ChangePoint(
                bench, state.sha(step.index), step.before, step.after, step.after / step.before,
                Outcome.INCONCLUSIVE if worse is None else Outcome.REGRESSED if worse else Outcome.IMPROVED,
                previous_sha=state.sha(step.index - 1), p_value=step.p_value, machine=machine, index=step.index,
            )
        )  # fmt: skip
    return out


def change_points(
    series: Sequence[Result],
    *,
    settings: HistorySettings | None = None,
    floor: float = 0.0,
) -> list[ChangePoint]:
    """Find the steps in one series' history.

    Args:
        series: results of one benchmark on one machine, oldest commit first (a store returns them
            in history order). Several results of one commit pool their samples; commits with no
            finite positive sample are skipped.
        settings: detector settings; `HistorySettings()` when None.
        floor: the series' threshold from the project: smaller steps are not reported
            (`state_change_points`).

    Returns:
        Change points oldest first, each naming the first commit after the step.

    Raises:
        TypeError: `series` is not a sequence of Result.
        ValueError: `series` mixes benchmarks or machines.
    """
    settings = settings or HistorySettings()
    commits, meds, bench, machine = _pooled(series)
    state = SeriesState(settings.knobs)
    state.extend(commits, meds)
    return state_change_points(state, bench, machine, floor)


def _absolute_change_points(track: AbsoluteTrack, bench: Benchmark, machine: str) -> list[ChangePoint]:
    """A series at or through zero: its steps by difference (`ci.verdicts.absolute`), each judged by
    its sign, with no ratio where a side is at or below zero and no floor (the project's thresholds
    are relative)."""
    out = []
    for step in track.steps:
        worse = is_worse_step(bench.direction, step.before, step.after)
        ratio = step.after / step.before if step.before > 0 and step.after > 0 else math.nan
        out.append(ChangePoint(
            bench, step.sha, step.before, step.after, ratio,
            Outcome.INCONCLUSIVE if worse is None else Outcome.REGRESSED if worse else Outcome.IMPROVED,
            previous_sha=step.previous_sha, p_value=ABSOLUTE_P, machine=machine, index=step.index,
        ))  # fmt: skip
    return out


def _no_floor(_key: str) -> float:
    """Every step the detector finds (`detect_all` without a project's thresholds)."""
    return 0.0


def detect_all(
    source: ResultSource | Sequence[Result],
    *,
    machine: str | None = None,
    branch: str | None = None,
    settings: HistorySettings | None = None,
    include_correctness: bool = False,
    floor_for: Callable[[str], float] | None = None,
) -> list[ChangePoint]:
    """Change points of every series (benchmark x machine) in a store or a list of results.

    Args:
        source: a store (a `ResultSource`, as every `StoreReader` is; its results come back in
            history order) or results already in history order (oldest first). A store that keeps
            detector states (`ci.store.Store`) is read as columns and only its new runs are
            examined (module docstring).
        machine: only this machine's series.
        branch: with a store, only commits of this branch (e.g. "main"); ignored for a list.
        settings: detector settings.
        include_correctness: also analyse correctness series (off: the gates judge those).
        floor_for: each series' threshold by its key (`ci.project.ProjectSettings.floor_for`);
            steps smaller than it are not reported. None: every step the detector finds.

    Returns:
        All change points, grouped by series key then machine, oldest first within a series.

    Raises:
        TypeError: `source` is neither a store nor a sequence of Result.
    """
    settings = settings or HistorySettings()
    floor_of = floor_for or _no_floor
    if isinstance(source, HistoryStore):  # a store that keeps the detector's states
        return _detect_stored(source, machine, branch, settings, include_correctness,
                              floor_of)
    groups: dict[tuple[str, str], list[Result]] = {}
    if isinstance(source, ResultSource):
        allowed = {c.sha for c in source.commits(branch)} if branch else None
        for bench in source.benchmarks():
            if (bench.kind == Kind.CORRECTNESS and not include_correctness) or bench.kind == Kind.EXACT:
                continue
            for r in source.results(benchmark_key=bench.key, machine=machine):
                if allowed is None or r.commit_sha in allowed:
                    groups.setdefault((bench.key, r.machine), []).append(r)
    elif isinstance(source, Sequence) and not isinstance(source, (str, bytes)):
        groups = _groups(source, machine, include_correctness)
    else:
        raise TypeError(f"source must be a store (a StoreReader; any ResultSource) or a sequence of Result, "
                        f"got {type(source).__name__}")
    out: list[ChangePoint] = []
    for key in sorted(groups):
        # A step where the benchmark's code changed is not the library's: judge the current version only.
        out.extend(change_points(current_version(groups[key]), settings=settings,
                                 floor=floor_of(key[0])))
    return out


def _groups(results: Sequence[Result], machine: str | None, include_correctness: bool
            ) -> dict[tuple[str, str], list[Result]]:
    groups: dict[tuple[str, str], list[Result]] = {}
    for r in results:
        if not isinstance(r, Result):
            raise TypeError(f"source must contain only Result records, got {type(r).__name__}")
        if (r.benchmark.kind == Kind.CORRECTNESS and not include_correctness) or r.benchmark.kind == Kind.EXACT:
            continue
        if machine is None or r.machine == machine:
            groups.setdefault((r.benchmark.key, r.machine), []).append(r)
    return groups


def _extend_from_columns(state: SeriesState, col: SeriesColumns, first_run: int) -> None:
    """Extend `state` with `col`'s results from run `first_run` on (its `tag`: the benchmark version)."""
    commits, version, rows = _column_commits(col, first_run, state.tag)
    state.tag = version
    if rows is not None:
        state.extend_rows(rows[0], rows[1], np.median(rows[1], axis=1))
    elif commits or not first_run:
        state.extend(commits)


def _column_commits(col: SeriesColumns, first_run: int, version: str | None
                    ) -> tuple[list[tuple[str, np.ndarray]], str | None, tuple[Sequence[str], np.ndarray] | None]:
    """(sha, finite samples pooled) per commit of `col`'s results from run `first_run` on, filtered
    as `current_version` filters a whole series, and the series' current benchmark version; or, when
    every commit has one result with the same number of samples, all finite, (shas, samples matrix)
    as the third item instead (commits then empty).

    Args:
        col: a series' columns.
        first_run: the first run (index into the machine's runs) whose results are new.
        version: the current version of the results before `first_run` (None: none known).

    Raises:
        NeedFullHistory: the new results make another version current, so older results drop out.
    """
    start = 0
    while start < len(col.runs) and col.runs[start] < first_run:
        start += 1
    # `current_version`'s rule, the results before `first_run` standing in as their one version.
    latest, keep = current_versions([version, *col.versions[start:]])
    if version is not None and latest != version:
        raise NeedFullHistory("the benchmark's version changed")
    flat = np.frombuffer(col.samples, dtype=np.float64)
    counts = col.counts[start:]
    new_shas = col.commit_shas[start:]
    # A commit's results are adjacent (history order): no two neighbours alike, no commit twice.
    single = not any(map(operator.eq, new_shas[1:], new_shas[:-1]))
    if keep is None and counts and single and counts.count(counts[0]) == len(counts):
        # One result per commit, one sample count (a runner's history): one reshape, no per-commit work.
        c = counts[0]
        offset = sum(col.counts[:start])
        mat = flat[offset : offset + c * len(counts)].reshape(len(counts), c)
        if c and np.isfinite(mat).all():
            return [], latest, (new_shas, mat)
    ends = np.cumsum(col.counts)
    index: dict[str, int] = {}
    shas: list[str] = []
    parts: list[list[np.ndarray]] = []
    for i in range(start, len(col.runs)):
        if keep is not None and col.versions[i] not in keep:
            continue
        j = index.get(col.commit_shas[i])
        if j is None:
            j = index[col.commit_shas[i]] = len(parts)
            shas.append(col.commit_shas[i])
            parts.append([])
        parts[j].append(flat[ends[i] - col.counts[i] : ends[i]])
    commits = []
    for sha, part in zip(shas, parts, strict=True):
        pooled = np.concatenate(part) if len(part) > 1 else part[0]
        commits.append((sha, pooled[np.isfinite(pooled)]))
    return commits, latest, None


def _detect_stored(
    store: HistoryStore, machine: str | None, branch: str | None, settings: HistorySettings, include_correctness: bool,
    floor_of: Callable[[str], float],
) -> list[ChangePoint]:
    """`detect_all` over a store that keeps states: read each machine's runs after those its states
    cover, extend the states with them, save them back (a machine whose states cannot all be
    extended is read whole and recomputed)."""
    knobs, fingerprint, where = settings.knobs, settings.fingerprint, branch or ""
    cached = store.change_point_states(where, fingerprint)
    after: dict[str, int] = {}
    for (_key, m), (runs, _digest, _state) in cached.items():
        if machine is None or m == machine:
            after[m] = min(after.get(m, runs), runs)
    benches = _Benchmarks(store)
    out: list[ChangePoint] = []
    save: dict[tuple[str, str], tuple[int, str, bytes]] = {}
    for hist in store.series_columns(machine=machine, branch=branch, runs_after=after):
        got = _machine_states(hist, cached, knobs, benches, complete=after.get(hist.machine, 0) == 0)
        if got is None:  # some series need their whole history: read the machine's once
            (hist,) = store.series_columns(machine=hist.machine, branch=branch)
            got = _machine_states(hist, cached, knobs, benches, complete=True)
            assert got is not None
        states, changed = got
        save.update(changed)
        for key in sorted(states):
            state, bench = states[key]
            if bench.kind != Kind.CORRECTNESS or include_correctness:
                out.extend(state_change_points(state, bench, hist.machine,
                                               floor_of(key)))
    if save:
        try:
            store.save_change_point_states(where, fingerprint, save)
        except Exception:  # noqa: BLE001 - a cache: a store that cannot be written still gets its change points
            pass
    out.sort(key=lambda c: (c.benchmark.key, c.machine))
    return out


class _Benchmarks:
    """The store's series by key, read once and only if a series without new results needs its identity."""

    def __init__(self, store: HistoryStore) -> None:
        self._store = store
        self._by_key: dict[str, Benchmark] | None = None

    def get(self, key: str) -> Benchmark | None:
        if self._by_key is None:
            self._by_key = {b.key: b for b in self._store.benchmarks()}
        return self._by_key.get(key)


def _machine_states(
    hist: MachineHistory, cached: dict[tuple[str, str], tuple[int, str, bytes]], knobs: Knobs,
    benches: _Benchmarks, *, complete: bool,
) -> tuple[dict[str, tuple[SeriesState, Benchmark]], dict[tuple[str, str], tuple[int, str, bytes]]] | None:
    """Every series' state of one machine, extended with `hist`'s results, and the states to save.

    Every series gets a state, correctness series too, so the runs a machine's states cover hold no
    series without one. Returns None when `hist` holds only the newer runs (not `complete`) and a
    series needs its whole history: its state is missing, stale (its runs' digests no longer match
    the history: a file rewritten, a commit's time or branch changed) or cannot be extended.
    """
    total = len(hist.runs)
    chain = run_chain(hist.runs)
    mine = {key: v for (key, m), v in cached.items() if m == hist.machine}
    valid = {key: runs for key, (runs, digest, _) in mine.items() if runs <= total and chain[runs] == digest}
    if not complete and len(valid) < len(mine):
        return None
    states: dict[str, tuple[SeriesState, Benchmark]] = {}
    save: dict[tuple[str, str], tuple[int, str, bytes]] = {}
    for col in hist.series:
        if col.benchmark.kind == Kind.EXACT:
            continue  # exact series step exactly where their value moves (ci.verdicts.exact), no detector state
        key = col.benchmark.key
        state = None
        if key in valid:
            try:
                state = SeriesState.from_bytes(mine[key][2], knobs)
                _extend_from_columns(state, col, valid[key])
            except (NeedFullHistory, ValueError, KeyError):
                state = None
        if state is None:
            if not complete:
                return None
            state = SeriesState(knobs)
            _extend_from_columns(state, col, 0)
        states[key] = (state, col.benchmark)
        save[(key, hist.machine)] = (total, chain[total], state.to_bytes())
    for key, runs in valid.items():
        if key in states or complete:
            continue  # a complete read lists every series that has results
        bench = benches.get(key)
        if bench is None or bench.kind == Kind.EXACT:
            continue
        try:
            state = SeriesState.from_bytes(mine[key][2], knobs)
        except (ValueError, KeyError):
            if not complete:
                return None
            continue
        states[key] = (state, bench)  # no new results: same steps, more runs covered
        if runs != total:
            save[(key, hist.machine)] = (total, chain[total], mine[key][2])
    return states, save


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
    settings = settings or HistorySettings()
    if isinstance(results, (str, bytes)) or not isinstance(results, Sequence):
        raise TypeError(f"results must be a sequence of Result, got {type(results).__name__}")
    out: list[ChangePoint] = []
    for _key, group in sorted(_groups(results, None, False).items()):
        now = current_version(group)
        before = current_version([r for r in group if r.commit_sha not in new_commits])
        commits, meds, bench, machine = _pooled(now)
        old = _pooled(before)[0] if before else []
        state = SeriesState(settings.knobs)
        seen: set[str] = set()
        if before == now[: len(before)]:
            # The job's commits come last (a push job): the history without them is a prefix, so one
            # state gives both answers, the second by extending the first with the job's commits.
            state.extend(old, None if meds is None else meds[: len(old)])
            seen = {c.commit_sha for c in state_change_points(state, bench, machine)}
            state.extend(commits[len(old):], None if meds is None else meds[len(old):])
            found = state_change_points(state, bench, machine)
        else:
            state.extend(commits, meds)
            found = state_change_points(state, bench, machine)
            if found:
                earlier = SeriesState(settings.knobs)
                earlier.extend(old)
                seen = {c.commit_sha for c in state_change_points(earlier, bench, machine)}
        out.extend(c for c in found if c.commit_sha not in seen)
    return out
