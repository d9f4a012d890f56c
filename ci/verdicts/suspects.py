"""Suspected regressions: a new commit's step judged at once against its recent history, before the
change-point detector can see it.

`ci.verdicts.history.change_points` reports a step only once `revert + 1` (4) commits hold it (with
fewer, the next commit may still undo it as an excursion), so a regression that lands on main stays
unflagged for 3 more commits. This module covers that blind zone, as PyTorch HUD's "suspicious"
label and conbench's lookback z-score do, with its own state so that a suspicion is never mistaken
for a confirmed change point or an A/B verdict.

Method, per series (one benchmark on one machine, commits oldest first; a commit's level is the
median of its pooled samples, commits without a positive finite sample skipped, as
`change_points` takes them):

1. The recent history of commit j is the window of up to `window` commits before it: its level is
   the median of their log values, its noise sigma the robust sigma of their successive
   differences (MAD / sqrt(2) x 1.4826; the mean absolute deviation when the MAD is 0), the
   estimator `change_points` applies to a whole series.
2. The threshold is the detector's practical-size guard on that noise: `max(floor, noise_k x
   sigma)` with the detector's own `floor` and `noise_k` (`HistorySettings`), the floor raised to
   the series' threshold in the project's asv.conf.json where the caller passes it. `noise_thresholds`
   gives it at every commit; the dashboard colours a change only past it.
3. Commit j is suspected once `hold` commits (j and the next ones) are all worse than j's level by
   more than j's threshold, and the commit before it was not (the commits after a step are worse
   than their own windows too: they are the same step). One commit out and back is the runner's
   noise: with `hold` 1, 52 suspicions per 1,000 commit-series on a real Jenkins history and 8% of
   them confirmed; with 2, 14 and 31%, and on a GitHub-hosted history 35 -> 15 per 1,000 and
   26% -> 63% confirmed, at a median delay of 2 commits (`python -m tools.eval_history`, 2026-12-05).
4. How sure: 1 - p, where p is the one-sided Student-t probability (df = differences - 1) of a
   step at least that large from the window's noise alone, comparing the median of the commits
   measured from j on with the window's median (the variance of a median of k normal values
   taken as sigma^2 pi / 2k, sigma^2 / k for k <= 2). A step less than `min_confidence` (0.999)
   sure is not suspected.
5. Afterwards: CONFIRMED once `change_points` reports a regression at j or at the next commit;
   WITHDRAWN when the commits after j come back within the threshold of the old level, or when
   `confirm_within` commits (j included) are in and the detector has not confirmed it; otherwise
   still SUSPECTED. Every state is a pure function of the history, so the same history always
   gives the same flags, and a withdrawn suspicion stays listed with the commit that withdrew it.

6. A whole job that moved: a shared runner's job that lands on a slower host moves every series of
   the machine at once, and the next job or two move them back. Each series alone cannot tell that
   from a commit that slows everything, so the machine's series are read together (`job_moves`): at
   a commit where at least `job_share` of those judged there are past their thresholds on the worse
   side, a suspicion needs `hold` + 1 commits held (`hold_at_job_moves`), the dashboard's reading. On
   Django's GitHub-hosted history (44 series, 35 commits, 2026-12-07) two such jobs raised 26 of its
   27 suspicions, every one withdrawn by the job after; now none of them is raised, the overview's
   banner for suspicions alone is up at 6% of commits instead of 11% (the rest: one suspicion still
   open at the newest commits). Of 132 +10% steps injected, 18 are flagged later: 13 sit at those
   commits and wait one or two commits more (two are left to the change-point detector), and 5
   had been "flagged" by the job's own suspicions, not their step; the median delay reads 6 -> 11
   commits, most trials having no flag within 30. MetPy's and the H200's histories hold no such
   commit, uxarray's 4 (in one environment), where every suspicion held a third commit too: none of
   their figures changes (`python -m tools.eval_history`).

A series at or through zero (a warning count at 0, a signed delta: `by_difference`) has no ratio.
Its suspicions read the levels' differences instead (`judge_levels(difference=True)`): the same
steps on the levels themselves, the threshold `noise_k` robust sigmas of the window's differences,
or of its levels' spread where wider (as the steps by difference read the noise), in the series'
unit and with no relative floor; a visit of the window counts where it went as far as the held
commits, and the held commits must be as unlikely as the window's own commits that went as far
make them. A count that stayed put is suspected at its first move that holds `hold` commits (0, 0,
0, 0, 0, 3, 3: at the first 3), and confirmed by the history's steps by difference
(`ci.verdicts.absolute`) once `RUN` commits hold it. On seeded series (`python -m tools.null_series`,
2026-12-06): 0 suspicions on a counter at 0, 2.4 per 1,000 commit-series on one at 1 on 10% of its
commits, 0.1 on Gaussian noise around 0 and 3.5 on AR(1) noise; a step of 5 on the flaky counter
suspected two commits in 96% of the time, 4 sigmas of Gaussian noise 59%. Before this
(2026-12-06) such a series had no suspicions at all in the blind zone of those `RUN` commits, and
the dashboard read ratio suspicions and thresholds off its positive levels alone, across the zeros.
"""

from __future__ import annotations

import hashlib
import json
import math
import statistics
import struct
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
from scipy import stats

from ci.records import Benchmark, Direction, Outcome, Result
from ci.verdicts.absolute import RUN as ABSOLUTE_RUN
from ci.verdicts.history import ChangePoint, HistorySettings, change_points
from ci.verdicts.segments import TRANSIENT_MARGIN, TRANSIENT_REACH, neighbourhood_medians, safe_exp, trimmed_mean


