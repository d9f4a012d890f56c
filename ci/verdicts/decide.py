"""One series' A/B decision: what `ci.verdicts.ab.compare` decides per series.

`measure` does everything per series that does not depend on the other series (the threshold, the
bootstrap interval, the raw Mann-Whitney p; a Verdict where no test applies, asv's rule where a side
has asv's statistics and too few samples); `decide` turns a `Pending` series into a Verdict once its
p-value is corrected over the whole comparison. The rules are `ci.verdicts.ab`'s (its docstring).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ci.records import (
    FAILED_BOTH,
    FAILED_ON_HEAD,
    NO_BASE_SAMPLES,
    UNCONFIRMED_SLOWDOWN,
    UNKNOWN_DIRECTION,
    WITHHELD_OTHER_JOB,
    Benchmark,
    Direction,
    Outcome,
    Result,
    Verdict,
    is_worse,
    is_worse_step,
)
from ci.verdicts.noise import MAD_TO_SIGMA, SeriesNoise
from ci.verdicts.settings import VerdictSettings
from ci.verdicts.stats import bootstrap_ci, mwu_pvalue, relative_sigma, slow_tail, spread_pvalue

# A head whose spread is wider than its base's at this Brown-Forsythe p (asv's own significance level)
# does not pool into its threshold (`_noise_sigma`).
SAME_SPREAD_P = 0.002
# asv measures a benchmark's rounds in separate processes and appends each round's samples in order, so
# the two halves of a side's samples are its two rounds under asv's default (`rounds = 2`). Halves of a
# side that differ at this Mann-Whitney p, by more than half the threshold, are two processes that
# measured differently (a load burst, another core, a clock change): see `_halves_disagree`.
HALVES_P = 0.01
# asv compare's statistics of one side, as `_is_result_better` takes them: (stats dict, raw samples or None).
AsvSide = tuple[dict[str, float], list[float] | None]


@dataclass(frozen=True, kw_only=True)
class Pending:
    """A series measured on both sides, before the PR-wide p-value correction."""

    benchmark: Benchmark
    base: np.ndarray
    head: np.ndarray
    base_sha: str
    head_sha: str
    ratio: float
    ci: tuple[float, float]
    p_raw: float
    threshold: float
    machine: str
    cross_job: bool = False
    basis: str = ""  # where the threshold came from, when not the floor or the base's own noise


def _asv_side(rs: Sequence[Result]) -> AsvSide | None:
    """asv compare's statistics of one side of a series: its one result's recorded statistics (the
    store reads them for a point of one value) and its raw samples (None for a point of one value).
    None when the side pools several results (their statistics do not pool) or asv recorded no 99 %
    interval for it: a side of a few raw samples keeps the rule below (too few for a test)."""
    if len(rs) != 1:
        return None
    st = rs[0].asv_stats()
    if st is None:
        return None
    raw = [x for x in rs[0].samples if math.isfinite(x)]
    return st, (raw if len(raw) > 1 else None)


# What each rule that decides a one-value series writes in its reason, so a reader (the comment's legend,
# `rule_counts`) can tell which decided: asv compare's rule (asv's statistics), the size alone against
# the history's allowance (across jobs, no statistics), or too few samples for any test.
ASV_RULE = "asv compare's rule"
SIZE_ONLY = "no in-job statistics recorded"
TOO_FEW = "too few samples for a test"


@functools.cache
def _asv_is_result_better() -> Callable[..., bool]:
    """asv compare's rule, imported on first use (asv's package import loads its plugins: ~0.3 s)."""
    from asv.commands.compare import _is_result_better

    return _is_result_better


def _noise_sigma(b: np.ndarray, h: np.ndarray, side: AsvSide | None) -> float:
    """The relative noise behind a series' in-job threshold: the base side's (`_base_sigma`), pooled
    with the head's only where the two spreads are one noise (the head not significantly wider:
    Brown-Forsythe p >= SAME_SPREAD_P). A head significantly wider than its base (a bimodal head, a
    new slow mode) never raises its own bar; pooling two sides of one spread halves the estimate's
    variance, and a base-only estimate cost a head that was noisier by chance an "inconclusive":
    synthetic A/A 1.24 -> ~2.0 % inconclusive at n = 20 (tools.bench_verdicts, 2026-12-05)."""
    sb = _base_sigma(b, side)
    if b.size < 3 or h.size < 3:
        return sb
    sh = relative_sigma(h)
    if sh > sb and spread_pvalue(b, h) < SAME_SPREAD_P:
        return sb
    return _rms(sb, sh)


def _base_sigma(b: np.ndarray, side: AsvSide | None) -> float:
    """The base side's robust relative noise: from its samples, else from asv's recorded quartiles
    (IQR / 1.349 / median), else 0."""
    if b.size >= 2:
        return relative_sigma(b)
    if side is not None and {"q_25", "q_75"} <= side[0].keys() and b.size:
        med = float(np.median(b))
        if med > 0:
            return max(0.0, (side[0]["q_75"] - side[0]["q_25"]) / 1.349 / med)
    return 0.0


# Across jobs, a series with no between-job noise model (too few jobs in its history; no twin environment)
# is judged only past this factor, either way: no timing or memory series of seven real histories (MetPy,
# uxarray, Django, jaxion, geocat-comp, OpenBLAS's, this project's H200; 35,000 adjacent jobs) moved 3x or
# more from one job to the next but at a change of its code, where 2x did (a runner of another CPU, an
# H200 end-to-end forward flipping mode), 2026-12-07. Below it such a series stays withheld: stingray's
# x14 and x165 steps at its environment's second commit were withheld with every smaller change.
UNKNOWN_DRIFT_FACTOR = 3.0
UNKNOWN_DRIFT_BASIS = (f"between-job drift unknown: too few jobs of this series in the history (or an allowance wider "
                       f"than that), so only a change past x{UNKNOWN_DRIFT_FACTOR:g} either way is judged")


def _allowance(drift: float | SeriesNoise, settings: VerdictSettings) -> tuple[float, str]:
    """The least threshold between jobs and the words for where it came from ("" in-job)."""
    if isinstance(drift, SeriesNoise):
        return drift.allowance, drift.describe
    if drift:
        return settings.drift_k * drift, f"between-job drift {drift * 100:.2f}% x {settings.drift_k:g}"
    return 0.0, ""


def measure(
    bench: Benchmark,
    b: np.ndarray,
    h: np.ndarray,
    base_sha: str,
    head_sha: str,
    base_bench: Benchmark,
    settings: VerdictSettings,
    machine: str,
    version_change: str | None = None,
    drift: float | SeriesNoise | None = 0.0,
    cross_job: bool = False,
    results: tuple[Sequence[Result], Sequence[Result]] = ((), ()),
) -> Verdict | Pending:
    """Everything per series that does not depend on the other series; a Verdict when no test applies.
    `results`: the (base, head) results pooled into `b` and `h`, for asv's statistics of each side."""

    def early(outcome: Outcome, ratio: float, reason: str, threshold: float = math.nan,
              ci: tuple[float, float] = (math.nan, math.nan)) -> Verdict:
        bv = float(np.median(b)) if b.size else math.nan
        hv = float(np.median(h)) if h.size else math.nan
        return Verdict(benchmark=bench, outcome=outcome, base_value=bv, head_value=hv, ratio=ratio, ci_low=ci[0],
                       ci_high=ci[1], threshold=threshold, base_sha=base_sha, head_sha=head_sha, reason=reason,
                       machine=machine)

    if version_change is not None:
        return early(Outcome.INCONCLUSIVE, math.nan, f"not comparable: {version_change}")
    if base_bench.unit != bench.unit or base_bench.direction != bench.direction:
        return early(Outcome.INCONCLUSIVE, math.nan,
                     f"not comparable: unit/direction changed from {base_bench.unit}/{base_bench.direction} "
                     f"to {bench.unit}/{bench.direction}")
    if h.size == 0 and b.size == 0:
        return early(Outcome.FAILED, math.nan, FAILED_BOTH)
    if h.size == 0:  # it ran on base: the head broke it
        return early(Outcome.FAILED, math.nan, FAILED_ON_HEAD)
    if b.size == 0:
        return early(Outcome.INCONCLUSIVE, math.nan, NO_BASE_SAMPLES)
    bm, hm = float(np.median(b)), float(np.median(h))
    if bm <= 0 or hm <= 0 or b.min() <= 0 or h.min() <= 0:
        if drift is None and not _constant_sides(b, h):
            return early(Outcome.INCONCLUSIVE, math.nan, WITHHELD_OTHER_JOB)
        outcome, how = _by_difference(bench, b, h, settings, cross_job, (_asv_side(results[0]), _asv_side(results[1])))
        return early(outcome, math.nan, how)
    ratio = hm / bm
    if not math.isfinite(ratio) or ratio == 0.0:  # medians many orders of magnitude apart
        return early(Outcome.INCONCLUSIVE, math.nan, f"ratio undefined: medians {bm!r} and {hm!r} too far apart")
    floor = settings.floor_for(bench.key)
    # The allowance comes from the base side (and, across jobs, the history): a regression that adds
    # noise must not raise its own bar (`_noise_sigma`). In one job, the spread stands in for the
    # run-to-run drift its samples cannot show.
    sig = _noise_sigma(b, h, _asv_side(results[0]) if b.size < 2 else None)
    threshold = max(floor, min(settings.max_threshold, settings.noise_k * sig))
    # Measured in different jobs: their difference carries the series' between-job drift too. A noise
    # model of the history measured that drift itself, so it replaces the stand-in. No model, or one that
    # allows more than no model does (conda's 5 jobs of a series that ran 2.5-11.6 s allowed +6,639%, and
    # a row read "unchanged" under it, 2026-12-07): withheld, unless past any drift seen between jobs.
    allowance, basis = _allowance(drift, settings) if drift is not None else (math.inf, "")
    if allowance > UNKNOWN_DRIFT_FACTOR - 1.0:
        if bench.direction == Direction.UNKNOWN or abs(math.log(ratio)) <= math.log(UNKNOWN_DRIFT_FACTOR):
            return early(Outcome.INCONCLUSIVE, ratio, WITHHELD_OTHER_JOB, threshold)
        allowance, basis = UNKNOWN_DRIFT_FACTOR - 1.0, UNKNOWN_DRIFT_BASIS
    if isinstance(drift, SeriesNoise):
        threshold = floor
    basis = basis if allowance > threshold else ""
    threshold = max(threshold, allowance)
    if min(b.size, h.size) >= settings.min_samples:
        ci = bootstrap_ci(b, h, key=bench.key, seed=settings.seed, n_resamples=settings.n_resamples,
                          confidence=settings.confidence)
        return Pending(benchmark=bench, base=b, head=h, base_sha=base_sha, head_sha=head_sha, ratio=ratio, ci=ci,
                       p_raw=mwu_pvalue(b, h), threshold=threshold, machine=machine, cross_job=cross_job, basis=basis)
    where = threshold_text(threshold) + (f" ({basis})" if basis else "")
    sides = (_asv_side(results[0]), _asv_side(results[1]))
    if sides[0] is not None and sides[1] is not None:
        outcome, how, ci = _asv_rule(bench, bm, hm, sides[0], sides[1], threshold)
        return early(outcome, ratio, f"{(ratio - 1) * 100:+.1f}% {how} ({ASV_RULE}): {where}", threshold, ci)
    if cross_job:
        # One value a side and no statistics of asv's: the history's allowance is the only evidence.
        outcome, how = _size_outcome(bench, ratio, threshold, "beyond the history's allowance")
        return early(outcome, ratio, f"{(ratio - 1) * 100:+.1f}% {how} ({SIZE_ONLY}): {where}", threshold)
    within = abs(math.log(ratio)) <= math.log1p(floor)
    return early(
        Outcome.UNCHANGED if within else Outcome.INCONCLUSIVE, ratio,
        f"{TOO_FEW} ({b.size} base, {h.size} head; need {settings.min_samples}): "
        + ("ratio within the floor" if within else "measure more samples"),
        threshold,
    )


