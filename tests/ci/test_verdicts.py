"""A/B verdicts: outcomes, direction, noise-adaptive threshold, multiple comparisons, bad inputs."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from ci.records import WITHHELD_OTHER_JOB, Benchmark, Direction, Kind, Outcome, Result, Verdict
from ci.verdicts import VerdictSettings, compare, exit_code, summarize

LAT = Benchmark("bench_attention.GPUTime.time_gpu", (("B", "8"), ("N", "197")))
TPUT = Benchmark("bench_e2e.Throughput.track_images", (("B", "32"),), unit="images/s",
                 direction=Direction.HIGHER, kind=Kind.THROUGHPUT)


def _samples(rng: np.random.Generator, level: float, noise: float, n: int) -> tuple[float, ...]:
    return tuple(float(x) for x in level * rng.lognormal(0.0, noise, n))


def _pair(bench: Benchmark, shift: float, *, noise: float = 0.01, n: int = 10, seed: int = 1,
          level: float = 2e-5) -> tuple[Result, Result]:
    rng = np.random.default_rng(seed)
    base = Result(bench, "base0000", "h200", _samples(rng, level, noise, n))
    head = Result(bench, "head1111", "h200", _samples(rng, level * shift, noise, n))
    return base, head


def _one(bench: Benchmark, shift: float, **kw) -> Verdict:
    b, h = _pair(bench, shift, **kw)
    (v,) = compare([b], [h])
    return v


@pytest.mark.parametrize(
    ("bench", "shift", "expected"),
    [
        pytest.param(LAT, 1.10, Outcome.REGRESSED, id="latency-up10pct-regressed"),
        pytest.param(LAT, 0.90, Outcome.IMPROVED, id="latency-down10pct-improved"),
        pytest.param(TPUT, 0.90, Outcome.REGRESSED, id="throughput-down10pct-regressed"),
        pytest.param(TPUT, 1.10, Outcome.IMPROVED, id="throughput-up10pct-improved"),
        pytest.param(LAT, 1.00, Outcome.UNCHANGED, id="latency-aa-unchanged"),
    ],
)
def test_outcome_is_direction_aware(bench: Benchmark, shift: float, expected: Outcome) -> None:
    v = _one(bench, shift)
    assert v.outcome == expected, v.reason
    assert v.ratio == pytest.approx(v.head_value / v.base_value)
    assert v.ci_low <= v.ratio <= v.ci_high
    assert (v.base_sha, v.head_sha) == ("base0000", "head1111")


def test_regression_fields_are_consistent() -> None:
    v = _one(LAT, 1.10)
    assert 1.05 < v.ratio < 1.15
    assert v.ci_low > 1.0
    assert v.p_value < 0.01
    assert v.threshold == pytest.approx(0.025)  # 1 % noise: the 2.5 % floor applies
    assert "significant" in v.reason


def test_threshold_adapts_to_noise() -> None:
    """A 5 % change is a regression on a quiet series but not on one with ~10 % noise."""
    quiet = _one(LAT, 1.05, noise=0.01, n=20)
    noisy = _one(LAT, 1.05, noise=0.10, n=20, seed=3)
    assert quiet.outcome == Outcome.REGRESSED
    assert noisy.threshold > 0.1 > 0.05 > quiet.threshold
    assert noisy.outcome in (Outcome.INCONCLUSIVE, Outcome.UNCHANGED), noisy.reason


def test_threshold_floor_and_cap() -> None:
    s = VerdictSettings(floor=0.05, max_threshold=0.3)
    b, h = _pair(LAT, 1.04)
    (v,) = compare([b], [h], settings=s)
    assert v.threshold == pytest.approx(0.05)
    assert v.outcome != Outcome.REGRESSED  # a significant 4 % is below the 5 % floor
    b, h = _pair(LAT, 1.0, noise=0.5, n=20)
    (v,) = compare([b], [h], settings=s)
    assert v.threshold == pytest.approx(0.3)


def test_override_floor_by_regex() -> None:
    """As asv matches `regressions_thresholds`: re.match on `name(params)`, the largest match wins."""
    s = VerdictSettings(overrides=((r".*GPUTime", 0.15), (r".*time_gpu", 0.08), (r"GPUTime", 0.5)))
    assert s.floor_for(LAT.key) == 0.15  # the largest matching floor wins; "GPUTime" is not at the start
    assert s.floor_for(TPUT.key) == s.floor
    b, h = _pair(LAT, 1.10)
    (v,) = compare([b], [h], settings=s)
    assert v.outcome != Outcome.REGRESSED and v.threshold == pytest.approx(0.15)


def test_large_change_without_significance_is_inconclusive() -> None:
    """Three samples per side cannot reach significance: ask for more samples instead of guessing."""
    v = _one(LAT, 1.30, n=3)
    assert v.outcome == Outcome.INCONCLUSIVE
    assert "more samples" in v.reason
    w = _one(LAT, 1.001, n=3, noise=0.001)
    assert w.outcome == Outcome.UNCHANGED


def test_straddling_interval_is_inconclusive() -> None:
    """A change near the threshold on few samples: interval crosses the band edge."""
    outcomes = set()
    for seed in range(30):
        rng = np.random.default_rng(seed)
        b = Result(LAT, "a", "m", _samples(rng, 1.0, 0.03, 6))
        h = Result(LAT, "b", "m", _samples(rng, 1.05, 0.03, 6))
        (v,) = compare([b], [h])
        outcomes.add(v.outcome)
        if v.outcome == Outcome.INCONCLUSIVE:
            # Either the interval reaches past the regression edge, or the change is large but unconfirmed.
            assert v.ci_high > 1 + v.threshold or "not significant" in v.reason, v.reason
        elif v.outcome == Outcome.UNCHANGED:
            assert v.ci_high <= 1 + v.threshold
    assert Outcome.INCONCLUSIVE in outcomes


@pytest.mark.slow
def test_aa_false_alarms_are_rare_across_a_suite() -> None:
    """200 identical series (a whole PR, 20 samples a side as the GPU suite records): no alarm."""
    rng = np.random.default_rng(11)
    keys = [Benchmark(f"s.B.time_{i}") for i in range(200)]
    base = [Result(k, "a", "m", _samples(rng, 1e-5, 0.015, 20)) for k in keys]
    head = [Result(k, "b", "m", _samples(rng, 1e-5, 0.015, 20)) for k in keys]
    verdicts = compare(base, head)
    counts = summarize(verdicts)
    assert counts[Outcome.REGRESSED] + counts[Outcome.IMPROVED] == 0
    assert counts[Outcome.INCONCLUSIVE] <= 16  # ~3 % expected at n=20 (docs/performance.md "Verdict quality")
    assert exit_code(verdicts) == 0


@pytest.mark.slow
def test_correction_changes_p_values() -> None:
    rng = np.random.default_rng(5)
    keys = [Benchmark(f"s.B.time_{i}") for i in range(50)]
    base = [Result(k, "a", "m", _samples(rng, 1.0, 0.01, 10)) for k in keys]
    head = [Result(k, "b", "m", _samples(rng, 1.2 if i == 0 else 1.0, 0.01, 10)) for i, k in enumerate(keys)]
    raw = compare(base, head, settings=VerdictSettings(correction="none"))
    for method in ("bh", "holm", "bonferroni"):
        adj = compare(base, head, settings=VerdictSettings(correction=method))
        assert all(a.p_value >= r.p_value - 1e-15 for a, r in zip(adj, raw, strict=True))
        assert adj[0].outcome == Outcome.REGRESSED
    bonf = compare(base, head, settings=VerdictSettings(correction="bonferroni"))
    assert bonf[0].p_value == pytest.approx(min(1.0, raw[0].p_value * 50))


def test_one_sided_series_are_reported() -> None:
    b, h = _pair(LAT, 1.0)
    new = Result(TPUT, "head1111", "h200", (1.0, 2.0))
    verdicts = compare([b], [h, new])
    assert [v.benchmark.key for v in verdicts] == sorted([LAT.key, TPUT.key])
    (v_new,) = [v for v in verdicts if v.benchmark == TPUT]
    assert v_new.outcome == Outcome.UNCHANGED and "new series" in v_new.reason
    gone = compare([b, Result(TPUT, "base0000", "h200", (1.0, 2.0))], [h])
    (v_gone,) = [v for v in gone if v.benchmark == TPUT]
    assert v_gone.outcome == Outcome.INCONCLUSIVE and "missing on head" in v_gone.reason
    assert math.isnan(v_gone.head_value)


def test_failed_side_and_nonpositive_values() -> None:
    """A series that ran on base and crashed on head (a sample-less result) fails: the head broke
    it. One that crashed on both sides did not run on head either: it fails too (a benchmark a PR added
    that crashes is run on base as well, by asv, and passed as "not compared" before 2026-12-07); one
    new on head that crashed fails."""
    b, _ = _pair(LAT, 1.0)
    crashed = Result(LAT, "h", "h200", ())
    (v,) = compare([b], [crashed])
    assert v.outcome == Outcome.FAILED and "failed to run on head" in v.reason
    assert exit_code([v]) == 1
    (v,) = compare([Result(LAT, "a", "h200", ())], [crashed])
    assert v.outcome == Outcome.FAILED and v.reason.startswith("failed to run on head, and on base")
    assert exit_code([v]) == 1
    (v,) = compare([], [crashed])
    assert v.outcome == Outcome.FAILED and "failed to run on head" in v.reason
    (v,) = compare([Result(LAT, "a", "h200", ())], [Result(LAT, "h", "h200", (1.0,) * 10)])
    assert v.outcome == Outcome.INCONCLUSIVE and "base has no finite samples" in v.reason
    zero = Result(LAT, "a", "h200", (0.0,) * 10)
    (v,) = compare([zero], [Result(LAT, "b", "h200", (1.0,) * 10)])
    assert v.outcome == Outcome.REGRESSED and "the change is exact" in v.reason and math.isnan(v.ratio)


COUNT = Benchmark("bench_io.Counts.track_warnings", (), unit="unit")
SIGNED = Benchmark("bench_io.Drift.track_offset", (), unit="unit", direction=Direction.UNKNOWN)


@pytest.mark.parametrize(
    "base, head, cross, outcome, words",
    [
        ((0.0,) * 4, (5.0,) * 4, False, Outcome.REGRESSED, "the change is exact"),
        ((0.0,) * 4, (5.0,) * 4, True, Outcome.REGRESSED, "the change is exact"),  # a counter does not drift
        ((5.0,) * 4, (0.0,) * 4, False, Outcome.IMPROVED, "the change is exact"),
        ((0.0,) * 4, (0.0,) * 4, True, Outcome.UNCHANGED, "the change is exact"),
        ((0.0,), (5.0,), True, Outcome.REGRESSED, "changed by asv compare's rule"),  # as `asv compare` reads it
        ((0.0,), (0.0,), False, Outcome.UNCHANGED, "no change by asv compare's rule"),
        ((3.0,), (0.0,), False, Outcome.IMPROVED, "changed by asv compare's rule"),
        ((-3.0,), (-2.0,), False, Outcome.INCONCLUSIVE, "negative values, which no factor can judge"),
    ],
    ids=["0-to-5", "0-to-5-across-jobs", "5-to-0", "0-to-0", "one-value-0-to-5", "one-value-0-to-0", "one-value-3-to-0",
         "one-value-negative"],
)
def test_series_at_zero_are_judged_by_their_difference(base, head, cross, outcome, words) -> None:
    """A count that starts at 0 has no ratio: its difference is judged, exactly where every sample of a side
    is one value, by asv compare's rule for single values (0 -> 5 is worse, as asv says), never a silent
    "inconclusive" that hides a new warning."""
    (v,) = compare([Result(COUNT, "a", "m", base)], [Result(COUNT, "b", "m", head)],
                   between_jobs={COUNT.key: 0.01} if cross else None)
    assert v.outcome == outcome and words in v.reason and "no ratio" in v.reason, v.reason
    assert math.isnan(v.ratio) and v.base_value == float(np.median(base))
    if not cross:
        return
    (v,) = compare([Result(COUNT, "a", "m", base)], [Result(COUNT, "b", "m", head)], between_jobs={})
    exact = len(base) >= 2
    assert (v.outcome == outcome) if exact else (v.reason == WITHHELD_OTHER_JOB), v.reason


def test_noisy_series_through_zero_need_a_significant_difference_past_the_bases_spread() -> None:
    """Samples around zero (a signed offset): an A/A pair is never called changed; a shift of five base
    sigmas is, in one job (REGRESSED for lower-is-better, reported not judged for an unknown direction);
    across jobs it is an unconfirmed slowdown, since the history's allowance is relative."""
    rng = np.random.default_rng(11)
    calls = []
    for seed in range(40):
        r = np.random.default_rng(seed)
        a, b = tuple(r.normal(0, 1, 10)), tuple(r.normal(0, 1, 10))
        (v,) = compare([Result(COUNT, "a", "m", a)], [Result(COUNT, "b", "m", b)])
        calls.append(v.outcome)
    assert Outcome.REGRESSED not in calls and Outcome.IMPROVED not in calls
    assert calls.count(Outcome.UNCHANGED) >= 30, calls
    base, head = tuple(rng.normal(0, 1, 12)), tuple(rng.normal(5, 1, 12))
    (v,) = compare([Result(COUNT, "a", "m", base)], [Result(COUNT, "b", "m", head)])
    assert v.outcome == Outcome.REGRESSED and "past the allowance and significant" in v.reason, v.reason
    (v,) = compare([Result(SIGNED, "a", "m", base)], [Result(SIGNED, "b", "m", head)])
    assert v.outcome == Outcome.INCONCLUSIVE and "past the allowance and significant" in v.reason, v.reason
    (v,) = compare([Result(COUNT, "a", "m", base)], [Result(COUNT, "b", "m", head)], between_jobs={COUNT.key: 0.01})
    assert v.outcome == Outcome.INCONCLUSIVE and v.reason.startswith("unconfirmed slowdown"), v.reason


