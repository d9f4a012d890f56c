"""Suspected regressions: flagged at the newest commit, then confirmed or withdrawn as commits arrive."""

from __future__ import annotations

import hashlib
import math
import random
from dataclasses import replace

import numpy as np
import pytest

from ci.records import Benchmark, Direction, Kind, Result
from ci.verdicts import (
    JobMove,
    Suspect,
    SuspectSettings,
    SuspectState,
    change_points,
    commit_levels,
    find_suspects,
    hold_at_job_moves,
    job_moves,
    judge_levels,
    noise_thresholds,
)
from ci.verdicts.segments import TRANSIENT_REACH

LAT = Benchmark("bench_attention.K.time_gpu", (("preset", "b8"),))
TPUT = Benchmark("bench_e2e.T.track_images", unit="images/s", direction=Direction.HIGHER, kind=Kind.THROUGHPUT)


def _sha(i: int) -> str:
    return hashlib.sha1(f"c{i}".encode()).hexdigest()


def _series(levels: list[float], *, bench: Benchmark = LAT, noise: float = 0.01, samples: int = 10,
            seed: int = 0) -> list[Result]:
    """One result per commit; commit i's samples scatter around levels[i] with relative `noise`
    (also the commit-to-commit drift, as between asv runs)."""
    rng = random.Random(seed)
    out = []
    for i, level in enumerate(levels):
        centre = level * (1 + noise * rng.gauss(0, 1))
        out.append(Result(bench, _sha(i), "h200", tuple(centre * (1 + 0.2 * noise * rng.gauss(0, 1))
                                                          for _ in range(samples))))
    return out


def test_a_step_held_by_two_commits_is_suspected_at_once() -> None:
    """One commit past the threshold is the runner's noise until the next one holds it (`hold`);
    then the step is suspected at its first commit, before the detector can see it."""
    assert find_suspects(_series([1e-5] * 20 + [1.3e-5])) == []
    rs = _series([1e-5] * 20 + [1.3e-5] * 2)
    (s,) = find_suspects(rs)
    assert s.state == SuspectState.SUSPECTED and s.commit_sha == _sha(20) and s.previous_sha == _sha(19)
    assert s.ratio == pytest.approx(1.3, rel=0.05) and s.commits_since == 2
    assert s.confidence > 0.99 and 0.02 <= s.threshold < 0.3
    assert "change-point detector can judge it after 1 more commit" in s.reason
    assert change_points(rs) == []  # what it covers: the detector cannot see it yet
    assert len(find_suspects(rs, settings=SuspectSettings(hold=1))) == 1
    assert len(find_suspects(rs[:-1], settings=SuspectSettings(hold=1))) == 1  # the newest commit alone


def test_a_return_to_a_level_the_window_was_at_is_not_suspected() -> None:
    """A series that flips between levels (a shared runner's regimes): two commits at a level the
    last 20 commits went to and came back from twice are the series' habit, not a new step; the
    detector still judges whether it stays (`seen`). One earlier visit is not a habit."""
    plan = [1e-5] * 6 + [1.3e-5] * 3 + [1e-5] * 4 + [1.3e-5] * 2 + [1e-5] * 5 + [1.3e-5] * 2
    rs = _series(plan)
    # the first and second visits are news (both withdrawn once the level came back); the third is not
    assert [(x.commit_sha, x.state) for x in find_suspects(rs)] == [(_sha(6), SuspectState.WITHDRAWN),
                                                                    (_sha(13), SuspectState.WITHDRAWN)]
    for settings in (SuspectSettings(seen=0), SuspectSettings(seen=3)):  # off, or three visits needed
        assert [x.commit_sha for x in find_suspects(rs, settings=settings)] == [_sha(6), _sha(13), _sha(20)]
    with pytest.raises(ValueError, match="seen"):
        SuspectSettings(seen=-1)