def _constant_sides(b: np.ndarray, h: np.ndarray) -> bool:
    """Whether each side holds two or more samples, all one value (a counter): a change is then exact."""
    return b.size >= 2 and h.size >= 2 and b.min() == b.max() and h.min() == h.max()


def _by_difference(bench: Benchmark, b: np.ndarray, h: np.ndarray, settings: VerdictSettings, cross_job: bool,
                   sides: tuple[AsvSide | None, AsvSide | None]) -> tuple[Outcome, str]:
    """A series with a value at or below zero (a count that starts at 0, a signed delta): no ratio, so
    judged by the difference of the medians, as (outcome, words).

    - Each side of two or more samples, every one the same value (a counter): the change is exact, any
      size, in one job or across jobs.
    - `min_samples` or more a side, in one job: the Mann-Whitney test at `alpha` and a difference past
      `noise_k` robust sigmas of the base's samples (its own absolute spread; a head that adds noise
      does not raise the bar). Across jobs the history's allowance is relative, so such a change is
      reported as unconfirmed, not judged.
    - Fewer samples, no value below zero: asv compare's rule (`_is_result_better`, factor 1 + the
      floor, with asv's statistics where each side has them), so a count going 0 -> 5 reads worse as
      `asv compare` reads it. With a negative value, inconclusive: asv's factor divides, which on
      negative values lowers its bar."""
    bm, hm = float(np.median(b)), float(np.median(h))
    diff = hm - bm
    change = f"{bm:.6g} -> {hm:.6g} ({diff:+.6g})"
    scale = "values at or below zero have no ratio, so the difference is judged"

    def judged(moved: bool, words: str) -> tuple[Outcome, str]:
        if not moved:
            return Outcome.UNCHANGED, f"{change}: {words}; {scale}"
        worse = is_worse_step(bench.direction, bm, hm)
        if worse is None:
            return Outcome.INCONCLUSIVE, f"{UNKNOWN_DIRECTION}; {change}: {words}; {scale}"
        return (Outcome.REGRESSED if worse else Outcome.IMPROVED), f"{change}: {words}; {scale}"

    if _constant_sides(b, h):
        return judged(diff != 0, "every sample of each side the same value, so the change is exact")
    if min(b.size, h.size) >= settings.min_samples:
        allowance = settings.noise_k * MAD_TO_SIGMA * float(np.median(np.abs(b - bm)))
        p = mwu_pvalue(b, h)
        stat = f"p={p:.2g} (uncorrected), allowance {allowance:.6g} ({settings.noise_k:g} x the base's spread)"
        if abs(diff) <= allowance:
            return judged(False, f"within the allowance: {stat}")
        if not p < settings.alpha:
            return Outcome.INCONCLUSIVE, f"{change}: past the allowance but not significant: {stat}; {scale}"
        if cross_job:
            lead = UNCONFIRMED_SLOWDOWN if is_worse_step(bench.direction, bm, hm) else "unconfirmed change"
            return (Outcome.INCONCLUSIVE, f"{lead}: {change} past the allowance and significant, but measured in "
                    f"different jobs, and the history's between-job allowance is relative: {stat}; measure both in "
                    f"one job; {scale}")
        return judged(True, f"past the allowance and significant: {stat}")
    if min(b.min(), h.min()) < 0:
        # asv's rule divides by the factor, which on negative values lowers the bar instead of raising it.
        return (Outcome.INCONCLUSIVE, f"{change}: too few samples for a test ({b.size} base, {h.size} head; need "
                f"{settings.min_samples}) and negative values, which no factor can judge; {scale}")
    factor = 1.0 + settings.floor_for(bench.key)
    better = _asv_is_result_better()
    use = sides[0] is not None and sides[1] is not None
    up = better(bm, hm, sides[0] if use else None, sides[1] if use else None, factor)
    down = better(hm, bm, sides[1] if use else None, sides[0] if use else None, factor)
    how = f"by asv compare's rule (factor {factor:g}{', with its statistics' if use else ''})"
    if up or down:
        return judged(True, f"changed {how}")
    return judged(False, f"no change {how}")


