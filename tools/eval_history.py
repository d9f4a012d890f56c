"""Quality of the service's history verdicts on real asv results, beside asv's own methods on the
same series (a script, not a test).

Run: `python -m tools.eval_history RESULTS_DIR [RESULTS_DIR ...] [--json FILE]`; one markdown table
per results directory. Every number comes from the service's public functions, the code paths
`ci run` and the dashboard take, so a changed detector is measured by the same command:
`ci.ingest.ingest_results_dir` into a temporary SQLite `ci.store.Store`; `ci.verdicts.change_points`,
`judge_levels`, `SeriesState.extend` + `state_change_points` (a replay, commit by commit) and
`compare_commits`; `dashboard.model.recovery` (whether the dashboard shows a regression open).
asv's column calls asv's own functions: `asv.step_detect.detect_steps` on per-commit values with
`asv._stats.get_weight` weights, then `detect_regressions` with the `regressions_thresholds` of
asv.conf.json, as `asv publish` does; `asv.commands.compare._is_result_better` with factor 1.1, as
`asv compare` does.

Definitions (what the printed numbers mean):

- Series: one benchmark point on one machine key (asv machine x environment x host,
  `ci.records.Machine`), correctness series left out, its current benchmark version only (as
  `detect_all` reads it); its commits are those with a positive level (`commit_levels`), oldest
  first. Series with fewer than `--min-commits` commits are skipped. A series of unknown direction
  (neither declared nor implied by its unit) is never judged by the service (its steps are
  INCONCLUSIVE); its trials are counted apart.
- Trial: one series and one step size s, on a copy. A seeded commit index k, 10 <= k <= n - 10
  (n: the series' commits), and every sample of commits k..n-1 multiplied by a factor: for "+s"
  (the bad direction) 1 + s on a lower-is-better series and 1 / (1 + s) on a higher-is-better one;
  for "-s" (an improvement) the inverse. A series of unknown direction takes 1 + s (asv's reading:
  lower is better). asv's inputs of those commits are scaled alike (value, 99 % interval, quartiles).
- Found: `change_points` of the whole injected series holds a change point of the right outcome
  (REGRESSED for +, IMPROVED for -; unknown direction: INCONCLUSIVE with the ratio's direction) at
  an index within +-2 of k. asv: `detect_steps` fits a segment boundary within +-2 of k whose level
  moves the way the values were moved (its fitted steps: asv has no direction, so on a
  higher-is-better series it reads a regression as an improvement).
- By chance: the same test at the same k on the un-injected series (a change point of that outcome,
  or an asv boundary of that direction, already there): the share of "found" that needs no step.
- Still open: of the + trials found, those whose change point the dashboard shows as an open
  regression at the newest commit: `recovery(cp.before, later change points, direction,
  threshold)` is "" with the series' threshold for its next commit (`judge_levels`). asv's
  counterpart: `detect_regressions` lists a jump whose first commit after is within +-2 of k
  (asv lists only regressions not undone since, so this is its "still open").
- Delay: the injected series replayed prefix by prefix, p = k+1 .. min(n, k+30) commits
  (`SeriesState.extend`, `judge_levels(track=...)`); the delay is p - k at the first prefix where
  the service flags it (a change point of the right outcome within +-2 of k, or, for + steps, a
  suspicion raised at commits k .. k+2: suspicions at k-2 and k-1 predate the step), so 1 means
  "flagged when the step's own commit arrived". Not flagged within 30 commits (or by the series'
  end, when fewer than 30 follow k) is ">30". asv: the first prefix whose `detect_steps` fit has a
  boundary as in "found". Median and 90th percentile are nearest-rank.
- Regressions per 1,000 commit-series (the un-injected series): REGRESSED change points of
  `change_points` on each whole series, per 1,000 commits summed over the series. asv: the jumps
  `detect_regressions` lists on each whole series, per 1,000 of the same commits.
- ...of them: the share of those change points where asv's fit of the same series has a boundary
  within +-NEAR moving the same way, and the share whose step is at least `BIG_STEP` (5) robust
  sigmas (`ci.verdicts.segments.robust_sigma` of the series' log levels): steps of the data itself,
  not of the detector.
- False alarms: each real series with its commits in a seeded random order (`shuffled`: the same
  values, outliers and mix of runner regimes, but no step anywhere), REGRESSED change points of
  `change_points`, and the suspicions `judge_levels` raises on it, per 1,000 commit-series; asv:
  the jumps `detect_regressions` lists on the same shuffled points.
- Suspicions per 1,000 commit-series: `judge_levels` on each whole series, every suspicion raised
  (whatever its state now); share confirmed: CONFIRMED / (CONFIRMED + WITHDRAWN).
- Banner up: each series replayed commit by commit; at a commit of a machine (one where any
  evaluated series of it has a level), the overview's banner is up when an evaluated series of
  that machine, as of that commit, has an open suspicion (SUSPECTED) or a change-point regression
  the dashboard shows open (as above; no acknowledgements). Share: such commits / all of them,
  over every machine; split into commits with an open regression and those with suspicions only.
  A false warning: a commit whose banner is up for suspicions alone, every one of them withdrawn
  (or expired) by the whole history. The same replay counts the REGRESSED change points some
  prefix showed that the whole history no longer holds (retracted as later commits arrived).
- Adjacent pairs (cross-job A/B): up to `--pairs` seeded pairs of consecutive commits of one
  machine (its commits where it has any result). Service: `compare_commits(store, base, head,
  machine)`, which applies the cross-job rule (between-job drift) unless both sides carry one job
  marker; a pair counts when any verdict is REGRESSED. asv: asv compare's rule per series in both
  (correctness left out): "+" (worse by factor 1.1 and, where the results carry statistics,
  `asv._stats.is_different`); a pair counts when any series is "+". Injected: +10 % (the bad
  direction) into one seeded series of known direction of the pair's head (through a reader that
  scales those samples, so `compare_commits` runs unchanged); found: the service's verdict on it is
  REGRESSED; asv marks it changed in the direction its value moved.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import multiprocessing
import sys
import tempfile
import time
import types
import zlib
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from asv import util as asv_util
from asv._stats import get_weight
from asv.commands.compare import _is_result_better  # asv compare's rule: factor, then its statistics
from asv.plugins.regressions import _GraphDataFilter  # asv publish's regressions_thresholds lookup
from asv.step_detect import detect_regressions, detect_steps

from ci.forking import fork_workers
from ci.ingest import ingest_results_dir
from ci.ingest.asv_files import iter_result_files, load_benchmarks_json, load_machine_json
from ci.ingest.parse import parse_result_file
from ci.project import project_settings
from ci.records import Benchmark, Direction, Kind, Outcome, Result, current_version
from ci.site.model import recovery
from ci.store import Store
from ci.verdicts import (
    HistorySettings,
    SeriesState,
    SuspectState,
    change_points,
    commit_levels,
    compare_commits,
    group_changes,
    judge_levels,
    state_change_points,
)
from ci.verdicts.segments import robust_sigma

DEFAULT_STEPS = "+5,+10,+20,-10"
HEADLINE_STEP = 0.10
NEAR = 2  # a step is found at k when flagged within +-NEAR commits of it
EDGE = 10  # k is at least this many commits from either end
REPLAY = 30  # prefixes k+1 .. k+REPLAY
AB_STEP = 0.10
BIG_STEP = 5.0  # robust sigmas: a step this large against the series' commit-to-commit noise is no accident
ASV_FACTOR = 1.1  # asv compare's default --factor


@dataclass(frozen=True)
class AsvPoint:
    """What asv reads for one series at one commit: its reported value, its stats (ci_99_a, ci_99_b,
    q_25, q_75, number, repeat; None when not recorded) and raw samples (None when not recorded)."""

    value: float
    stats: dict[str, float] | None
    samples: tuple[float, ...] | None

    def scaled(self, factor: float) -> AsvPoint:
        """The point with every measured value multiplied by `factor` (counts kept)."""
        stats = None if self.stats is None else {
            k: v * factor if k in ("ci_99_a", "ci_99_b", "q_25", "q_75") else v for k, v in self.stats.items()}
        samples = None if self.samples is None else tuple(x * factor for x in self.samples)
        return AsvPoint(self.value * factor, stats, samples)

    @property
    def weight(self) -> float | None:
        """asv publish's weight of the point (`get_weight`: 2 / the 99 % interval's width)."""
        return get_weight(self.stats) if self.stats is not None else None

    @property
    def compare_stats(self) -> tuple[dict[str, float] | None, tuple[float, ...] | None] | None:
        """The (stats, samples) pair asv compare passes to `_is_result_better` (None: factor only)."""
        if self.stats is None or not {"ci_99_a", "ci_99_b"} <= self.stats.keys():
            return None
        return self.stats, self.samples


def read_asv_points(results_dir: str | Path) -> dict[tuple[str, str], AsvPoint]:
    """What asv reads of every measured point, by (run key, series key): parsed with the service's
    own parser, so run keys and series keys are those of the store's results (`Result.run_id`,
    `Benchmark.key`). A file the parser refuses is left out (the store has none of its results)."""
    benchmarks = load_benchmarks_json(results_dir)
    out: dict[tuple[str, str], AsvPoint] = {}
    for path in iter_result_files(results_dir):
        try:
            run = parse_result_file(path, benchmarks, load_machine_json(Path(path).parent))
        except Exception:  # noqa: BLE001 - ingest reports it; no result of it reaches the store either
            continue
        for pt in run.all_points():
            if pt.status == "ok" and pt.value is not None and math.isfinite(pt.value):
                out[(run.run_key, pt.key)] = AsvPoint(pt.value, dict(pt.stats) or None,
                                                      tuple(pt.samples) if pt.has_raw_samples else None)
    return out


def asv_thresholds(conf_path: Path | None) -> Any:
    """asv publish's per-series regression threshold (`regressions_thresholds`, the largest match,
    else 0.05) as a function of the entry name; asv.conf.json is read with asv's own loader."""
    thresholds = {}
    if conf_path is not None and conf_path.is_file():
        thresholds = asv_util.load_json(str(conf_path), js_comments=True).get("regressions_thresholds", {}) or {}
    conf = types.SimpleNamespace(regressions_thresholds=thresholds)
    graph = types.SimpleNamespace(params={})
    flt = _GraphDataFilter(conf, None, {})
    return lambda entry_name: float(flt._get_threshold(graph, None, entry_name))