def test_noise_of_1e160_times_the_median_is_judged_not_an_overflow() -> None:
    """Squaring a relative sigma of ~1e160 (an IQR of 1e100 around a median of 1e-60, values an ingest
    accepts) raised OverflowError; such a series gets a capped threshold and a verdict."""
    wild = (1e-60, 1e100, 1e-60, 2e100, 1e-60, 1e-60) * 2
    (v,) = compare([Result(LAT, "a", "m", wild)], [Result(LAT, "b", "m", (1e-60,) * 12)])
    assert v.outcome in (Outcome.UNCHANGED, Outcome.INCONCLUSIVE) and v.threshold == VerdictSettings().max_threshold
    (v,) = compare([Result(LAT, "a", "m", (1e-200, 2e-200, 3e-200, 1e100, 2e100) * 2)],
                   [Result(LAT, "b", "m", (1e100,) * 10)])
    assert math.isfinite(v.ratio) and v.ci_high > 1e200


def test_pooled_samples_from_several_results() -> None:
    rng = np.random.default_rng(2)
    base = [Result(LAT, "a", "m", _samples(rng, 1.0, 0.01, 3)) for _ in range(4)]
    head = [Result(LAT, "b", "m", _samples(rng, 1.1, 0.01, 3)) for _ in range(4)]
    (v,) = compare(base, head)
    assert v.outcome == Outcome.REGRESSED  # 12 pooled samples a side are enough; 3 would not be


