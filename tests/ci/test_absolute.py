"""Series at or through zero in the history (`ci.verdicts.absolute`): a counter's steps are change
points judged by their difference, found once RUN commits hold them, the same commit by commit as
at once and through a store; one stray zero leaves a timing series on the ratio detector; noise
around zero raises no step."""

from __future__ import annotations

import numpy as np
import pytest

from ci.records import Benchmark, Commit, Direction, Machine, Outcome, Result
from ci.verdicts.absolute import RUN
from ci.verdicts.history import HistorySettings, change_points, detect_all
from ci.verdicts.segments import SeriesState

COUNT = Benchmark("bench_io.Counts.track_warnings", (), unit="unit")
SCORE = Benchmark("bench_io.Quality.track_score", (), unit="unit", direction=Direction.HIGHER)
OFFSET = Benchmark("bench_io.Drift.track_offset", (), unit="unit", direction=Direction.UNKNOWN)


def _results(levels, bench=COUNT, noise=0.0, seed=0) -> list[Result]:
    rng = np.random.default_rng(seed)
    return [Result(bench, f"c{i:04d}", "m", tuple(float(v + x) for x in rng.normal(0, noise, 3)) if noise else
                   (float(v),)) for i, v in enumerate(levels)]


def _found(results) -> list[tuple[str, str, float, float]]:
    return [(cp.commit_sha, cp.outcome.value, cp.before, cp.after) for cp in change_points(results)]


def test_a_counter_going_up_and_back_is_a_regression_then_an_improvement() -> None:
    levels = [0] * 20 + [5] * 10 + [0] * 8
    assert _found(_results(levels)) == [("c0020", "regressed", 0.0, 5.0), ("c0030", "improved", 5.0, 0.0)]
    (cp, _) = change_points(_results(levels))
    assert cp.previous_sha == "c0019" and np.isnan(cp.ratio) and 0 < cp.p_value < 0.01
    # Found once RUN commits hold it, not before.
    assert _found(_results([0] * 20 + [5] * (RUN - 1))) == []
    assert _found(_results([0] * 20 + [5] * RUN)) == [("c0020", "regressed", 0.0, 5.0)]
    # Which way is worse comes from the benchmark; an unknown direction is reported, not judged.
    assert _found(_results([0] * 10 + [3] * 10, SCORE)) == [("c0010", "improved", 0.0, 3.0)]
    assert _found(_results([0] * 10 + [3] * 10, OFFSET)) == [("c0010", "inconclusive", 0.0, 3.0)]


def test_a_positive_counter_that_drops_to_zero_is_found_at_its_first_zero() -> None:
    assert _found(_results([3] * 30 + [0] * 10)) == [("c0030", "improved", 3.0, 0.0)]


def test_one_stray_zero_leaves_a_timing_series_on_the_ratio_detector() -> None:
    """A single level at zero (a broken run) is skipped as before: the same change points as the
    series without that commit."""
    levels = [1.0] * 30 + [1.2] * 30
    plain = _results(levels, noise=0.002, seed=4)
    stray = plain[:12] + [Result(COUNT, "zero", "m", (0.0,) * 3)] + plain[12:]
    assert change_points(stray) == change_points(plain) and len(change_points(plain)) == 1


_EARLY = [0.3, -0.8, 0.5, -0.2, 0.1, -0.6, 0.4, -0.1, 0.2, -0.4] * 4 + [0.9, 6.0, 6.4, 5.7, 6.2, 5.9, 6.1, 5.8, 6.3]


def test_a_step_is_placed_at_its_commit_when_the_one_before_sits_high() -> None:
    """The commit before a step sits above the RUN before it (0.9 after 0.4 at most): the RUN levels
    each side of it are separated too, one commit early. The step is where the RUN levels' means move
    most, the first commit at the new level (before 2026-12-06: the commit before it, in about one
    noisy step of six)."""
    (cp,) = change_points(_results(_EARLY))
    assert (cp.commit_sha, cp.previous_sha) == ("c0041", "c0040") and cp.outcome == Outcome.REGRESSED
    # Found as soon as RUN commits hold the early boundary, then moved once the step's own is judged.
    assert [c.commit_sha for c in change_points(_results(_EARLY[:45]))] == ["c0040"]
    assert [c.commit_sha for c in change_points(_results(_EARLY[:46]))] == ["c0041"]