def band_text(threshold: float) -> str:
    """A relative threshold as the band it sets, both edges: "+30.8% / -23.5%" (1 + t up, 1 / (1 + t)
    down). One number read as symmetric: a -26.1% speed-up looked inside a 30.8% threshold that it is
    beyond, and a throughput series' regression edge (down) was never named (a real history,
    2026-12-07)."""
    return f"+{threshold * 100:.1f}% / {_lower_edge(threshold)}"


def _lower_edge(threshold: float) -> str:
    """The band's lower edge, 1 / (1 + t) - 1, as a signed percentage ("-23.5%")."""
    return f"{(1.0 / (1.0 + threshold) - 1.0) * 100:+.1f}%"


def threshold_text(threshold: float) -> str:
    """A verdict's threshold in its reason: "threshold +30.8% / -23.5%" (`band_text`)."""
    return f"threshold {band_text(threshold)}"


def regression_edge(threshold: float, direction: Direction) -> str:
    """The edge of the band a regression passes: "+8.6%" up for lower-is-better, "-7.9%" down for
    higher-is-better (a series of unknown direction: the band)."""
    if direction == Direction.LOWER:
        return f"+{threshold * 100:.1f}%"
    if direction == Direction.HIGHER:
        return _lower_edge(threshold)
    return band_text(threshold)