def test_identical_constant_samples() -> None:
    (v,) = compare([Result(LAT, "a", "m", (2.0,) * 8)], [Result(LAT, "b", "m", (2.0,) * 8)])
    assert v.outcome == Outcome.UNCHANGED and v.ratio == 1.0 and v.ci_low == v.ci_high == 1.0


def test_correctness_series_go_through_the_gates() -> None:
    diff = Benchmark("bench_correct.Logits.track_max_abs_diff", unit="max abs diff",
                     kind=Kind.CORRECTNESS)
    b, h = _pair(LAT, 1.0)
    verdicts = compare([b, Result(diff, "a", "h200", (0.001,))], [h, Result(diff, "b", "h200", (0.005,))])
    (gate,) = [v for v in verdicts if v.benchmark == diff]
    assert gate.outcome == Outcome.FAILED
    assert exit_code(verdicts) == 1


def test_a_correctness_check_that_stopped_running_fails() -> None:
    """Measured on base, absent on head (skipped, removed, renamed): not a pass."""
    diff = Benchmark("bench_correct.Logits.track_max_abs_diff", unit="max abs diff", kind=Kind.CORRECTNESS)
    b, h = _pair(LAT, 1.0)
    verdicts = compare([b, Result(diff, "a", "h200", (0.001,))], [h])
    (gate,) = [v for v in verdicts if v.benchmark == diff]
    assert gate.outcome == Outcome.FAILED and "a check that did not run is not a pass" in gate.reason
    assert exit_code(verdicts) == 1


