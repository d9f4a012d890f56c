"""The history detector's core: its statistics equal scipy's and statistics.median bit for bit, and
a state extended commit by commit is exactly the state computed from scratch."""

from __future__ import annotations

import math
import statistics
import time

import numpy as np
import pytest
from scipy import stats

from ci.verdicts import segments
from ci.verdicts.history import HistorySettings
from ci.verdicts.segments import (
    NeedFullHistory,
    SeriesState,
    median,
    medians,
    mwu_pvalue_auto,
    safe_exp,
    smallest_p_at_least,
)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.slow
def test_mann_whitney_p_equals_scipys_bit_for_bit(seed: int) -> None:
    rng = np.random.default_rng(seed)
    checked = 0
    for n1 in (1, 2, 3, 5, 8, 9, 13, 40, 300):
        for n2 in (1, 3, 8, 9, 21, 500):
            for ties in (False, True):
                a = rng.lognormal(0, 0.05, n1)
                b = rng.lognormal(0.02, 0.05, n2)
                if ties:  # coarse timers: values that repeat
                    a, b = np.round(a, 2), np.round(b, 2)
                if np.ptp(np.concatenate([a, b])) == 0:
                    continue
                ours = mwu_pvalue_auto(a, b)
                theirs = float(stats.mannwhitneyu(a, b, alternative="two-sided").pvalue)
                assert ours == theirs, (n1, n2, ties, ours, theirs)
                checked += 1
    assert checked > 90


@pytest.mark.parametrize("size", [1, 2, 3, 4, 5, 10, 11, 64])
def test_medians_equal_statistics_median(size: int) -> None:
    rng = np.random.default_rng(size)
    arrays = [rng.lognormal(-9, 1, size) for _ in range(50)] + [rng.lognormal(-9, 1, size + 1)]
    expected = [statistics.median(a.tolist()) for a in arrays]
    assert medians(arrays) == expected
    assert [median(a) for a in arrays] == expected
    assert [float(np.median(a)) for a in arrays] == expected
    assert medians([np.empty(0)]) == [0.0]


def _random_history(seed: int, n: int) -> list[tuple[str, np.ndarray]]:
    """Commits of one series with what real histories have: steps up and down, drift, noise that
    changes, a quantised stretch (medians that repeat), failed commits (no samples, or <= 0)."""
    rng = np.random.default_rng(seed)
    level = np.ones(n)
    for _ in range(int(rng.integers(0, 5))):
        at = int(rng.integers(3, n - 3))
        level[at:] *= float(rng.choice([0.9, 0.95, 1.05, 1.1, 1.3]))
    level *= np.exp(np.cumsum(rng.normal(0, float(rng.choice([0.0, 0.001, 0.004])), n)))
    out = []
    for i in range(n):
        k = int(rng.choice([1, 4, 5, 10]))
        x = level[i] * rng.lognormal(0, float(rng.choice([0.002, 0.01, 0.03])), k)
        if n // 3 < i < n // 2:
            x = np.round(x, 2)  # a coarse timer for a while
        if rng.random() < 0.03:
            x = np.empty(0) if rng.random() < 0.5 else -x  # a failed commit carries no level
        out.append((f"{seed:03d}{i:05d}", x))
    return out


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.slow
def test_state_extended_commit_by_commit_is_the_state_computed_from_scratch(seed: int) -> None:
    """Random histories, windows of 24 commits (many full windows, a partial one), extended in random
    chunks with the state stored and read back between chunks (as the store keeps it): after every
    chunk, the steps and the stored bytes equal those of one computation over the same commits."""
    settings = HistorySettings(window=24, min_points=8)
    history = _random_history(seed, 200)
    rng = np.random.default_rng(1000 + seed)
    state = SeriesState(settings.knobs)
    done, fallbacks, compared = 0, 0, 0
    while done < len(history):
        chunk = history[done : done + int(rng.choice([1, 1, 1, 2, 7]))]
        state = SeriesState.from_bytes(state.to_bytes(), settings.knobs)
        try:
            state.extend(chunk)
        except NeedFullHistory:  # as the store path does: recompute that series from scratch
            fallbacks += 1
            state = SeriesState(settings.knobs)
            state.extend(history[: done + len(chunk)])
        done += len(chunk)
        scratch = SeriesState(settings.knobs)
        scratch.extend(history[:done])
        assert state.steps == scratch.steps, done
        assert state.to_bytes() == scratch.to_bytes(), done
        compared += 1
    assert compared > 60
    assert fallbacks <= compared // 10  # the incremental path is the rule, the fallback the exception
    assert SeriesState.from_bytes(state.to_bytes(), settings.knobs).to_bytes() == state.to_bytes()