def asv_entry_name(bench: Benchmark) -> str:
    """asv's regression entry name of a series, `name(value, ...)` (the service keeps the values as
    asv displays them, quotes stripped: a regex on quoted reprs may match differently)."""
    return f"{bench.name}({', '.join(v for _, v in bench.params)})" if bench.params else bench.name


@dataclass
class Series:
    """One evaluated series: its results and, per commit with a level, what the service and asv read.

    Attributes:
        benchmark, machine: the series.
        results: current-version results, history order (what `change_points` takes).
        shas, levels: `commit_levels(results)`.
        commits: per commit of `shas`, its finite samples pooled (what `SeriesState.extend` takes).
        asv: per commit of `shas`, asv's point (None where the file's point was not found).
        asv_threshold: asv publish's regression threshold for it.
        positions: per commit of `shas`, its position in the store's history.
        floor: the service's threshold for it from the project (`ci.project.ProjectSettings.floor_for`).
    """

    benchmark: Benchmark
    machine: str
    results: list[Result]
    shas: list[str]
    levels: np.ndarray
    commits: list[tuple[str, np.ndarray]]
    asv: list[AsvPoint | None]
    asv_threshold: float
    positions: list[int] = field(default_factory=list)
    floor: float = 0.0

    @property
    def n(self) -> int:
        return len(self.shas)

    @property
    def judged(self) -> bool:
        """Whether the service judges its steps better or worse (a known direction)."""
        return self.benchmark.direction != Direction.UNKNOWN


def pooled_commits(results: Sequence[Result], shas: Sequence[str]) -> list[tuple[str, np.ndarray]]:
    """Per commit of `shas`, the finite samples of its results pooled, as `change_points` pools them."""
    parts: dict[str, list[float]] = defaultdict(list)
    for r in results:
        parts[r.commit_sha].extend(r.samples)
    out = []
    for sha in shas:
        a = np.asarray(parts[sha], dtype=float)
        out.append((sha, a[np.isfinite(a)]))
    return out


def make_series(bench: Benchmark, machine: str, results: list[Result], asv: dict[tuple[str, str], AsvPoint],
                threshold: float, position: dict[str, int], floor: float = 0.0) -> Series:
    """A Series from its current-version results."""
    shas, levels = commit_levels(results)
    by_sha = {}
    for r in results:
        by_sha.setdefault(r.commit_sha, asv.get((r.run_id, bench.key)))
    return Series(bench, machine, results, shas, levels, pooled_commits(results, shas),
                  [by_sha.get(sha) for sha in shas], threshold, [position[sha] for sha in shas], floor)


def step_factor(direction: Direction, step: float) -> float:
    """The factor of a step of `step` (+: the bad direction, -: an improvement) on a series."""
    bad = 1.0 + abs(step) if direction != Direction.HIGHER else 1.0 / (1.0 + abs(step))
    return bad if step > 0 else 1.0 / bad


def injected(s: Series, k: int, factor: float) -> Series:
    """A copy of `s` with every sample of its commits k.. multiplied by `factor` (asv's points too)."""
    after = set(s.shas[k:])
    results = [r.scaled(factor) if r.commit_sha in after else r for r in s.results]
    shas, levels = commit_levels(results)
    return Series(s.benchmark, s.machine, results, shas, levels, pooled_commits(results, shas),
                  scaled_points(s.asv, k, factor), s.asv_threshold, s.positions, s.floor)


def scaled_points(points: Sequence[AsvPoint | None], k: int, factor: float) -> list[AsvPoint | None]:
    """asv's points with those of commits k.. scaled by `factor`."""
    return [p if p is None or i < k else p.scaled(factor) for i, p in enumerate(points)]


