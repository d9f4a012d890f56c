"""The shared record: a benchmark's key and label are computed once, and a cached key changes
nothing about equality, hashing, repr or pickling."""

from __future__ import annotations

import dataclasses
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