def _size_outcome(bench: Benchmark, ratio: float, threshold: float, beyond_words: str,
                  up: bool | None = None, down: bool | None = None) -> tuple[Outcome, str]:
    """The outcome of a change judged by its size (`up`/`down`: the change past the threshold upward /
    downward is significant; None: its size is the evidence), with its words."""
    up = ratio > 1.0 + threshold if up is None else up
    down = ratio < 1.0 / (1.0 + threshold) if down is None else down
    beyond = ratio > 1.0 + threshold or ratio < 1.0 / (1.0 + threshold)
    if (up or down) and bench.direction == Direction.UNKNOWN:
        return Outcome.INCONCLUSIVE, f"{beyond_words} ({UNKNOWN_DIRECTION})"
    if up or down:
        return (Outcome.REGRESSED if is_worse(bench.direction, ratio) else Outcome.IMPROVED), beyond_words
    if beyond:
        return Outcome.INCONCLUSIVE, "beyond the threshold but asv's 99% intervals overlap; measure more samples"
    return Outcome.UNCHANGED, "within the threshold"


def _asv_rule(bench: Benchmark, bm: float, hm: float, base: AsvSide, head: AsvSide, threshold: float
              ) -> tuple[Outcome, str, tuple[float, float]]:
    """asv compare's decision with the factor `1 + threshold` (`_is_result_better`: the factor, and the
    samples' Mann-Whitney test or, without enough samples, non-overlapping 99 % intervals; the factor
    alone where a side's `repeat` is 1), as (outcome, words, the ratio's interval from asv's intervals)."""
    better = _asv_is_result_better()
    factor = 1.0 + threshold
    up = better(bm, hm, base, head, factor)  # base lower than head / factor: the value rose
    down = better(hm, bm, head, base, factor)
    bs, hs = base[0], head[0]
    # A ratio of intervals only where every bound is positive: asv's interval of 2 repeats reaches below
    # zero, and a ratio interval read [-1.765, 15.892] (conda's history, 2026-12-07).
    ends = (bs["ci_99_a"], bs["ci_99_b"], hs["ci_99_a"], hs["ci_99_b"])
    ci = (hs["ci_99_a"] / bs["ci_99_b"], hs["ci_99_b"] / bs["ci_99_a"]) if min(ends) > 0 else (math.nan, math.nan)
    outcome, how = _size_outcome(bench, hm / bm, threshold, "beyond the threshold and significant",
                                 up, down)
    return outcome, how, ci