class SuspectState(StrEnum):
    SUSPECTED = "suspected"  # open: the detector cannot judge it yet
    CONFIRMED = "confirmed"  # the change-point detector found the step
    WITHDRAWN = "withdrawn"  # not confirmed: the level came back, or the detector saw no step
    EXPIRED = "expired"  # unresolved: the series stopped reporting before anything could decide it


@dataclass(frozen=True)
class SuspectSettings:
    """Knobs of the suspicion test.

    Attributes:
        window: how many commits before a step make its recent history.
        min_history: fewest commits before a step for it to be judged at all (4 differences for a sigma).
        confirm_within: a suspicion the detector has not confirmed once this many commits are in
            (the suspect included) is withdrawn. At least `history.min_size`: the detector needs that
            many commits from the step on.
        hold: commits in a row (the suspect first) that must all be past the threshold before it is
            suspected (1: the newest commit alone).
        seen: a step to a level that its window already visited this many separate times (runs of
            commits past the threshold) is not suspected: the series flips between levels (shared
            runners' regimes), and the detector judges whether it stays (0: off). On two real histories with
            each series' commits shuffled (no step), suspicions per 1,000 commit-series 2.28 -> 0.94
            (MetPy) and 14.4 -> 2.2 (uxarray); on the real order, confirmed 48% -> 57% and 80% -> 84%
            (`tools.eval_history`, 2026-12-05).
        min_confidence: a step less sure than this (1 - p, step 4 of the module docstring) is not
            suspected: a noise estimate from a short or wild window makes a wide threshold uncertain
            itself. The two suspicions of the H200 history of main, both withdrawn, were 0.995 and
            0.992 sure (a series with a 52% threshold, 8 commits in); every confirmed suspicion of
            uxarray's history was above 0.9999 and no suspicion of MetPy's under 0.999
            (`tools.eval_history`, 2026-12-05).
        job_share: a commit at which at least this share of its machine's judged series are past
            their thresholds on the worse side is one where the whole job moved (`job_moves`): a
            suspicion there is raised only once `hold` + 1 commits hold it (`hold_at_job_moves`).
        job_min_series: ...and at least this many series had a threshold at it (fewer are no job).
        history: the change-point detector's settings, whose `floor` and `noise_k` are the threshold.
    """

    window: int = 20
    min_history: int = 5
    confirm_within: int = 6
    hold: int = 2
    seen: int = 2
    min_confidence: float = 0.999
    job_share: float = 0.5
    job_min_series: int = 5
    history: HistorySettings = field(default_factory=HistorySettings)

    def __post_init__(self) -> None:
        if self.min_history < 3:
            raise ValueError(f"min_history must be >= 3, got {self.min_history!r}")
        if self.window < self.min_history:
            raise ValueError(f"window ({self.window!r}) must be >= min_history ({self.min_history!r})")
        if not 0.0 <= self.min_confidence < 1.0:
            raise ValueError(f"min_confidence must be in [0, 1), got {self.min_confidence!r}")
        if isinstance(self.seen, bool) or not isinstance(self.seen, int) or self.seen < 0:
            raise ValueError(f"seen must be an int >= 0, got {self.seen!r}")
        if isinstance(self.hold, bool) or not isinstance(self.hold, int) or not 1 <= self.hold <= self.confirm_within:
            raise ValueError(f"hold must be an int in [1, confirm_within], got {self.hold!r}")
        if self.confirm_within < self.history.min_size:
            raise ValueError(f"confirm_within ({self.confirm_within!r}) must be >= the detector's min_size "
                             f"({self.history.min_size!r})")
        if not 0.0 < self.job_share <= 1.0:
            raise ValueError(f"job_share must be in (0, 1], got {self.job_share!r}")
        if isinstance(self.job_min_series, bool) or not isinstance(self.job_min_series, int) \
                or self.job_min_series < 2:
            raise ValueError(f"job_min_series must be an int >= 2, got {self.job_min_series!r}")


@dataclass(frozen=True)
class Suspect:
    """A commit whose step looked like a regression when it was the newest commit of its series.

    Attributes:
        benchmark: the series.
        machine: where it was measured.
        commit_sha: the suspected commit.
        previous_sha: the commit before it in the series.
        state: suspected, confirmed or withdrawn.
        before: level of the recent history (median of the window).
        after: while suspected, the median of the commits measured from the suspect on; once
            confirmed or withdrawn, the suspect's own level (what was seen when it was flagged).
        ratio: after / before (NaN where either is at or below zero).
        threshold: the relative change the series' noise required (0.05 = 5 %); by difference, the
            difference it required, in the series' unit.
        confidence: 1 - p of a step this large from noise alone (see the module docstring), with
            the commits `after` was taken over.
        commits_since: commits measured from the suspect on, itself included.
        reason: one line a reader can act on.
        resolved_sha: the commit whose arrival confirmed or withdrew it ("" while suspected).
        index: position of the suspect among the series' commits.
        by_difference: judged by the levels' difference (a series at or through zero), not their ratio.
        job_move: where the whole job moved at its commit (`hold_at_job_moves`), `JobMove.describe`; "" elsewhere.
    """

    benchmark: Benchmark
    machine: str
    commit_sha: str
    previous_sha: str
    state: SuspectState
    before: float
    after: float
    ratio: float
    threshold: float
    confidence: float
    commits_since: int
    reason: str
    resolved_sha: str = ""
    index: int = -1
    by_difference: bool = False
    job_move: str = ""