def test_a_step_read_against_a_short_wild_window_needs_to_be_sure() -> None:
    """Seven commits of a ±12% series make a ~30% threshold that is itself uncertain: two commits past
    it are 0.994 sure, under `min_confidence` (0.999), and not suspected; without the gate they are."""
    rs = _series([1e-5] * 7 + [1.45e-5] * 2, noise=0.12, seed=2)
    assert find_suspects(rs) == []
    later = _series([1e-5] * 8 + [1.6e-5] * 3)  # a step the window can judge: suspected at its own commit
    assert [s.commit_sha for s in find_suspects(later)] == [_sha(8)]
    (s,) = find_suspects(rs, settings=SuspectSettings(min_confidence=0.0))
    assert s.index == 7 and 0.99 < s.confidence < 0.999 and s.threshold > 0.25
    with pytest.raises(ValueError, match="min_confidence"):
        SuspectSettings(min_confidence=1.0)


@pytest.mark.parametrize("levels", [(5e-324, 1e100), (1e100, 5e-324)], ids=["up-1e424", "down-1e424"])
def test_levels_far_apart_are_judged_not_an_overflow(levels: tuple[float, float]) -> None:
    """A suspect's ratio from log levels ~975 apart (values an ingest accepts) was math.exp's
    OverflowError; it is inf (or 0) now, and the flags are what they would be for any big step."""
    rs = [Result(LAT, _sha(i), "h200", (v, v)) for i, v in enumerate([levels[0]] * 20 + [levels[1]] * 2)]
    flagged = find_suspects(rs)
    if levels[1] > levels[0]:
        (s,) = flagged
        assert s.state == SuspectState.SUSPECTED and s.commit_sha == _sha(20) and s.ratio == math.inf
        assert s.before == 5e-324 and s.after == pytest.approx(1e100)
    else:
        assert flagged == []  # faster: not a suspicion
    alternating = [Result(LAT, _sha(i), "h200", (levels[i % 2],) * 2) for i in range(30)]
    assert all(math.isfinite(s.threshold) for s in find_suspects(alternating))


def test_confirmed_when_the_detector_finds_the_step() -> None:
    # Suspected at 2 commits; the detector reports the step once 4 commits hold it (no excursion then).
    assert [x.state for x in find_suspects(_series([1e-5] * 20 + [1.3e-5] * 3))] == [SuspectState.SUSPECTED]
    rs = _series([1e-5] * 20 + [1.3e-5] * 4)
    assert [cp.commit_sha for cp in change_points(rs)] == [_sha(20)]
    (s,) = find_suspects(rs)
    assert s.state == SuspectState.CONFIRMED and s.resolved_sha == _sha(20) and s.commits_since == 4


def test_a_step_before_the_series_could_be_flagged_is_left_to_the_change_point() -> None:
    """A step at a series' 4th commit, before its window can judge a commit: the change point at the 4th
    reports it, and no suspicion names the 6th (the first with a window), which changed nothing. (A
    suspicion there read "withdrawn: the detector did not confirm the step" beside the series' own open
    regression on geocat-comp's history, and "the whole job moved at this commit" two commits after a
    crowd's step on devito's, 2026-12-07.)"""
    rs = _series([1e-5] * 3 + [3e-5] * 12)
    assert [cp.commit_sha for cp in change_points(rs)] == [_sha(3)]
    assert find_suspects(rs) == []


def test_a_two_commit_excursion_is_withdrawn_visibly_and_a_one_commit_one_never_raised() -> None:
    rs = _series([1e-5] * 20 + [1.3e-5] * 2 + [1e-5] * 2)
    (s,) = find_suspects(rs)
    assert s.state == SuspectState.WITHDRAWN and s.resolved_sha == _sha(23)  # the median of 21..23 is back
    assert "came back at" in s.reason
    assert find_suspects(_series([1e-5] * 20 + [1.3e-5] + [1e-5] * 3)) == []


def test_withdrawn_when_the_detector_does_not_confirm() -> None:
    # A step that stays but is too small for the detector's test (p) still ends: never silently open.
    rs = _series([1e-5] * 20 + [1.3e-5] * 7)
    found = [cp for cp in change_points(rs) if cp.commit_sha != _sha(20)]  # as if the detector missed it
    (s,) = find_suspects(rs, found=found)
    assert s.state == SuspectState.WITHDRAWN and s.resolved_sha == _sha(25)
    assert "no change point after 6 commits" in s.reason