def test_summarize_and_exit_code() -> None:
    mk = lambda o: Verdict(benchmark=LAT, outcome=o, base_value=1.0, head_value=1.0, ratio=1.0)
    counts = summarize([mk(Outcome.UNCHANGED), mk(Outcome.UNCHANGED), mk(Outcome.INCONCLUSIVE)])
    assert counts == {Outcome.REGRESSED: 0, Outcome.IMPROVED: 0, Outcome.UNCHANGED: 2, Outcome.INCONCLUSIVE: 1,
                      Outcome.FAILED: 0, Outcome.CHANGED: 0}
    assert exit_code([mk(Outcome.CHANGED)]) == 0  # an exact series that moved: reported, not a failure
    assert exit_code([mk(Outcome.IMPROVED), mk(Outcome.INCONCLUSIVE)]) == 0
    assert exit_code([mk(Outcome.UNCHANGED), mk(Outcome.REGRESSED)]) == 1
    assert exit_code([mk(Outcome.FAILED)]) == 1
    assert exit_code([]) == 0
    with pytest.raises(TypeError, match="Verdict"):
        summarize(["regressed"])  # type: ignore[list-item]


def test_verdicts_are_reproducible() -> None:
    b, h = _pair(LAT, 1.03, noise=0.02)
    assert compare([b], [h]) == compare([b], [h])


