"""Ragged attention: our Triton kernel and every baseline, three measures per case.

- `time_host`: host cost per call (wall time of N back-to-back calls before the final sync, / N);
- `time_latency`: call + synchronize, wall clock;
- `time_gpu`: GPU time per call from CUDA events around a CUDA-graph replay, or the summed kernel
  time of eager calls for the baselines that cannot be captured (see `timing.GpuTimer`).

Parameters: shape preset (batch x keep ratio x geometry, `presets.ATTENTION_PRESETS`) x backend
(`ragged_kernels.ATTENTION_BACKENDS` keys; the kernel under test is "triton").

Every class takes all its samples in its `setup_cache` (one process, one CUDA context) and hands
them to asv one per call (`_replay`: why, and how rounds get distinct samples).
"""

from __future__ import annotations

from typing import Any

from . import _replay, timing
from .presets import ATTENTION_BACKENDS, ATTENTION_PRESETS, AttentionPreset


def make_qkv(torch: Any, preset: AttentionPreset, device: str, dtype: Any, seed: int) -> tuple:
    """Packed q, k, v as strided views of one fused [T, 3, H, D] buffer (as a ViT's qkv Linear makes them).

    Args:
        torch: the torch module.
        preset: shape preset.
        device: "cuda" or "cpu".
        dtype: element type.
        seed: generator seed of this input set.

    Returns:
        (q, k, v, cu_seqlens int32 [B+1] on `device`).
    """
    gen = torch.Generator(device="cpu").manual_seed(seed)
    qkv = torch.randn(preset.total_tokens, 3, preset.heads, preset.head_dim, generator=gen).to(device, dtype)
    cu = torch.tensor(preset.cu_seqlens(), dtype=torch.int32, device=device)
    return qkv[:, 0], qkv[:, 1], qkv[:, 2], cu


def _backend(name: str) -> Any:
    backends = timing.require_attr("ragged_kernels", "ATTENTION_BACKENDS")
    if name not in backends:
        raise NotImplementedError(f"attention backend {name!r} absent at this commit (have {sorted(backends)})")
    return backends[name]


class _Case:
    """Inputs, callable and GPU timer of one (preset, backend), built once per process."""

    CALLS = 20

    def __init__(self, preset_name: str, backend: str) -> None:
        torch = timing.require_cuda()
        from .gpu_env import write_for_asv_run

        write_for_asv_run()
        fn = _backend(backend)
        preset = ATTENTION_PRESETS[preset_name]
        bytes_per_set = preset.total_tokens * 3 * preset.heads * preset.head_dim * 2
        l2 = torch.cuda.get_device_properties(0).L2_cache_size
        sets = timing.rotating_sets(
            lambda i: make_qkv(torch, preset, "cuda", torch.float16, seed=i), bytes_per_set, l2
        )
        max_seqlen = preset.tokens  # any upper bound is allowed: callers never need .item()

        def call(i: int) -> Any:
            q, k, v, cu = sets[i % len(sets)]
            return fn(q, k, v, cu, max_seqlen)

        self.torch = torch
        self.call = call
        self.gpu = timing.GpuTimer(call, self.CALLS, torch)


GPU_MEASURES = ("time_gpu", "time_host", "time_latency")
# Above this latency per call a case takes fewer calls per host/latency sample (NestedTensor SDPA,
# ~4 ms; padded SDPA, ~0.4-0.8 ms, stays below).
SLOW_CALL_S = 2e-3


def _gpu_samples(measures: tuple[str, ...], samples: int) -> Any:
    """compute(preset, backend) -> {measure: [seconds] * samples} on the GPU (for `_replay.measure_matrix`)."""
    torch = timing.require_cuda()
    timing.warm_up_device(torch)

    def take(preset: str, backend: str) -> dict:
        c = _Case(preset, backend)
        sync = torch.cuda.synchronize
        # Calls per sample: fewer for the millisecond-scale baselines (NestedTensor SDPA: ~4 ms per
        # call, which at 50 + 20 calls x 20 samples x 9 presets was ~50 s of the suite), the same
        # per-call quantity either way.
        slow = timing.latency(c.call, 3, sync) > SLOW_CALL_S
        host_calls, latency_calls = (10, 5) if slow else (50, 20)
        many = {
            "time_gpu": c.gpu.measure_many,
            "time_host": lambda n: [timing.host_cost(c.call, host_calls, sync) for _ in range(n)],
            "time_latency": lambda n: [timing.latency(c.call, latency_calls, sync) for _ in range(n)],
        }
        out = {m: many[m](samples) for m in measures if m != "time_gpu" or c.gpu.mode != "kernel-sum"}
        if "time_gpu" in measures and c.gpu.mode == "kernel-sum":
            # Profiled after every other case and measure of this process (GpuTimer: "profile last").
            out["time_gpu"] = lambda: c.gpu.measure_many(samples)
        return out

    def compute(preset: str, backend: str) -> dict:
        try:
            return take(preset, backend)
        finally:  # the case's input sets and graph are gone: give their memory back before the next
            torch.cuda.empty_cache()

    return compute