def is_bad(s: Series, up: bool) -> bool:
    """Whether raising (`up`) or lowering the values makes the series worse (False: unknown direction)."""
    return s.judged and up == (s.benchmark.direction == Direction.LOWER)


def _right(cp: Any, s: Series, up: bool) -> bool:
    """Whether change point `cp` is the injected step's outcome (`up`: the values were raised)."""
    if not s.judged:
        return cp.outcome == Outcome.INCONCLUSIVE and (cp.ratio > 1.0) == up
    return cp.outcome == (Outcome.REGRESSED if is_bad(s, up) else Outcome.IMPROVED)


def open_regressions(cps: Sequence[Any], direction: Direction, threshold: float) -> list[Any]:
    """The REGRESSED change points the dashboard shows open (no acknowledgements): `recovery` is ""."""
    return [cp for i, cp in enumerate(cps)
            if cp.outcome == Outcome.REGRESSED and recovery(cp.before, cp.after, cps[i + 1:], direction) == ""]


def service_trial(s: Series, k: int, factor: float, *, replay: bool, settings: HistorySettings
                  ) -> tuple[bool, bool | None, int | None]:
    """(found, still open (None unless a found regression), delay (None: not within the replay))."""
    inj = injected(s, k, factor)
    up = factor > 1.0
    bad = is_bad(s, up)
    bench, machine = s.benchmark, s.machine
    cps = change_points(inj.results, settings=settings, floor=s.floor)
    hits = [cp for cp in cps if _right(cp, s, up) and abs(cp.index - k) <= NEAR]
    still_open = None
    if hits and hits[0].outcome == Outcome.REGRESSED:
        _, thr, _ = judge_levels(bench, machine, inj.shas, inj.levels, cps, floor=s.floor)
        shown = {cp.commit_sha for cp in open_regressions(cps, bench.direction, float(thr[-1]))}
        still_open = any(cp.commit_sha in shown for cp in hits)
    delay = None
    if replay:
        state = SeriesState(settings.knobs)
        state.extend(inj.commits[:k])
        _, _, track = judge_levels(bench, machine, inj.shas[:k], inj.levels[:k], [], floor=s.floor)
        for p in range(k + 1, min(inj.n, k + REPLAY) + 1):
            state.extend(inj.commits[p - 1:p])
            now = state_change_points(state, bench, machine, s.floor)
            if any(_right(cp, s, up) and abs(cp.index - k) <= NEAR for cp in now):
                delay = p - k
                break
            sus, _, track = judge_levels(bench, machine, inj.shas[:p], inj.levels[:p], now, track=track,
                                         floor=s.floor)
            if bad and any(k <= x.index <= k + NEAR for x in sus):  # suspicions flag regressions only
                delay = p - k
                break
    return bool(hits), still_open, delay


def shuffled(s: Series, seed: int) -> Series:
    """A copy of `s` with its commits in a seeded random order: the same values, outliers and mix of
    runner regimes, but no step at any commit (a null series: what either detector flags on it is a
    false alarm). asv's points are reordered alike."""
    ident = zlib.crc32(f"{s.machine}\0{s.benchmark.key}".encode())
    order = np.random.default_rng([seed, ident, 7]).permutation(s.n).tolist()
    rank = {s.shas[i]: j for j, i in enumerate(order)}
    results = sorted(s.results, key=lambda r: rank.get(r.commit_sha, -1))  # stable: a commit's results together
    shas, levels = commit_levels(results)
    return Series(s.benchmark, s.machine, results, shas, levels, pooled_commits(results, shas),
                  [s.asv[i] for i in order], s.asv_threshold, [s.positions[i] for i in order], s.floor)


def banner_replay(s: Series, settings: HistorySettings) -> tuple[np.ndarray, np.ndarray, np.ndarray, set[str]]:
    """Per prefix of the real series (1..n commits), whether it puts the overview's banner up, as of
    that commit: (a change-point regression shown open, an open suspicion, an open suspicion that the
    whole history does not withdraw), and the commits of every REGRESSED change point some prefix
    showed."""
    regressed = np.zeros(s.n, dtype=bool)
    suspected = np.zeros(s.n, dtype=bool)
    founded = np.zeros(s.n, dtype=bool)
    seen: set[str] = set()
    if not s.judged:
        return regressed, suspected, founded, seen
    state = SeriesState(settings.knobs)
    track = None
    open_at: list[set[int]] = []
    sus: list[Any] = []
    for p in range(1, s.n + 1):
        state.extend(s.commits[p - 1:p])
        cps = state_change_points(state, s.benchmark, s.machine, s.floor)
        sus, thr, track = judge_levels(s.benchmark, s.machine, s.shas[:p], s.levels[:p], cps, track=track,
                                       floor=s.floor)
        regressed[p - 1] = bool(open_regressions(cps, s.benchmark.direction, float(thr[-1])))
        open_at.append({x.index for x in sus if x.state == SuspectState.SUSPECTED})
        suspected[p - 1] = bool(open_at[-1])
        seen.update(cp.commit_sha for cp in cps if cp.outcome == Outcome.REGRESSED)
    # The whole history's verdict on each suspicion (the last prefix is the whole series).
    in_vain = {x.index for x in sus if x.state in (SuspectState.WITHDRAWN, SuspectState.EXPIRED)}
    for p, now in enumerate(open_at):
        founded[p] = bool(now - in_vain)
    return regressed, suspected, founded, seen
    state = SeriesState(settings.knobs)
    track = None
    for p in range(1, s.n + 1):
        state.extend(s.commits[p - 1:p])
        cps = state_change_points(state, s.benchmark, s.machine, s.floor)
        sus, thr, track = judge_levels(s.benchmark, s.machine, s.shas[:p], s.levels[:p], cps, track=track,
                                       floor=s.floor)
        regressed[p - 1] = bool(open_regressions(cps, s.benchmark.direction, float(thr[-1])))
        suspected[p - 1] = any(x.state == SuspectState.SUSPECTED for x in sus)
        seen.update(cp.commit_sha for cp in cps if cp.outcome == Outcome.REGRESSED)
    return regressed, suspected, seen


def asv_fit(points: Sequence[AsvPoint | None]) -> list[tuple[int, int, float, float, float]]:
    """`detect_steps` on the per-commit values and weights, as `asv publish` calls it (missing: None)."""
    y = [p.value if p is not None else None for p in points]
    w = [p.weight if p is not None else None for p in points]
    if sum(v is not None for v in y) < 2:
        return []
    return detect_steps(y, w)


def asv_boundary_near(steps: Sequence[tuple[int, int, float, float, float]], k: int, up: bool) -> bool:
    """Whether the fit has a boundary within +-NEAR of k whose level moves up (`up`) or down."""
    return any(abs(cur[0] - k) <= NEAR and cur[2] != prev[2] and (cur[2] > prev[2]) == up
               for prev, cur in zip(steps, steps[1:], strict=False))


def asv_jumps(steps: Sequence[tuple[int, int, float, float, float]], threshold: float) -> list[tuple[Any, ...]]:
    """The regressions `detect_regressions` lists: (last commit before, first commit after, value, best after)."""
    return (detect_regressions(steps, threshold)[2] or []) if steps else []