@pytest.mark.parametrize("levels", [
    _EARLY,
    [0] * 20 + [5] * 10 + [0] * 8 + [2] * 30,
    [4.0] * 70 + [0, 0, 1, 0, 0, 0] * 10 + [6.0] * 12,  # a long positive history, then zeros
    list(np.random.default_rng(3).normal(0, 1, 150)) + list(np.random.default_rng(4).normal(8, 1, 40)),
], ids=["early", "counter", "positive-then-zeros", "noise-through-zero"])
def test_commit_by_commit_equals_at_once_and_survives_storage(levels) -> None:
    """A state extended commit by commit, stored and read back after every commit, holds the same
    bytes and change points as one extended at once."""
    from ci.verdicts.history import _pooled, state_change_points

    results = _results(levels)
    commits, meds, bench, machine = _pooled(results)
    settings = HistorySettings(window=16)
    whole = SeriesState(settings.knobs)
    whole.extend(commits, meds)
    data = SeriesState(settings.knobs).to_bytes()
    for c in commits:
        state = SeriesState.from_bytes(data, settings.knobs)
        state.extend([c])
        data = state.to_bytes()
    assert data == whole.to_bytes()
    final = SeriesState.from_bytes(data, settings.knobs)
    assert state_change_points(final, bench, machine) == state_change_points(whole, bench, machine)
    assert state_change_points(whole, bench, machine) == change_points(results, settings=settings)
    assert state_change_points(whole, bench, machine)  # each of these has a step


def test_noise_around_zero_raises_no_step() -> None:
    """Gaussian and heavy-tailed noise centred on zero (signed deltas), 6,000 commits: no step."""
    rng = np.random.default_rng(7)
    for values in (rng.normal(0, 1, 3000), rng.standard_t(3, 3000)):
        assert change_points(_results(values.tolist())) == []


def test_a_store_gives_the_counters_steps_commit_by_commit(tmp_path) -> None:
    """Through a Store that keeps states: each commit's incremental answer is the full one, and the
    counter's step is there once RUN commits hold it."""
    from ci.store import Store
    from tools.fixtures import MemoryStore, ingest_commits

    results = _results([0] * 14 + [4] * 8 + [0] * 6)
    mem = MemoryStore(machine_list=[Machine("m")], benchmark_list=[COUNT], result_list=results,
                      commit_list=[Commit(r.commit_sha) for r in results])
    settings = HistorySettings(window=16)
    with Store(tmp_path / "z.sqlite") as store:
        store.upsert_commits(mem.commit_list)
        for r in results:
            ingest_commits(store, mem, [r.commit_sha])
            assert detect_all(store, settings=settings) == detect_all(store.results(), settings=settings)
        got = [(cp.commit_sha, cp.outcome) for cp in detect_all(store, settings=settings)]
    assert got == [("c0014", Outcome.REGRESSED), ("c0022", Outcome.IMPROVED)]


@pytest.mark.parametrize("bad", [[], {"count": 1}, {"first_index": 0, "start": 0, "count": 1, "checked": 0,
                                                     "nonpositive": 0, "tail": [["a"]], "steps": []}, "x"])
def test_a_corrupt_stored_track_is_a_value_error_the_store_recomputes(bad) -> None:
    """A state's track that is not one raises what `SeriesState.from_bytes` promises (ValueError or
    KeyError), which a store's reader answers by recomputing the state, never a crash."""
    from ci.verdicts.absolute import AbsoluteTrack

    with pytest.raises((ValueError, KeyError)):
        AbsoluteTrack.from_json(bad)