def test_a_short_series_is_one_window_and_the_tail_is_all_a_long_one_keeps() -> None:
    """Up to `window` commits the series is segmented whole; beyond, the state keeps raw samples
    only for the last window and a pooled test's span, so its size stops growing with the samples."""
    settings = HistorySettings()
    history = _random_history(7, 1000)
    state = SeriesState(settings.knobs)
    state.extend(history[:100])
    assert state.final_windows == 0 and state.keep_from == 0
    state.extend(history[100:])
    assert state.final_windows > 10
    assert 0 < len(state.tail_shas) == len(state.tail_ends) <= settings.window + 30
    with pytest.raises(NeedFullHistory, match="given twice"):
        state.extend([history[-1]])


def test_a_stored_state_that_is_not_one_is_refused() -> None:
    knobs = HistorySettings().knobs
    state = SeriesState(knobs)
    state.extend(_random_history(3, 50))
    data = state.to_bytes()
    with pytest.raises(ValueError):
        SeriesState.from_bytes(data[:-8], knobs)
    with pytest.raises(ValueError):
        SeriesState.from_bytes(data + b"\0" * 8, knobs)


def _quotient(m: int, n: int, max_pvalue: float) -> bool:
    """The detector's test of whether a per-commit test can reach `max_pvalue`, as it was computed up to
    2026-12-04: the float quotient, which raised OverflowError once C(m + n, m) passed the largest float."""
    return 2.0 / math.comb(m + n, m) >= max_pvalue


def test_the_smallest_p_decides_as_the_quotient_wherever_that_was_a_float() -> None:
    """Log space gives the quotient's answer on every pair it could compute, at the boundary too
    (max_pvalue exactly the quotient and one ulp either side), and an answer beyond it."""
    rng = np.random.default_rng(0)
    checked = 0
    pairs = [(m, n) for m in range(0, 40) for n in range(0, 40)]
    pairs += [(int(m), int(t - m)) for t in rng.integers(40, 1020, 300) for m in [rng.integers(0, t + 1)]]
    pairs += [(m, 5000 - m) for m in (0, 1, 2, 3, 50, 4950, 4998)]  # long, still a float: C(5000, 50) ~ 1e106
    for m, n in pairs:
        q = 2.0 / math.comb(m + n, m)
        for alpha in (q, math.nextafter(q, 0), math.nextafter(q, 1), 1e-3, 0.05, 1e-300, 5e-324, 0.999):
            assert smallest_p_at_least(m, n, alpha) == _quotient(m, n, alpha), (m, n, alpha)
            checked += 1
    assert checked > 14_000
    for m, n in ((515, 515), (10_000, 10_000), (3, 10**9)):  # the quotient overflows at the first two
        assert smallest_p_at_least(m, n, 1e-3) is False
        assert smallest_p_at_least(m, n, 0.0) is True
        assert smallest_p_at_least(m, n, math.nan) is False
    with pytest.raises(OverflowError):
        _quotient(515, 515, 1e-3)


def test_the_pooled_span_is_the_first_span_the_quotient_rules_out() -> None:
    def linear(min_size: int, max_pvalue: float) -> int:
        t = 2 * min_size
        while _quotient(min_size, t - min_size, max_pvalue):
            t += 1
        return t

    for min_size in range(2, 12):
        for alpha in (1e-3, 0.05, 1e-6, 1e-9, 0.5, 2.0 / math.comb(30, min_size)):
            assert segments._pooled_span(min_size, alpha) == linear(min_size, alpha), (min_size, alpha)
    t0 = time.perf_counter()
    assert segments._pooled_span(3, 1e-300) == segments._SPAN_CAP  # ~1e100 commits: longer than any history
    assert segments._pooled_span(400, 1e-300) == linear(400, 1e-300)
    assert time.perf_counter() - t0 < 1.0


