"""The evaluated series (the package docstring's "Series"): asv's points of them, the store's
series as the service reads them, and the copies the trials run on (injected steps, shuffled order)."""

from __future__ import annotations

import math
import statistics
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
from asv.plugins.regressions import _GraphDataFilter  # asv publish's regressions_thresholds lookup

from ci.ingest.asv_files import iter_result_files, load_benchmarks_json, load_machine_json
from ci.ingest.parse import parse_result_file
from ci.records import Benchmark, Direction, Kind, Result, current_version
from ci.store import Store
from ci.verdicts import JobMove, commit_levels, job_moves, noise_thresholds
from ci.verdicts.absolute import RUN as ABSOLUTE_RUN

DEFAULT_STEPS = "+5,+10,+20,-10"
HEADLINE_STEP = 0.10
NEAR = 2  # a step is found at k when flagged within +-NEAR commits of it
EDGE = 10  # k is at least this many commits from either end (fewer on a short series: `edge_for`)
MIN_EDGE = 6  # ...and never fewer: 5 commits before a step give a suspicion its window, 4 after a change point


def edge_for(n: int) -> int:
    """How far from either end of a series of `n` commits its trials' steps sit: `EDGE`, or on a series
    shorter than 2 x EDGE + 1 commits as far as it allows, at least `MIN_EDGE` (asv histories of 13 to
    20 commits, MDAnalysis' and devito's, could not be evaluated at all, 2026-12-07)."""
    return max(MIN_EDGE, min(EDGE, (n - 1) // 2))
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


class EvalInputError(ValueError):
    """An input of the evaluation (a results directory, its asv.conf.json) that cannot be read."""


def asv_thresholds(conf_path: Path | None) -> Any:
    """asv publish's per-series regression threshold (`regressions_thresholds`, the largest match,
    else 0.05) as a function of the entry name; asv.conf.json is read with asv's own loader."""
    thresholds: dict[str, float] = {}
    if conf_path is not None and conf_path.is_file():
        try:
            conf_json = asv_util.load_json(str(conf_path), js_comments=True)
        except (ValueError, OSError) as exc:  # json5's parse errors are ValueErrors
            raise EvalInputError(f"{conf_path}: not a readable asv.conf.json: {exc}") from None
        thresholds = (conf_json.get("regressions_thresholds", {}) if isinstance(conf_json, dict) else {}) or {}
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
        job_moves: the commits of its machine's real series where the whole job moved
            (`machine_job_moves`); a copy with its commits reordered (`shuffled`) has none.
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
    job_moves: dict[str, JobMove] = field(default_factory=dict)

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
    by_sha: dict[str, AsvPoint | None] = {}
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
                  scaled_points(s.asv, k, factor), s.asv_threshold, s.positions, s.floor, s.job_moves)


def scaled_points(points: Sequence[AsvPoint | None], k: int, factor: float) -> list[AsvPoint | None]:
    """asv's points with those of commits k.. scaled by `factor`."""
    return [p if p is None or i < k else p.scaled(factor) for i, p in enumerate(points)]


def is_bad(s: Series, up: bool) -> bool:
    """Whether raising (`up`) or lowering the values makes the series worse (False: unknown direction)."""
    return s.judged and up == (s.benchmark.direction == Direction.LOWER)


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


def read_series(store: Store, asv: dict[tuple[str, str], AsvPoint], threshold_of: Any, *, min_commits: int,
                max_series: int | None, seed: int, floor_of: Any = None) -> tuple[list[Series], dict[str, int]]:
    """Every evaluated series of the store (see the package docstring), and what was left out."""
    position = {c.sha: i for i, c in enumerate(store.commits())}
    series: list[Series] = []
    skipped = {"correctness": 0, "at or through zero": 0, "short": 0, "sampled out": 0, "asv points missing": 0,
               "longest": 0}  # not a count: the most commits of a series it evaluates (`evaluate_dir` takes it out)
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
            if _at_or_below_zero(results) >= ABSOLUTE_RUN:
                # Judged by difference (`ci.verdicts.absolute`): a relative step injected means nothing
                # there; `tools.null_series` measures that detector on its second table.
                skipped["at or through zero"] += 1
                continue
            s = make_series(bench, machine, results, asv, threshold_of(asv_entry_name(bench)), position,
                            floor_of(bench.key) if floor_of is not None else 0.0)
            skipped["longest"] = max(skipped["longest"], s.n)
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


def _at_or_below_zero(results: Sequence[Result]) -> int:
    """How many commits of a series have a level (median of their finite samples) at or below zero."""
    by_commit: dict[str, list[float]] = defaultdict(list)
    for r in results:
        by_commit[r.commit_sha].extend(x for x in r.samples if math.isfinite(x))
    return sum(1 for xs in by_commit.values() if xs and statistics.median(xs) <= 0)


def machine_job_moves(series: Sequence[Series]) -> None:
    """Sets each series' `job_moves`: the commits where its machine's whole job moved
    (`ci.verdicts.job_moves` over the machine's evaluated series, every commit a candidate), as the
    dashboard reads them over every series of the machine judged by ratio."""
    by_machine: dict[str, list[Series]] = defaultdict(list)
    for s in series:
        by_machine[s.machine].append(s)
    for mine in by_machine.values():
        moves = job_moves((s.benchmark, s.shas, s.levels, noise_thresholds(s.levels, floor=s.floor)) for s in mine)
        for s in mine:
            s.job_moves = moves


JOB_NEIGHBOURS = 10  # commits each side of a job whose median level a series' deviation is read against
JOB_MIN_SERIES = 5  # a commit's shift is read only where at least this many series of the machine have a level


def job_shifts(series: Sequence[Series]) -> dict[str, list[float]]:
    """Per machine, how far each of its jobs moved every series together: at each commit, the median over
    the machine's series of the series' log level there minus the median of its `JOB_NEIGHBOURS`
    commits each side (at least 5 of them), for commits where `JOB_MIN_SERIES` series have one.

    Runners whose jobs land on hardware of different speed without the files saying so show a second
    mode here (a fifth of the jobs on a host 15% slower: +13.4%, `tools.synthetic_history
    --hide-host`); a step of every series at one commit shows as one or two commits near half of it."""
    by_machine: dict[str, list[Series]] = defaultdict(list)
    for s in series:
        by_machine[s.machine].append(s)
    out: dict[str, list[float]] = {}
    for machine, mine in sorted(by_machine.items()):
        deviations: dict[int, list[float]] = defaultdict(list)
        for s in mine:
            y = np.log(s.levels)
            for j, pos in enumerate(s.positions):
                around = np.concatenate((y[max(0, j - JOB_NEIGHBOURS):j], y[j + 1:j + 1 + JOB_NEIGHBOURS]))
                if around.size >= 5:
                    deviations[pos].append(float(y[j] - np.median(around)))
        out[machine] = [float(np.median(d)) for _, d in sorted(deviations.items()) if len(d) >= JOB_MIN_SERIES]
    return out
