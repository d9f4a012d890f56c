"""Jobs that ran on a host of another speed that the result files do not record.

Shared runners (GitHub-hosted ones, a pool behind one runner label) land jobs on hardware of
different speed, and a workflow that writes one machine file for all of them (a fixed `cpu`, a
copied `~/.asv-machine.json`) makes their results one series: each series then flips by the hosts'
difference at random commits, and judges itself alone. On a synthetic history where a fifth of
the jobs ran 15% slower and the files said nothing (`tools.synthetic_history --slow-share 0.2
--hide-host`, 30 series, 80 commits), +10% steps injected into one series were found within 2
commits 46% of the time (asv's fit: 68%), +5% steps 2% (2026-12-06).

The jobs say it plainly across series: every series of such a job reads the same ratio off the
levels around it, before and after. Per run of one machine (asv machine name, environment, and
recorded host), `job_shifts` reads, over the machine's series, the median of each series' log level
against the median of its levels at the `neighbours` runs before the run, and the same against the
runs after it; a run counts as an excursion of the whole job only when both sides agree (at the
newest or oldest run, the one side there is). A step of every series at one commit (a runner
upgrade, a change that slows everything) differs from one side only, so it stays a step of the
history. `off_speed_groups` then keeps the runs whose shift is large (past `least` and `mad_k`
robust sigmas of the machine's shifts) and alike (within `spread` of their group's median): a group
of `min_jobs` or more runs, at least `min_share` of the machine's, is a host of another speed;
`find_off_speed` reads again with the jobs found set aside as neighbours, since a stretch of them
lifts the levels around each. Ingest keeps such a group's runs as their own machine
(`ci.ingest.speed`), as it keeps a second recorded host apart (`ci.store.hosts`), so that neither
host's series carries the other's level.

None of the four real histories the service is evaluated on has such a job (MetPy's Jenkins
container, uxarray's GitHub-hosted runners and workstation, mujoco-warp's GPU runner, the H200:
the largest shift of any job 4.2%, the threshold 5%; `tools.eval_history`, 2026-12-06). Kept apart,
the synthetic history's +10% steps were found 100% (asv's fit on the same series 96%), +5% 36%. A
fifth, 40 jobs of Django's GitHub-hosted runners, has them (2026-12-07): 5 jobs are kept apart at
+45%. Another job, which read its series 27-89% higher (outside the group's `spread`), and jobs of
at least two more speeds (+10% and +28% in `time_query_count`) stay in the machine's series; that
job raised suspicions in 14 series, all withdrawn by the commits after it, until suspicions at a
commit where the whole job moved began waiting for a third commit (`ci.verdicts.job_moves`, later
on 2026-12-07): none is raised there now.

Pure functions over arrays; no store.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view


@dataclass(frozen=True)
class SpeedSettings:
    """Knobs of the off-speed job rule.

    Attributes:
        neighbours: levels each side of a run that a series' shift there is read against.
        least_neighbours: fewest levels on a side for that side to be read.
        min_series: fewest series with a shift at a run for the run's shift to be read.
        least: smallest shift of a job that counts (relative: 0.05 = 5%).
        mad_k: a shift must also be this many robust sigmas of the machine's job shifts.
        min_jobs: fewest runs in a group of one speed.
        min_share: least share of the machine's read runs in such a group.
        spread: a group's runs lie within this share of its median shift (and at least
            `least_spread` of it) of that median.
        least_spread: see `spread` (log scale).
    """

    neighbours: int = 10
    least_neighbours: int = 3
    min_series: int = 8
    least: float = 0.05
    mad_k: float = 5.0
    min_jobs: int = 5
    min_share: float = 0.05
    spread: float = 0.25
    least_spread: float = 0.025


@dataclass(frozen=True)
class SpeedGroup:
    """Runs of one machine whose every series read alike off the runs around them.

    Attributes:
        runs: the runs' indices (into the `levels` columns `off_speed_groups` read), ascending.
        shift: the group's median shift on the log scale (> 0: slower, for times).
        read: how many of the machine's runs had a shift to read.
    """

    runs: tuple[int, ...]
    shift: float
    read: int

    @property
    def ratio(self) -> float:
        """The shift as a ratio of levels (1.134: every series 13.4% higher in these jobs)."""
        return float(np.exp(self.shift))


def _medians(windows: np.ndarray, least: int) -> np.ndarray:
    """The median of the finite values along the last axis (NaN sorts last), NaN where fewer than
    `least` are finite: `np.nanmedian` without its masked-array path for small rows (a 16,000-series
    store's split spent 20 s in it, 2026-12-06). All NaN along an empty axis (a machine whose runs hold
    no series: a foreign machine folder whose benchmarks the results' benchmarks.json does not name)."""
    if windows.shape[-1] == 0:
        return np.full(windows.shape[:-1], np.nan)
    ordered = np.sort(windows, axis=-1)
    count = np.sum(np.isfinite(windows), axis=-1)
    lo = np.clip((count - 1) // 2, 0, None)[..., None]
    hi = np.clip(count // 2, 0, None)[..., None]
    med = (np.take_along_axis(ordered, lo, axis=-1)[..., 0] + np.take_along_axis(ordered, hi, axis=-1)[..., 0]) / 2
    med[count < max(least, 1)] = np.nan
    return med


_BLOCK = 4_000_000  # window values sorted at once (32 MB a side)


def job_shifts(levels: np.ndarray, settings: SpeedSettings | None = None, *,
               aside: Sequence[int] = ()) -> np.ndarray:
    """How far each run moved every series of its machine together.

    Args:
        levels: series x runs, each series' level at each run of the machine in history order
            (NaN where the series has none; values > 0).
        settings: the knobs; `SpeedSettings()` when None.
        aside: runs not read as another run's neighbours (a group already found: where a fifth of
            the jobs are slow, a stretch of them would lift the levels around each).

    Returns:
        Per run, its shift on the log scale: the median over series of the log level against the
        median of the series' levels at the `neighbours` runs before it, and the same against the
        runs after it; where both sides are read and agree in sign, the smaller of the two, where
        they disagree 0 (a step, not an excursion); where one side is read, that side's. A side is
        read where `least_neighbours` of its runs have a level, and a run where `min_series` series
        read a side. A run's shift depends on the runs within `neighbours` of it alone, so the
        shifts of a history's new runs are read from its tail (`ci.ingest.speed`). NaN: not read.
    """
    k = settings or SpeedSettings()
    levels = np.asarray(levels, dtype=float)
    if levels.ndim != 2:
        raise ValueError(f"levels must be series x runs, got shape {levels.shape}")
    n_series, n_runs = levels.shape
    w = k.neighbours
    with np.errstate(divide="ignore", invalid="ignore"):
        logs = np.where(levels > 0, np.log(levels), np.nan)
    seen = logs.copy()
    seen[:, list(aside)] = np.nan
    left = np.full((n_series, n_runs), np.nan)
    right = np.full((n_series, n_runs), np.nan)
    padded = np.pad(seen, ((0, 0), (w, w)), constant_values=np.nan)
    step = max(1, _BLOCK // max(1, n_runs * w))
    for i in range(0, n_series, step):
        windows = sliding_window_view(padded[i : i + step], w, axis=1)  # [s, j] = padded[s, j : j + w]
        left[i : i + step] = logs[i : i + step] - _medians(windows[:, :n_runs], k.least_neighbours)  # j - w .. j - 1
        right[i : i + step] = logs[i : i + step] - _medians(windows[:, w + 1 : w + 1 + n_runs], k.least_neighbours)
    la = _medians(left.T, k.min_series)
    lb = _medians(right.T, k.min_series)
    out = np.where(np.isfinite(la), la, lb)
    both = np.isfinite(la) & np.isfinite(lb)
    smaller = np.where(np.abs(la) < np.abs(lb), la, lb)
    out[both] = np.where(la[both] * lb[both] <= 0, 0.0, smaller[both])
    return out


def find_off_speed(levels: np.ndarray, settings: SpeedSettings | None = None, rounds: int = 3) -> list[SpeedGroup]:
    """`off_speed_groups` of `job_shifts`, read again with the groups' runs set aside as neighbours
    until the groups stop changing (at most `rounds` times): the runs of a group are then each read
    against the other host's levels only.

    Args:
        levels: as `job_shifts` takes them.
        settings: the knobs.
        rounds: most readings.

    Returns:
        The groups (none on a machine whose jobs do not move its series together).
    """
    aside: tuple[int, ...] = ()
    groups: list[SpeedGroup] = []
    for _ in range(max(1, rounds)):
        groups = off_speed_groups(job_shifts(levels, settings, aside=aside), settings)
        found = tuple(sorted(r for g in groups for r in g.runs))
        if found == aside:
            break
        aside = found
    return groups


def shift_cut(shifts: Sequence[float] | np.ndarray, settings: SpeedSettings | None = None) -> float:
    """The shift a run must pass to count: `least`, or `mad_k` robust sigmas of the machine's read job
    shifts where that is more (on the log scale)."""
    k = settings or SpeedSettings()
    f = np.asarray(shifts, dtype=float)
    v = f[np.isfinite(f)]
    mad = 1.4826 * float(np.median(np.abs(v - np.median(v)))) if v.size else 0.0
    return max(float(np.log1p(k.least)), k.mad_k * mad)


def off_speed_groups(shifts: Sequence[float] | np.ndarray, settings: SpeedSettings | None = None) -> list[SpeedGroup]:
    """The groups of runs that ran on a host of another speed, from `job_shifts`.

    Args:
        shifts: per run, its shift (NaN: not read).
        settings: the knobs; `SpeedSettings()` when None.

    Returns:
        At most one group per sign (slower, faster), largest shift first; none on a machine whose
        jobs do not move its series together.
    """
    k = settings or SpeedSettings()
    f = np.asarray(shifts, dtype=float)
    read = np.flatnonzero(np.isfinite(f))
    if read.size < max(2 * k.min_jobs, 1):
        return []
    cut = shift_cut(f, k)
    groups = []
    for sign in (1.0, -1.0):
        cand = read[(sign * f[read]) > cut]
        if cand.size < k.min_jobs:
            continue
        med = float(np.median(f[cand]))
        members = cand[np.abs(f[cand] - med) <= max(k.least_spread, k.spread * abs(med))]
        if members.size >= max(k.min_jobs, k.min_share * read.size):
            groups.append(SpeedGroup(tuple(int(x) for x in members), float(np.median(f[members])), int(read.size)))
    groups.sort(key=lambda g: -abs(g.shift))
    return groups
