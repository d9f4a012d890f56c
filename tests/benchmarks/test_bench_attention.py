"""Classes hand asv the samples their setup_cache measured, one per call, in order (benchmarks/_replay.py)."""

from __future__ import annotations

import pytest

from benchmarks import _replay, bench_attention, timing
from benchmarks.bench_attention import AttentionKernels


def _cache():
    return {
        "p|triton": {"values": {"time_gpu": [1e-6, 2e-6, 4e-6], "time_host": [1e-5] * 3, "time_latency": [3e-5] * 3}},
        "p|nested_sdpa": {"skip": "backend absent at this commit"},
        "p|fa2_varlen": {"error": "Traceback ...\nRuntimeError: boom"},
    }


def _take(cls, cache, case, measure, calls):
    seen = []
    for _ in range(calls):
        b = cls()
        b.setup(cache, *case)  # asv re-runs setup before every sample
        t0 = timing.CLOCK.now()
        getattr(b, measure)(cache, *case)
        seen.append(timing.CLOCK.now() - t0)
    return seen


def test_each_call_advances_the_clock_by_the_next_recorded_sample(monkeypatch, tmp_path):
    monkeypatch.setattr(_replay, "_CALLS", {})
    monkeypatch.chdir(tmp_path)  # not asv's setup_cache directory: chunk 0
    assert _take(AttentionKernels, _cache(), ("p", "triton"), "time_gpu", 3) == pytest.approx([1e-6, 2e-6, 4e-6])


def test_each_round_process_claims_its_own_chunk_in_the_cache_directory(monkeypatch, tmp_path):
    """`asv run` of one commit: one setup_cache, one process per round; no sample handed out twice."""
    (tmp_path / "cache.pickle").write_bytes(b"")  # what asv_runner's setup_cache leaves there
    monkeypatch.chdir(tmp_path)
    cache = {"p|triton": {"values": {"time_gpu": [float(i) for i in range(20)]}}}
    rounds = []
    for _ in range(2):  # each round: a fresh benchmark process
        monkeypatch.setattr(_replay, "_CALLS", {})
        rounds.append(_take(bench_attention.AttentionKernelsPR, cache, ("p", "triton"), "time_gpu", 10))
    assert rounds == [pytest.approx([float(i) for i in range(10)]), pytest.approx([float(i) for i in range(10, 20)])]
    # Another measure or case of the same directory has its own counter.
    monkeypatch.setattr(_replay, "_CALLS", {})
    other = {"q|triton": {"values": {"time_gpu": [float(i) for i in range(20)]}}}
    assert _take(bench_attention.AttentionKernelsPR, other, ("q", "triton"), "time_gpu", 1) == [0.0]


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
    params = (["deitb224-b8-keep0.5"], ["triton"])
    cache = _replay.measure_matrix(params, lambda: bench_attention._gpu_samples(("time_gpu",), 2))
    with pytest.raises(NotImplementedError, match="CUDA"):
        AttentionKernels().setup(cache, "deitb224-b8-keep0.5", "triton")


REPLAYED = [
    "bench_attention.AttentionKernels",
    "bench_attention.AttentionKernelsPR",
    "bench_attention.AttentionCPU",
    "bench_pack.PackTokens",
    "bench_pack.PackTokensCPU",
    "bench_end_to_end.EndToEnd",
    "bench_end_to_end.EndToEndPR",
]


def _cls(name):
    import importlib

    mod_name, cls = name.split(".")
    return getattr(importlib.import_module(f"benchmarks.{mod_name}"), cls)


@pytest.mark.parametrize("name", REPLAYED)
def test_asv_calls_the_function_exactly_once_per_sample(name):
    # An int repeat, number 1, no warm-up: asv makes no call outside the recorded samples; and
    # setup_cache is the class's own (asv keys caches on the function's source line).
    cls = _cls(name)
    assert isinstance(cls.repeat, int) and cls.number == 1 and cls.warmup_time == 0.0
    assert "setup_cache" in vars(cls)


