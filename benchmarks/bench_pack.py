"""pack_tokens / unpack_tokens: the data movement around the ragged kernel.

`PackTokens` (GPU): GPU time (graph replay + events) and host cost per call.
`PackTokensCPU`: the same ops on PyTorch-CPU tensors; the CPU subset CI runs through real asv.
"""

from __future__ import annotations

import inspect
from typing import Any

from . import _replay, timing
from .presets import CPU_PRESETS, PACK_PRESETS, AttentionPreset


def make_tokens(torch: Any, preset: AttentionPreset, device: str, dtype: Any, seed: int) -> tuple:
    """Tokens x [B, N, C] and a keep mask [B, N] whose row sums are the preset's lengths.

    Args:
        torch: the torch module.
        preset: shape preset (C = heads * head_dim, N = tokens).
        device: "cuda" or "cpu".
        dtype: element type of x.
        seed: generator seed of this input set.

    Returns:
        (x, keep).
    """
    gen = torch.Generator(device="cpu").manual_seed(seed)
    b, n, c = preset.batch, preset.tokens, preset.heads * preset.head_dim
    x = torch.randn(b, n, c, generator=gen).to(device, dtype)
    keep = torch.zeros(b, n, dtype=torch.bool)
    for i, length in enumerate(preset.lengths()):
        # the class token (0) always survives pruning; the rest are a seeded random subset
        keep[i, 0] = True
        keep[i, 1 + torch.randperm(n - 1, generator=gen)[: length - 1]] = True
    return x, keep.to(device)


def _pack_kwargs(pack_tokens: Any, preset: AttentionPreset) -> dict:
    # A fixed capacity (the unpruned size) keeps pack free of host syncs, so it can be graph-captured.
    if "capacity" in inspect.signature(pack_tokens).parameters:
        return {"capacity": preset.batch * preset.tokens}
    return {}


class _Case:
    def __init__(self, preset: AttentionPreset, op: str, device: str, torch: Any) -> None:
        if op not in ("pack", "unpack"):
            raise ValueError(f"op must be 'pack' or 'unpack', got {op!r}")
        pack_tokens = timing.require_attr("ragged_kernels", "pack_tokens")
        unpack_tokens = timing.require_attr("ragged_kernels", "unpack_tokens")
        kwargs = _pack_kwargs(pack_tokens, preset)
        dtype = torch.float16 if device == "cuda" else torch.float32
        sets = []
        for s in range(2 if device == "cpu" else 4):
            x, keep = make_tokens(torch, preset, device, dtype, seed=s)
            packed, cu = pack_tokens(x, keep, **kwargs)
            sets.append((x, keep, packed, cu))
        if op == "pack":

            def call(i: int) -> Any:
                x, keep, _, _ = sets[i % len(sets)]
                return pack_tokens(x, keep, **kwargs)

        else:

            def call(i: int) -> Any:
                _, keep, packed, cu = sets[i % len(sets)]
                return unpack_tokens(packed, keep, cu)

        self.torch = torch
        self.call = call
        self.sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
        self.gpu = timing.GpuTimer(call, 20, torch) if device == "cuda" else None


def _samples(device: str, measures: tuple[str, ...], samples: int) -> Any:
    """compute(preset_name, op) -> {measure: [seconds] * samples} (for `_replay.measure_matrix`)."""
    if device == "cuda":
        torch = timing.require_cuda()
        from .gpu_env import write_for_asv_run

        write_for_asv_run()
        timing.warm_up_device(torch)
        presets, calls = PACK_PRESETS, 50
    else:
        import os

        if os.environ.get("TRITON_INTERPRET") != "1":
            raise NotImplementedError("pack/unpack on the CPU need TRITON_INTERPRET=1")
        import torch

        # One intra-op thread: host cost is what we measure, and on a loaded CI box a parallel
        # region waiting for a descheduled worker inflates samples (2026-11, 2 shared cores).
        torch.set_num_threads(1)
        # 2 calls per sample: a pack in Triton's interpreter takes 90-220 ms on the 2-core box
        # (depending on its load), and 20 calls made this class 55 s of every demo round
        # (2026-12-01); CPU timings only show the pipeline working, so the precision bought nothing.
        presets, calls = CPU_PRESETS, 2

    def take(preset: str, op: str) -> dict:
        c = _Case(presets[preset], op, device, torch)
        once = {"time_gpu": lambda: c.gpu.measure(), "time_host": lambda: timing.host_cost(c.call, calls, c.sync)}
        return {m: [once[m]() for _ in range(samples)] for m in measures}

    def compute(preset: str, op: str) -> dict:
        try:
            return take(preset, op)
        finally:  # the case's inputs and graph are gone: give their memory back before the next
            if device == "cuda":
                torch.cuda.empty_cache()

    return compute


class PackTokens(_replay.Replayed):
    """pack_tokens / unpack_tokens on the GPU, fp16 tokens, DeiT-B width (768).

    Samples are taken in setup_cache and handed to asv one per call (`_replay`)."""

    params = (list(PACK_PRESETS), ["pack", "unpack"])
    param_names = ["preset", "op"]
    version = "1"
    rounds = 2
    repeat = 10

    def setup_cache(self) -> dict:
        samples = self.rounds * self.repeat
        return _replay.measure_matrix(self.params, lambda: _samples("cuda", ("time_gpu", "time_host"), samples))

    setup_cache.timeout = 300

    def time_gpu(self, cache: dict, preset: str, op: str) -> None:
        self.replay("time_gpu", preset, op)

    def time_host(self, cache: dict, preset: str, op: str) -> None:
        self.replay("time_host", preset, op)


class PackTokensCPU(_replay.Replayed):
    """pack_tokens / unpack_tokens on PyTorch-CPU tensors (fp32), through Triton's interpreter.

    Runs where TRITON_INTERPRET=1 is set in asv's environment (CI sets it); elsewhere (a GPU runner)
    it skips, as the kernels refuse CPU tensors outside the interpreter."""

    params = (list(CPU_PRESETS), ["pack", "unpack"])
    param_names = ["preset", "op"]
    version = "1"
    rounds = 2
    repeat = 5

    def setup_cache(self) -> dict:
        return _replay.measure_matrix(self.params, lambda: _samples("cpu", ("time_host",), self.rounds * self.repeat))

    setup_cache.timeout = 300

    def time_host(self, cache: dict, preset: str, op: str) -> None:
        self.replay("time_host", preset, op)