def _tail_verdict(p: Pending, p_adj: float, settings: VerdictSettings, stat: str) -> tuple[Outcome, str] | None:
    """A slower tail where the median stays within the threshold (`ci.verdicts.stats.slow_tail`):
    the samples significantly different (the Mann-Whitney test) and the slow side's quartile or the
    mean wholly past the threshold on the bad side (its bootstrap interval). REGRESSED in one job;
    across jobs an unconfirmed slowdown (INCONCLUSIVE: the history's allowance is of medians). None
    when no such shift.

    The interval, not the point estimate: a mean or a 90th percentile moves with one outlier, and
    with the drift between two sides of one job making the test significant, point estimates put 55
    of 9,500 synthetic A/A series (n = 20) past the threshold (`tools.bench_verdicts`, 2026-12-05)."""
    if not p_adj < settings.alpha:
        return None
    higher = p.benchmark.direction == Direction.HIGHER
    band = 1.0 / (1.0 + p.threshold) if higher else 1.0 + p.threshold
    for name, r, fn in slow_tail(p.base, p.head, higher_is_better=higher):
        if not (r < band if higher else r > band):
            continue
        lo, hi = bootstrap_ci(p.base, p.head, key=f"{p.benchmark.key}\0{name}", seed=settings.seed,
                              n_resamples=settings.n_resamples, confidence=settings.confidence, statistic=fn)
        if not (hi < band if higher else lo > band):
            continue
        what = (f"{(p.ratio - 1) * 100:+.1f}% median, but the {name} {(r - 1) * 100:+.1f}% "
                f"[{(lo - 1) * 100:+.1f}%, {(hi - 1) * 100:+.1f}%]")
        if not p.cross_job:
            return Outcome.REGRESSED, f"{what} beyond the threshold and significant: a slower tail: {stat}"
        return (Outcome.INCONCLUSIVE, f"{UNCONFIRMED_SLOWDOWN}: {what} beyond the threshold, across jobs, where "
                f"the history's allowance is of medians: {stat}; measure both in one job")
    return None


