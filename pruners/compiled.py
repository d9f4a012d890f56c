"""`torch.compile` of a sync-free pruned (or dense) forward, at the captured capacities.

Every Triton kernel of the forward is a `torch.library` custom op with a fake implementation
(`ragged_kernels`' attention, pack and unpack; the pruners' CLS-score, ATS and Threshold-L2 decision
kernels), and the buffer capacities are host ints, so `torch.compile(fullgraph=True, dynamic=False)`
traces the whole forward as one graph without breaks; inductor then fuses the LayerNorms, bias adds,
GELUs and residual adds around those ops. `build_pruned_model(..., compile=True, graph=True)` captures
the compiled forward as one CUDA graph (`GraphedPrunedModel(model, forward=compiled)`), so a replay
launches fewer, fused kernels.

Compile time is paid on the first call of each input signature (batch size, dtype, device) and kept
in `compile_seconds`; the benchmarks report it beside the images/s.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import torch
import torch._inductor.config  # noqa: F401  (compile_settings reads it)
from torch import nn

if TYPE_CHECKING:
    from pruners.model import PrunedDeiT

# torch.compile modes that capture CUDA graphs themselves (cudagraph trees); graph mode captures the
# compiled forward on its own, so with graph=True a mode must leave graphs to it.
CUDAGRAPH_MODES = ("reduce-overhead", "max-autotune")
MODES = (None, "default", "max-autotune-no-cudagraphs") + CUDAGRAPH_MODES


def compile_settings(mode: str | None, backend: str, eager_numerics: bool) -> dict:
    """torch.compile keywords: `mode`, or with `eager_numerics` the mode's inductor options plus
    `emulate_precision_casts` (torch.compile takes a mode or options, not both).

    Why eager numerics by default: inductor keeps fused fp16 intermediates in fp32, so a compiled fp16
    DeiT-B differs from the eager one by up to 0.0044 in its logits at batch 64-256 (H200, 2026-12-01,
    `tools.bench_e2e`), above the 0.004 the correctness checks allow against the eager padded reference;
    the pruned models inherit that difference, not cause it."""
    if backend != "inductor":
        return {}
    config = getattr(torch._inductor, "config", None)
    if not eager_numerics or not hasattr(config, "emulate_precision_casts"):
        return {"mode": mode}
    options = dict(torch._inductor.list_mode_options(mode)) if mode not in (None, "default") else {}
    options["emulate_precision_casts"] = True
    return {"options": options}


class CompiledPrunedModel(nn.Module):
    """`torch.compile(fullgraph=True)` of a PrunedDeiT's forward.

    Args:
        model: a PrunedDeiT whose options compile (`ForwardOptions.check_capture`: a sync-free backend,
            padded_sdpa built with `sync_free=True`; no exact_capacity, no ragged_linear).
        mode: a torch.compile mode (None: inductor's default).
        backend: the torch.compile backend ("inductor"; the CPU tests trace with "aot_eager", which runs the
            same graph unfused).
        eager_numerics: inductor rounds fused fp16/bf16 intermediates as eager PyTorch does
            (`emulate_precision_casts`), so the compiled logits stay within the eager tolerance of the
            padded reference; False keeps them in fp32 inside fused kernels (see `compile_settings`).

    Attributes:
        model: the wrapped eager model.
        compile_seconds: per input signature, the wall time of its first call (tracing and compiling,
            then the first run).
    """

    def __init__(self, model: PrunedDeiT, *, mode: str | None = None, backend: str = "inductor",
                 eager_numerics: bool = True) -> None:
        super().__init__()
        if mode not in MODES:
            raise ValueError(f"compile mode must be one of {MODES}, got {mode!r}")
        model.options.check_capture(model.backend, compiled=True)
        self.model = model
        self.mode = mode
        self.eager_numerics = eager_numerics
        self._fn = torch.compile(model.logits, fullgraph=True, dynamic=False, backend=backend,
                                 **compile_settings(mode, backend, eager_numerics))
        self.compile_seconds: dict[tuple, float] = {}

    @torch.no_grad()
    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """Logits [B, 1000] for images [B, 3, H, W] (compiles on the first call per signature)."""
        model = self.model
        model.check_images(images)
        if not model.override_checked:  # a fresh keep_override: one eager forward checks that it fits
            model.logits(images)
        key = (tuple(images.shape), images.dtype, images.device)
        if key in self.compile_seconds:
            return self._fn(images)
        t0 = time.perf_counter()
        out = self._fn(images)
        if out.is_cuda:
            torch.cuda.synchronize(out.device)
        self.compile_seconds[key] = time.perf_counter() - t0
        return out

    def check_images(self, images: torch.Tensor) -> None:
        self.model.check_images(images)


__all__ = ["CUDAGRAPH_MODES", "MODES", "CompiledPrunedModel", "compile_settings"]