def asv_trial(s: Series, k: int, factor: float, *, replay: bool) -> tuple[bool, bool, int | None]:
    """(fitted step found, listed as a regression, delay) for asv on the injected series."""
    points = scaled_points(s.asv, k, factor)
    up = factor > 1.0
    steps = asv_fit(points)
    found = asv_boundary_near(steps, k, up)
    listed = any(j[1] is not None and abs(j[1] - k) <= NEAR for j in asv_jumps(steps, s.asv_threshold))
    delay = None
    if replay:
        for p in range(k + 1, min(s.n, k + REPLAY) + 1):
            if asv_boundary_near(asv_fit(points[:p]), k, up):
                delay = p - k
                break
    return found, listed, delay


@dataclass
class Trial:
    """One (series, step) trial's outcome for the service and for asv."""

    step: float
    k: int
    judged: bool
    after: int  # commits from k on (the series' end bounds the replay when < REPLAY)
    found: bool
    still_open: bool | None
    delay: int | None
    asv_found: bool
    asv_listed: bool
    asv_delay: int | None
    chance: bool  # the un-injected series already has such a change point within +-NEAR of k
    asv_chance: bool  # asv's fit of the un-injected series already has such a boundary there


@dataclass
class SeriesOutcome:
    """Everything measured on one series."""

    key: str
    machine: str
    judged: bool
    commits: int
    trials: list[Trial]
    regressed: int = 0
    regressed_open: int = 0
    inconclusive: int = 0
    suspicions: int = 0
    confirmed: int = 0
    withdrawn: int = 0
    asv_regressions: int = 0
    banner: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None  # `banner_replay`
    retracted: int = 0  # REGRESSED change points some prefix showed that the whole history does not hold
    positions: list[int] = field(default_factory=list)
    changes: list[Any] = field(default_factory=list)  # the real series' change points (alert groups)
    regressed_asv_fit: int = 0  # of `regressed`: asv's fit has a boundary moving the same way within +-NEAR
    regressed_sigmas: int = 0  # of `regressed`: steps of at least BIG_STEP robust sigmas of the series' noise
    null_regressed: int = 0  # REGRESSED change points on the shuffled series (`shuffled`)
    null_suspicions: int = 0
    null_asv_regressions: int = 0


def trial_k(seed: int, s: Series, step: float) -> int:
    """The seeded step position of a trial: stable across runs, samples and the other step sizes."""
    ident = zlib.crc32(f"{s.machine}\0{s.benchmark.key}".encode())
    rng = np.random.default_rng([seed, ident, int(round(step * 1000)) + 100_000])
    return int(rng.integers(EDGE, s.n - EDGE + 1))


def evaluate_series(s: Series, steps: Sequence[float], *, seed: int, replay: bool, real: bool,
                    settings: HistorySettings) -> SeriesOutcome:
    """The trials of one series and, with `real`, its un-injected measures (and banner, with `replay`)."""
    cps = change_points(s.results, settings=settings, floor=s.floor)
    asv_steps = asv_fit(s.asv)
    trials = []
    for step in steps:
        k = trial_k(seed, s, step)
        f = step_factor(s.benchmark.direction, step)
        found, still_open, delay = service_trial(s, k, f, replay=replay, settings=settings)
        a_found, a_listed, a_delay = asv_trial(s, k, f, replay=replay)
        chance = any(_right(cp, s, f > 1.0) and abs(cp.index - k) <= NEAR for cp in cps)
        trials.append(Trial(step, k, s.judged, s.n - k, found, still_open, delay, a_found, a_listed, a_delay,
                            chance, asv_boundary_near(asv_steps, k, f > 1.0)))
    out = SeriesOutcome(s.benchmark.key, s.machine, s.judged, s.n, trials, positions=s.positions)
    if real:
        out.changes = list(cps)
        out.regressed = sum(cp.outcome == Outcome.REGRESSED for cp in cps)
        out.inconclusive = sum(cp.outcome == Outcome.INCONCLUSIVE for cp in cps)
        sus, thr, _ = judge_levels(s.benchmark, s.machine, s.shas, s.levels, cps, floor=s.floor)
        out.regressed_open = len(open_regressions(cps, s.benchmark.direction, float(thr[-1])))
        out.suspicions = len(sus)
        out.confirmed = sum(x.state == SuspectState.CONFIRMED for x in sus)
        out.withdrawn = sum(x.state == SuspectState.WITHDRAWN for x in sus)
        out.asv_regressions = len(asv_jumps(asv_steps, s.asv_threshold))
        sigma = robust_sigma(np.log(s.levels))
        for cp in cps:
            if cp.outcome == Outcome.REGRESSED:
                out.regressed_asv_fit += asv_boundary_near(asv_steps, cp.index, cp.ratio > 1.0)
                out.regressed_sigmas += abs(math.log(cp.ratio)) >= BIG_STEP * sigma
        null = shuffled(s, seed)
        null_cps = change_points(null.results, settings=settings, floor=s.floor)
        out.null_regressed = sum(cp.outcome == Outcome.REGRESSED for cp in null_cps)
        out.null_suspicions = len(judge_levels(s.benchmark, s.machine, null.shas, null.levels, null_cps,
                                               floor=s.floor)[0])
        out.null_asv_regressions = len(asv_jumps(asv_fit(null.asv), s.asv_threshold))
        if replay:
            regressed, suspected, founded, seen = banner_replay(s, settings)
            out.banner = (regressed, suspected, founded)
            out.retracted = len(seen - {cp.commit_sha for cp in cps if cp.outcome == Outcome.REGRESSED})
    return out


_FORK_WORK: tuple[Any, list[Any]] | None = None


def _run_chunk(indices: list[int]) -> list[tuple[int, Any]]:
    assert _FORK_WORK is not None
    fn, items = _FORK_WORK
    return [(i, fn(items[i])) for i in indices]


def fork_map(fn: Any, items: list[Any]) -> list[Any]:
    """`[fn(x) for x in items]` over forked workers when there are CPUs to spare (`ci.forking`);
    the children read `fn` and `items` from inherited memory and touch no database."""
    global _FORK_WORK
    if fork_workers(len(items), 8) == 1:
        return [fn(x) for x in items]
    _FORK_WORK = (fn, items)
    try:
        with multiprocessing.get_context("fork").Pool(fork_workers(len(items), 8)) as pool:
            # Small chunks in order: the long series (or slow pairs) do not all land on one worker.
            chunks = [list(range(i, min(i + 4, len(items)))) for i in range(0, len(items), 4)]
            parts = pool.map(_run_chunk, chunks, chunksize=1)
    finally:
        _FORK_WORK = None
    got = dict(item for part in parts for item in part)
    return [got[i] for i in range(len(items))]