def _halves(x: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """A side's samples as its first and second half in recorded order (asv's two rounds under its
    default), or None with fewer than 5 a half, where no difference between halves reaches HALVES_P."""
    k = x.size // 2
    return (x[:k], x[k:]) if k >= 5 else None


def _halves_disagree(p: Pending, *, medians: bool) -> str | None:
    """Why a change between base and head may be the processes' and not the code's, or None.

    One side's halves (asv's rounds: separate processes) differ significantly (Mann-Whitney, HALVES_P)
    by more than half the threshold, and the change does not hold between every half of base and every
    half of head beyond the threshold the same way (`medians`; a slower tail, which one slow process
    makes by itself, never holds then). The samples of one process are not independent of each other:
    on a loaded 2-core box a burst that hit one process of one side read as a significant 1.76x of the
    same code in 4 of ~10 runs (2026-12-07), and a 3 % drift per half of each side made 20 % of
    synthetic A/A series false alarms (`tools.bench_verdicts --synthetic --round-drift 0.03`)."""
    hb, hh = _halves(p.base), _halves(p.head)
    if hb is None or hh is None:
        return None
    edge = math.log1p(p.threshold)
    mb, mh = [float(np.median(x)) for x in hb], [float(np.median(x)) for x in hh]
    moved = []
    for side, (a, b), (ma, mz) in (("base", hb, mb), ("head", hh, mh)):
        if ma > 0 and mz > 0 and abs(math.log(mz / ma)) > edge / 2 and mwu_pvalue(a, b) < HALVES_P:
            moved.append(f"{side}'s two halves differ by {(mz / ma - 1) * 100:+.1f}%")
    if not moved:
        return None
    if medians:
        ratios = [h / b for b in mb for h in mh]
        if all(r > math.exp(edge) for r in ratios) or all(r < math.exp(-edge) for r in ratios):
            return None
    return (" and ".join(moved) + " (asv's rounds run in separate processes: something other than the code "
            "changed during the run)")


def _rms(a: float, b: float) -> float:
    """sqrt((a^2 + b^2) / 2) of two relative sigmas, as always computed; through `math.hypot` for a
    sigma whose square is no float (past ~1e154: an IQR of 1e100 around a median of 1e-60, values
    an ingest accepts), where `a ** 2` raised OverflowError."""
    if max(a, b) < 1e150:
        return math.sqrt((a**2 + b**2) / 2)
    return math.hypot(a, b) / math.sqrt(2)


def decide(p: Pending, p_adj: float, settings: VerdictSettings) -> Verdict:
    hi_band, lo_band = 1.0 + p.threshold, 1.0 / (1.0 + p.threshold)
    ci_low, ci_high = p.ci
    beyond = p.ratio > hi_band or p.ratio < lo_band
    significant = p_adj < settings.alpha
    pct = f"{(p.ratio - 1) * 100:+.1f}%"
    stat = f"p={p_adj:.2g} (raw {p.p_raw:.2g}), {threshold_text(p.threshold)}" + (
        f" ({p.basis})" if p.basis else "")
    if p.benchmark.direction == Direction.UNKNOWN:
        # Neither better nor worse can be said: the change is reported with its size, never judged.
        # Only an interval inside the band on both sides is "unchanged", whichever way is better.
        if significant and beyond:
            outcome, how = Outcome.INCONCLUSIVE, "beyond the threshold and significant"
        elif beyond:
            outcome, how = Outcome.INCONCLUSIVE, "beyond the threshold but not significant"
        elif ci_high > hi_band or ci_low < lo_band:
            outcome, how = Outcome.INCONCLUSIVE, "within the threshold but the interval reaches beyond it"
        else:
            outcome, how = Outcome.UNCHANGED, "interval within the threshold on both sides"
        reason = f"{pct} {how}: {stat}"
        if outcome == Outcome.INCONCLUSIVE:
            reason = f"{UNKNOWN_DIRECTION}; {reason}"
    elif significant and beyond:
        outcome = Outcome.REGRESSED if is_worse(p.benchmark.direction, p.ratio) else Outcome.IMPROVED
        reason = f"{pct} beyond the threshold and significant: {stat}"
        if (split := _halves_disagree(p, medians=True)) is not None:
            outcome = Outcome.INCONCLUSIVE
            lead = UNCONFIRMED_SLOWDOWN if is_worse(p.benchmark.direction, p.ratio) else "unconfirmed change"
            reason = f"{lead}: {pct} beyond the threshold and significant, but {split}: {stat}; measure again"
    elif (tail := _tail_verdict(p, p_adj, settings, stat)) is not None:
        outcome, reason = tail
        if outcome == Outcome.REGRESSED and (split := _halves_disagree(p, medians=False)) is not None:
            outcome = Outcome.INCONCLUSIVE
            reason = f"{UNCONFIRMED_SLOWDOWN}: {reason.split(': ', 1)[0]}, but {split}: {stat}; measure again"
    elif beyond:
        outcome = Outcome.INCONCLUSIVE
        reason = f"{pct} beyond the threshold but not significant: {stat}; measure more samples"
    elif (ci_high > hi_band) if p.benchmark.direction == Direction.LOWER else (ci_low < lo_band):
        # Only the regression side asks for a re-run: an unconfirmed improvement costs nothing.
        outcome = Outcome.INCONCLUSIVE
        reason = f"{pct} within the threshold but the interval reaches a regression: {stat}; measure more samples"
    else:
        outcome = Outcome.UNCHANGED
        edge = regression_edge(p.threshold, p.benchmark.direction)
        reason = f"{pct}: interval rules out a regression beyond {edge}: {stat}"
    return Verdict(
        benchmark=p.benchmark, outcome=outcome, base_value=float(np.median(p.base)),
        head_value=float(np.median(p.head)), ratio=p.ratio, ci_low=ci_low, ci_high=ci_high, p_value=p_adj,
        threshold=p.threshold, base_sha=p.base_sha, head_sha=p.head_sha, reason=reason, machine=p.machine,
    )
