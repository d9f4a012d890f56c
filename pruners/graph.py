"""CUDA-graph mode for the sync-free `triton` pruned forward.

The whole pruned forward (embedding, dense blocks, decisions, packing, packed blocks, head) is
captured once per input signature (batch size, image size, dtype, device) and replayed by copying new
images into the static input. Buffer capacities are host ints fixed by the pruner configuration, so
every image batch of that size fits the captured graph, whatever the per-image kept counts.
Why: at serving batch sizes the host, not the GPU, is the bottleneck (DESIGN.md: DeiT-S BS=1 eager
386 img/s vs 1,870 img/s as one graph replay).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import torch
from torch import nn


@dataclass
class _Captured:
    graph: torch.cuda.CUDAGraph
    static_in: torch.Tensor
    static_out: torch.Tensor
    keeps: list[torch.Tensor]


class GraphedPrunedModel(nn.Module):
    """Replay a captured PrunedDeiT forward.

    Args:
        model: a PrunedDeiT built with backend "triton" (or "reference") and exact_capacity False.
        warmup: eager iterations on a side stream before capture (compiles Triton kernels, allocator).
        clone_outputs: return a fresh copy of the logits (True) or the static output buffer itself,
            which the next replay overwrites (False; saves one copy kernel).

    Attributes:
        model: the wrapped eager model (set `model.record = True` before the first call to make
            `last_keeps()` available).
    """

    def __init__(self, model: nn.Module, *, warmup: int = 2, clone_outputs: bool = True) -> None:
        super().__init__()
        if getattr(model, "exact_capacity", False):
            raise ValueError("graph mode needs exact_capacity=False (it reads counts back to the host)")
        if getattr(model, "backend", None) not in ("triton", "reference"):
            raise ValueError(f"graph mode needs a sync-free backend, got {getattr(model, 'backend', None)!r}")
        if warmup < 1:
            raise ValueError(f"warmup must be >= 1, got {warmup}")
        _warn_if_unbounded(model)
        self.model = model
        self.warmup = warmup
        self.clone_outputs = clone_outputs
        self._graphs: dict[tuple, _Captured] = {}
        self._last: _Captured | None = None

    def _capture(self, images: torch.Tensor) -> _Captured:
        static_in = images.clone()
        side = torch.cuda.Stream(device=images.device)
        side.wait_stream(torch.cuda.current_stream(images.device))
        with torch.cuda.stream(side):
            for _ in range(self.warmup):
                self.model(static_in)
        torch.cuda.current_stream(images.device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_out = self.model(static_in)
        keeps = list(getattr(self.model, "recorded_keeps", []))
        return _Captured(graph, static_in, static_out, keeps)

    @torch.no_grad()
    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """Logits [B, 1000] for images [B, 3, H, W] on CUDA (captures on the first call per signature)."""
        self.model.check_images(images)
        if not images.is_cuda:
            raise ValueError("graph mode needs CUDA images")
        p = next(self.model.parameters())
        key = (tuple(images.shape), images.dtype, images.device, p.dtype, p.device)
        entry = self._graphs.get(key)
        if entry is None:
            entry = self._graphs[key] = self._capture(images)
        entry.static_in.copy_(images)
        entry.graph.replay()
        self._last = entry
        return entry.static_out.clone() if self.clone_outputs else entry.static_out

    def last_keeps(self) -> list[torch.Tensor]:
        """Copies of the keep masks the last replay applied (needs model.record = True before capture)."""
        if self._last is None:
            raise ValueError("no forward has run yet")
        return [k.clone() for k in self._last.keeps]

    @property
    def captured_batch_sizes(self) -> list[int]:
        """Batch sizes with a captured graph."""
        return sorted({k[0][0] for k in self._graphs})


def _warn_if_unbounded(model: nn.Module) -> None:
    """Warn when no stage of the model's pruner bounds the tokens an image keeps: the captured buffers
    then hold every token, and the blocks after each stage run at the unpruned size (Threshold-L2
    without `max_keep`: a threshold may keep every token, so nothing smaller is safe to capture)."""
    pruner, n = getattr(model, "pruner", None), getattr(model, "num_patches", None)
    if pruner is None or n is None or not pruner.stages:
        return
    n += 1
    for stage in range(len(pruner.stages)):
        if pruner.tokens_bound(stage, n) < n:
            return
    hint = f" ({pruner.capacity_hint})" if pruner.capacity_hint else ""
    warnings.warn(
        f"graph mode with {pruner.name}: no stage bounds the tokens an image keeps, so the captured buffers hold "
        f"every token and the blocks after each stage run at the unpruned size{hint}",
        UserWarning,
        stacklevel=3,
    )