def test_direction_is_respected() -> None:
    assert find_suspects(_series([1000.0] * 20 + [1300.0] * 2, bench=TPUT)) == []  # more images/s is better
    (s,) = find_suspects(_series([1000.0] * 20 + [700.0] * 2, bench=TPUT))
    assert s.state == SuspectState.SUSPECTED and s.ratio == pytest.approx(0.7, rel=0.05)


@pytest.mark.slow
def test_a_step_inside_the_series_noise_is_not_suspected() -> None:
    # The same +30% step: always suspected on a 1% series, rarely inside CPU-like noise (±30% between
    # runs), where a fixed band would flag every one.
    def flagged(noise: float) -> int:
        return sum(any(s.commit_sha == _sha(20) for s in find_suspects(
            _series([1e-3] * 20 + [1.3e-3] * 2, noise=noise, seed=seed), found=[])) for seed in range(200))

    assert flagged(0.02) >= 190
    assert flagged(0.3) <= 20  # 9.7% of 300 seeds held one commit (2026-12-01); two must now hold it


@pytest.mark.slow
def test_false_suspicions_on_noise_are_rare() -> None:
    newest_flagged = sum(
        any(s.commit_sha == _sha(29) for s in find_suspects(_series([1e-5] * 30, noise=0.02, seed=seed), found=[]))
        for seed in range(300))
    assert newest_flagged <= 6  # 2% of 300; the threshold is 3 sigma of the commit-to-commit noise


def test_too_short_a_history_and_correctness_series() -> None:
    assert find_suspects(_series([1e-5] * 4 + [2e-5] * 2)) == []  # 4 commits before: one too few
    assert len(find_suspects(_series([1e-5] * 5 + [2e-5] * 2))) == 1
    gate = Benchmark("c.L.track_max_abs_diff", unit="max abs diff", kind=Kind.CORRECTNESS)
    assert find_suspects(_series([1e-3] * 20 + [9e-3], bench=gate)) == []


def test_thresholds_follow_each_commits_recent_noise() -> None:
    quiet = noise_thresholds(np.full(30, 1e-5))
    assert np.isnan(quiet[:5]).all() and np.allclose(quiet[5:], 0.02)  # the detector's 2% floor
    _, levels = commit_levels(_series([1e-5] * 40, noise=0.05))
    noisy = noise_thresholds(levels)
    assert 0.08 < float(np.nanmedian(noisy)) < 0.25  # 3 sigma of 5% noise


@pytest.mark.parametrize("factor", [0.6, 1.6], ids=["below", "above"])
def test_the_threshold_is_the_change_point_detectors_size_guard(factor: float) -> None:
    # On long segments (p far below 0.001) the detector reports a step exactly when it passes its size
    # guard; the suspicion threshold of the same noise must sit where the detector's guard does.
    rng = np.random.default_rng(1)
    noise = np.exp(rng.normal(0, 0.01, 120))
    thr = float(np.nanmedian(noise_thresholds(1e-5 * noise[:60])))
    levels = 1e-5 * noise * np.where(np.arange(120) >= 60, 1 + factor * thr, 1.0)
    rs = [Result(LAT, _sha(i), "h200", (float(v),) * 5) for i, v in enumerate(levels)]
    found = [cp.commit_sha for cp in change_points(rs)]
    assert (found == [_sha(60)]) == (factor > 1), (factor, thr, found)


def test_bad_inputs() -> None:
    with pytest.raises(TypeError, match="sequence of Result"):
        find_suspects("abc")  # type: ignore[arg-type]
    mixed = _series([1e-5] * 3) + [Result(TPUT, _sha(9), "h200", (1.0,))]
    with pytest.raises(ValueError, match="mixes"):
        find_suspects(mixed)
    with pytest.raises(ValueError, match="confirm_within"):
        SuspectSettings(confirm_within=2)
    with pytest.raises(ValueError, match="window"):
        SuspectSettings(window=3)
    assert find_suspects([]) == []
    assert math.isclose(commit_levels(_series([2e-5], noise=0.0))[1][0], 2e-5)