def commit_levels(series: Sequence[Result], *, signed: bool = False) -> tuple[list[str], np.ndarray]:
    """Each commit's level: the median of its pooled finite samples, commits without a positive
    level left out (failed or skipped), as `change_points` reads a series.

    Args:
        series: results of one benchmark on one machine, oldest commit first.
        signed: keep every commit with a finite level, of either sign (a series judged by
            difference: `by_difference`).

    Returns:
        (shas, levels), oldest first.
    """
    pooled: dict[str, list[float]] = {}
    for r in series:
        if not isinstance(r, Result):
            raise TypeError(f"series must contain only Result records, got {type(r).__name__}")
        pooled.setdefault(r.commit_sha, []).extend(s for s in r.samples if math.isfinite(s))
    shas, levels = [], []
    for sha, samples in pooled.items():
        level = statistics.median(samples) if samples else math.nan
        if level > 0 or (signed and math.isfinite(level)):
            shas.append(sha)
            levels.append(level)
    return shas, np.asarray(levels, dtype=float)


def by_difference(levels: np.ndarray) -> bool:
    """Whether a series' commits' levels (any sign) are judged by difference: `RUN` of them at or below
    zero (`ci.verdicts.absolute`), as its change points are; fewer are left out as failed runs."""
    return int(np.count_nonzero(np.asarray(levels, dtype=float) <= 0)) >= ABSOLUTE_RUN


def levels_to_judge(shas: Sequence[str], levels: np.ndarray) -> tuple[list[str], np.ndarray, bool]:
    """Of a series' commits and levels (any value, NaN for a commit without one), those its suspicions
    and thresholds read and whether they read them by difference (`by_difference`): every finite
    level then, else the positive ones."""
    difference = by_difference(levels)
    kept = np.flatnonzero(np.isfinite(levels) if difference else levels > 0)  # NaN compares False: dropped too
    return [shas[i] for i in kept.tolist()], levels[kept], difference