@pytest.mark.parametrize("seed", range(3))
def test_the_same_change_points_as_the_quotient_gave_on_series_it_handled(seed: int, monkeypatch) -> None:
    """Histories of up to 1,000 commits (where the old arithmetic still held: C(1000, 500) ~ 2.7e299)
    give the same steps, bit for bit, and the same stored state."""
    for n, window in ((300, 128), (1000, 128), (1000, 2000)):  # window 2000: one window, segments of ~500
        history = _random_history(seed, n)
        settings = HistorySettings(window=window)
        new = SeriesState(settings.knobs)
        new.extend(history)
        with monkeypatch.context() as patch:
            patch.setattr(segments, "smallest_p_at_least", _quotient)
            old = SeriesState(settings.knobs)
            old.extend(history)
        assert new.steps == old.steps, (n, window)
        assert new.to_bytes() == old.to_bytes(), (n, window)


def _long_rows(n: int, steps: dict[int, float], seed: int = 0) -> tuple[list[str], np.ndarray]:
    rng = np.random.default_rng(seed)
    level = np.ones(n)
    for at, factor in steps.items():
        level[at:] *= factor
    return [f"{seed:02d}{i:038d}" for i in range(n)], level[:, None] * rng.lognormal(0, 0.01, (n, 5))


@pytest.mark.parametrize("window", [128, 25_000], ids=["windowed", "one-window"])
@pytest.mark.slow
def test_a_20000_commit_series_finds_its_steps(window: int) -> None:
    """Segments of ~1,030 commits or more made the merge's test overflow (exit 2 for the dashboard and
    `ci run`). 20,000 commits, steps with thousands of commits on each side and one 3 commits from the end."""
    settings = HistorySettings(window=window)
    shas, rows = _long_rows(20_000, {5000: 1.1, 12_000: 0.9, 19_997: 1.2})
    state = SeriesState(settings.knobs)
    state.extend_rows(shas, rows, np.median(rows, axis=1))
    assert [s.index for s in state.steps] == [5000, 12_000, 19_997]
    assert np.allclose([safe_exp(s.log_ratio) for s in state.steps], [1.1, 0.9, 1.2], rtol=0.02)
    assert SeriesState.from_bytes(state.to_bytes(), settings.knobs).steps == state.steps
    flat_shas, flat = _long_rows(20_000, {}, seed=1)
    quiet = SeriesState(settings.knobs)
    quiet.extend_rows(flat_shas, flat, np.median(flat, axis=1))
    assert quiet.steps == []


def test_a_20000_commit_series_extended_commit_by_commit_equals_one_computation() -> None:
    settings = HistorySettings()
    shas, rows = _long_rows(20_000, {15_000: 1.1})
    meds = np.median(rows, axis=1)
    state = SeriesState(settings.knobs)
    state.extend_rows(shas[:19_990], rows[:19_990], meds[:19_990])
    for i in range(19_990, 20_000):
        state = SeriesState.from_bytes(state.to_bytes(), settings.knobs)
        state.extend_rows(shas[i:i + 1], rows[i:i + 1], meds[i:i + 1])
    whole = SeriesState(settings.knobs)
    whole.extend_rows(shas, rows, meds)
    assert [s.index for s in state.steps] == [15_000]
    assert state.to_bytes() == whole.to_bytes()


def test_levels_1e100_apart_give_an_infinite_ratio_not_an_error() -> None:
    assert safe_exp(975.0) == math.inf and safe_exp(-975.0) == 0.0 and safe_exp(1.0) == math.exp(1.0)
    assert math.isnan(safe_exp(math.nan))
    values = [5e-324] * 20 + [1e100] * 20
    state = SeriesState(HistorySettings().knobs)
    state.extend([(f"c{i:03d}", np.array([v, v])) for i, v in enumerate(values)])
    (step,) = state.steps
    assert step.index == 20 and step.log_ratio > 900 and safe_exp(step.log_ratio) == math.inf


def _mixture(seed: int, n: int = 160, high: float = 0.25) -> np.ndarray:
    """Levels that flip at random between 1.0 and 1.75 (a share `high` at 1.75), 1% noise: no step."""
    rng = np.random.default_rng(seed)
    return np.where(rng.random(n) < high, 1.75, 1.0) * (1 + 0.01 * rng.standard_normal(n))


def _steps_up(levels: np.ndarray, settings: HistorySettings) -> list[segments.Step]:
    state = SeriesState(settings.knobs)
    state.extend([(f"c{i:04d}", np.array([v])) for i, v in enumerate(levels)])
    return [s for s in state.steps if s.log_ratio > 0]