def test_a_series_of_unknown_direction_is_never_suspected() -> None:
    """Neither way is worse for it: a step at the newest commit is no suspected regression either
    way (its change points report it, inconclusive)."""
    bench = Benchmark("bench_io.Copy.track_bandwidth", unit="GB/s", direction=Direction.UNKNOWN, kind=Kind.OTHER)
    for step in (0.7, 1.3):
        assert find_suspects(_series([100.0] * 20 + [100.0 * step] * 2, bench=bench)) == []
    known = Benchmark("bench_io.Copy.track_bandwidth", unit="GB/s", direction=Direction.HIGHER, kind=Kind.THROUGHPUT)
    assert len(find_suspects(_series([100.0] * 20 + [70.0] * 2, bench=known))) == 1  # declared: suspected


@pytest.mark.parametrize("bench", [LAT, TPUT], ids=["lower-is-better", "higher-is-better"])
@pytest.mark.slow
def test_a_track_extended_commit_by_commit_gives_the_answer_from_scratch(bench: Benchmark) -> None:
    """`judge_levels` with the track of the history one (or a few) commits shorter gives exactly the
    suspicions and thresholds of a computation from scratch (and `noise_thresholds`' thresholds),
    packed and unpacked between calls as the dashboard keeps them, while new commits confirm,
    withdraw (the level came back; the detector did not confirm) and open suspicions."""
    import ci.verdicts.suspects as suspects
    from ci.verdicts.suspects import SuspectTrack, judge_levels

    windowed: list[int] = []
    real_windows = suspects._windows

    def windows(y: np.ndarray, settings: SuspectSettings, **kw: object) -> object:
        windowed.append(y.size)
        return real_windows(y, settings, **kw)  # type: ignore[arg-type]

    worse = 1.3 if bench.direction == Direction.LOWER else 0.7
    # confirmed; an excursion; a short step; a step the detector is told to miss (the steps a window
    # apart: a level the window was at already is not suspected)
    plan = ([1.0] * 24 + [worse] * 8 + [1.0] * 16 + [worse] + [1.0] * 12 + [worse] * 4 + [1.0] * 21
            + [worse] * 7 + [1.0] * 30)
    rs = _series([1e-5 * f for f in plan], bench=bench, noise=0.01, seed=3)
    missed = _sha(24 + 8 + 16 + 1 + 12 + 4 + 21)  # the detector is told it found nothing there
    seen: dict[str, set[SuspectState]] = {}
    track = None
    n = 1
    rng = random.Random(5)
    while n <= len(rs):
        shas, levels = commit_levels(rs[:n])
        found = [cp for cp in change_points(rs[:n]) if cp.commit_sha != missed]
        step = n - (track.count if track else 0)
        windowed.clear()
        with pytest.MonkeyPatch.context() as m:
            m.setattr(suspects, "_windows", windows)
            got, thresholds, track = judge_levels(bench, "h200", shas, levels, found, track=track)
        # the new commits, the `hold` before them and the one before those, and the neighbourhoods of the
        # window's oldest commits (`TRANSIENT_REACH`)
        assert windowed == [min(n + 1, SuspectSettings().window + step + SuspectSettings().hold + 1
                                + TRANSIENT_REACH)], n
        want, want_thresholds, _ = judge_levels(bench, "h200", shas, levels, found)
        assert repr(got) == repr(want), n
        assert np.array_equal(thresholds, want_thresholds, equal_nan=True), n
        assert np.array_equal(thresholds, noise_thresholds(np.append(levels, levels[-1])), equal_nan=True), n
        assert thresholds.size == n + 1
        for x in got:
            seen.setdefault(x.commit_sha, set()).add(x.state)
        track = SuspectTrack.unpack(SuspectTrack.pack({"s": track}))["s"]  # type: ignore[index]
        n += 1 if n < 70 else rng.choice([1, 2, 5])
    states = sorted(tuple(sorted(v)) for v in seen.values())
    assert (SuspectState.CONFIRMED, SuspectState.SUSPECTED) in states  # a new commit confirmed it
    assert (SuspectState.SUSPECTED, SuspectState.WITHDRAWN) in states  # a new commit withdrew it
    assert seen[missed] == {SuspectState.SUSPECTED, SuspectState.WITHDRAWN}