class MachineReader:
    """The reads `compare_commits` makes of one machine, served from one read of its results and
    failures (the store's own records, history order kept): each comparison reads the machine's
    whole history for its between-job drift, and forked workers must not share the store's
    connections. Every call returns a fresh list (callers append to it)."""

    def __init__(self, store: Any, machine: str) -> None:
        self.machine = machine
        self._results = store.results(machine=machine)
        self._failures = store.failures(machine=machine)
        self._machines = store.machines()

    def machines(self) -> list[Any]:
        return list(self._machines)

    @staticmethod
    def _pick(rows: list[Any], benchmark_key: str | None, commit_sha: str | None) -> list[Any]:
        return [r for r in rows if (benchmark_key is None or r.benchmark.key == benchmark_key)
                and (commit_sha is None or r.commit_sha == commit_sha)]

    def results(self, *, benchmark_key: str | None = None, machine: str | None = None,
                commit_sha: str | None = None) -> list[Result]:
        if machine != self.machine:
            raise ValueError(f"this reader holds machine {self.machine!r} only, not {machine!r}")
        return self._pick(self._results, benchmark_key, commit_sha)

    def failures(self, *, benchmark_key: str | None = None, machine: str | None = None,
                 commit_sha: str | None = None) -> list[Any]:
        if machine != self.machine:
            raise ValueError(f"this reader holds machine {self.machine!r} only, not {machine!r}")
        return self._pick(self._failures, benchmark_key, commit_sha)


class InjectedReader:
    """A reader whose one series at one commit on one machine reads `factor` times its samples and
    asv's statistics of them (`Result.scaled`), as asv's side reads the point scaled (`AsvPoint.scaled`)."""

    def __init__(self, inner: Any, key: str, sha: str, machine: str, factor: float) -> None:
        self._inner, self._target, self._factor = inner, (key, sha, machine), factor

    def results(self, **kw: Any) -> list[Result]:
        f = self._factor
        return [r.scaled(f) if (r.benchmark.key, r.commit_sha, r.machine) == self._target else r
                for r in self._inner.results(**kw)]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def asv_mark(a: AsvPoint, b: AsvPoint) -> str:
    """asv compare's mark for base `a` and head `b`: "-" better, "+" worse, " " neither."""
    if _is_result_better(b.value, a.value, b.compare_stats, a.compare_stats, ASV_FACTOR):
        return "-"
    if _is_result_better(a.value, b.value, a.compare_stats, b.compare_stats, ASV_FACTOR):
        return "+"
    return " "


@dataclass
class PairOutcome:
    """One adjacent pair: whether each rule called a regression, and the injected series' fate."""

    together: bool
    service_regressed: bool
    asv_worse: bool
    injected: bool = False
    service_found: bool = False
    asv_found: bool = False


def evaluate_pair(reader: MachineReader, asv: dict[tuple[str, str], AsvPoint], base: str, head: str,
                  seed: int, verdicts: Any = None) -> PairOutcome:
    """Both rules on one adjacent pair, then on it with AB_STEP injected into one seeded series."""
    m = reader.machine
    got = compare_commits(reader, base, head, m, settings=verdicts)
    b_pts = {r.benchmark.key: (r, asv.get((r.run_id, r.benchmark.key))) for r in got.base if r.samples}
    h_pts = {r.benchmark.key: (r, asv.get((r.run_id, r.benchmark.key))) for r in got.head if r.samples}
    both = sorted(key for key in b_pts.keys() & h_pts.keys()
                  if b_pts[key][0].benchmark.kind != Kind.CORRECTNESS and b_pts[key][1] and h_pts[key][1])
    out = PairOutcome(got.jobs.together, any(v.outcome == Outcome.REGRESSED for v in got.verdicts),
                      any(asv_mark(b_pts[key][1], h_pts[key][1]) == "+" for key in both))  # type: ignore[arg-type]
    judged = [key for key in both if h_pts[key][0].benchmark.direction != Direction.UNKNOWN]
    if not judged:
        return out
    rng = np.random.default_rng([seed, zlib.crc32(f"{m}\0{base}\0{head}".encode())])
    key = judged[int(rng.integers(len(judged)))]
    f = step_factor(h_pts[key][0].benchmark.direction, AB_STEP)
    again = compare_commits(InjectedReader(reader, key, head, m, f), base, head, m, settings=verdicts)
    out.injected = True
    out.service_found = any(v.benchmark.key == key and v.outcome == Outcome.REGRESSED for v in again.verdicts)
    mark = asv_mark(b_pts[key][1], h_pts[key][1].scaled(f))  # type: ignore[union-attr, arg-type]
    out.asv_found = mark == ("+" if f > 1 else "-")
    return out


@dataclass
class PairsOutcome:
    pairs: int = 0
    together: int = 0  # pairs whose two commits carry one job marker (in-job statistics)
    service_regressed: int = 0
    asv_worse: int = 0
    injected: int = 0
    service_found: int = 0
    asv_found: int = 0
    seconds: float = 0.0


def _pair(item: tuple[MachineReader, dict[tuple[str, str], AsvPoint], str, str, int, Any]) -> PairOutcome:
    return evaluate_pair(*item)


def evaluate_pairs(store: Any, machines: Sequence[str], asv: dict[tuple[str, str], AsvPoint], *, pairs: int,
                   seed: int, verdicts: Any = None) -> PairsOutcome:
    """Cross-job A/B on up to `pairs` seeded adjacent commit pairs of `machines` (module docstring)."""
    t0 = time.perf_counter()
    order = {c.sha: i for i, c in enumerate(store.commits())}
    readers = {m: MachineReader(store, m) for m in machines}
    candidates = []
    for m in machines:
        shas = sorted({r.commit_sha for r in readers[m].results(machine=m)}, key=order.__getitem__)
        candidates += [(m, a, b) for a, b in zip(shas, shas[1:], strict=False)]
    if not candidates:
        return PairsOutcome(seconds=time.perf_counter() - t0)
    rng = np.random.default_rng([seed, 0xAB])
    picked = sorted(rng.choice(len(candidates), min(pairs, len(candidates)), replace=False).tolist())
    got = fork_map(_pair, [(readers[m], asv, a, b, seed, verdicts) for m, a, b in (candidates[i] for i in picked)])
    out = PairsOutcome(pairs=len(got))
    for name in ("together", "service_regressed", "asv_worse", "injected", "service_found", "asv_found"):
        setattr(out, name, sum(getattr(g, name) for g in got))
    out.seconds = time.perf_counter() - t0
    return out