def test_flip_size_sees_runs_at_another_level_not_outliers_or_steps() -> None:
    flat = np.log(1 + 0.01 * np.random.default_rng(0).standard_normal(100))
    with_outliers = flat.copy()
    with_outliers[[20, 50, 80]] += math.log(1.5)  # single commits: outliers, not runs
    step = flat.copy()
    step[60:] += math.log(1.3)
    for y in (flat, with_outliers, step):
        assert segments.flip_size(y, segments.robust_sigma(y), 32) == (0.0, 0)
    runs = flat.copy()
    runs[20:25] += math.log(1.2)  # 5 commits at +20%, then back
    runs[60:63] += math.log(1.2)
    size, longest = segments.flip_size(runs, segments.robust_sigma(runs), 32)
    assert size == pytest.approx(math.log(1.2), abs=0.03) and longest == 5
    assert segments.flip_size(runs, segments.robust_sigma(runs), 4) == (0.0, 0)  # runs longer than `within`


def test_a_long_series_that_steps_does_not_read_as_flipping() -> None:
    """Around the whole series' median, a long series that steps by 3.3 sigmas has runs past 3 sigmas
    on both sides from its noise alone; measured against the level around each commit it has none,
    and its step is found (20 of 120 such +10% steps were missed on 2026-12-06)."""
    rng = np.random.default_rng(5)
    y = 0.03 * rng.standard_normal(1000)
    y[500:] += math.log(1.1)
    sigma = segments.robust_sigma(y)
    assert segments.flip_size(y, sigma, 32) == (0.0, 0)
    whole = y - np.median(y)  # the old reference: runs of 2+ commits past 3 sigmas that come back
    side = np.where(whole > 3 * sigma, 1, np.where(whole < -3 * sigma, -1, 0))
    assert sum(a != 0 and a == b for a, b in zip(side, side[1:], strict=False)) >= 2
    found = _steps_up(np.exp(y), HistorySettings())
    assert [s.index for s in found] == [500]
    runs = y.copy()
    for at in (100, 300, 700):  # flips of 4 commits at +15% in the same long series are still flips
        runs[at:at + 4] += math.log(1.15)
    size, longest = segments.flip_size(runs, segments.robust_sigma(runs), 32)
    assert size == pytest.approx(math.log(1.15), abs=0.04) and longest == 4


def test_a_stretch_of_noisier_commits_is_judged_by_its_own_noise() -> None:
    """A runner that turns noisy (1% -> 4% for its last 200 of 1,000 commits) leaves the whole
    history's sigma near 1%: against it, runs of that stretch's noise passed as steps (+8% and -8%
    four commits apart here). Around a step with a side clearly noisier than the series (64 commits,
    more than twice its sigma), that side's noise is the guard. A real step in the quiet part is
    still found."""
    rng = np.random.default_rng(4)
    noise = np.where(np.arange(1000) < 800, 0.01, 0.04)
    levels = np.exp(noise * rng.standard_normal(1000))
    assert _steps_up(levels, HistorySettings()) == []
    before = SeriesState(HistorySettings().knobs)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(segments, "NOISIER", math.inf)  # the whole history's sigma everywhere
        before.extend([(f"c{i:04d}", np.array([v])) for i, v in enumerate(levels)])
    assert [s.index for s in before.steps if abs(s.log_ratio) > math.log(1.05)]  # the case is real
    stepped = levels.copy()
    stepped[400:] *= 1.06
    assert [s.index for s in _steps_up(stepped, HistorySettings())] == [400]


def test_flips_far_from_a_step_do_not_change_how_it_is_judged() -> None:
    """A long history's regimes come and go: two flips in its first 130 commits said that every step of
    its 1,000 flipped, and a +5.5% step held 300 commits (2.75 sigmas of 2% noise) then needed the
    3-sigma guard. Flips count within `window` commits of the step."""
    rng = np.random.default_rng(2)
    y = 0.02 * rng.standard_normal(1000)
    for at in (50, 120):
        y[at:at + 3] += math.log(1.15)
    y[700:] += math.log(1.055)
    sigma = segments.robust_sigma(y)
    assert segments.flip_size(y, sigma, 32)[0] > 0  # the series does flip, early on
    assert segments.flip_size(y, sigma, 32, near=(700 - 128, 700 + 128)) == (0.0, 0)
    assert [s.index for s in _steps_up(np.exp(y), HistorySettings())] == [700]
    y[680:683] += math.log(1.15)  # a flip near the step, and another: the step is judged as a flip might be
    y[760:763] += math.log(1.15)
    assert segments.flip_size(y, segments.robust_sigma(y), 32, near=(700 - 128, 700 + 128))[0] > 0
    assert [s.index for s in _steps_up(np.exp(y), HistorySettings())] == []