def test_a_track_of_another_history_is_not_extended() -> None:
    """A track whose commits or levels are not the first of the series (an older commit measured
    again, another direction) is recomputed: the answer from scratch, never a stale flag."""
    from ci.verdicts.suspects import SuspectTrack, judge_levels

    shas, levels = commit_levels(_series([1e-5] * 20 + [1.3e-5] * 2 + [1e-5] * 5))
    _, _, track = judge_levels(LAT, "h200", shas[:22], levels[:22], [])
    assert [f.index for f in track.flags] == [20]
    changed = levels.copy()
    changed[20] = 1e-5  # the suspect commit measured again, back at the old level
    got, thr, _ = judge_levels(LAT, "h200", shas, changed, [], track=track)
    want, want_thr, _ = judge_levels(LAT, "h200", shas, changed, [])
    assert got == want == [] and thr.tobytes() == want_thr.tobytes()
    flipped = Benchmark(LAT.name, LAT.params, unit="images/s", direction=Direction.HIGHER, kind=Kind.THROUGHPUT)
    assert judge_levels(flipped, "h200", shas, levels, [], track=track)[0] == []  # a rise is no regression
    assert SuspectTrack.unpack(b"not a track") is None
    packed = SuspectTrack.pack({"s": track})
    assert SuspectTrack.unpack(packed[:-8]) is None


def test_the_median_of_the_later_commits_is_numpys() -> None:
    """`_median` (a sort and the middle, or the middle two halved) gives np.median's bits: the old
    implementation's states and values, judged from its median."""
    from ci.verdicts.suspects import _median

    rng = np.random.default_rng(11)
    for size in (1, 2, 3, 4, 19, 20, 999, 1000):
        for _ in range(50):
            a = np.log(np.exp(rng.normal(-11.0, 0.05, size)))
            assert _median(a) == float(np.median(a)), size
    assert _median(np.array([1.0, 1.0 + 2**-52])) == float(np.median([1.0, 1.0 + 2**-52]))


COUNT = Benchmark("bench_io.Lint.track_warnings", unit="count", kind=Kind.OTHER)


def _counts(levels: list[float], bench: Benchmark = COUNT) -> list[Result]:
    return [Result(bench, _sha(i), "h200", (float(v),)) for i, v in enumerate(levels)]


def test_a_count_leaving_zero_is_suspected_by_difference_then_confirmed() -> None:
    """A warning count at 0 has no ratio: its first move that two commits hold is suspected by
    difference (threshold 0: a count that stayed put has no noise), "0 → 3", and confirmed once the
    history's steps by difference (`RUN` commits) find it; one commit out and back is nothing."""
    (s,) = find_suspects(_counts([0] * 30 + [3] * 2))
    assert s.state == SuspectState.SUSPECTED and s.by_difference and s.commit_sha == _sha(30)
    assert (s.before, s.after, s.threshold) == (0.0, 3.0, 0.0) and math.isnan(s.ratio)
    assert s.previous_sha == _sha(29) and s.confidence == 1.0 and "a difference of 0" in s.reason
    assert change_points(_counts([0] * 30 + [3] * 2)) == []  # what it covers: the detector needs 5 commits
    (s,) = find_suspects(_counts([0] * 30 + [3] * 6))
    assert s.state == SuspectState.CONFIRMED and s.resolved_sha == _sha(30)
    assert find_suspects(_counts([0] * 30 + [3] + [0] * 6)) == []
    (s,) = find_suspects(_counts([0] * 30 + [3] * 2 + [0] * 5))
    assert s.state == SuspectState.WITHDRAWN and s.resolved_sha == _sha(33)  # the median of 3, 0, 0 is back
    # Fewer than `RUN` levels at or below zero: the ratio test on the positive levels, as before.
    assert not find_suspects(_series([1e-5] * 20 + [1.3e-5] * 2))[0].by_difference


