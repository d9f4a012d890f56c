"""AttentionKernels hands asv the samples its setup_cache measured, one per call, in order."""

from __future__ import annotations

import pytest

from benchmarks import _timing, bench_attention
from benchmarks.bench_attention import AttentionKernels


def _cache():
    return {
        "p|triton": {"values": {"time_gpu": [1e-6, 2e-6, 4e-6], "time_host": [1e-5] * 3, "time_latency": [3e-5] * 3}},
        "p|nested_sdpa": {"skip": "backend absent at this commit"},
        "p|fa2_varlen": {"error": "Traceback ...\nRuntimeError: boom"},
    }


def test_each_call_advances_the_clock_by_the_next_recorded_sample(monkeypatch):
    monkeypatch.setattr(bench_attention, "_NEXT", {})
    cache = _cache()
    seen = []
    for _ in range(3):
        b = AttentionKernels()
        b.setup(cache, "p", "triton")  # asv re-runs setup before every sample
        t0 = _timing.CLOCK.now()
        b.time_gpu(cache, "p", "triton")
        seen.append(_timing.CLOCK.now() - t0)
    assert seen == pytest.approx([1e-6, 2e-6, 4e-6])


def test_skips_and_errors_of_the_matrix_reach_asv():
    with pytest.raises(NotImplementedError, match="absent"):
        AttentionKernels().setup(_cache(), "p", "nested_sdpa")
    with pytest.raises(RuntimeError, match="boom"):
        AttentionKernels().setup(_cache(), "p", "fa2_varlen")
    with pytest.raises(NotImplementedError, match="not measured"):
        AttentionKernels().setup(_cache(), "other", "triton")


def test_without_a_gpu_the_matrix_is_one_skip():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("has a GPU")
    cache = bench_attention.measure_matrix(["deitb224-b8-keep0.5"], ["triton"])
    with pytest.raises(NotImplementedError, match="CUDA"):
        AttentionKernels().setup(cache, "deitb224-b8-keep0.5", "triton")


def test_asv_calls_the_function_exactly_once_per_sample():
    # repeat == samples, number 1, no warm-up: no call outside the recorded samples.
    assert AttentionKernels.repeat == bench_attention.SAMPLES
    assert AttentionKernels.number == 1 and AttentionKernels.warmup_time == 0.0 and AttentionKernels.rounds == 1


@pytest.mark.parametrize("cls_name", ["bench_pack.PackTokensCPU", "bench_attention.AttentionCPU"])
def test_cpu_classes_skip_without_the_interpreter(monkeypatch, cls_name):
    """On a GPU runner (no TRITON_INTERPRET) the CPU classes skip instead of failing (device run C)."""
    import importlib

    mod_name, cls = cls_name.split(".")
    bench_cls = getattr(importlib.import_module(f"benchmarks.{mod_name}"), cls)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    preset = bench_cls.params[0][0]
    op = "pack" if mod_name == "bench_pack" else "triton"
    with pytest.raises(NotImplementedError, match="TRITON_INTERPRET"):
        bench_cls().setup(preset, op)