def test_bad_inputs() -> None:
    b, h = _pair(LAT, 1.0)
    with pytest.raises(TypeError, match="base must be a sequence"):
        compare(b, [h])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="only Result"):
        compare([b], [h, 3.0])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="same machine"):
        compare([b], [Result(LAT, "h", "other-gpu", h.samples)])
    assert compare([b], [Result(LAT, "h", "other-gpu", h.samples)],
                   settings=VerdictSettings(allow_cross_machine=True))
    with pytest.raises(ValueError, match="several commits"):
        compare([b, Result(LAT, "zzz", "h200", b.samples)], [h])
    with pytest.raises(TypeError, match="VerdictSettings"):
        compare([b], [h], settings={"alpha": 0.1})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"alpha": 0.0}, "alpha"),
        ({"alpha": 1.5}, "alpha"),
        ({"correction": "fdr"}, "correction"),
        ({"floor": -0.1}, "floor"),
        ({"noise_k": -1}, "noise_k"),
        ({"floor": 0.2, "max_threshold": 0.1}, "max_threshold"),
        ({"confidence": 1.0}, "confidence"),
        ({"n_resamples": 10}, "n_resamples"),
        ({"min_samples": 1}, "min_samples"),
        ({"overrides": (("(", 0.1),)}, "bad regex"),
        ({"overrides": (("x", 200.0),)}, "floor for"),
    ],
    ids=lambda x: str(x) if isinstance(x, str) else None,
)
def test_settings_validation(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        VerdictSettings(**kwargs)


def test_a_threshold_pattern_that_backtracks_is_an_error_not_a_hang() -> None:
    """A `regressions_thresholds` pattern is matched with a time limit: one that backtracks without
    end on a series name is a ValueError naming it, within a fraction of a second; the pattern that
    held compare at 100% CPU under `re` ("(.*.*)*X") matches nothing at once."""
    import time

    t0 = time.monotonic()
    with pytest.raises(ValueError, match="catastrophic backtracking"):
        VerdictSettings.from_thresholds({"(a|a)*$": 0.1}).floor_for("a" * 40 + "!")
    assert VerdictSettings.from_thresholds({"(.*.*)*X": 0.1}).floor_for("bench_io." * 20) == VerdictSettings().floor
    assert VerdictSettings.from_thresholds({"bench_io": 0.1}).floor_for("bench_io.Copy.time_copy") == 0.1
    assert time.monotonic() - t0 < 5


def test_settings_override_must_be_pairs() -> None:
    with pytest.raises(TypeError, match="pairs"):
        VerdictSettings(overrides=("GPUTime",))  # type: ignore[arg-type]


def test_verdicts_carry_their_machine() -> None:
    # Several runners share one history: a verdict must say which machine it judged, or two
    # machines' verdicts for one (series, base, head) overwrite each other in the store.
    b, h = _pair(LAT, 1.10)
    diff = Benchmark("bench_correct.Logits.track_max_abs_diff", unit="max abs diff", kind=Kind.CORRECTNESS)
    new = Result(TPUT, "head1111", "h200", (1.0, 2.0))
    gone = Result(Benchmark("b.gone"), "base0000", "h200", (1.0, 2.0))
    verdicts = compare([b, gone], [h, new, Result(diff, "head1111", "h200", (0.001,))])
    assert len(verdicts) == 4
    assert {v.machine for v in verdicts} == {"h200"}
    few = compare([Result(LAT, "a", "m2", (1.0,))], [Result(LAT, "b", "m2", (1.0,))])  # an early verdict
    assert few[0].machine == "m2"
    cross = compare([Result(LAT, "a", "m1", (1.0,) * 8)], [Result(LAT, "b", "m2", (1.0,) * 8)],
                    settings=VerdictSettings(allow_cross_machine=True))
    assert cross[0].machine == "m2"  # the head's machine: that is the series the verdict is about
    assert Verdict(benchmark=LAT, outcome=Outcome.UNCHANGED, base_value=1.0, head_value=1.0,
                   ratio=1.0).machine == ""  # "" by default: a verdict stored before verdicts had a machine
    with pytest.raises(TypeError):  # keyword-only: 13 fields are too many to read by position
        Verdict(LAT, Outcome.UNCHANGED, 1.0, 1.0, 1.0)  # type: ignore[misc]


def test_a_changed_benchmark_version_is_not_compared() -> None:
    """asv's `version` changes with the benchmark's code: base and head then measure different things."""
    from dataclasses import replace

    b, h = _pair(LAT, 1.5)
    (v,) = compare([replace(b, benchmark_version="v1")], [replace(h, benchmark_version="v2")])
    assert v.outcome == Outcome.INCONCLUSIVE and "version changed (v1 -> v2)" in v.reason
    (same,) = compare([replace(b, benchmark_version="v2")], [replace(h, benchmark_version="v2")])
    assert same.outcome == Outcome.REGRESSED
    (unknown,) = compare([b], [replace(h, benchmark_version="v2")])  # an unknown version is not a change
    assert unknown.outcome == Outcome.REGRESSED


def test_the_built_in_settings_carry_no_projects_floor_and_ours_live_in_its_asv_conf():
    """One threshold table, the project's own: `VerdictSettings()` has no per-series override, and this
    project's CPU floor comes from its asv.conf.json's `regressions_thresholds` (read by `asv publish`
    too), through `ci.project.project_settings` as every deciding command takes it."""
    from pathlib import Path

    from ci.project import project_settings

    assert VerdictSettings().overrides == ()
    assert VerdictSettings().floor_for("bench_pack.PackTokensCPU.time_host") == VerdictSettings().floor
    ours = project_settings(config=Path(__file__).resolve().parents[2] / "asv.conf.json").verdicts
    assert ours.floor == 0.025 and ours.floor_for("bench_pack.PackTokensCPU.time_host(preset=tiny)") == 4.0
    assert ours.floor_for(LAT.key) == 0.025
    assert ours.as_thresholds() == {".*": 0.025, r".*CPU\.": 4.0}
    s = VerdictSettings.from_thresholds({".*": 0.05, r".*GPUTime": 0.2}, noise_k=2.0)
    assert (s.floor, s.overrides, s.noise_k) == (0.05, ((r".*GPUTime", 0.2),), 2.0)
    assert VerdictSettings.from_thresholds({}) == VerdictSettings()
    with pytest.raises(ValueError, match="must map to a number"):
        VerdictSettings.from_thresholds({".*": "5%"})
    with pytest.raises(TypeError, match="regressions_thresholds"):
        VerdictSettings.from_thresholds([0.05])  # type: ignore[arg-type]


@pytest.mark.parametrize("thresholds", [
    pytest.param({".*": 0.05, "bench_a": 0.01, "bench_b": 0.3}, id="dotstar-raises-a-lower-entry"),
    pytest.param({"bench_a": 0.01}, id="no-dotstar"),
    pytest.param({".*": 0.4, "bench_a.T": 0.6}, id="dotstar-past-the-noise-cap"),
    pytest.param({".*": 1.5, "bench_b": 0.2}, id="dotstar-of-150pct"),
    pytest.param({"bench_.*": 0.1, "bench_a": 0.07, ".*": 0.08}, id="several-match"),
])
def test_a_series_floor_is_the_one_asv_publish_takes(thresholds):
    """asv's rule (`asv.plugins.regressions.Regressions._get_threshold`): the largest threshold of every
    entry whose regex matches the series' start, `".*"` included; the built-in floor where none
    matches (asv's own default there is 5%)."""
    import re

    s = VerdictSettings.from_thresholds(thresholds)
    for key in ("bench_a.T.time_x(n=1)", "bench_b.T.time_y", "other.T.time_z"):
        matched = [v for pattern, v in thresholds.items() if re.match(pattern, key)]
        assert s.floor_for(key) == (max(matched) if matched else VerdictSettings().floor), key


def test_a_cpu_series_is_called_only_past_a_fifth_or_five_times():
    """The CPU floor (this project's asv.conf.json: `.*CPU\\.` 4.0) is not capped by max_threshold (it
    used to be: 25% whatever the override said)."""
    settings = VerdictSettings.from_thresholds({".*": 0.025, r".*CPU\.": 4.0})
    cpu = Benchmark("bench_pack.PackTokensCPU.time_host", (("preset", "tiny"),))
    for shift in (1.4, 0.517, 0.353):  # tight samples, p tiny: what CPU noise did between processes (make demo)
        b, h = _pair(cpu, shift, noise=0.01)
        (v,) = compare([b], [h], settings=settings)
        assert v.threshold == pytest.approx(4.0) and v.outcome == Outcome.UNCHANGED, v.reason
    b, h = _pair(cpu, 6.0, noise=0.01)
    (v,) = compare([b], [h], settings=settings)
    assert v.outcome == Outcome.REGRESSED


def _interleaved(a: tuple[float, ...], b: tuple[float, ...]) -> tuple[float, ...]:
    """Two modes sample by sample, as a bimodal benchmark records them within each process."""
    return tuple(x for pair in zip(a, b, strict=True) for x in pair)


def test_a_regression_that_adds_noise_is_still_a_regression() -> None:
    """A bimodal head (half its samples 45 % slower, both modes in each process): pooling the head's
    spread into the threshold made it "inconclusive" (its IQR raised the bar to the 25 % cap). The
    allowance comes from the base side only."""
    rng = np.random.default_rng(4)
    base = Result(LAT, "a", "m", _samples(rng, 1.0, 0.01, 20))
    head = Result(LAT, "b", "m", _interleaved(_samples(rng, 1.0, 0.01, 10), _samples(rng, 1.45, 0.01, 10)))
    (v,) = compare([base], [head])
    assert v.outcome == Outcome.REGRESSED, v.reason
    assert v.threshold == pytest.approx(0.025)


def test_a_slower_tail_with_the_median_unchanged_is_a_regression() -> None:
    """n = 100: a third of the head's samples 90 % slower moves the mean by +30 % and the 90th
    percentile by +90 % at p ~ 1e-6, while the median stays within 1 %: it read "unchanged" (the
    interval of the median ruled out a regression). The slow samples come all through the run."""
    rng = np.random.default_rng(8)
    base = Result(LAT, "a", "m", _samples(rng, 1.0, 0.01, 100))
    head = Result(LAT, "b", "m", tuple(rng.permutation(_samples(rng, 1.0, 0.01, 67) + _samples(rng, 1.9, 0.01, 33))))
    (v,) = compare([base], [head])
    assert abs(v.ratio - 1) < 0.025 and v.p_value < 1e-4
    assert v.outcome == Outcome.REGRESSED, v.reason
    assert "upper quartile" in v.reason
    # Higher is better: the slow tail is the low side (the 10th percentile).
    base = Result(TPUT, "a", "m", _samples(rng, 1.0, 0.01, 100))
    head = Result(TPUT, "b", "m", tuple(rng.permutation(_samples(rng, 1.0, 0.01, 67) + _samples(rng, 0.5, 0.01, 33))))
    (v,) = compare([base], [head])
    assert v.outcome == Outcome.REGRESSED, v.reason


def test_a_change_only_one_process_of_a_side_shows_is_unconfirmed() -> None:
    """asv appends its rounds' samples in order, one process each: a head whose second half is 75 %
    slower while its first half matches the base is a burst of load in one process as likely as the
    code (a loaded 2-core box read the same code as a significant 1.76x in 4 of ~10 runs,
    2026-12-07). It is an unconfirmed slowdown, not a regression; a change that every half of head
    shows against every half of base stays one, and so does a slower tail spread through the run."""
    rng = np.random.default_rng(11)
    base = Result(LAT, "a", "m", _samples(rng, 1.0, 0.02, 10))
    burst = Result(LAT, "b", "m", _samples(rng, 1.0, 0.02, 5) + _samples(rng, 1.75, 0.02, 5))
    (v,) = compare([base], [burst])
    assert v.outcome == Outcome.INCONCLUSIVE and v.reason.startswith("unconfirmed slowdown"), v.reason
    assert "head's two halves differ by +7" in v.reason and "separate processes" in v.reason
    # The same samples interleaved: a bimodal head in each process, judged as before.
    mixed = Result(LAT, "b", "m", _interleaved(burst.samples[:5], burst.samples[5:]))
    (v,) = compare([base], [mixed])
    assert v.outcome == Outcome.REGRESSED, v.reason
    # Both processes of head slower than both of base, though their halves differ: a regression.
    both = Result(LAT, "b", "m", _samples(rng, 1.5, 0.02, 5) + _samples(rng, 2.2, 0.02, 5))
    (v,) = compare([base], [both])
    assert v.outcome == Outcome.REGRESSED, v.reason
    # A burst in one process of the base reads as a speed-up of the head: unconfirmed as well.
    slow_base = Result(LAT, "a", "m", _samples(rng, 1.0, 0.02, 5) + _samples(rng, 1.75, 0.02, 5))
    head = Result(LAT, "b", "m", _samples(rng, 1.0, 0.02, 10))
    (v,) = compare([slow_base], [head])
    assert v.outcome == Outcome.INCONCLUSIVE and "base's two halves differ" in v.reason, v.reason
    # A slower tail from one process (the median within the threshold): unconfirmed, not a regression.
    base = Result(LAT, "a", "m", _samples(rng, 1.0, 0.01, 100))
    tail = Result(LAT, "b", "m", _samples(rng, 1.0, 0.01, 67) + _samples(rng, 1.9, 0.01, 33))
    (v,) = compare([base], [tail])
    assert v.outcome == Outcome.INCONCLUSIVE and v.reason.startswith("unconfirmed slowdown"), v.reason
    assert "halves differ" in v.reason


def test_a_slower_tail_across_jobs_is_an_unconfirmed_slowdown() -> None:
    """Across jobs the history's allowance covers medians, not tails: a slower tail is listed as an
    unconfirmed slowdown (INCONCLUSIVE, worded so), never "unchanged"."""
    rng = np.random.default_rng(8)
    base = Result(LAT, "a", "m", _samples(rng, 1.0, 0.01, 100))
    head = Result(LAT, "b", "m", _samples(rng, 1.0, 0.01, 67) + _samples(rng, 1.9, 0.01, 33))
    (v,) = compare([base], [head], between_jobs={LAT.key: 0.005})
    assert v.outcome == Outcome.INCONCLUSIVE and v.reason.startswith("unconfirmed slowdown"), v.reason


def test_a_head_significantly_wider_than_its_base_does_not_raise_its_threshold() -> None:
    """The base's noise is pooled with the head's only where the two spreads are one noise: a head
    four times wider (Brown-Forsythe p < 0.002) keeps the base's threshold."""
    rng = np.random.default_rng(6)
    base = Result(LAT, "a", "m", _samples(rng, 1.0, 0.03, 20))
    same = Result(LAT, "b", "m", _samples(rng, 1.0, 0.03, 20))
    wide = Result(LAT, "b", "m", _samples(rng, 1.0, 0.12, 20))
    (pooled,) = compare([base], [same])
    (kept,) = compare([base], [wide])
    b = np.array(base.samples)
    q25, med, q75 = np.percentile(b, [25, 50, 75])
    assert kept.threshold == pytest.approx(1.5 * (q75 - q25) / 1.349 / med)
    assert pooled.threshold != kept.threshold


def _one_value(bench: Benchmark, sha: str, value: float, half_width: float, repeat: float = 10.0) -> Result:
    """A point asv recorded without raw samples: its value and its statistics (99 % interval of the
    median, quartiles, number, repeat), as the store reads it back."""
    stats = (value * (1 - half_width), value * (1 + half_width), value * (1 - half_width / 3),
             value * (1 + half_width / 3), 1.0, repeat)
    return Result(bench, sha, "h200", (value,), stats=stats)


@pytest.mark.parametrize(("shift", "half_width", "expected"), [
    pytest.param(1.15, 0.02, Outcome.REGRESSED, id="plus15-intervals-apart-regressed"),
    pytest.param(1 / 1.15, 0.02, Outcome.IMPROVED, id="minus13-intervals-apart-improved"),
    pytest.param(1.15, 0.10, Outcome.INCONCLUSIVE, id="plus15-intervals-overlap-inconclusive"),
    pytest.param(1.01, 0.02, Outcome.UNCHANGED, id="plus1-unchanged"),
])
def test_points_without_raw_samples_are_judged_by_asvs_statistics(shift, half_width, expected) -> None:
    """One value a side (asv without --record-samples): asv compare's rule (the factor, then its 99 %
    intervals must not overlap) with the factor 1 + threshold. They were never tested (5 raw samples
    needed): a +15 % step read "inconclusive"."""
    base = _one_value(LAT, "a", 2e-5, half_width)
    head = _one_value(LAT, "b", 2e-5 * shift, half_width)
    (v,) = compare([base], [head])
    assert v.outcome == expected, v.reason
    assert v.ratio == pytest.approx(shift)
    if expected != Outcome.INCONCLUSIVE:
        assert v.ci_low <= v.ratio <= v.ci_high
    # asv's `repeat == 1`: no statistics, the factor alone (asv's rule), so the overlap no longer matters.
    (once,) = compare([_one_value(LAT, "a", 2e-5, 0.10, 1.0)], [_one_value(LAT, "b", 2e-5 * 1.15, 0.10, 1.0)])
    assert once.outcome == Outcome.REGRESSED, once.reason
    # An interval reaching below zero (asv's of 2 repeats): no ratio interval, not [-1.765, 15.892].
    (wide,) = compare([_one_value(LAT, "a", 2e-5, 0.5, 2.0)], [_one_value(LAT, "b", 2e-5 * 6.7, 1.4, 2.0)])
    assert math.isnan(wide.ci_low) and math.isnan(wide.ci_high), (wide.ci_low, wide.ci_high)


def test_a_point_without_raw_samples_shows_asvs_repeats_and_quartiles() -> None:
    """One value a side: the comment's spread is asv's recorded quartiles and its `repeat` count, not
    "n=1" with no spread; raw samples, several points a side, a point asv measured once (`repeat` 1)
    or quartiles that do not hold the value keep the samples' own spread."""
    from ci.verdicts import spreads
    from ci.verdicts.ab import side_spread

    point = _one_value(LAT, "a", 2e-5, 0.03, repeat=5.0)
    got = side_spread([point])
    assert got is not None and (got.median, got.q25, got.q75, got.n) == (2e-5, 2e-5 * 0.99, 2e-5 * 1.01, 5)
    assert got.half_iqr == pytest.approx(0.01)
    assert spreads([point], [_one_value(LAT, "b", 3e-5, 0.03)])[("h200", LAT.key)][1].n == 10
    assert side_spread([_one_value(LAT, "a", 2e-5, 0.03, repeat=1.0)]).n == 1
    raw = Result(LAT, "a", "h200", (1.0, 2.0, 3.0))
    assert side_spread([raw]).n == 3
    two = [point, _one_value(LAT, "a", 3e-5, 0.03)]
    assert side_spread(two).n == 2  # two points: their own spread
    odd = replace(point, stats=(1.0, 2.0, 5e-5, 6e-5, 1.0, 5.0))  # quartiles above the value: not asv's
    assert side_spread([odd]).n == 1
    assert side_spread([]) is None


def test_a_threshold_is_stated_as_its_band_and_a_regression_by_its_edge() -> None:
    """The band is 1 / (1 + t) .. 1 + t: a -26% change is beyond a 30.8% threshold, and its reason
    names both edges (+30.8% / -23.5%), not one number it reads as inside; "rules out a regression"
    names the edge a regression passes: down (-7.9%) for a throughput series, up for a time."""
    from ci.verdicts.decide import regression_edge, threshold_text

    assert threshold_text(0.308) == "threshold +30.8% / -23.5%"
    assert threshold_text(0.0) == "threshold +0.0% / +0.0%"
    assert regression_edge(0.086, Direction.HIGHER) == "-7.9%" and regression_edge(0.086, Direction.LOWER) == "+8.6%"
    v = _one(LAT, 0.739)
    assert v.outcome == Outcome.IMPROVED and "% beyond the threshold" in v.reason and "/ -2.4%" in v.reason, v.reason
    point = _one_value(LAT, "a", 2e-5, 0.01)
    (one,) = compare([point], [_one_value(LAT, "b", 2e-5 * 0.739, 0.01)])
    assert one.outcome == Outcome.IMPROVED and "threshold +" in one.reason and "% / -" in one.reason, one.reason
    flat = _one(TPUT, 1.0)
    assert flat.outcome == Outcome.UNCHANGED and "rules out a regression beyond -" in flat.reason, flat.reason


def test_the_legend_names_the_rule_that_decided_the_rows() -> None:
    """Rows of one value a side are asv compare's: the legend says so (no p, asv's 99% intervals)
    instead of a bootstrap interval and a correction over 0 series tested; beside rows with raw
    samples it names both; rows judged across jobs by their size alone (one value, no statistics of
    asv's) are named as that, never as asv's rule."""
    from ci.outputs.comment import render_comment
    from ci.outputs.table import render_table
    from ci.verdicts.noise import SeriesNoise

    def legend(verdicts: list[Verdict]) -> str:
        text = render_comment(verdicts, [], base_sha="a" * 40, head_sha="b" * 40, environment={},
                              dashboard_url=None)
        return next(line for line in text.splitlines() if line.startswith("Base and head:"))

    points = ([_one_value(LAT, "a", 2e-5, 0.01)], [_one_value(LAT, "b", 2.6e-5, 0.01)])
    only = legend(compare(*points))
    assert "every series with one value a side (asv without --record-samples): asv compare's rule" in only
    assert "bootstrap" not in only and "series tested" not in only
    raw = _pair(TPUT, 1.0)
    both = legend(compare([points[0][0], raw[0]], [points[1][0], raw[1]]))
    assert "bootstrap" in both and "over the 1 series tested" in both and "1 series with one value a side" in both
    # One plain value a side, no statistics, across jobs: the history's allowance alone.
    plain = ([Result(TPUT, "a", "h200", (100.0,))], [Result(TPUT, "b", "h200", (101.0,))])
    noise = {("h200", TPUT.key): SeriesNoise(sigma=0.01, jump=0.0, jobs=40, multiplier=3.3, allowance=0.05)}
    sized = compare(*plain, between_jobs=noise)
    assert "no in-job statistics recorded" in sized[0].reason, sized[0].reason
    text = legend(sized)
    assert "every series with one value a side and no statistics of asv's" in text
    assert "bootstrap" not in text and "asv compare's rule" not in text
    table = render_table(sized)
    assert "no statistics of asv's" in table and "bootstrap" not in table
    # A row with no ratio is counted under no rule, whatever its reason quotes (a benchmark version
    # string from a result file is in a "not comparable" reason).
    from ci.outputs.groups import rule_counts

    quoted = replace(sized[0], ratio=math.nan, reason="not comparable: version asv compare's rule -> x")
    assert rule_counts([quoted]) == {"tested": 0, "asv": 0, "size": 0, "few": 0}
    # No row decided by any rule (every one withheld, failed or missing): the legend names no test.
    text = legend([quoted])
    assert "no row was decided by a rule" in text and "bootstrap" not in text and "series tested" not in text
    # The terminal table (`continuous`) says which failures crashed on base too, as the comment does.
    from ci.records import FAILED_BOTH

    crashed = replace(quoted, outcome=Outcome.FAILED, reason=FAILED_BOTH)
    assert "1 benchmark(s) failed to run on head (all of them failed on base too)" in render_table([crashed])


def test_the_comment_shows_a_difference_where_there_is_no_ratio() -> None:
    """The regressions table names the change of a series at zero (0 -> 5: "+5 (difference)"), not "n/a"."""
    from ci.outputs.comment import render_comment

    (v,) = compare([Result(COUNT, "a" * 40, "m", (0.0,))], [Result(COUNT, "b" * 40, "m", (5.0,))])
    text = render_comment([v], [], base_sha="a" * 40, head_sha="b" * 40, environment={}, dashboard_url=None)
    row = next(line for line in text.splitlines() if "track_warnings" in line)
    assert "+5 (difference)" in row and "1 regression(s)" in text


def test_an_environment_with_nothing_at_head_is_named_not_read_as_removed_benchmarks() -> None:
    """A series missing at head is "removed, renamed or skipped" only where its environment ran at head;
    where nothing of that environment (machine key) was measured, every one of its series says so, and
    the comment names the environment once above the table (a retired or failed environment read as
    36 benchmarks the head removed, 2026-12-07)."""
    from ci.outputs.comment import render_comment
    from ci.records import MISSING_MACHINE, MISSING_ON_HEAD

    b, h = _pair(LAT, 1.0)
    kept = Result(Benchmark("b.kept"), b.commit_sha, "h200", (1.0, 2.0))
    dropped = Result(Benchmark("b.dropped"), b.commit_sha, "h200", (1.0, 2.0))
    old_env = [Result(Benchmark(name), b.commit_sha, "h200 [py3.10]", (1.0, 2.0)) for name in ("b.kept", "b.other")]
    verdicts = compare([b, kept, dropped, *old_env], [h, Result(Benchmark("b.kept"), h.commit_sha, "h200", (1.0, 2.0))])
    reasons = {(v.machine, v.benchmark.key): v.reason for v in verdicts}
    assert reasons[("h200", "b.dropped")] == MISSING_ON_HEAD
    assert reasons[("h200 [py3.10]", "b.kept")] == reasons[("h200 [py3.10]", "b.other")] == MISSING_MACHINE
    assert all(v.outcome == Outcome.INCONCLUSIVE for v in verdicts if v.reason in (MISSING_ON_HEAD, MISSING_MACHINE))
    body = render_comment(verdicts, (), base_sha=b.commit_sha, head_sha=h.commit_sha, environment={},
                          dashboard_url=None)
    assert "3 not measured on head" in body
    assert body.count("Nothing of `h200 [py3.10]` (2 series) was measured at head") == 1