def test_local_median_is_the_median_of_the_neighbourhood() -> None:
    y = np.arange(10, dtype=float)[::-1]
    assert segments.local_median(y, 2).tolist() == [8.0, 7.5, 7.0, 6.0, 5.0, 4.0, 3.0, 2.0, 1.5, 1.0]
    assert segments.local_median(y, 5).tolist() == [4.5] * 10  # no longer than 2 x reach + 1: the whole median
    # longer than 2 x reach + 1; up to `SMALL_REACH` every window sorted, past it the filter
    for n, reach in ((4, 1), (40, 2), (12, 5), (19, 8), (130, 64), (1000, 64), (258, 128)):
        z = np.round(np.random.default_rng(n).standard_normal(n), 1)  # values that repeat too
        padded = np.concatenate((np.full(reach, np.nan), z, np.full(reach, np.nan)))
        want = np.nanmedian(np.lib.stride_tricks.sliding_window_view(padded, 2 * reach + 1), axis=1)
        assert np.array_equal(segments.local_median(z, reach), want), (n, reach)


@pytest.mark.slow
def test_a_series_that_flips_between_levels_reports_no_step_by_chance() -> None:
    """Runs at the other level happen by chance in such a series, and the segmentation picks them:
    at p < 0.01 they read as steps (17 of 60 such series on 2026-12-05); `flip_pvalue` asks steps no
    larger than the flips and no longer than the longest of them for p < 0.001."""
    seeds = range(30)
    before = sum(bool(_steps_up(_mixture(s), HistorySettings(flip_pvalue=0.0))) for s in seeds)
    after = sum(bool(_steps_up(_mixture(s), HistorySettings())) for s in seeds)
    assert before >= 5  # the case is real: without the rule, these series report steps
    assert after <= 1


def test_a_step_held_longer_than_any_flip_is_found_in_a_flipping_series() -> None:
    levels = _mixture(3, n=200)
    levels[150:] = 1.75 * (1 + 0.01 * np.random.default_rng(9).standard_normal(50))  # the high level stays
    found = _steps_up(levels, HistorySettings())
    assert [s.index for s in found if abs(s.index - 150) <= 2], found


def test_noise_pvalue_is_a_z_test_on_medians_against_the_series_noise() -> None:
    # se = sigma * sqrt(pi / 2 * (1 / m + 1 / n)): 0.05 * sqrt(pi / 3) for 3 against 3
    se = 0.05 * math.sqrt(math.pi / 3)
    assert segments.noise_pvalue(0.1, 3, 3, 0.05) == pytest.approx(2 * stats.norm.sf(0.1 / se), rel=1e-12)
    assert segments.noise_pvalue(-0.1, 3, 3, 0.05) == segments.noise_pvalue(0.1, 3, 3, 0.05)
    assert segments.noise_pvalue(0.1, 3, 30, 0.05) < segments.noise_pvalue(0.1, 3, 3, 0.05)  # more commits
    assert segments.noise_pvalue(0.0, 3, 3, 0.05) == 1.0
    assert segments.noise_pvalue(0.1, 3, 3, 0.0) == 1.0  # no noise measured: nothing to judge by
    assert segments.noise_pvalue(math.nan, 3, 3, 0.05) == 1.0
    assert segments.noise_pvalue(math.inf, 3, 3, 0.05) == 0.0
    # sigma measured on a series of `commits`: Student's t with NOISE_DF_PER_COMMIT * (commits - 1) df
    df = segments.NOISE_DF_PER_COMMIT * 39
    assert segments.noise_pvalue(0.1, 3, 3, 0.05, 40) == pytest.approx(2 * stats.t.sf(0.1 / se, df), rel=1e-9)
    assert segments.noise_pvalue(0.1, 3, 3, 0.05, 8) > segments.noise_pvalue(0.1, 3, 3, 0.05, 400)
    assert segments.noise_pvalue(0.1, 3, 3, 0.05, 2) == pytest.approx(2 * stats.t.sf(0.1 / se, 1), rel=1e-9)