class AttentionKernels(_replay.Replayed):
    """Ragged attention forward, fp16, DeiT-B heads, q/k/v strided views of a fused qkv buffer.

    All 45 (preset, backend) cases x 3 measures are measured in this class's one setup_cache
    process (20 samples each); one round (a PR A/B uses AttentionKernelsPR).
    """

    params = (list(ATTENTION_PRESETS), ATTENTION_BACKENDS)
    param_names = ["preset", "backend"]
    # 3: GPU time of the cases that cannot be captured (padded_sdpa, nested_sdpa) is their summed
    #    kernel time, no longer events around eager calls that counted the host's gaps (timing.GpuTimer)
    # 2: samples taken in setup_cache (v1: one process per case, 2 rounds)
    version = "3"
    rounds = 1
    repeat = 20

    def setup_cache(self) -> dict:
        return _replay.measure_matrix(self.params, lambda: _gpu_samples(GPU_MEASURES, self.rounds * self.repeat))

    setup_cache.timeout = 900

    def time_host(self, cache: dict, preset: str, backend: str) -> None:
        self.replay("time_host", preset, backend)

    def time_latency(self, cache: dict, preset: str, backend: str) -> None:
        self.replay("time_latency", preset, backend)

    def time_gpu(self, cache: dict, preset: str, backend: str) -> None:
        self.replay("time_gpu", preset, backend)


class AttentionKernelsPR(_replay.Replayed):
    """The quick PR subset of AttentionKernels: GPU time of ours and FA2 on three presets.

    A PR A/B and the per-commit history need the kernel's GPU time on a few representative shapes,
    with enough samples (2 rounds x 10) for the verdict engine's 5% detection
    (docs/performance.md "Verdict quality"). In a PR job (`--interleave-rounds`) asv computes setup_cache
    for every round of both commits, so each round's samples come from a fresh process.
    """

    params = (["deitb224-b8-keep0.5", "deitb224-b32-keep0.5", "deitb384-b32-keep0.5"], ["triton", "fa2_varlen"])
    param_names = ["preset", "backend"]
    version = "1"  # the same measure as before (GPU time of a 20-call graph replay per sample)
    rounds = 2
    repeat = 10

    def setup_cache(self) -> dict:
        return _replay.measure_matrix(self.params, lambda: _gpu_samples(("time_gpu",), self.rounds * self.repeat))

    setup_cache.timeout = 300

    def time_gpu(self, cache: dict, preset: str, backend: str) -> None:
        self.replay("time_gpu", preset, backend)


def _cpu_host_samples(samples: int) -> Any:
    """compute(preset, backend) -> {"time_host": [...]} on PyTorch-CPU fp32."""

    def compute(preset: str, backend: str) -> dict:
        import os

        if backend == "triton" and os.environ.get("TRITON_INTERPRET") != "1":
            raise NotImplementedError("triton on the CPU needs TRITON_INTERPRET=1")
        import torch

        from .presets import CPU_PRESETS

        torch.set_num_threads(1)  # see bench_pack: thread stalls on a shared CPU box
        p = CPU_PRESETS[preset]
        if backend == "reference":
            fn = timing.require_attr("ragged_kernels.attention.naive", "ragged_attention_ref")
        else:
            fn = _backend(backend)
        q, k, v, cu = make_qkv(torch, p, "cpu", torch.float32, seed=0)
        fn(q, k, v, cu, p.tokens)  # first call outside timing (interpreter/JIT set-up)
        call = lambda i: fn(q, k, v, cu, p.tokens)  # noqa: E731
        # One call per sample where a call is slow: the interpreted kernel took 0.45-1 s a call and
        # the per-segment oracle 0.1-0.15 s on the 2-core box (2026-12-01, load 3-8).
        calls = 3 if backend == "padded_sdpa" else 1
        return {"time_host": [timing.host_cost(call, calls, lambda: None) for _ in range(samples)]}

    return compute


class AttentionCPU(_replay.Replayed):
    """Ragged attention on PyTorch-CPU (fp32): the oracle, and baselines that run on the CPU.

    "triton" runs only under the Triton interpreter (TRITON_INTERPRET=1 in asv's environment, as
    CI sets it); elsewhere it skips. Part of the CPU subset that CI runs through real asv, which
    also exercises the sample replay of `_replay` end to end.
    """

    params = (["tiny224-b4-keep0.5-d32"], ["reference", "padded_sdpa", "triton"])
    param_names = ["preset", "backend"]
    version = "1"
    rounds = 2
    repeat = 5

    def setup_cache(self) -> dict:
        return _replay.measure_matrix(self.params, lambda: _cpu_host_samples(self.rounds * self.repeat))

    setup_cache.timeout = 300

    def time_host(self, cache: dict, preset: str, backend: str) -> None:
        self.replay("time_host", preset, backend)
