"""The shared record: a benchmark's key and label are computed once, and a cached key changes
nothing about equality, hashing, repr or pickling."""

from __future__ import annotations

import dataclasses
import math
import pickle

from ci.records import Benchmark


def test_benchmark_key_is_cached_and_the_record_unchanged() -> None:
    b = Benchmark("bench_attention.K.time_gpu", (("preset", "b8"), ("backend", "triton")))
    fresh = Benchmark("bench_attention.K.time_gpu", (("preset", "b8"), ("backend", "triton")))
    assert b.key == "bench_attention.K.time_gpu(preset=b8, backend=triton)"
    assert b.key is b.key and b.params_label == "preset=b8, backend=triton"
    assert b == fresh and hash(b) == hash(fresh) and repr(b) == repr(fresh) and {b: 1}[fresh] == 1
    back = pickle.loads(pickle.dumps(b))
    assert back == b and back.key == b.key
    other = dataclasses.replace(b, params=(("preset", "b32"),))
    assert other.key == "bench_attention.K.time_gpu(preset=b32)" and Benchmark("x.y").key == "x.y"


def test_recorded_spread_is_asvs_quartiles_only_where_they_are_a_spread() -> None:
    """The spread of a point asv kept one value of: its quartiles and `repeat`, in `STAT_NAMES` order;
    nothing where the point has raw samples (None), where asv recorded no quartiles or an unordered
    pair, and no sample count where `repeat` is not a count."""
    from ci.records import STAT_NAMES, recorded_spread

    nan = math.nan
    assert STAT_NAMES[2:4] == ("q_25", "q_75") and STAT_NAMES[5] == "repeat"
    assert recorded_spread((0.9, 1.1, 0.95, 1.05, 2.0, 10.0)) == (0.95, 1.05, 10.0)
    assert recorded_spread((0.9, 1.1, 1.0, 1.0, 1.0, 1.0)) == (1.0, 1.0, 1.0)
    for bad in (None, (), (nan,) * 6, (0.9, 1.1, 1.05, 0.95, 2.0, 10.0), (0.9, 1.1, nan, 1.05, 2.0, 10.0),
                (0.9, 1.1, 0.95, math.inf, 2.0, 10.0)):
        assert all(math.isnan(x) for x in recorded_spread(bad)), bad
    for reps in (nan, 0.0, 2.5, -3.0):
        q25, q75, n = recorded_spread((0.9, 1.1, 0.95, 1.05, 2.0, reps))
        assert (q25, q75) == (0.95, 1.05) and math.isnan(n), reps


def test_asv_stats_that_do_not_hold_the_points_value_are_not_used() -> None:
    """asv's 99% interval is of the median it records (5 significant digits): a value outside it,
    beyond that rounding (a file whose value was rewritten without its statistics), leaves the point
    without asv's statistics, so asv compare's rule does not decide it on an interval of other values."""
    from ci.records import Result
    from ci.verdicts import compare
    from ci.verdicts.decide import ASV_RULE

    bench = Benchmark("suite.T.time_x", unit="seconds")

    def result(sha: str, value: float, around: float) -> Result:
        return Result(bench, sha, "m", (value,), stats=(around * 0.98, around * 1.02, around * 0.99, around * 1.01,
                                                        1.0, 10.0))

    assert result("a" * 40, 4.67e-3, 4.67e-3).asv_stats() is not None
    assert result("a" * 40, 0.029773 * 1.00003, 0.029773 / 1.02).asv_stats() is not None  # 3e-5 over: rounding
    assert result("a" * 40, 3e-3, 4.67e-3).asv_stats() is None
    base = result("a" * 40, 4.67e-3, 4.67e-3)
    (kept,) = compare([base], [result("b" * 40, 5.14e-3, 5.14e-3)])
    (dropped,) = compare([base], [result("b" * 40, 3e-3, 5.14e-3)])
    assert ASV_RULE in kept.reason and ASV_RULE not in dropped.reason, (kept.reason, dropped.reason)