def test_the_noise_model_adds_no_step_to_short_histories() -> None:
    """A sigma from 7 to 11 successive differences is often too small: read on the normal distribution,
    the noise test added a false step to 2.2% of 8-commit Gaussian series (the rank test alone: 0%).
    Read on Student's t (its degrees of freedom from the series' length) it adds none."""
    def steps(levels: np.ndarray, settings: HistorySettings) -> int:
        state = SeriesState(settings.knobs)
        state.extend([(f"c{i:04d}", np.array([v])) for i, v in enumerate(levels)])
        return len(state.steps)

    rng = np.random.default_rng(800)
    on = off = 0
    for n in (8, 10, 12):
        for _ in range(150):
            levels = np.exp(0.02 * rng.standard_normal(n))
            on += steps(levels, HistorySettings())
            off += steps(levels, HistorySettings(noise_test=False))
    assert on <= off


def _two_steps(seed: int, gap: int, after: int) -> np.ndarray:
    """60 commits at 1.0, +30% at 60, +10% more `gap` commits later, held `after` commits; 1% noise."""
    n = 60 + gap + after
    levels = np.ones(n)
    levels[60:] *= 1.3
    levels[60 + gap:] *= 1.1
    return levels * (1 + 0.01 * np.random.default_rng(seed).standard_normal(n))


@pytest.mark.parametrize("seed", range(5))
def test_a_step_four_commits_after_another_is_found_on_three_commits_by_the_noise_model(seed: int) -> None:
    """4 commits against 3 reach p = 0.057 at best in the rank test, so a +10% step (10 sigmas) 4 commits
    after a real step waited for 6 commits; the series' noise model judges it on 3."""
    levels = _two_steps(seed, gap=4, after=3)
    found = _steps_up(levels, HistorySettings())
    assert [s.index for s in found] == [60, 64], found
    assert [s.index for s in _steps_up(levels, HistorySettings(noise_test=False))] == [60]
    assert [s.index for s in _steps_up(_two_steps(seed, gap=4, after=6), HistorySettings(noise_test=False))] == [60, 64]


def test_the_noise_model_adds_no_step_to_quiet_series_or_to_series_that_flip() -> None:
    """On steady series with 1% noise (100 of them, 120 commits each) and on series that flip between
    levels, the noise model adds no step, up or down, that the rank test alone does not report."""
    def steps(levels: np.ndarray, settings: HistorySettings) -> list[segments.Step]:
        state = SeriesState(settings.knobs)
        state.extend([(f"c{i:04d}", np.array([v])) for i, v in enumerate(levels)])
        return state.steps

    rng = np.random.default_rng(11)
    for i in range(100):
        levels = 1 + 0.01 * rng.standard_normal(120)
        assert steps(levels, HistorySettings()) == steps(levels, HistorySettings(noise_test=False)), i
    for s in range(10):
        levels = _mixture(s)
        assert steps(levels, HistorySettings()) == steps(levels, HistorySettings(noise_test=False)), s
    # Heavy tails (Student's t with 2 degrees of freedom, where the Gaussian noise model is most wrong):
    # no more steps than the rank test alone reports (2026-12-05: 0.16 per 1,000 commit-series either way).
    on = off = 0
    for _ in range(20):
        levels = np.exp(0.01 * rng.standard_t(2, 200))
        on += len(steps(levels, HistorySettings()))
        off += len(steps(levels, HistorySettings(noise_test=False)))
    assert on <= off


def test_noise_test_is_a_setting_in_the_fingerprint() -> None:
    assert "noise_test=True" in HistorySettings().fingerprint
    assert HistorySettings(noise_test=False).fingerprint != HistorySettings().fingerprint
    with pytest.raises(ValueError, match="noise_test"):
        HistorySettings(noise_test=1)  # type: ignore[arg-type]


def _quiet_step(seed: int, at: int, n: int, size: float = 0.05, noise: float = 0.02) -> np.ndarray:
    """`n` commits with `noise` Gaussian noise on the log scale, a step of `size` at commit `at`."""
    y = noise * np.random.default_rng(seed).standard_normal(n)
    y[at:] += math.log1p(size)
    return np.exp(y)


def _all_steps(levels: np.ndarray, settings: HistorySettings) -> list[segments.Step]:
    state = SeriesState(settings.knobs)
    state.extend([(f"c{i:04d}", np.array([v])) for i, v in enumerate(levels)])
    return state.steps


