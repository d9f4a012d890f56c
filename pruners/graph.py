"""CUDA-graph mode for every sync-free forward (`pruners.backends.CAPTURABLE_BACKENDS`, dense included).

The whole forward (embedding, dense blocks, decisions, packing, packed blocks, head) is captured once
per input signature (batch size, image size, dtype, device) and replayed by copying new images into
the static input. Buffer capacities are host ints fixed by the pruner configuration, so every image
batch of that size fits the captured graph, whatever the per-image kept counts. The captured forward
may be the eager one or a `torch.compile`d one (`CompiledPrunedModel`: fused elementwise work, then
captured the same way).
Why: at serving batch sizes the host, not the GPU, is the bottleneck (timm DeiT-S fp16 BS=1, measured
before 2026-11-29: eager 386 img/s, 1,870 img/s as one graph replay), so the dense model captured once
is the baseline a
pruned forward must beat, and every backend is compared graph against graph.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import nn

if TYPE_CHECKING:
    from pruners.model import PrunedDeiT


@dataclass
class _Captured:
    graph: torch.cuda.CUDAGraph
    static_in: torch.Tensor
    static_out: torch.Tensor
    keeps: list[torch.Tensor]
    nodes: dict[str, int] | None  # what one replay launches (`graph_nodes`), None where unknown


# CUgraphNodeType (cuda.h): the node kinds a captured forward holds.
_NODE_KINDS = {0: "kernel", 1: "memcpy", 2: "memset"}


def graph_nodes(graph: torch.cuda.CUDAGraph) -> dict[str, int] | None:
    """Nodes of a captured, not yet instantiated graph (`CUDAGraph(keep_graph=True)`) by kind:
    {"kernel": n, "memcpy": n, "memset": n, "other": n}; None where the driver API or torch's raw
    handle is unavailable. Read through the driver (`cuGraphGetNodes`, `cuGraphNodeGetType`), so no
    profiler attaches to the process (CUPTI can slow every later launch, pytorch/pytorch#146604)."""
    import ctypes

    try:
        raw = ctypes.c_void_p(graph.raw_cuda_graph())
        cuda = ctypes.CDLL("libcuda.so.1")
        count = ctypes.c_size_t(0)
        if cuda.cuGraphGetNodes(raw, None, ctypes.byref(count)) != 0:
            return None
        nodes = (ctypes.c_void_p * count.value)()
        if cuda.cuGraphGetNodes(raw, nodes, ctypes.byref(count)) != 0:
            return None
        out = {"kernel": 0, "memcpy": 0, "memset": 0, "other": 0}
        kind = ctypes.c_int(0)
        for node in nodes:
            if cuda.cuGraphNodeGetType(ctypes.c_void_p(node), ctypes.byref(kind)) != 0:
                return None
            out[_NODE_KINDS.get(kind.value, "other")] += 1
        return out
    except (OSError, AttributeError, RuntimeError, TypeError):
        return None


class GraphedPrunedModel(nn.Module):
    """Replay a captured PrunedDeiT forward.

    Args:
        model: a PrunedDeiT with a sync-free backend (`CAPTURABLE_BACKENDS`) whose options capture
            (`ForwardOptions.check_capture`: no exact_capacity; padded_sdpa built with `sync_free=True`).
        forward: what to capture instead of `model` itself: a `CompiledPrunedModel` of it.
        warmup: eager iterations on a side stream before capture (compiles Triton kernels, allocator).
        clone_outputs: return a fresh copy of the logits (True) or the static output buffer itself,
            which the next replay overwrites (False; saves one copy kernel).

    Attributes:
        model: the wrapped eager model (set `model.record = True` before the first call to make
            `last_keeps()` available).
    """

    def __init__(self, model: PrunedDeiT, *, forward: nn.Module | None = None, warmup: int = 2,
                 clone_outputs: bool = True) -> None:
        super().__init__()
        model.options.check_capture(model.backend, compiled=False)
        if warmup < 1:
            raise ValueError(f"warmup must be >= 1, got {warmup}")
        _warn_if_unbounded(model)
        self.model = model
        self.compiled = forward
        self.warmup = warmup
        self.clone_outputs = clone_outputs
        self._graphs: dict[tuple, _Captured] = {}
        self._last: _Captured | None = None

    def _capture(self, images: torch.Tensor) -> _Captured:
        static_in = images.clone()
        fn = self.model if self.compiled is None else self.compiled
        side = torch.cuda.Stream(device=images.device)
        side.wait_stream(torch.cuda.current_stream(images.device))
        with torch.cuda.stream(side):
            for _ in range(self.warmup):
                fn(static_in)
        torch.cuda.current_stream(images.device).wait_stream(side)
        try:  # torch >= 2.8: keep the cudaGraph_t until it is instantiated, to count what a replay launches
            graph, kept = torch.cuda.CUDAGraph(keep_graph=True), True
        except TypeError:
            graph, kept = torch.cuda.CUDAGraph(), False
        with torch.cuda.graph(graph):
            static_out = fn(static_in)
        nodes = None
        if kept:
            try:
                nodes = graph_nodes(graph)
            finally:
                graph.instantiate()
        keeps = list(getattr(self.model, "recorded_keeps", []))
        return _Captured(graph, static_in, static_out, keeps, nodes)

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

    def replay_nodes(self) -> dict[str, int] | None:
        """What one replay of the last captured graph launches: {"kernel", "memcpy", "memset", "other"}
        node counts (`graph_nodes`), None where unknown."""
        if self._last is None:
            raise ValueError("no forward has run yet")
        return self._last.nodes

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
