"""How far a series' level moves from one job to the next, learned from its machine's history: the
allowance of a cross-job A/B comparison (`ci.verdicts.ab.compare`'s `between_jobs`).

When base and head were not measured in one asv call, their difference carries the drift between
jobs, which no in-job sample shows (`ci.verdicts.jobs`). The history of the machine shows it: each of
its runs (one asv result file, one job) measured every series once, so the differences between a
series' successive job levels are draws of what an unchanged pair of jobs reads.

The model, per series (levels on a log scale; `d` the successive differences of its job levels in
history order, the compared commits left out, `n` of them, taken as |d|: an unchanged pair differs
by nothing on average, so they are centred on zero and a slow trend counts as noise):

- **jumps**: a difference beyond `jump_sigmas` (3) robust sigmas, `1.4826 * median(|d|)`, is a jump.
- **core**: `sigma`, the root mean square of the other differences, divided by 0.9866 (the RMS of a
  normal sample clipped at 3 sigmas, `clip_factor`): the MAD's robustness to outliers and real
  steps with nearly a standard deviation's efficiency, and no blindness to moderate tails (a plain
  MAD read 0.19 % on the H200 history's `PackTokens.time_gpu(deitb384-b32-keep0.5, pack)`, 6 of 35
  commits 3 % low, and the return from the low mode read REGRESSED at the 2.5 % floor, 2026-12-05).
- **false-alarm rate**: the allowance must hold for the next pair, with a sigma estimated from the
  `m` core differences, so its multiplier is Student's t quantile at `1 - false_alarm` (one-sided,
  0.001: asv's two-sided p < 0.002) with `m - 1` degrees of freedom: 3.10 for a long history, 3.25
  at 56 differences, 3.37 at 32, 4.30 at 10.
- **recurring jumps** (regime switches of shared runners, a level that flips between two modes):
  jumps the level takes back, each with the next jump of its series the other way within
  `return_within` (32) jobs. More than `outliers` (3) of them is more than one outlier commit (two)
  explains; the series' jump size is then the `outliers + 1`-th largest of them (in a window of more
  than 400 differences, the one that `leg_rate`, 1% of them, pass) and the allowance covers it plus
  the core noise. One outlier commit changes nothing, nor do steps that stay, however
  many a long history holds; a mode visited twice or more is covered.

    allowance = exp(jump + t * sigma) - 1          (jump = 0 with `outliers` jumps or fewer)

**Window.** The model learns from the `window` (1,000) jobs of the machine just before the later
compared commit (`job_window`; never a job after it, so a verdict does not change as history grows),
not from every job of the history: the drift between jobs near the pair is what the next pair shows, and
a history of any length then costs one window to read (`ci.verdicts.inputs.noise_history` reads it
from the store as columns, `column_levels`). Every history of the real asv results we hold is shorter
(MetPy 59 jobs, mjwarp 76, uxarray's two GH-Actions environments 198 and 87, the H200's 35), so none
of their verdicts changes. Past 1,000 jobs more history adds little: the t quantile is 3.098 at 999
differences and 3.091 at 19,997 (0.2 % of the core allowance), and the core sigma's relative standard
error is ~2 % (1 / sqrt(2 * 1000)); a series whose differences sit at the jump line can read recurring
jumps in its window that its whole history's MAD did not (1 of 128 on a 3,000-commit replay of MetPy:
13.3 -> 26.3 %, no outcome changed). The whole history of a 20,000-job, 128-series store read as
`Result` records took 23.5 s and 2.8 GB for one comparison (2026-12-06; 2.4 s and 0.3 GB now).

Everything is vectorised over the series of a machine (one pass over the results, one median per
distinct sample count and a grouped sort). The previous estimate took a `np.median` per run per
series: 115-138 ms of a 189-214 ms `compare_commits` on MetPy's 7,441-result machine, now 7.3 ms;
500,000 results (1,000 jobs x 500 series x 10 samples) 7.0-7.2 -> 0.7-1.0 s of CPU (2026-12-05,
2-core box).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from ci.records import MachineHistory, Result

MAD_TO_SIGMA = 1.4826  # 1 / Phi^-1(3/4): the MAD of a normal sample times this is its sigma


@dataclass(frozen=True)
class NoiseSettings:
    """Knobs of the per-series noise model.

    Attributes:
        false_alarm: one-sided false-alarm rate per series of an unchanged cross-job pair, at most
            (0.001: asv's two-sided p < 0.002).
        family_false_alarm: the chance that an unchanged cross-job pair shows a false alarm on any
            of the series it compares, were every series exactly normal: a comparison of `m` series
            gives each `min(false_alarm, family_false_alarm / m)` (`series_noise`'s `family`), so a
            wide suite does not fail every PR. At 0.001 a series, 200 series raised a false alarm on
            ~18 % of unchanged pairs and 16,000 on all of them (a synthetic quiet history, 2 % noise,
            2026-12-06: 21 of 100 adjacent pairs called regressed at 400 series, asv compare's rule 8;
            at 0.1 / m 8, with +10% injected into one series found 50% against asv's 48%; an
            unchanged pair of a 16,000-series store: 33 regressed and 29 improved, now none). Up to 100
            series (the three real histories we hold compare 28-128) it changes little: the t
            quantile at 0.001 is 3.10, at 0.1 / 128 3.17. The in-job rule's Benjamini-Hochberg
            correction plays this part there.
        outliers: how many jumps the level takes back (an outlier commit makes two) may be outliers
            before they count as a recurring jump.
        leg_rate: ...and in a longer window, how many of them may pass the allowance, as a share of
            its job-to-job differences (0.01: more than `outliers` from 400 differences on; every
            real history we hold is shorter, so none of its verdicts moves).
        jump_sigmas: a difference beyond this many core sigmas is a jump (0.27 % of a normal core's
            differences: ~0.15 of 57); fixed, so whether a series has recurring jumps does not
            depend on the false-alarm rate chosen.
        return_within: a jump counts towards recurring jumps only where the next jump of its series
            goes the other way within this many jobs (a step that stays is a change, not noise).
        min_jobs: series measured in fewer jobs have no model (absent from the result: withheld).
        window: the jobs (runs of the machine, the compared commits' own not counted) a model learns
            from, those just before the later compared commit (`job_window`; module docstring).
    """

    false_alarm: float = 0.001
    family_false_alarm: float = 0.1
    outliers: int = 3
    leg_rate: float = 0.01
    jump_sigmas: float = 3.0
    return_within: int = 32
    min_jobs: int = 5
    window: int = 1000

    def __post_init__(self) -> None:
        if not 0.0 < self.false_alarm < 0.5:
            raise ValueError(f"false_alarm must be in (0, 0.5), got {self.false_alarm!r}")
        if not 0.0 < self.family_false_alarm < 1.0:
            raise ValueError(f"family_false_alarm must be in (0, 1), got {self.family_false_alarm!r}")
        if self.outliers < 0:
            raise ValueError(f"outliers must be >= 0, got {self.outliers!r}")
        if not 0.0 <= self.leg_rate < 0.5:
            raise ValueError(f"leg_rate must be in [0, 0.5), got {self.leg_rate!r}")
        if not self.jump_sigmas > 0:
            raise ValueError(f"jump_sigmas must be > 0, got {self.jump_sigmas!r}")
        if self.return_within < 1:
            raise ValueError(f"return_within must be >= 1, got {self.return_within!r}")
        if self.min_jobs < 3:
            raise ValueError(f"min_jobs must be >= 3 (two successive differences), got {self.min_jobs}")
        if self.window < self.min_jobs:
            raise ValueError(f"window must be >= min_jobs ({self.min_jobs}), got {self.window}")

    def rate(self, family: int) -> float:
        """Each series' one-sided false-alarm rate in a comparison of `family` series."""
        return min(self.false_alarm, self.family_false_alarm / max(1, family))


@dataclass(frozen=True)
class SeriesNoise:
    """One series' job-to-job variation (module docstring).

    Attributes:
        sigma: robust sigma of the log difference of two jobs' levels (0.01 = 1 %).
        jump: the recurring jump it shows (log), 0.0 when it shows none.
        jobs: the jobs (runs) it was learned from.
        multiplier: Student's t quantile at the false-alarm rate for this many jobs.
        allowance: the relative change (0.05 = 5 %) an unchanged pair of jobs stays within at the
            false-alarm rate: `exp(jump + multiplier * sigma) - 1`.
        shared_over: the series the false-alarm rate was shared over (`NoiseSettings.family_false_alarm`),
            0 where each series kept the per-series rate.
    """

    sigma: float
    jump: float
    jobs: int
    multiplier: float
    allowance: float
    shared_over: int = 0
    learned_on: str = ""  # another environment of the host whose history it was learned from ("": its own)

    @property
    def describe(self) -> str:
        """A verdict's words for it: "history: ±x% between jobs (n jobs)", with the jump when there is one."""
        where = f"history of {self.learned_on} (the same benchmark, another environment of this host)" \
            if self.learned_on else "history"
        text = f"{where}: {self.allowance * 100:.1f}% between jobs ({self.jobs} jobs"
        if self.jump > 0:
            text += f", recurring jumps of {math.expm1(self.jump) * 100:.1f}%"
        if self.shared_over:
            text += f", the false-alarm rate shared over {self.shared_over:,} series"
        return text + ")"


def clip_factor(c: float) -> float:
    """sqrt(E[X^2 | |X| <= c]) for a standard normal X: the root mean square of a normal sample clipped
    at c sigmas, in sigmas (0.9866 at 3)."""
    phi = math.exp(-c * c / 2) / math.sqrt(2 * math.pi)
    inside = math.erf(c / math.sqrt(2))
    return math.sqrt(1.0 - 2 * c * phi / inside)


def job_window(run_commits: Sequence[str], compared: Sequence[str], window: int) -> tuple[int, int]:
    """Which of a machine's runs a noise model learns from: at most the `window` runs just before the
    later of `compared` (in history order) that has a run here, their own runs not counted; never a
    run after it. A verdict is then the one a job could give when the head was measured, and judging
    the pair again once more history is stored gives it again: a real +17 % step of a real history
    (jaxion's, 2026-12-07) read "regressed" against the 22 runs before it and "unchanged" once a
    spike six commits later joined the model (every run of a history no longer than the window was
    learned from until then).

    Args:
        run_commits: the commit of each of the machine's runs, history order (`run_commits`).
        compared: the compared commits (base, head).
        window: how many runs, `compared`'s own not counted.

    Returns:
        (start, stop): runs `start` to `stop - 1` (`compared`'s among them are for the model to leave out).
    """
    excluded = set(compared)
    kept = [i for i, sha in enumerate(run_commits) if sha not in excluded]
    present = [run_commits.index(sha) for sha in compared if sha in run_commits]
    anchor = max(present) if present else len(run_commits)
    before = bisect.bisect_left(kept, anchor)
    return (kept[before - window] if before > window else 0), anchor


def job_levels(history: Sequence[Result], exclude_commits: Collection[str] = ()
               ) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Every job's level of every series: the median of its finite positive samples pooled over the
    results of one run (asv rounds of one file), runs of `exclude_commits` left out.

    Args:
        history: results of one machine, oldest first.
        exclude_commits: commit shas whose runs are not used.

    Returns:
        (series keys, series index per job, log level per job): jobs of a series in history order,
        the series sorted by index; jobs without a positive finite level are left out.
    """
    excluded = set(exclude_commits)
    keys: dict[str, int] = {}
    slot: dict[tuple[str, str], int] = {}
    series_of: list[int] = []
    samples_of: list[tuple[float, ...]] = []
    for r in history:
        if r.commit_sha in excluded:
            continue
        key = r.benchmark.key
        run = (key, r.run_id or f"{r.commit_sha}/{id(r)}")
        i = slot.get(run)
        if i is None:
            slot[run] = len(samples_of)
            s = keys.get(key)
            if s is None:
                s = keys[key] = len(keys)
            series_of.append(s)
            samples_of.append(r.samples)
        else:  # several results of one run (asv rounds): their samples pooled
            samples_of[i] = samples_of[i] + r.samples
    levels = np.full(len(samples_of), np.nan)
    by_count: dict[int, list[int]] = {}
    for i, pooled in enumerate(samples_of):
        by_count.setdefault(len(pooled), []).append(i)
    for count, idx in by_count.items():
        if count == 0:
            continue
        _median_levels(levels, idx, np.array([samples_of[i] for i in idx], dtype=float).reshape(len(idx), count))
    return list(keys), *_in_series_order(np.asarray(series_of, dtype=np.int64), levels)


def _in_series_order(sid: np.ndarray, levels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(series index, log level) of the jobs with a positive finite level, series by series, each
    series' jobs in history order."""
    with np.errstate(all="ignore"):
        y = np.log(levels)
    ok = np.isfinite(y)
    sid, y = sid[ok], y[ok]
    order = np.argsort(sid, kind="stable")  # each series' jobs stay in history order
    return sid[order], y[order]


def _median_levels(levels: np.ndarray, idx: Sequence[int] | np.ndarray, a: np.ndarray) -> None:
    """Into `levels[idx]`, the median of each row of `a` over its finite positive samples (NaN for a
    row without one); `a` is overwritten."""
    good = np.isfinite(a) & (a > 0)
    if good.all():
        levels[idx] = np.median(a, axis=1)
    else:
        a[~good] = np.nan
        with np.errstate(all="ignore"):
            rows = good.any(axis=1)
            levels[np.asarray(idx)[rows]] = np.nanmedian(a[rows], axis=1)


def column_levels(history: MachineHistory, exclude_commits: Collection[str] = ()
                  ) -> tuple[list[str], np.ndarray, np.ndarray]:
    """`job_levels` of a machine's series read as columns (`RunWindowSource.series_columns`): the
    same levels, without one `Result` record per point. A store holds one result per series and run,
    so each result is one job.

    Args:
        history: one machine's series (a window of its runs, `job_window`).
        exclude_commits: commit shas whose runs are not used.

    Returns:
        As `job_levels`: (series keys, series index per job, log level per job).
    """
    excluded = set(exclude_commits)
    keys = [col.benchmark.key for col in history.series]
    sizes = [len(col.counts) for col in history.series]
    sid = np.repeat(np.arange(len(keys), dtype=np.int64), sizes)
    counts = np.fromiter((c for col in history.series for c in col.counts), dtype=np.int64, count=int(sum(sizes)))
    keep = np.fromiter((sha not in excluded for col in history.series for sha in col.commit_shas), dtype=bool,
                       count=int(sum(sizes)))  # fmt: skip
    samples = np.concatenate([np.frombuffer(col.samples, dtype=np.float64) for col in history.series]
                             or [np.zeros(0)])  # fmt: skip
    offsets = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64) if counts.size else counts
    levels = np.full(counts.size, np.nan)
    for count in np.unique(counts[keep]).tolist():
        if count == 0:
            continue
        idx = np.flatnonzero(keep & (counts == count))
        _median_levels(levels, idx, samples[offsets[idx, None] + np.arange(count)])
    return keys, *_in_series_order(sid, levels)


def series_noise(history: Sequence[Result] | MachineHistory, *, exclude_commits: Collection[str] = (),
                 settings: NoiseSettings | None = None, family: int = 1) -> dict[str, SeriesNoise]:
    """Per series of one machine's history, its job-to-job noise model (module docstring).

    Args:
        history: results of one machine, oldest first (`StoreReader.results(machine=...)`), or its
            series as columns (`ci.verdicts.inputs.noise_history`); all of it is learned from (the
            caller chooses the window, `job_window`).
        exclude_commits: commit shas whose runs are not used (the comparison's own base and head, so
            a change under test never counts as noise).
        settings: `NoiseSettings()` when None.
        family: how many series the comparison judges (all its machines'): each series' false-alarm
            rate is `min(settings.false_alarm, settings.family_false_alarm / family)`.

    Returns:
        series key -> SeriesNoise, for every series with at least `settings.min_jobs` jobs.
    """
    settings = settings or NoiseSettings()
    if isinstance(history, MachineHistory):
        keys, sid, y = column_levels(history, exclude_commits)
    else:
        keys, sid, y = job_levels(history, exclude_commits)
    if not keys:
        return {}
    n_series = len(keys)
    jobs = np.bincount(sid, minlength=n_series)
    same = sid[1:] == sid[:-1]
    signed = np.diff(y)[same]
    d = np.abs(signed)
    ds = sid[1:][same]
    n = np.bincount(ds, minlength=n_series)
    sorted_d = d[np.lexsort((d, ds))]  # each series' |d| ascending, series after series
    start = np.concatenate([[0], np.cumsum(n)[:-1]])
    has = (jobs >= settings.min_jobs) & (n >= 2)
    lo = np.where(has, start + (n - 1) // 2, 0)
    hi = np.where(has, start + n // 2, 0)
    mad_sigma = np.where(has, MAD_TO_SIGMA * (sorted_d[lo] + sorted_d[hi]) / 2, 0.0) if d.size else np.zeros(n_series)
    # Clipped at jump_sigmas MAD sigmas, the root mean square of the rest: the MAD's robustness to
    # jumps with nearly a standard deviation's efficiency (the t quantile's degrees of freedom).
    jumps = d > settings.jump_sigmas * mad_sigma[ds]
    inliers = np.bincount(ds, weights=(~jumps).astype(float), minlength=n_series)
    squares = np.bincount(ds, weights=np.where(jumps, 0.0, d * d), minlength=n_series)
    with np.errstate(all="ignore"):
        sigma = np.where(has & (inliers > 0), np.sqrt(squares / inliers) / clip_factor(settings.jump_sigmas), 0.0)
    rate = settings.rate(family)
    shared_over = max(1, family) if rate < settings.false_alarm else 0
    multiplier = stats.t.ppf(1.0 - rate, np.maximum(1.0, inliers - 1.0))
    core = multiplier * sigma
    # Recurring jumps are those the level takes back: a jump with the next jump of its series the other
    # way within `return_within` jobs (an outlier commit, a visit to another mode). A step that stays
    # is a change, not noise: a long history holds many (each real step of uxarray's history, read
    # six times over 1,338 commits, made every series "jump" by its largest step, 2026-12-06).
    at = np.flatnonzero(jumps)
    back = ((ds[at[1:]] == ds[at[:-1]]) & (at[1:] - at[:-1] <= settings.return_within)
            & (np.sign(signed[at[1:]]) != np.sign(signed[at[:-1]])))
    taken = np.zeros(d.size, dtype=bool)
    taken[at[1:][back]] = taken[at[:-1][back]] = True
    beyond = np.bincount(ds[taken], minlength=n_series)
    # Beyond `outliers` legs, as many as `leg_rate` of the window's differences may pass the allowance:
    # a count alone made a longer window stricter (3 of 198 differences pass on uxarray's history, 3 of
    # 1,000 on fifteen copies of it, where +10% injected into one series was then found 32% against 58%).
    k = np.maximum(settings.outliers, np.floor(settings.leg_rate * n)).astype(np.int64)
    legs = np.flatnonzero(taken)
    legs = legs[np.lexsort((-d[legs], ds[legs]))]  # each series' legs, largest first, series after series
    first = np.searchsorted(ds[legs], np.arange(n_series))
    recurring = has & (beyond > k)
    jump = np.zeros(n_series)
    jump[recurring] = d[legs[first[recurring] + k[recurring]]]
    allowance = np.expm1(jump + core)
    return {
        key: SeriesNoise(float(sigma[i]), float(jump[i]), int(jobs[i]), float(multiplier[i]), float(allowance[i]),
                         shared_over)
        for i, key in enumerate(keys) if has[i]
    }