OFF = HistorySettings(long_side=0)


def test_a_small_step_held_long_passes_at_long_noise_k_sigmas() -> None:
    """+5% in a series with 2% commit-to-commit noise is 2.5 sigmas: the 3-sigma guard passes it only
    where the series' sigma reads low by chance (5 of 20 seeds); held 40 commits each side it is clear,
    and found at its commit (20 of 20)."""
    found = off = 0
    for seed in range(20):
        levels = _quiet_step(seed, 40, 80)
        found += any(abs(s.index - 40) <= 2 for s in _steps_up(levels, HistorySettings()))
        off += any(abs(s.index - 40) <= 2 for s in _steps_up(levels, OFF))
    assert off <= 6, off
    assert found >= 18, found


def test_a_small_step_with_a_short_side_keeps_the_noise_k_guard() -> None:
    """The same +5% with 6 commits after it (fewer than `long_side`): judged by the 3-sigma guard alone."""
    for seed in range(20):
        levels = _quiet_step(seed, 74, 80)
        assert _all_steps(levels, HistorySettings()) == _all_steps(levels, OFF), seed


def test_long_sides_add_no_step_to_quiet_series_or_to_series_that_flip() -> None:
    """No step on 100 steady series with 2% noise (160 commits) nor on series that flip between levels
    that the 3-sigma guard alone does not report."""
    rng = np.random.default_rng(21)
    for i in range(100):
        levels = np.exp(0.02 * rng.standard_normal(160))
        assert _all_steps(levels, HistorySettings()) == _all_steps(levels, OFF), i
    for s in range(10):
        assert _all_steps(_mixture(s), HistorySettings()) == _all_steps(_mixture(s), OFF), s


def test_long_side_knobs_are_checked_and_in_the_fingerprint() -> None:
    assert "long_side=10 long_noise_k=2.0 long_pvalue=0.001" in HistorySettings().fingerprint
    assert OFF.fingerprint != HistorySettings().fingerprint
    for bad in ({"long_side": -1}, {"long_side": 1.5}, {"long_noise_k": 4.0}, {"long_noise_k": -1.0},
                {"long_pvalue": 0.5}, {"long_pvalue": -0.1}):
        with pytest.raises(ValueError, match="long_"):
            HistorySettings(**bad)  # type: ignore[arg-type]


# mujoco-warp's GPU runner, ApptronikApolloTerrain `step.forward.fwd_actuation` (ms, 63 commits), with
# +10% from commit 18 on: two dips of 1.4-1.7% at commits 30-37 make it a series that flips.
FWD_ACTUATION = [1.8989, 1.9037, 1.89, 1.8841, 1.8894, 1.8964, 1.8714, 1.8627, 1.8692, 1.8676, 1.8646, 1.8436,
                 1.8546, 1.8572, 1.892, 1.8892, 1.898, 1.8992, 1.8929, 1.9082, 1.9015, 1.9222, 1.9411, 1.9339,
                 1.9324, 1.9379, 1.9311, 1.946, 1.9201, 1.9414, 1.8951, 1.8924, 1.9006, 1.8974, 1.9115, 1.9297,
                 1.9006, 1.9032, 1.9265, 1.9281, 1.9373, 1.9363, 1.9763, 1.9436, 1.9439, 1.9463, 1.939, 1.9331,
                 1.9486, 1.9454, 1.9486, 1.9455, 1.9435, 1.9493, 1.9436, 1.9456, 1.9457, 1.9482, 1.9493, 1.948,
                 1.9409, 1.9337, 1.9417]


def test_a_step_far_past_a_series_flips_is_judged_by_its_noise_on_short_sides() -> None:
    """The noise test was off on any series that flips, so a +10% step 3 commits before a real +1.7% one
    (4 commits against 3 between the segmentation's proposals: rank p 0.057 at best) was dropped and the
    step reported at the later commit, 3 from where it is; against noise of at least the flips' size
    (1.5% here) a step more than `FLIP_MARGIN` times them is judged on its short sides."""
    y = np.log(FWD_ACTUATION)
    y[18:] += math.log(1.1)
    assert segments.flip_size(y, segments.robust_sigma(y), 32)[0] == pytest.approx(0.015, abs=0.002)
    assert [s.index for s in _steps_up(np.exp(y), HistorySettings())] == [18]