def test_a_series_through_zero_is_not_judged_by_ratio_across_its_zeros() -> None:
    """Positive, then twenty commits at zero, then positive again 40% higher: the ratio test on the
    positive levels alone read the return as a step from the commit before the zeros; by difference
    the suspicion is at the return, against the zeros before it, in the series' unit."""
    rng = np.random.default_rng(1)
    levels = np.r_[100 + rng.normal(0, 1, 40), np.zeros(20), 140 + rng.normal(0, 1, 2)].tolist()
    (s,) = find_suspects(_counts(levels))
    assert s.by_difference and s.commit_sha == _sha(60) and s.previous_sha == _sha(59)
    assert s.before == 0.0 and s.after == pytest.approx(140, abs=3) and s.threshold == 0.0


def test_a_noisy_signed_series_gets_thresholds_in_its_unit() -> None:
    """A signed delta (Gaussian around zero): the thresholds are 3 robust sigmas of its differences,
    in its unit (about 3 here), not a percentage of its positive values; a step of 6 is suspected."""
    from ci.verdicts.suspects import judge_levels

    rng = np.random.default_rng(2)
    levels = rng.normal(0, 1, 60)
    _, thresholds, _ = judge_levels(COUNT, "h200", [_sha(i) for i in range(60)], levels, [], difference=True)
    assert 1.5 < np.nanmedian(thresholds) < 5
    stepped = np.r_[levels, rng.normal(6, 1, 2)]
    (s,) = judge_levels(COUNT, "h200", [_sha(i) for i in range(62)], stepped, [], difference=True)[0]
    assert s.commit_sha == _sha(60) and s.state == SuspectState.SUSPECTED and s.by_difference


def test_levels_of_the_wrong_kind_for_the_test_are_refused() -> None:
    """A ratio test of a level at or below zero, or a test by difference of a NaN: a clear error."""
    from ci.verdicts.suspects import judge_levels

    shas = [_sha(i) for i in range(3)]
    with pytest.raises(ValueError, match="positive"):
        judge_levels(COUNT, "h200", shas, np.array([1.0, 0.0, 1.0]), [])
    with pytest.raises(ValueError, match="finite"):
        judge_levels(COUNT, "h200", shas, np.array([1.0, math.nan, 1.0]), [], difference=True)


def test_a_track_by_difference_extended_commit_by_commit_gives_the_answer_from_scratch() -> None:
    """The suspicion track of a count (steps up, back, up again) extended one commit at a time gives
    the answer from scratch, and a ratio track of the same commits is not reused for it."""
    from ci.verdicts.suspects import SuspectTrack, judge_levels

    levels = np.array([0.0] * 25 + [2.0] * 8 + [0.0] * 20 + [4.0] * 3 + [1.0] * 10)
    shas = [_sha(i) for i in range(levels.size)]
    rs = _counts(levels.tolist())
    track = None
    for n in range(1, levels.size + 1):
        found = change_points(rs[:n])
        got, thr, track = judge_levels(COUNT, "h200", shas[:n], levels[:n], found, track=track, difference=True)
        want, want_thr, _ = judge_levels(COUNT, "h200", shas[:n], levels[:n], found, difference=True)
        assert repr(got) == repr(want) and np.array_equal(thr, want_thr, equal_nan=True), n
        track = SuspectTrack.unpack(SuspectTrack.pack({"s": track}))["s"]  # type: ignore[index]
    assert {x.state for x in got} >= {SuspectState.CONFIRMED}
    positive = levels + 1.0
    _, _, ratio_track = judge_levels(COUNT, "h200", shas, positive, [])
    assert ratio_track.digest != track.digest