def read_series(store: Store, asv: dict[tuple[str, str], AsvPoint], threshold_of: Any, *, min_commits: int,
                max_series: int | None, seed: int, floor_of: Any = None) -> tuple[list[Series], dict[str, int]]:
    """Every evaluated series of the store (see the module docstring), and what was left out."""
    position = {c.sha: i for i, c in enumerate(store.commits())}
    series: list[Series] = []
    skipped = {"correctness": 0, "short": 0, "sampled out": 0, "asv points missing": 0}
    for machine in sorted(m.name for m in store.machines()):
        groups: dict[str, list[Result]] = {}
        for r in store.results(machine=machine):
            groups.setdefault(r.benchmark.key, []).append(r)
        mine = []
        for key in sorted(groups):
            bench = groups[key][0].benchmark
            if bench.kind == Kind.CORRECTNESS:
                skipped["correctness"] += 1
                continue
            results = current_version(groups[key])
            s = make_series(bench, machine, results, asv, threshold_of(asv_entry_name(bench)), position,
                            floor_of(bench.key) if floor_of is not None else 0.0)
            if s.n < min_commits:
                skipped["short"] += 1
                continue
            skipped["asv points missing"] += sum(p is None for p in s.asv)
            mine.append(s)
        if max_series is not None and len(mine) > max_series:
            rng = np.random.default_rng([seed, zlib.crc32(machine.encode())])
            keep = sorted(rng.choice(len(mine), max_series, replace=False).tolist())
            skipped["sampled out"] += len(mine) - max_series
            mine = [mine[i] for i in keep]
        series += mine
    return series, skipped


def evaluate_dir(results_dir: Path, *, steps: Sequence[float], seed: int, min_commits: int, max_series: int | None,
                 replay: bool, only_steps: bool, pairs: int, asv_conf: Path | None) -> dict[str, Any]:
    """Ingest one results directory into a temporary store and measure everything; the report's numbers."""
    t0 = time.perf_counter()
    conf = asv_conf if asv_conf is not None else results_dir.parent / "asv.conf.json"
    threshold_of = asv_thresholds(conf)
    # The service's one threshold table, as every command reads it: the project's asv.conf.json.
    project = project_settings(config=conf) if conf.is_file() else project_settings()
    settings = HistorySettings()
    with tempfile.TemporaryDirectory(prefix="eval-history-") as tmp:
        store = Store(Path(tmp) / "history.sqlite")
        try:
            ingest = ingest_results_dir(store, results_dir)
            asv = read_asv_points(results_dir)
            series, skipped = read_series(store, asv, threshold_of, min_commits=min_commits, max_series=max_series,
                                          seed=seed, floor_of=project.floor_for)
            t1 = time.perf_counter()
            outcomes = fork_map(functools.partial(evaluate_series, steps=steps, seed=seed, replay=replay,
                                                  real=not only_steps, settings=settings), series)
            t2 = time.perf_counter()
            ab = PairsOutcome()
            if not only_steps and pairs > 0:
                ab = evaluate_pairs(store, sorted({s.machine for s in series}), asv, pairs=pairs, seed=seed,
                                    verdicts=project.verdicts)
        finally:
            store.close()
    report = summarize(outcomes, steps)
    report["real"].update(alert_groups(outcomes, series))
    report.update({
        "results_dir": str(results_dir),
        "ingest": ingest.summary(),
        "asv_conf": str(conf) if conf.is_file() else None,
        "asv_thresholds": sorted({s.asv_threshold for s in series}),
        "service_floors": sorted({s.floor for s in series}),
        "machines": len({s.machine for s in series}),
        "series_judged": sum(s.judged for s in series),
        "series_unknown_direction": sum(not s.judged for s in series),
        "skipped": skipped,
        "settings": {"steps": list(steps), "seed": seed, "min_commits": min_commits, "max_series": max_series,
                     "replay": replay, "only_steps": only_steps, "pairs": pairs},
        "pairs": vars(ab),
        "seconds": {"read": t1 - t0, "series": t2 - t1, "pairs": ab.seconds, "total": time.perf_counter() - t0},
    })
    return report


def alert_groups(outcomes: Sequence[SeriesOutcome], series: Sequence[Series]) -> dict[str, int]:
    """The real series' change points as the service reports them (`ci.verdicts.group_changes`, per
    machine): alerts with a regression (a crowd of series at one commit is one), and the crowds
    labelled as a change of the recorded environment (not blamed on the commit)."""
    order: dict[str, list[str]] = {}
    envs: dict[tuple[str, str], dict[str, str]] = {}
    for s in series:
        for r in s.results:
            envs.setdefault((s.machine, r.commit_sha), dict(r.environment))
    for machine in {s.machine for s in series}:
        shas = {sha for (m, sha) in envs if m == machine}
        position = {sha: p for s in series if s.machine == machine for sha, p in zip(s.shas, s.positions, strict=True)}
        order[machine] = sorted(shas, key=lambda sha: position.get(sha, -1))
    groups = group_changes([cp for o in outcomes if o.judged for cp in o.changes], order, envs)
    return {"alerts": sum(1 for g in groups if g.regressions and not g.environment_change),
            "alert_crowds": sum(1 for g in groups if g.regressions and g.crowd and not g.environment_change),
            "environment_groups": sum(1 for g in groups if g.environment_change),
            "environment_regressions": sum(len(g.regressions) for g in groups if g.environment_change)}


def nearest_rank(values: Sequence[float], q: float) -> float:
    """The nearest-rank q-quantile (NaN for no values)."""
    if not values:
        return math.nan
    v = sorted(values)
    return v[max(0, math.ceil(q * len(v)) - 1)]


def summarize(outcomes: Sequence[SeriesOutcome], steps: Sequence[float]) -> dict[str, Any]:
    """The report's numbers from the per-series outcomes."""
    per_step: dict[str, dict[str, Any]] = {}
    for judged, label in ((True, "judged"), (False, "unknown")):
        for step in steps:
            ts = [t for o in outcomes for t in o.trials if t.step == step and t.judged == judged]
            delays = [math.inf if t.delay is None else t.delay for t in ts]
            asv_delays = [math.inf if t.asv_delay is None else t.asv_delay for t in ts]
            per_step[f"{label} {step:+g}"] = {
                "trials": len(ts), "found": sum(t.found for t in ts), "chance": sum(t.chance for t in ts),
                "asv_chance": sum(t.asv_chance for t in ts),
                "still_open": sum(bool(t.still_open) for t in ts),
                "delay_median": nearest_rank(delays, 0.5), "delay_p90": nearest_rank(delays, 0.9),
                "not_flagged": sum(d == math.inf for d in delays),
                "short_replay": sum(t.after < REPLAY for t in ts),
                "asv_found": sum(t.asv_found for t in ts), "asv_listed": sum(t.asv_listed for t in ts),
                "asv_delay_median": nearest_rank(asv_delays, 0.5), "asv_delay_p90": nearest_rank(asv_delays, 0.9),
                "asv_not_flagged": sum(d == math.inf for d in asv_delays),
            }
    real: dict[str, Any] = {}
    for judged, label in ((True, "judged"), (False, "unknown")):
        os_ = [o for o in outcomes if o.judged == judged]
        real[label] = {
            "series": len(os_), "commits": sum(o.commits for o in os_),
            **{name: sum(getattr(o, name) for o in os_) for name in (
                "regressed", "regressed_open", "inconclusive", "suspicions", "confirmed", "withdrawn",
                "asv_regressions", "retracted", "regressed_asv_fit", "regressed_sigmas", "null_regressed",
                "null_suspicions", "null_asv_regressions")},
        }
    up = {"any": 0, "regression": 0, "suspicion": 0, "suspected": 0, "in_vain": 0}
    total = 0
    by_machine: dict[str, list[SeriesOutcome]] = defaultdict(list)
    for o in outcomes:
        if o.judged and o.banner is not None:
            by_machine[o.machine].append(o)
    for group in by_machine.values():
        cols = sorted({p for o in group for p in o.positions})
        index = {p: i for i, p in enumerate(cols)}
        regressed = np.zeros(len(cols), dtype=bool)
        suspected = np.zeros(len(cols), dtype=bool)
        founded = np.zeros(len(cols), dtype=bool)
        for o in group:
            assert o.banner is not None
            # A series' state holds from its commit until its next one.
            state = np.zeros(len(cols), dtype=np.int64) - 1
            state[[index[p] for p in o.positions]] = np.arange(len(o.positions))
            last = np.maximum.accumulate(state)
            regressed |= np.where(last >= 0, o.banner[0][np.maximum(last, 0)], False)
            suspected |= np.where(last >= 0, o.banner[1][np.maximum(last, 0)], False)
            founded |= np.where(last >= 0, o.banner[2][np.maximum(last, 0)], False)
        up["any"] += int((regressed | suspected).sum())
        up["regression"] += int(regressed.sum())
        up["suspicion"] += int((suspected & ~regressed).sum())
        up["suspected"] += int(suspected.sum())
        up["in_vain"] += int((suspected & ~founded & ~regressed).sum())  # only suspicions the history withdraws
        total += len(cols)
    real["banner_up"], real["banner_commits"] = up, total
    return {"steps": per_step, "real": real}


