"""Correctness gates: limits, worst-sample rule, missing data, bad inputs."""

from __future__ import annotations

import math

import pytest

from ci.records import Benchmark, Direction, Kind, Outcome, Result
from ci.verdicts.gates import MAX_ABS_DIFF_LIMIT, correctness_gates

DIFF = Benchmark("bench_correct.Logits.track_max_abs_diff", (("pruner", "threshold_l2"),), unit="max abs diff",
                 kind=Kind.CORRECTNESS)
TOP1 = Benchmark("bench_correct.Logits.track_top1", (("pruner", "ats"),), unit="top-1 agreement",
                 direction=Direction.HIGHER, kind=Kind.CORRECTNESS)
LAT = Benchmark("bench_attention.GPUTime.time_gpu")


def _gate(bench: Benchmark, *samples: float):
    (v,) = correctness_gates([Result(bench, "head", "h200", samples)])
    return v


@pytest.mark.parametrize(
    ("bench", "samples", "expected"),
    [
        pytest.param(DIFF, (0.0039,), Outcome.UNCHANGED, id="diff-just-below"),
        pytest.param(DIFF, (0.004,), Outcome.FAILED, id="diff-at-limit-fails"),
        pytest.param(DIFF, (0.001, 0.002, 0.05), Outcome.FAILED, id="diff-one-bad-sample-fails"),
        pytest.param(TOP1, (1.0, 1.0), Outcome.UNCHANGED, id="top1-all-agree"),
        pytest.param(TOP1, (1.0, 0.999), Outcome.FAILED, id="top1-one-disagreement"),
        pytest.param(DIFF, (math.nan,), Outcome.FAILED, id="diff-nan-fails"),
        pytest.param(TOP1, (), Outcome.FAILED, id="top1-no-samples-fails"),
    ],
)
def test_gate_outcomes(bench: Benchmark, samples: tuple[float, ...], expected: Outcome) -> None:
    v = _gate(bench, *samples)
    assert v.outcome == expected, v.reason
    assert v.head_sha == "head"
    assert v.reason


def test_gate_uses_worst_sample_and_reports_it() -> None:
    v = _gate(DIFF, 0.001, 0.006, 0.002)
    assert v.head_value == pytest.approx(0.006)
    assert v.threshold == MAX_ABS_DIFF_LIMIT
    assert v.ratio == pytest.approx(1.5)
    assert "1 of 3 samples fail" in v.reason
    t = _gate(TOP1, 1.0, 0.98)
    assert t.head_value == pytest.approx(0.98)


def test_non_correctness_results_are_ignored_and_order_is_stable() -> None:
    results = [
        Result(TOP1, "h", "m", (1.0,)),
        Result(LAT, "h", "m", (1e-5,)),
        Result(DIFF, "h", "m", (0.01,)),
    ]
    verdicts = correctness_gates(results)
    assert [v.benchmark for v in verdicts] == sorted([DIFF, TOP1], key=lambda b: b.key)
    assert correctness_gates([Result(LAT, "h", "m", (1.0,))]) == []


def test_bad_inputs() -> None:
    odd = Benchmark("bench_correct.X.track_y", unit="percent", kind=Kind.CORRECTNESS)
    with pytest.raises(ValueError, match="unit 'percent'"):
        correctness_gates([Result(odd, "h", "m", (1.0,))])
    with pytest.raises(TypeError, match="sequence of Result"):
        correctness_gates(Result(DIFF, "h", "m", (1.0,)))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="only Result"):
        correctness_gates([{"unit": "max abs diff"}])  # type: ignore[list-item]


def test_one_verdict_per_series_failing_if_any_result_fails() -> None:
    # Two runs of one series on the head (a rerun, a second asv file, or a crashed point added as a
    # sample-less result): the store and the comment keep one verdict per series key, so a
    # per-result verdict let a later passing run hide the failure.
    results = [
        Result(DIFF, "h", "m", (0.01,)),
        Result(DIFF, "h", "m", (0.001,)),
        Result(TOP1, "h", "m", (1.0,)),
        Result(TOP1, "h", "m", ()),
    ]
    verdicts = correctness_gates(results)
    assert [v.benchmark for v in verdicts] == sorted([DIFF, TOP1], key=lambda b: b.key)
    by = {v.benchmark: v for v in verdicts}
    assert by[DIFF].outcome == Outcome.FAILED
    assert by[DIFF].head_value == pytest.approx(0.01)
    assert by[TOP1].outcome == Outcome.FAILED, by[TOP1].reason
    assert "no finite sample" in by[TOP1].reason
    passing = correctness_gates([Result(DIFF, "h", "m", (0.001,)), Result(DIFF, "h", "m", (0.002, 0.003))])
    assert len(passing) == 1 and passing[0].outcome == Outcome.UNCHANGED
    assert passing[0].head_value == pytest.approx(0.003)


def test_gates_judge_each_machine_separately() -> None:
    # One history, several runners: a failure on one machine must not be merged into (or hidden
    # by) the other machine's pass, and each verdict names its machine.
    verdicts = correctness_gates([Result(DIFF, "h", "gpu-b", (0.001,)), Result(DIFF, "h", "gpu-a", (0.01,))])
    assert [(v.machine, v.outcome) for v in verdicts] == [("gpu-a", Outcome.FAILED), ("gpu-b", Outcome.UNCHANGED)]