def _machine(plan: list[float], n_series: int = 8, *, alone: int | None = None) -> dict[str, list[Result]]:
    """`n_series` series of one machine whose levels follow `plan` (relative); with `alone`, only that
    series follows it and the others stay at 1."""
    out = {}
    for i in range(n_series):
        bench = Benchmark(f"bench_m.S{i}.time_x")
        levels = [1e-5 * (f if alone in (None, i) else 1.0) for f in plan]
        out[bench.key] = [Result(r.benchmark, r.commit_sha, r.machine, r.samples)
                          for r in _series(levels, bench=bench, seed=i)]
    return out


def _moves_and_kept(machine: dict[str, list[Result]], settings: SuspectSettings | None = None
                    ) -> tuple[dict[str, JobMove], dict[str, list[Suspect]]]:
    """`job_moves` over the machine's series and each series' suspicions after `hold_at_job_moves`,
    as the dashboard reads them."""
    judged = {}
    for key, rs in machine.items():
        shas, levels = commit_levels(rs)
        sus, thr, _ = judge_levels(rs[0].benchmark, "h200", shas, levels, change_points(rs), settings=settings)
        judged[key] = (rs[0].benchmark, shas, levels, thr, sus)
    moves = job_moves(((b, shas, lv, thr) for b, shas, lv, thr, _ in judged.values()),
                      {x.commit_sha for *_, sus in judged.values() for x in sus}, settings)
    return moves, {key: hold_at_job_moves(sus, lv, moves, settings) for key, (_, _, lv, _, sus) in judged.items()}


def test_a_job_that_moved_every_series_for_two_commits_raises_no_suspicion() -> None:
    """A shared runner's job on a slower host moves every series at once and the next job or two undo
    it (Django's GitHub runners, 2026-12-07: every one of 44 series +27-88% for two jobs). Each series
    alone suspects it; the machine read together holds it one commit more, and it came back."""
    machine = _machine([1.0] * 20 + [1.5, 1.3] + [1.0] * 3)
    assert all(len(find_suspects(rs)) == 1 for rs in machine.values())  # each series on its own
    moves, kept = _moves_and_kept(machine)
    (move,) = moves.values()
    assert move.commit_sha == _sha(20) and move.worse == move.judged == 8 and 0.4 < move.median < 0.6
    assert "8 of 8 series worse, median +" in move.describe
    assert all(sus == [] for sus in kept.values())


def test_a_commit_that_slows_every_series_is_suspected_one_commit_later() -> None:
    """The same move held a third commit is not the job: suspected at its first commit, the reason
    saying it waited; with two commits in, nothing yet (the next one decides)."""
    machine = _machine([1.0] * 20 + [1.5] * 3)
    _, kept = _moves_and_kept(machine)
    for sus in kept.values():
        (x,) = sus
        assert x.commit_sha == _sha(20) and x.state == SuspectState.SUSPECTED and x.commits_since == 3
        assert "the whole job moved at this commit (8 of 8 series worse" in x.reason
        assert "raised one commit later" in x.reason
    two_in = {key: rs[:-1] for key, rs in machine.items()}
    moves, kept = _moves_and_kept(two_in)
    assert list(moves) == [_sha(20)] and all(sus == [] for sus in kept.values())