def _row_medians(sorted_rows: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Median of each row's first `counts` entries, the rows sorted (NaN padding sorts last)."""
    rows = np.arange(sorted_rows.shape[0])
    return (sorted_rows[rows, (counts - 1) // 2] + sorted_rows[rows, counts // 2]) / 2


def _robust_sigma(d: np.ndarray, counts: np.ndarray, transient: Callable[[], np.ndarray]) -> np.ndarray:
    """Robust sigma of the rows of `d` (successive differences, `counts` of them per row, NaN after):
    MAD / sqrt(2) x 1.4826, or where the MAD is 0 (values that repeat) the smaller of the mean absolute
    deviation x sqrt(pi/2) / sqrt(2) and `TRANSIENT_MARGIN` x the rows' `transient()` deviation
    (`_transient_rows`, read only then), as `ci.verdicts.segments.robust_sigma` reads a whole series."""
    dev = np.abs(d - _row_medians(np.sort(d, axis=1), counts)[:, None])
    mad = _row_medians(np.sort(dev, axis=1), counts)
    out = 1.4826 * mad / math.sqrt(2)
    repeat = mad == 0
    if repeat.any():
        mean_dev = np.nansum(dev[repeat], axis=1) / counts[repeat] * math.sqrt(math.pi / 2) / math.sqrt(2)
        out[repeat] = np.minimum(mean_dev, TRANSIENT_MARGIN * transient()[repeat])
    return out


def _transient_rows(y: np.ndarray, lo: int, w: int) -> np.ndarray:
    """Per position j from `lo` on: `ci.verdicts.segments.transient_deviation` of the window before j
    (the values' distance from the median of their `TRANSIENT_REACH` neighbours each side, its trimmed
    mean) over the window's commits whose neighbours all come before j, so no window reads ahead; inf
    where none does. The oldest commits' neighbourhoods reach `TRANSIENT_REACH` commits before the
    window: a caller that cuts the series before a window (`judge_levels` with a track) keeps those."""
    reach, n = TRANSIENT_REACH, y.size
    # Neighbourhoods at any length (`local_median` takes a series no longer than 2 x reach + 1 whole, later
    # commits included; longer, the same values).
    dist = np.abs(y - neighbourhood_medians(y, reach)) * math.sqrt(math.pi / 2)
    # Row j: the distances of commits j - w .. j - reach - 1 (NaN before the first commit).
    rows = sliding_window_view(np.concatenate([np.full(w, np.nan), dist]), w - reach)[lo:n]
    counts = np.maximum(np.minimum(np.arange(lo, n), w) - reach, 0)
    return trimmed_mean(np.sort(rows, axis=1), counts)


def _windows(y: np.ndarray, settings: SuspectSettings, spread: bool = False
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per position j: the window's median log level, its noise sigma and its number of differences
    (NaN and 0 where fewer than `min_history` commits come before j). Sorted sliding windows, a few
    numpy calls per series (np.median per window cost ~10 ms a 1,000-commit series, 2026-12-01).
    `spread`: the sigma is at least the window's levels' own robust spread (1.4826 x their MAD), as
    the steps by difference read it (an autocorrelated series wanders further than its differences
    show)."""
    n, w = y.size, settings.window
    level = np.full(n, np.nan)
    sigma = np.full(n, np.nan)
    ndiff = np.zeros(n, dtype=int)
    lo = settings.min_history
    if n <= lo:
        return level, sigma, ndiff
    # Row j - lo is the window before commit j: y[j - w:j], NaN where it reaches before the first commit.
    ypad = np.concatenate([np.full(w, np.nan), y])
    wins = sliding_window_view(ypad, w)[lo:n]
    dpad = np.concatenate([np.full(w - 1, np.nan), np.diff(y)])
    dwins = sliding_window_view(dpad, w - 1)[lo - 1:n - 1]
    count = np.minimum(np.arange(lo, n), w)
    level[lo:] = _row_medians(np.sort(wins, axis=1), count)
    sigma[lo:] = _robust_sigma(dwins, count - 1, lambda: _transient_rows(y, lo, w))
    if spread:
        mad = _row_medians(np.sort(np.abs(wins - level[lo:, None]), axis=1), count)  # NaN padding sorts last
        sigma[lo:] = np.maximum(sigma[lo:], 1.4826 * mad)
    ndiff[lo:] = count - 1
    return level, sigma, ndiff


def _threshold(sigma: np.ndarray | float, settings: SuspectSettings, floor: float = 0.0,
               difference: bool = False) -> np.ndarray:
    h = settings.history
    if difference:  # in the series' unit: the relative floors mean nothing there
        return h.noise_k * np.asarray(sigma, dtype=float)
    return np.maximum(max(h.floor, floor), h.noise_k * np.asarray(sigma, dtype=float))


def noise_thresholds(levels: np.ndarray, settings: SuspectSettings | None = None, floor: float = 0.0) -> np.ndarray:
    """The relative change each commit needed to stand out of its series' recent noise.

    Args:
        levels: per-commit levels, oldest first (positive; see `commit_levels`).
        settings: suspicion settings; `SuspectSettings()` when None.
        floor: the series' threshold from the project (`ci.project.ProjectSettings.floor_for`),
            when above the detector's own floor.

    Returns:
        Per commit, `max(floor, noise_k x sigma)` of the window before it (0.05 = 5 %); NaN where
        fewer than `min_history` commits come before it (the noise is not known yet).
    """
    settings = settings or SuspectSettings()
    y = np.log(np.asarray(levels, dtype=float))
    _, sigma, _ = _windows(y, settings)
    out = _threshold(sigma, settings, floor)
    out[np.isnan(sigma)] = np.nan
    return out


def _median(a: np.ndarray) -> float:
    """`np.median` of a non-empty array without NaN, the same bits (the middle value, or the mean of the
    middle two as np.median computes it: their sum halved), at a tenth of its cost per call."""
    s = np.sort(a)
    m = s.size // 2
    return float(s[m]) if s.size % 2 else float((s[m - 1] + s[m]) / 2)


def _median_var(k: int) -> float:
    return 1.0 / k if k <= 2 else math.pi / (2 * k)


def _confidence(step: float, sigma: float, k: int, window: int, ndiff: int) -> float:
    """1 - p of a worse-direction log step `step` from noise sigma (see the module docstring)."""
    if step <= 0:
        return 0.0
    if sigma <= 0:
        return 1.0
    z = step / (sigma * math.sqrt(_median_var(k) + _median_var(window)))
    return float(stats.t.cdf(z, df=max(ndiff - 1, 1)))


def suspects_from_levels(
    benchmark: Benchmark,
    machine: str,
    shas: Sequence[str],
    levels: np.ndarray,
    found: Sequence[ChangePoint],
    settings: SuspectSettings | None = None,
    floor: float = 0.0,
    difference: bool = False,
) -> list[Suspect]:
    """Every suspicion in one series' history, with its state now (see the module docstring).

    Args:
        benchmark: the series.
        machine: its machine.
        shas: its commits, oldest first (those with a level).
        levels: their levels (positive; any finite, with `difference`).
        found: `change_points` of the same series (it confirms a suspicion).
        settings: suspicion settings; `SuspectSettings()` when None.
        floor: the series' threshold from the project (`noise_thresholds`).
        difference: judge by difference (`judge_levels`).

    Returns:
        Suspects oldest first.
    """
    return judge_levels(benchmark, machine, shas, levels, found, settings=settings, floor=floor,
                        difference=difference)[0]


@dataclass
class _Flag:
    """A flagged commit's facts that later commits cannot change: where it is, its window's median
    log level, sigma, log threshold and differences, its confidence as flagged (what a resolved
    suspicion reports), and the first count of commits after it whose median came back within the
    threshold (`back`, 0 while none of the first `searched` did)."""

    index: int
    level: float
    sigma: float
    thr: float
    ndiff: int
    confidence: float
    back: int = 0
    searched: int = 0


@dataclass
class SuspectTrack:
    """One series' suspicion test so far (`judge_levels`), for judging it again after later commits.

    Everything a commit's window gives (its threshold, whether it is flagged, the flag's level and
    noise) reads only the commits before it, so it is kept; what reads the later commits (a flag's
    state, its `after` value and, while open, its confidence) is judged again from the kept facts,
    a median per flag instead of a sorted window per commit. Valid for the series whose first
    `count` commits and levels hash to `digest` under the same settings and direction.

    Attributes:
        count: commits covered.
        digest: of their shas, their levels, the benchmark's direction and kind, and the settings.
        thresholds: `noise_thresholds` of the commits covered, and one more: the next commit's.
        flags: the flagged commits, oldest first.
    """

    count: int
    digest: str
    thresholds: np.ndarray
    flags: list[_Flag]

    _INTS = ("index", "ndiff", "back", "searched")
    _FLOATS = ("level", "sigma", "thr", "confidence")

    @staticmethod
    def pack(tracks: dict[str, SuspectTrack]) -> bytes:
        """Tracks by name as bytes (`unpack` reads them back): a JSON head and packed arrays, no pickles."""
        names = sorted(tracks)
        got = [tracks[k] for k in names]
        flags = [f for t in got for f in t.flags]
        head = json.dumps({"names": names, "counts": [t.count for t in got], "digests": [t.digest for t in got],
                           "flags": [len(t.flags) for t in got]}, separators=(",", ":")).encode()
        parts = [struct.pack("<I", len(head)), head,
                 np.concatenate([t.thresholds for t in got]).astype("<f8").tobytes() if got else b""]
        parts += [np.asarray([getattr(f, a) for f in flags], dtype="<i8").tobytes() for a in SuspectTrack._INTS]
        parts += [np.asarray([getattr(f, a) for f in flags], dtype="<f8").tobytes() for a in SuspectTrack._FLOATS]
        return b"".join(parts)

    @staticmethod
    def unpack(data: bytes) -> dict[str, SuspectTrack] | None:
        """The tracks `pack` wrote; None when `data` is not that (a damaged file costs a full computation)."""
        try:
            (size,) = struct.unpack_from("<I", data)
            head = json.loads(data[4:4 + size])
            names, counts, digests, nflags = head["names"], head["counts"], head["digests"], head["flags"]
            at, total = 4 + size, sum(int(c) + 1 for c in counts)
            thresholds = np.frombuffer(data, dtype="<f8", count=total, offset=at).astype(float)
            at += 8 * total
            m = sum(int(k) for k in nflags)
            if min((*counts, *nflags), default=0) < 0:
                return None
            cols: dict[str, list[Any]] = {}
            for names_of, dtype in ((SuspectTrack._INTS, "<i8"), (SuspectTrack._FLOATS, "<f8")):
                for a in names_of:
                    cols[a] = np.frombuffer(data, dtype=dtype, count=m, offset=at).tolist()
                    at += 8 * m
            if at != len(data) or not len(names) == len(counts) == len(digests) == len(nflags):
                return None
            out: dict[str, SuspectTrack] = {}
            t_at = f_at = 0
            for name, count, digest, k in zip(names, counts, digests, nflags, strict=True):
                flags = [_Flag(*(cols[a][i] for a in ("index", "level", "sigma", "thr", "ndiff", "confidence",
                                                      "back", "searched")))
                         for i in range(f_at, f_at + int(k))]
                if not all(0 < f.index < int(count) and 0 <= f.back <= f.searched < int(count) for f in flags):
                    return None
                out[str(name)] = SuspectTrack(int(count), str(digest), thresholds[t_at:t_at + int(count) + 1], flags)
                t_at, f_at = t_at + int(count) + 1, f_at + int(k)
            return out
        except (ValueError, KeyError, TypeError, struct.error):
            return None


class _TrackDigest:
    """The digest a `SuspectTrack` is checked by, over the first commits and then over all of them in
    one pass (the shas and the levels each hashed as one stream)."""

    def __init__(self, benchmark: Benchmark, settings: SuspectSettings, floor: float = 0.0,
                 difference: bool = False) -> None:
        self._head = (f"{settings!r}\0{floor!r}\0{benchmark.direction.value}\0{benchmark.kind.value}"
                      + ("\0difference" if difference else "")).encode()
        self._shas = hashlib.blake2b(digest_size=16)
        self._levels = hashlib.blake2b(digest_size=16)
        self._count = 0

    def add(self, shas: Sequence[str], levels: np.ndarray) -> str:
        """Add the next commits; returns the digest of all commits added so far."""
        if len(shas):
            self._shas.update(("\0" if self._count else "").encode() + "\0".join(shas).encode())
            self._levels.update(np.ascontiguousarray(levels, dtype="<f8").tobytes())
            self._count += len(shas)
        return hashlib.blake2b(self._head + self._shas.digest() + self._levels.digest() + str(self._count).encode(),
                               digest_size=16).hexdigest()


def judge_levels(
    benchmark: Benchmark,
    machine: str,
    shas: Sequence[str],
    levels: np.ndarray,
    found: Sequence[ChangePoint],
    *,
    track: SuspectTrack | None = None,
    settings: SuspectSettings | None = None,
    floor: float = 0.0,
    difference: bool = False,
) -> tuple[list[Suspect], np.ndarray, SuspectTrack]:
    """A series' suspicions (`suspects_from_levels`) and noise thresholds (`noise_thresholds`, one
    more for the next commit), computed only for the commits after `track` when the series still
    begins with the commits it covers; exactly the answer of a computation from scratch.

    Args:
        benchmark: the series.
        machine: its machine.
        shas: its commits, oldest first (those with a level).
        levels: their levels (positive; finite, of either sign, with `difference`).
        found: `change_points` of the same series now (it confirms a suspicion).
        track: the track a previous call returned for this series; None (or one that no longer
            matches the series' first commits) computes everything.
        settings: suspicion settings; `SuspectSettings()` when None.
        floor: the series' threshold from the project (`noise_thresholds`); a track kept under
            another floor is not reused.
        difference: judge the levels' differences, not their ratios (a series at or through zero,
            `by_difference`, the module docstring's last part): the thresholds in the series' unit
            (0 for a count that stayed put: any move of it), no relative floor. Its suspicions are
            confirmed by the steps by difference (`ci.verdicts.absolute`), which need `RUN` commits.

    Returns:
        (suspects oldest first, thresholds: one per commit and one for the next, the track to pass next time).

    Raises:
        ValueError: as many shas as levels are not given, or a level is not positive (not finite,
            with `difference`).
    """
    settings = settings or SuspectSettings()
    levels = np.asarray(levels, dtype=float)
    n = levels.size
    if len(shas) != n:
        raise ValueError(f"{len(shas)} shas for {n} levels")
    if not (np.isfinite(levels) if difference else levels > 0).all():
        raise ValueError("levels must be " + ("finite" if difference else "positive (pass difference=True for a "
                                                                          "series at or through zero)"))
    y = levels.copy() if difference else np.log(levels)
    start, kept, flags = 0, np.zeros(0), []
    digest = _TrackDigest(benchmark, settings, floor, difference)
    if track is not None and 0 < track.count <= n and track.thresholds.size == track.count + 1 \
            and track.digest == digest.add(shas[:track.count], levels[:track.count]):
        # Copies: judging a flag records how far its "came back" search went in this series' commits.
        start, kept, flags = track.count, track.thresholds[:track.count], [replace(f) for f in track.flags]
    # Windows of the commits from start - hold on (a flag is raised once `hold` commits hold it, and
    # whether the commit before it was worse decides whether it starts a step) and of the next commit.
    hold = settings.hold
    first = max(start - hold, 0)
    w = settings.window
    lo = max(first - w - TRANSIENT_REACH, 0)  # the window's oldest commits' neighbourhoods (`_transient_rows`)
    ext = np.append(y, y[-1] if n else 0.0)[lo:]  # the next commit's window ignores its (placeholder) level
    level, sigma, ndiff = (a[first - lo:] for a in _windows(ext, settings, spread=difference))
    window_thresholds = _threshold(sigma, settings, floor, difference)  # NaN where the window's sigma is
    thresholds = np.concatenate([kept, window_thresholds[start - first:]])
    judged = benchmark.judged
    sign = 1.0 if benchmark.direction == Direction.LOWER else -1.0
    if judged and n > settings.min_history:
        thr = window_thresholds[:-1] if difference else np.log1p(window_thresholds[:-1])
        worse = sign * (y[first:] - level[:-1]) > thr  # NaN windows compare False
        prior = np.concatenate(([False], worse[:-1]))
        for i in np.flatnonzero(worse & ~prior).tolist():
            j = first + i
            if not start <= j + hold - 1 < n:
                continue  # not held long enough yet, or judged by the call that made `track`
            held = sign * (y[j:j + hold] - level[i])
            if not (held > thr[i]).all():
                continue  # a commit or two out and back: the runner's noise, not a step
            if j and sign * (y[j - 1] - level[i]) > thr[i]:
                # The commit before was past it too, at a commit whose window was too short to judge: the
                # level moved there, not here. A series whose version changed 3 commits before a crowd's
                # step was suspected 2 commits after it, and that commit read "the whole job moved at this
                # commit" (devito's GPU history, 2026-12-07); the change points place such a step.
                continue
            recent = sign * (y[max(j - w, 0):j] - level[i])
            if settings.seen:
                # (by difference: a visit goes as far as the held commits; a count's flakes to 1 are no
                # visit of the 5 it stepped to)
                past = recent >= held.min() if difference else recent > thr[i]
                visits = int(past[0]) + int(np.count_nonzero(past[1:] & ~past[:-1]))
                if visits >= settings.seen:
                    continue  # the window went to that level and back already: a series that flips
            sure = _confidence(float(_median(held)), float(sigma[i]), hold, min(j, settings.window), int(ndiff[i]))
            if difference:
                # A count's levels repeat, and one Gaussian sigma does not describe them: `hold` commits
                # in a row as far out as these are also as unlikely as the window's own commits that went
                # as far make them (a counter at 1 on 10% of commits: 6.1 suspicions per 1,000
                # commit-series without this, `python -m tools.null_series`, 2026-12-06).
                sure = min(sure, 1.0 - (np.count_nonzero(recent >= held.min()) / recent.size) ** hold)
            if sure < settings.min_confidence:
                continue
            flags.append(_Flag(j, float(level[i]), float(sigma[i]), float(thr[i]), int(ndiff[i]), sure))
    else:
        flags = []
    if not start:  # nothing kept (or a track that does not match): hash from the first commit
        digest = _TrackDigest(benchmark, settings, floor, difference)
    new_track = SuspectTrack(n, digest.add(shas[start:], levels[start:]), thresholds, flags)
    if not judged or n <= settings.min_history:
        return [], thresholds, new_track
    confirmed_at = {cp.commit_sha for cp in found if cp.outcome == Outcome.REGRESSED}
    return [_judge_flag(f, benchmark, machine, shas, y, confirmed_at, sign, settings, difference) for f in flags], \
        thresholds, new_track


# How many commits before a flagged commit a change point still confirms its suspicion (`_judge_flag`).
CONFIRMED_BEFORE = 2


def _judge_flag(f: _Flag, benchmark: Benchmark, machine: str, shas: Sequence[str], y: np.ndarray,
                confirmed_at: set[str], sign: float, settings: SuspectSettings, difference: bool = False) -> Suspect:
    """A flagged commit's suspicion as the history stands now (steps 4 and 5 of the module docstring);
    updates `f.back` and `f.searched`. `y`: the log levels, or with `difference` the levels."""
    j, n = f.index, y.size
    k = n - j
    state, reason, resolved = SuspectState.SUSPECTED, "", ""
    # The change point that confirms it: at the flagged commit or the next, or up to `CONFIRMED_BEFORE`
    # commits before it, for any flag: a series too young to flag the step's own commit (geocat-comp's
    # py3.10 environment: a x3 step at 7c7e62eb, flagged two commits later, read "withdrawn: the detector
    # did not confirm the step" beside the open regression at 7c7e62eb, 2026-12-07), or a flag raised a
    # commit or two after the step the detector places. On MetPy's history this took the share of
    # suspicions confirmed 57% -> 65%, flags raised late among them.
    near = [j, j + 1, *range(j - 1, max(j - CONFIRMED_BEFORE, 0) - 1, -1)]
    at = next((i for i in near if i < n and shas[i] in confirmed_at), None)
    later = y[j + 1:]
    if at is not None:
        state = SuspectState.CONFIRMED
        resolved = shas[at]
        reason = f"confirmed: a change point at {resolved[:10]}" + (
            f" ({j - at} commit{'s' if j - at != 1 else ''} before the flagged one)" if at < j else "")
    elif later.size and sign * (_median(later) - f.level) <= f.thr:
        # The commits after it are back at the old level: a one-commit excursion. The first count of
        # them whose median is back never changes once found (later commits do not move it).
        while not f.back and f.searched < later.size:
            f.searched += 1
            if sign * (_median(later[:f.searched]) - f.level) <= f.thr:
                f.back = f.searched
        state = SuspectState.WITHDRAWN
        resolved = shas[j + f.back]
        reason = f"withdrawn: the level came back at {resolved[:10]}"
    elif k >= settings.confirm_within:
        state = SuspectState.WITHDRAWN
        resolved = shas[j + settings.confirm_within - 1]
        reason = (f"withdrawn: no change point after {settings.confirm_within} commits "
                  f"(the detector did not confirm the step)")
    else:
        waiting = max(settings.history.min_size - k, 0)
        allowed = f"a difference of {f.thr:.4g}" if difference else f"{math.expm1(f.thr) * 100:.1f}%"
        reason = (f"past the {allowed} that the noise of the {min(j, settings.window)} "
                  "commits before allows; " + (
                      f"the change-point detector can judge it after {waiting} more commit"
                      + ("s" if waiting != 1 else "") if waiting else "awaiting the change-point detector"))
    if state != SuspectState.SUSPECTED:
        # A resolved suspicion reports what was seen when it was flagged (the commits after a
        # withdrawn one are back at the old level and would hide why it was raised).
        after_log, confidence = float(y[j]), f.confidence
    else:
        after_log = _median(y[j:])
        confidence = _confidence(sign * (after_log - f.level), f.sigma, k, min(j, settings.window), f.ndiff)
    if difference:
        before, after = f.level, after_log
        ratio = after / before if before > 0 and after > 0 else math.nan
        threshold = f.thr
    else:
        before, after, ratio = safe_exp(f.level), safe_exp(after_log), safe_exp(after_log - f.level)
        threshold = math.expm1(f.thr)
    return Suspect(
        benchmark=benchmark, machine=machine, commit_sha=shas[j], previous_sha=shas[j - 1], state=state,
        before=before, after=after, ratio=ratio, threshold=threshold, confidence=confidence, commits_since=k,
        reason=reason, resolved_sha=resolved, index=j, by_difference=difference,
    )


def expire(suspects: Sequence[Suspect], last_sha: str, later: Sequence[str],
           settings: SuspectSettings | None = None) -> list[Suspect]:
    """Suspicions still open on a series that stopped reporting, expired: once its machine has
    measured `confirm_within` commits without a result of the series, nothing will decide them
    (without this, "can judge it after 1 more commit", years later).

    Args:
        suspects: one series' suspicions (`judge_levels`).
        last_sha: the series' last commit with a result.
        later: the commits its machine measured after `last_sha`, oldest first.
        settings: suspicion settings; `SuspectSettings()` when None.

    Returns:
        The suspicions, those open now EXPIRED (resolved at the commit that expired them).
    """
    settings = settings or SuspectSettings()
    if len(later) < settings.confirm_within:
        return list(suspects)
    why = f"unresolved: no data since {last_sha[:10]} ({len(later)} commits of the machine since)"
    return _expired(suspects, why, later[settings.confirm_within - 1])


def _expired(suspects: Sequence[Suspect], why: str, at_sha: str) -> list[Suspect]:
    """`suspects`, those open EXPIRED at `at_sha` for `why`."""
    return [replace(x, state=SuspectState.EXPIRED, resolved_sha=at_sha, reason=why)
            if x.state == SuspectState.SUSPECTED else x for x in suspects]


@dataclass(frozen=True)
class JobMove:
    """A commit at which most of a machine's series got worse at once (`job_moves`).

    Attributes:
        commit_sha: the commit.
        worse: series past their threshold on the worse side at it.
        judged: series with a threshold at it (a known direction, enough commits before it).
        median: the median of the judged series' relative move from their window's level, the worse
            side positive (0.3 = 30 % worse).
    """

    commit_sha: str
    worse: int
    judged: int
    median: float

    @property
    def describe(self) -> str:
        """Words for a suspicion's reason."""
        return (f"the whole job moved at this commit ({self.worse} of {self.judged} series worse, "
                f"median {self.median * 100:+.0f}%)")


def job_moves(series: Iterable[tuple[Benchmark, Sequence[str], np.ndarray, np.ndarray]],
              candidates: Collection[str] | None = None, settings: SuspectSettings | None = None
              ) -> dict[str, JobMove]:
    """The commits at which the whole job of one machine moved: at least `settings.job_share` of the
    series judged there past their threshold on the worse side (of at least `job_min_series`).

    A shared runner's job that lands on a slower host, or a noisy neighbour for its length, moves every
    series of the job at once and, on the next job, back: on Django's GitHub-hosted history one job read
    every one of 44 series +27 % to +88 % worse and the next still +29 % (2026-12-07), and each series
    raised a suspicion that the job after withdrew (26 of 27 suspicions raised). A commit that slows
    every benchmark looks the same at its own commit; it differs in holding at the next.

    Args:
        series: one machine's ratio-judged series as (benchmark, shas, positive levels, thresholds:
            `judge_levels`' per commit); series of unknown direction are not counted.
        candidates: the commits to test (the suspects' commits); None: every commit.
        settings: suspicion settings; `SuspectSettings()` when None.

    Returns:
        commit sha -> JobMove, for the commits where the whole job moved.
    """
    settings = settings or SuspectSettings()
    wanted = None if candidates is None else set(candidates)
    ids: dict[str, int] = {}  # commit sha -> its row in the tallies
    rows: list[np.ndarray] = []
    steps: list[np.ndarray] = []
    past: list[np.ndarray] = []
    w, lo = settings.window, settings.min_history
    for benchmark, shas, levels, thresholds in series:
        if not benchmark.judged or len(shas) <= lo:
            continue
        if wanted is None:
            at = np.arange(lo, len(shas))
        elif len(wanted) < len(shas):
            index = dict(zip(shas, range(len(shas)), strict=True))
            at = np.array(sorted(i for sha in wanted if (i := index.get(sha, -1)) >= lo), dtype=np.int64)
        else:
            at = np.array([i for i in range(lo, len(shas)) if shas[i] in wanted], dtype=np.int64)
        if not at.size:
            continue
        thr = np.asarray(thresholds, dtype=float)[at]
        at = at[np.isfinite(thr)]
        thr = thr[np.isfinite(thr)]
        y = np.log(np.asarray(levels, dtype=float))
        # The window before each commit (NaN where it reaches before the first), as `_windows` reads it.
        back = at[:, None] - w + np.arange(w)[None, :]
        window = np.where(back >= 0, y[np.maximum(back, 0)], np.nan)
        level = _row_medians(np.sort(window, axis=1), np.minimum(at, w))
        step = (1.0 if benchmark.direction == Direction.LOWER else -1.0) * (y[at] - level)
        rows.append(np.fromiter((ids.setdefault(shas[i], len(ids)) for i in at.tolist()), dtype=np.int64,
                                count=at.size))
        steps.append(step)
        past.append(step > np.log1p(thr))
    if not ids:
        return {}
    row, step, worse = np.concatenate(rows), np.concatenate(steps), np.concatenate(past)
    judged = np.bincount(row, minlength=len(ids))
    over = np.bincount(row, weights=worse.astype(float), minlength=len(ids))
    moved = (judged >= settings.job_min_series) & (over >= settings.job_share * judged)
    if not moved.any():
        return {}
    order = np.lexsort((step, row))  # each commit's steps ascending, commit after commit
    first = np.concatenate([[0], np.cumsum(judged)[:-1]])
    ranked = step[order]
    median = (ranked[first + (judged - 1) // 2] + ranked[first + judged // 2]) / 2
    shas_of = list(ids)
    return {shas_of[k]: JobMove(shas_of[k], int(over[k]), int(judged[k]), math.expm1(float(median[k])))
            for k in np.flatnonzero(moved).tolist()}


def hold_at_job_moves(suspects: Sequence[Suspect], levels: np.ndarray, moves: Mapping[str, JobMove],
                      settings: SuspectSettings | None = None) -> list[Suspect]:
    """One series' suspicions, those at a commit where the whole job moved (`job_moves`) raised only
    once `hold` + 1 commits hold them: a job that moved is undone by the next job or two, a commit that
    slows every benchmark is not, and waits one commit more. A suspicion whose extra commit came back
    within the threshold was never raised (nor one whose extra commit has not come yet).

    Args:
        suspects: the series' suspicions (`judge_levels`, by ratio; those by difference are kept).
        levels: the series' levels (`judge_levels`' input).
        moves: `job_moves` of its machine.
        settings: suspicion settings; `SuspectSettings()` when None.

    Returns:
        The suspicions kept, those at a job move with the move in their reason.
    """
    settings = settings or SuspectSettings()
    out = []
    for x in suspects:
        move = moves.get(x.commit_sha)
        if move is None or x.by_difference:
            out.append(x)
            continue
        extra = x.index + settings.hold
        if extra >= len(levels):
            continue
        sign = 1.0 if x.benchmark.direction == Direction.LOWER else -1.0
        if not sign * math.log(float(levels[extra]) / x.before) > math.log1p(x.threshold):
            continue
        out.append(replace(x, reason=f"{x.reason}; {move.describe}, so it was raised one commit later",
                           job_move=move.describe))
    return out


def expire_quiet(suspects: Sequence[Suspect], machine: str, last_sha: str, after: int, at_sha: str) -> list[Suspect]:
    """Suspicions still open on a machine that stopped measuring while the others went on, expired:
    nothing will decide them (`expire` covers a series that stopped while its machine went on).

    Args:
        suspects: one series' suspicions on `machine`.
        machine: the machine (its label, as the reason shows it).
        last_sha: the machine's last measured commit.
        after: how many newer commits other machines measured before it counted as stopped.
        at_sha: the commit at which it did (what resolved them: the same at every later render).

    Returns:
        The suspicions, those open now EXPIRED.
    """
    why = (f"unresolved: {machine} measured nothing since {last_sha[:10]} while other machines measured "
           f"{after} newer commits")
    return _expired(suspects, why, at_sha)


def find_suspects(
    series: Sequence[Result],
    *,
    found: Sequence[ChangePoint] | None = None,
    settings: SuspectSettings | None = None,
    floor: float = 0.0,
) -> list[Suspect]:
    """Every suspicion in one series' history, with its state now.

    Args:
        series: results of one benchmark on one machine, oldest commit first (as `change_points` takes them).
        found: the series' change points when already computed; None runs `change_points`.
        settings: suspicion settings; `SuspectSettings()` when None.
        floor: the series' threshold from the project (`noise_thresholds`, `change_points`).

    Returns:
        Suspects oldest first; the open ones are those with `state == SuspectState.SUSPECTED`.

    Raises:
        TypeError: `series` is not a sequence of Result.
        ValueError: `series` mixes benchmarks or machines.
    """
    if isinstance(series, (str, bytes)) or not isinstance(series, Sequence):
        raise TypeError(f"series must be a sequence of Result, got {type(series).__name__}")
    if not series:
        return []
    settings = settings or SuspectSettings()
    if len({r.benchmark.key for r in series}) > 1 or len({r.machine for r in series}) > 1:
        raise ValueError("series mixes benchmarks or machines; pass one benchmark on one machine")
    shas, levels, difference = levels_to_judge(*commit_levels(series, signed=True))
    if found is None:
        found = change_points(series, settings=settings.history, floor=floor)
    return judge_levels(series[0].benchmark, series[0].machine, shas, levels, found, settings=settings, floor=floor,
                        difference=difference)[0]
