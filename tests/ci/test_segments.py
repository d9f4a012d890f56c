"""The history detector's core: its statistics equal scipy's and statistics.median bit for bit, and
a state extended commit by commit is exactly the state computed from scratch."""

from __future__ import annotations

import statistics

import numpy as np
import pytest
from scipy import stats

from ci.verdicts.history import HistorySettings
from ci.verdicts.segments import NeedFullHistory, SeriesState, median, medians, mwu_pvalue_auto


@pytest.mark.parametrize("seed", range(4))
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