def test_one_series_stepping_alone_is_no_job_move() -> None:
    """A step in one series of eight (or in every series of a machine with fewer than `job_min_series`)
    is the commit's, suspected at once as before; so is a move shared by fewer than `job_share`."""
    moves, kept = _moves_and_kept(_machine([1.0] * 20 + [1.5, 1.3], alone=3))
    assert moves == {}
    assert [len(sus) for sus in kept.values()] == [0, 0, 0, 1, 0, 0, 0, 0]
    moves, kept = _moves_and_kept(_machine([1.0] * 20 + [1.5, 1.3], n_series=4))
    assert moves == {} and all(len(sus) == 1 for sus in kept.values())
    moves, _ = _moves_and_kept(_machine([1.0] * 20 + [1.5, 1.3], n_series=4),
                               SuspectSettings(job_min_series=4))
    assert list(moves) == [_sha(20)]
    half = {key: rs if i < 3 else [replace(r, samples=tuple(x / (1.5 if j == 20 else 1.3 if j == 21 else 1.0)
                                                              for x in r.samples)) for j, r in enumerate(rs)]
            for i, (key, rs) in enumerate(_machine([1.0] * 20 + [1.5, 1.3]).items())}
    moves, kept = _moves_and_kept(half)  # 3 of 8 moved
    assert moves == {} and [len(sus) for sus in kept.values()] == [1, 1, 1, 0, 0, 0, 0, 0]
    for bad in ({"job_share": 0.0}, {"job_share": 1.5}, {"job_min_series": 1}, {"job_min_series": True}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            SuspectSettings(**bad)  # type: ignore[arg-type]


def test_a_byte_count_that_steps_and_holds_is_suspected_at_its_threshold() -> None:
    """Values that repeat are judged by what leaves its level and comes back (`_transient_rows`), not by
    the steps the series took and held: mujoco-warp's device memory, real steps of 7% to 4x, then +10%
    held two commits, is suspected at once (the mean absolute deviation made its threshold 19%).
    Each window reads only commits before the one judged."""
    runs = [(8.745e8, 4), (1.3443e9, 6), (1.6127e9, 4), (4.7186e8, 3), (4.383e8, 6), (4.0475e8, 10)]
    levels = [v for v, n in runs for _ in range(n)] + [4.0475e8 * 1.1] * 2
    rs = [Result(Benchmark("bench_mem.Peak.peakmem_x", unit="bytes"), _sha(i), "h200", (v,) * 3)
          for i, v in enumerate(levels)]
    (s,) = [s for s in find_suspects(rs) if s.state == SuspectState.SUSPECTED]
    assert s.commit_sha == _sha(33) and s.threshold == pytest.approx(0.02)  # the detector's floor
    whole = noise_thresholds(np.array(levels))
    for j in range(10, len(levels)):  # the same thresholds from the commits up to j alone
        assert noise_thresholds(np.array(levels[:j + 1]))[j] == pytest.approx(whole[j], nan_ok=True), j


@pytest.mark.parametrize("difference", [False, True], ids=["ratio", "by-difference"])
def test_a_track_of_values_that_repeat_gives_the_answer_from_scratch(difference: bool) -> None:
    """Values that repeat read their noise from each commit's neighbours (`_transient_rows`), and the
    window's oldest commits' neighbours lie before it: a track extended commit by commit keeps them, so
    its suspicions and thresholds are exactly those from scratch (seeded byte counts that step and
    hold, with glitches; 3 of 150 differed when the track cut them off), at every prefix."""
    from ci.verdicts.suspects import judge_levels

    bench = Benchmark("bench_mem.Peak.peakmem_x", unit="bytes")
    # a step down right after the oldest commit of the window before a +10% step held 2 commits, then seeded
    cases = [np.array([2.0] * 11 + [1.0] * 19 + [1.1] * 3)]
    for seed in range(12):
        rng = np.random.default_rng(seed)
        values = np.repeat(rng.choice([1.0, 1.08, 1.3, 0.9, 1.15], 30), rng.integers(2, 9, 30))[:90]
        cases.append(np.where(rng.random(values.size) < 0.05, values * 1.5, values))  # glitches
    for seed, values in enumerate(cases):
        values = values - 1.1 if difference else values * 1e9  # through zero: judged by difference
        shas = [_sha(i) for i in range(values.size)]
        track = None
        for n in range(1, values.size + 1):
            got, thr, track = judge_levels(bench, "h200", shas[:n], values[:n], [], track=track,
                                           difference=difference)
            want, want_thr, _ = judge_levels(bench, "h200", shas[:n], values[:n], [], difference=difference)
            assert repr(got) == repr(want), (seed, n)
            assert np.array_equal(thr, want_thr, equal_nan=True), (seed, n)