def _pct(a: int, b: int) -> str:
    return f"{100 * a / b:.0f}%" if b else "n/a"


def _delay(x: float) -> str:
    return "—" if math.isnan(x) else f">{REPLAY}" if math.isinf(x) else f"{x:g}"


def _step(step: float) -> str:
    return f"{step * 100:+g}%"


def render(report: dict[str, Any]) -> str:
    """The markdown table and the counts behind it."""
    sets = report["settings"]
    steps, replay, real_too = sets["steps"], sets["replay"], not sets["only_steps"]
    head = HEADLINE_STEP if HEADLINE_STEP in steps else steps[0]
    others = [x for x in steps if x != head]
    st, real = report["steps"], report["real"]
    j, u = real["judged"], real["unknown"]

    def row(label: str) -> dict[str, Any]:
        return st[f"{label} {head:+g}"]

    def found(label: str, key: str) -> str:
        parts = [f"{_step(x)}: {_pct(st[f'{label} {x:+g}'][key], st[f'{label} {x:+g}']['trials'])}" for x in others]
        r = row(label)
        chance = "chance" if key == "found" else "asv_chance"
        return (_pct(r[key], r["trials"]) + (f" ({', '.join(parts)})" if parts else "")
                + f"; by chance {_pct(r[chance], r['trials'])}")

    def delays(label: str) -> tuple[str, str]:
        r = row(label)
        return (f"{_delay(r['delay_median'])} / {_delay(r['delay_p90'])} commits",
                f"{_delay(r['asv_delay_median'])} / {_delay(r['asv_delay_p90'])}")

    def per_thousand(x: int, commits: int) -> str:
        return f"{1000 * x / commits:.2f}" if commits else "n/a"

    rows = []
    hs = row("judged")
    if report["series_judged"]:
        rows.append((f"{_step(head)} steps found within ±{NEAR} commits (change point)", found("judged", "found"),
                     "its fitted steps: " + found("judged", "asv_found")))
        if head > 0:
            rows.append(("…of them still shown open at the newest commit", _pct(hs["still_open"], hs["found"]),
                         f"— (listed by detect_regressions: {_pct(hs['asv_listed'], hs['trials'])} of all "
                         f"{_step(head)} steps)"))
        if replay:
            rows.append((f"median / 90th-percentile delay before the first flag, {_step(head)}", *delays("judged")))
        if real_too:
            rows.append(("regressions flagged on the un-injected real series, per 1,000 commit-series",
                         f"{per_thousand(j['regressed'], j['commits'])} (open at the newest commit: "
                         f"{per_thousand(j['regressed_open'], j['commits'])})",
                         per_thousand(j["asv_regressions"], j["commits"])))
            rows.append((f"…of them: asv's fit steps there too / a step of {BIG_STEP:g}+ robust sigmas of the series",
                         f"{_pct(j['regressed_asv_fit'], j['regressed'])} / "
                         f"{_pct(j['regressed_sigmas'], j['regressed'])}",
                         "—"))
            rows.append(("false alarms: regressions on the same series in a shuffled commit order (no step), "
                         "per 1,000 commit-series", per_thousand(j["null_regressed"], j["commits"]),
                         per_thousand(j["null_asv_regressions"], j["commits"])))
            rows.append(("…suspicions raised on them, per 1,000 commit-series",
                         per_thousand(j["null_suspicions"], j["commits"]), "—"))
            rows.append(("…as alerts (a crowd of 3+ series at one commit is one alert), per 1,000 commit-series",
                         f"{per_thousand(real.get('alerts', 0), j['commits'])} ({real.get('alert_crowds', 0)} "
                         f"crowds; {real.get('environment_groups', 0)} groups of "
                         f"{real.get('environment_regressions', 0)} regressions at a recorded environment change, "
                         "not counted)", "—"))
            rows.append(("suspicions raised per 1,000 commit-series; share later confirmed",
                         f"{per_thousand(j['suspicions'], j['commits'])}; "
                         f"{_pct(j['confirmed'], j['confirmed'] + j['withdrawn'])}", "—"))
            if replay:
                up, n = real["banner_up"], real["banner_commits"]
                rows.append(("commits with the overview banner up",
                             f"{_pct(up['any'], n)} (an open regression: {_pct(up['regression'], n)}; "
                             f"suspicions only: {_pct(up['suspicion'], n)})", "—"))
                rows.append(("…with an open suspicion (the banner's \"suspected\" line)",
                             _pct(up.get("suspected", 0), n), "—"))
                rows.append(("…up for suspicions alone that the history later withdraws (a false warning)",
                             _pct(up.get("in_vain", 0), n), "—"))
    if real_too and report["pairs"]["pairs"]:
        ab = report["pairs"]
        rows.append(("adjacent real commit pairs, cross-job A/B: pairs with a \"regressed\" verdict",
                     f"{ab['service_regressed']} / {ab['pairs']}",
                     f"{ab['asv_worse']} / {ab['pairs']} (factor {ASV_FACTOR:g})"))
        none = "— (no series of known direction)"
        rows.append((f"…with {_step(AB_STEP)} injected into one series: found",
                     _pct(ab["service_found"], ab["injected"]) if ab["injected"] else none,
                     _pct(ab["asv_found"], ab["injected"]) if ab["injected"] else none))
    hu = row("unknown")
    if hu["trials"]:
        rows.append((f"series of unknown direction: {_step(head)} steps found (service: INCONCLUSIVE, never judged)",
                     found("unknown", "found"), "its fitted steps: " + found("unknown", "asv_found")))
        if replay:
            rows.append((f"…median / 90th-percentile delay, {_step(head)} (service: an INCONCLUSIVE change point)",
                         *delays("unknown")))
        if real_too:
            rows.append(("…steps on their un-injected series, per 1,000 commit-series",
                         f"{per_thousand(u['inconclusive'], u['commits'])} (INCONCLUSIVE)",
                         f"{per_thousand(u['asv_regressions'], u['commits'])} (regressions)"))
    lines = [f"### {report['results_dir']}", ""]
    if not report["series_judged"]:
        lines += ["No evaluated series has a known direction: the service judges none of them better or worse.", ""]
    lines += ["| | service | asv |", "|---|---|---|"] + [f"| {a} | {b} | {c} |" for a, b, c in rows] + [""]
    sk, sec = report["skipped"], report["seconds"]
    trials = ", ".join(f"{_step(x)}: {st[f'judged {x:+g}']['trials']}" for x in steps)
    utrials = ", ".join(f"{_step(x)}: {st[f'unknown {x:+g}']['trials']}" for x in steps)
    lines.append(f"- Data: {report['ingest']}")
    lines.append(f"- Series: {report['series_judged']} of known direction ({j['commits']} commits with a level), "
                 f"{report['series_unknown_direction']} of unknown direction ({u['commits']}), on "
                 f"{report['machines']} machine(s); left out: {sk['correctness']} correctness, {sk['short']} with "
                 f"fewer than {sets['min_commits']} commits, {sk['sampled out']} sampled out (--max-series "
                 f"{sets['max_series'] or 'off'}); asv points not found: {sk['asv points missing']}.")
    for label, r, what in (("known", hs, trials), ("unknown", hu, utrials)):
        if not r["trials"]:
            continue
        line = (f"- Trials, series of {label} direction: {what}; {_step(head)}: found {r['found']} "
                f"(by chance {r['chance']}), asv fitted {r['asv_found']} (by chance {r['asv_chance']})")
        if label == "known" and head > 0:
            line += f", still open {r['still_open']}, asv listed {r['asv_listed']}"
        if replay:
            line += (f"; not flagged within {REPLAY} commits: service {r['not_flagged']}, asv {r['asv_not_flagged']} "
                     f"({r['short_replay']} trials had fewer than {REPLAY} commits from k to the series' end)")
        lines.append(line + ".")
    if real_too and report["series_judged"]:
        line = (f"- Real series of known direction: {j['regressed']} REGRESSED change points ({j['regressed_open']} "
                f"open at the newest commit), asv {j['asv_regressions']} regressions; {j['suspicions']} suspicions, "
                f"{j['confirmed']} confirmed, {j['withdrawn']} withdrawn")
        if replay:
            up = real["banner_up"]
            line += (f"; banner up at {up['any']} of {real['banner_commits']} machine commits ({up['regression']} "
                     f"with an open regression); REGRESSED change points shown at some commit of the replay and "
                     f"gone from the whole history: {j['retracted']}")
        lines.append(line + ".")
    if real_too and report["pairs"]["pairs"]:
        ab = report["pairs"]
        lines.append(f"- Pairs: {ab['pairs']} ({ab['together']} measured in one job), {ab['injected']} with a "
                     f"series of known direction to inject into; service found {ab['service_found']}, asv "
                     f"{ab['asv_found']}.")
    lines.append(f"- asv regression threshold(s): {', '.join(f'{x:g}' for x in report['asv_thresholds']) or 'n/a'} "
                 f"({report['asv_conf'] or 'no asv.conf.json: asv default'}); the service's: "
                 f"{', '.join(f'{x:g}' for x in report.get('service_floors', [])) or 'n/a'} (the same file's "
                 f"`regressions_thresholds`, else its built-in floor); seed {sets['seed']}.")
    lines.append(f"- Wall time: {sec['total']:.1f} s (ingest and read {sec['read']:.1f} s, series "
                 f"{sec['series']:.1f} s, pairs {sec['pairs']:.1f} s).")
    return "\n".join(lines)


