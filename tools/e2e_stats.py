"""Token and FLOP accounting of a pruned forward (`benchmarks.token_flops`, the pure functions, shared
with the exact benchmarks) and the one forward that measures it on a model. Used by `tools.bench_e2e`."""

from __future__ import annotations

import torch

from benchmarks.token_flops import (  # noqa: F401  (re-exported: tools.bench_e2e and its tests import them here)
    BUDGET_MAX,
    BUDGET_MIN,
    budget_options,
    flop_parts,
    forward_flops,
    image_size,
    padded_packed_ratio,
    per_block,
    token_stats,
)


def measure_tokens(inner, x: torch.Tensor) -> dict:
    """`token_stats` of the decisions a PrunedDeiT `inner` takes on `x` (one untimed eager forward, syncs once)."""
    bb = inner.backbone
    depth, n_tokens, dim = len(bb.blocks), 1 + inner.num_patches, bb.embed_dim
    if inner.backend == "dense":
        return token_stats(depth, n_tokens, x.shape[0], dim, (), "before_block", [])
    with inner.packing_log() as log:
        inner(x)
    lens, caps = log.lengths()
    pr = inner.pruner
    return token_stats(depth, n_tokens, x.shape[0], dim, pr.stages, pr.placement, lens, caps)