@pytest.mark.parametrize("name", ["bench_end_to_end.EndToEnd", "bench_end_to_end.EndToEndPR"])
def test_end_to_end_hands_out_its_timed_forwards_and_tracks_its_values(monkeypatch, tmp_path, name):
    """The synced forwards as samples (so `asv continuous` and the verdicts can test a throughput
    change), peak memory as one tracked number per commit."""
    from benchmarks import bench_end_to_end

    cls = _cls(name)
    assert cls.rounds * cls.repeat <= bench_end_to_end.FORWARDS  # setup_cache takes enough samples
    monkeypatch.setattr(_replay, "_CALLS", {})
    monkeypatch.chdir(tmp_path)
    case = ("deits224-b32", "threshold_l2", "triton", "eager")
    times = [0.01 + i * 1e-4 for i in range(30)]
    cache = {"|".join(case): {"values": {"images_per_s": 3200.0, "peak_bytes": 1e9, "time_forward": times}}}
    assert _take(cls, cache, case, "time_forward", cls.repeat) == pytest.approx(times[: cls.repeat])
    b = cls()
    b.setup(cache, *case)
    assert b.track_peak_memory(cache, *case) == 1e9
    assert not hasattr(b, "track_images_per_s")  # time_forward carries it, with samples
    with pytest.raises(NotImplementedError, match="CUDA graph"):
        cls().setup(
            {"|".join(case[:3] + ("graph",)): {"skip": "padded_sdpa cannot be captured as a CUDA graph"}},
            *case[:3],
            "graph",
        )


@pytest.mark.parametrize("name", ["bench_pack.PackTokensCPU", "bench_attention.AttentionCPU"])
def test_cpu_classes_skip_without_the_interpreter(monkeypatch, name):
    """On a GPU runner (no TRITON_INTERPRET) the CPU classes skip instead of failing (they failed there on
    2026-11-29)."""
    import ragged_kernels  # noqa: F401 - imported with the suite's TRITON_INTERPRET=1: its module-level
    # switch must not be read while the variable is deleted here (later CPU tests would lose the interpreter)

    cls = _cls(name)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    cache = cls().setup_cache()
    preset = cls.params[0][0]
    op = "pack" if "Pack" in name else "triton"
    with pytest.raises(NotImplementedError, match="TRITON_INTERPRET"):
        cls().setup(cache, preset, op)


def test_more_calls_than_recorded_samples_is_an_error_not_a_repeat(monkeypatch, tmp_path):
    monkeypatch.setattr(_replay, "_CALLS", {})
    monkeypatch.chdir(tmp_path)
    cache = {"p|triton": {"values": {"time_gpu": [1.0, 2.0]}}}
    _take(bench_attention.AttentionKernelsPR, cache, ("p", "triton"), "time_gpu", 2)
    with pytest.raises(RuntimeError, match="setup_cache took 2"):
        _take(bench_attention.AttentionKernelsPR, cache, ("p", "triton"), "time_gpu", 1)


def test_quick_regex_selects_the_pr_classes_and_the_exact_tier_and_nothing_else():
    import re

    from benchmarks import QUICK_REGEX

    names = {
        "bench_attention.AttentionKernelsPR.time_gpu": True,
        "bench_attention.AttentionKernels.time_gpu": False,
        "bench_attention.AttentionCPU.time_host": False,
        "bench_pack.PackTokens.time_gpu": True,
        "bench_pack.PackTokens.time_host": False,
        "bench_pack.PackTokensCPU.time_host": False,
        "bench_correctness.KernelError.track_max_abs_error": True,
        "bench_correctness.ModelCorrectnessPR.track_max_abs_logit_diff": True,
        "bench_correctness.ModelCorrectness.track_max_abs_logit_diff": False,
        "bench_end_to_end.EndToEndPR.track_peak_memory": True,
        "bench_end_to_end.EndToEndPR.time_forward": True,
        "bench_end_to_end.EndToEnd.track_peak_memory": False,
        "bench_end_to_end.EndToEnd.time_forward": False,
        # the exact tier runs beside the timings (benchmarks.EXACT_REGEX)
        "bench_structure.Launches.track_launches": True,
        "bench_structure.KernelResources.track_spilled_bytes": True,
    }
    assert {n: bool(re.search(QUICK_REGEX, n)) for n in names} == names