def parse_steps(text: str) -> list[float]:
    """'+5,+10,-10' -> [0.05, 0.10, -0.10]; a size needs its sign."""
    out = []
    for part in text.split(","):
        part = part.strip().rstrip("%")
        if not part or part[0] not in "+-":
            raise argparse.ArgumentTypeError(f"step {part!r}: give a sign (+ the bad direction, - an improvement)")
        value = float(part) / 100
        if value == 0 or not math.isfinite(value) or abs(value) >= 10:
            raise argparse.ArgumentTypeError(f"step {part!r}: a non-zero percentage below 1000")
        out.append(value)
    return out


def main(argv: list[str] | None = None) -> int:
    """Measure every results directory given; print a table each; 0 when all were read."""
    p = argparse.ArgumentParser(prog="python -m tools.eval_history", description=__doc__.split("\n\n")[0])
    p.add_argument("results_dirs", nargs="+", type=Path, metavar="RESULTS_DIR", help="asv results directories")
    p.add_argument("--steps", type=parse_steps, default=parse_steps(DEFAULT_STEPS),
                   help=f"step sizes in percent, signed (default {DEFAULT_STEPS}: + the bad direction)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--min-commits", type=int, default=30, help="skip series with fewer commits with a value")
    p.add_argument("--max-series", type=int, default=None, help="sample this many series per machine (seeded)")
    p.add_argument("--only-steps", action="store_true",
                   help="only the injected-step trials (no real-series rates, banner or A/B pairs)")
    p.add_argument("--no-replay", action="store_true", help="skip the commit-by-commit replays (delays, banner)")
    p.add_argument("--pairs", type=int, default=100, help="adjacent commit pairs for the cross-job A/B")
    p.add_argument("--asv-conf", type=Path, default=None,
                   help="asv.conf.json for asv's regressions_thresholds (default: RESULTS_DIR/../asv.conf.json)")
    p.add_argument("--json", type=Path, default=None, help="write the numbers here")
    args = p.parse_args(argv)
    if args.min_commits < 2 * EDGE + 1:
        p.error(f"--min-commits must be >= {2 * EDGE + 1} (a step at least {EDGE} commits from either end)")
    if args.max_series is not None and args.max_series < 1:
        p.error("--max-series must be >= 1")
    reports = []
    for d in args.results_dirs:
        report = evaluate_dir(d, steps=args.steps, seed=args.seed, min_commits=args.min_commits,
                              max_series=args.max_series, replay=not args.no_replay, only_steps=args.only_steps,
                              pairs=args.pairs, asv_conf=args.asv_conf)
        print(render(report), end="\n\n", flush=True)
        reports.append(report)
    if args.json is not None:
        args.json.write_text(json.dumps(_plain(reports), indent=1) + "\n")
    return 0


def _plain(x: Any) -> Any:
    """`x` as strict JSON: a delay not flagged within the replay is the text ">30", NaN (no trials) null."""
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_plain(v) for v in x]
    if isinstance(x, float | np.floating):
        return f">{REPLAY}" if math.isinf(x) else None if math.isnan(x) else float(x)
    if isinstance(x, np.integer):
        return int(x)
    return x


if __name__ == "__main__":
    sys.exit(main())
