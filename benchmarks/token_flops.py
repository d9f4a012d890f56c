"""Token and FLOP accounting of a pruned forward, from the per-image lengths after each stage, and the
pruner options that hit a token budget: pure functions (no torch), shared by the exact benchmarks
(`bench_structure.Tokens`, in a process of the commit under test) and `tools.bench_e2e` (through
`tools.e2e_stats`), so both count FLOPs the same way."""

from __future__ import annotations

from collections.abc import Sequence


def image_size(model_name: str) -> int:
    """Input side in pixels of a DeiT in MODELS."""
    return 384 if model_name.endswith("384") else 224


# --budget's range: the first 3 of the 12 blocks always run on all tokens, so every pruner's mean token
# fraction is above 3/12 (keep rate 0 is refused by DynamicViT, EViT and Threshold-L2); 1 = no pruning.
BUDGET_MIN, BUDGET_MAX = 0.25, 1.0


def budget_options(pruner: str, budget: float, num_patches: int) -> dict:
    """Pruner options whose mean token fraction over 12 blocks (3 unpruned, then 3 stages) is ~budget.

    Args:
        pruner: pruner name.
        budget: target mean fraction of tokens per block (0.5 = "~50 % pruning"), in
            (BUDGET_MIN, BUDGET_MAX]: DynamicViT/EViT/Threshold-L2 keep rates in (0, 1] span exactly that.
        num_patches: N0 of the model.

    Returns:
        keyword options for create_pruner.
    """
    if isinstance(budget, bool) or not isinstance(budget, (int, float)) or not BUDGET_MIN < budget <= BUDGET_MAX:
        raise ValueError(f"budget must be a number in ({BUDGET_MIN}, {BUDGET_MAX}], got {budget!r}")
    if pruner == "ats":
        # ATS blocks 3..11; random weights make nearly every sample unique, so ~num_samples stay:
        # (3 + 9 f) / 12 = budget  ->  f = (12 budget - 3) / 9 of N0.
        return {"num_samples": max(8, round(num_patches * (12 * budget - 3) / 9))}
    # DynamicViT / EViT / Threshold-L2 at blocks 3/6/9: (1 + r + r^2 + r^3) / 4 = budget, solved by bisection.
    lo, hi = 0.0, 1.0
    for _ in range(50):
        r = (lo + hi) / 2
        lo, hi = (r, hi) if (1 + r + r * r + r**3) / 4 < budget else (lo, r)
    r = max(round((lo + hi) / 2, 4), 1e-4)  # a budget just above 0.25 must not round to keep rate 0
    return {"dynamicvit": {"rho": r}, "evit": {"keep_rate": r}, "threshold_l2": {"keep_ratio": r}}[pruner]


def per_block(depth: int, stages: Sequence[int], placement: str, initial, after_stage: Sequence) -> tuple[list, list]:
    """Spread per-stage values over the blocks: what each block's attention and MLP see.

    A `before_block` pruner prunes before block `stages[s]`, so that whole block runs on stage s's
    output; an `after_attention` pruner (EViT, ATS) prunes between the attention and the MLP of
    block `stages[s]`, so that block's attention still sees the previous tokens.

    Args:
        depth: number of blocks.
        stages: block index of each stage (ascending).
        placement: "before_block" or "after_attention".
        initial: the value before any stage (per-image lengths [1+N0] * B, or the dense row count).
        after_stage: one value per stage (per-image lengths, or the packed capacity).

    Returns:
        (attention values, MLP values), one entry per block.
    """
    if placement not in ("before_block", "after_attention"):
        raise ValueError(f"unknown placement {placement!r}")
    if len(after_stage) != len(stages):
        raise ValueError(f"{len(after_stage)} per-stage values for {len(stages)} stages")
    stage_at = {blk: s for s, blk in enumerate(stages)}
    attn, mlp, cur = [], [], initial
    for j in range(depth):
        s = stage_at.get(j)
        if s is not None and placement == "before_block":
            cur = after_stage[s]
        attn.append(cur)
        if s is not None and placement == "after_attention":
            cur = after_stage[s]
        mlp.append(cur)
    return attn, mlp


def padded_packed_ratio(attn_lengths: Sequence[Sequence[int]]) -> tuple[int, int, float]:
    """Padded-to-packed token ratio of the attention inputs.

    padded = sum over blocks of B x (longest length in the batch at that block) -- what
    `padded_sdpa` pads every image to; packed = sum over blocks of the sum of the lengths.
    Blocks before the first stage (all images at 1+N0) count 1:1, so this is the end-to-end bound.

    Args:
        attn_lengths: per block, the per-image token counts its attention sees.

    Returns:
        (padded tokens, packed tokens, padded / packed).
    """
    padded = sum(len(lens) * max(lens) for lens in attn_lengths if len(lens))
    packed = sum(sum(lens) for lens in attn_lengths)
    return padded, packed, (padded / packed if packed else float("nan"))


def flop_parts(
    attn_lengths: Sequence[Sequence[int]],
    mlp_lengths: Sequence[Sequence[int]],
    dim: int,
    attn_rows: Sequence[int] | None = None,
    mlp_rows: Sequence[int] | None = None,
) -> tuple[float, float]:
    """(linear-layer FLOPs, attention FLOPs) of the transformer blocks (multiply-add = 2 FLOPs), from
    per-image token counts.

    Per block, with C = embed dim, A = tokens its attention sees, M = tokens its MLP sees
    (A = M except at an `after_attention` stage block):
        linear layers   8 C^2 * sum(A)   (qkv 6 C^2 + proj 2 C^2 per token)
                     + 16 C^2 * sum(M)   (fc1 + fc2, hidden 4C)       -> 24 C^2 T when A = M = T
        attention       4 C * sum_i(A_i^2)   (Q K^T and P V, 2 L^2 C each per image)
    Norms, softmax, GELU, the patch embedding, the head and the pruners' decisions are not counted.

    Args:
        attn_lengths, mlp_lengths: per block, the per-image token counts.
        dim: embed dim C.
        attn_rows, mlp_rows: per block, the rows the linear layers actually run on when that is not
            the token count (packed buffers sized by a capacity bound); default: the token counts.

    Returns:
        (linear FLOPs, attention FLOPs), each summed over blocks.
    """
    if len(attn_lengths) != len(mlp_lengths):
        raise ValueError("attn_lengths and mlp_lengths must have one entry per block each")
    linear = attention = 0.0
    for j, (a, m) in enumerate(zip(attn_lengths, mlp_lengths, strict=True)):
        ra = sum(a) if attn_rows is None else attn_rows[j]
        rm = sum(m) if mlp_rows is None else mlp_rows[j]
        linear += 8.0 * dim * dim * ra + 16.0 * dim * dim * rm
        attention += 4.0 * dim * sum(x * x for x in a)
    return linear, attention


def forward_flops(
    attn_lengths: Sequence[Sequence[int]],
    mlp_lengths: Sequence[Sequence[int]],
    dim: int,
    attn_rows: Sequence[int] | None = None,
    mlp_rows: Sequence[int] | None = None,
) -> float:
    """FLOPs of the transformer blocks: the sum of `flop_parts` (same arguments)."""
    linear, attention = flop_parts(attn_lengths, mlp_lengths, dim, attn_rows, mlp_rows)
    return linear + attention


def token_stats(
    depth: int,
    n_tokens: int,
    batch: int,
    dim: int,
    stages: Sequence[int],
    placement: str,
    stage_lengths: Sequence[Sequence[int]],
    stage_capacity: Sequence[int] | None = None,
) -> dict:
    """Token and FLOP figures of one forward, from the per-image lengths after each stage.

    Args:
        depth: blocks; n_tokens: 1 + N0; batch: B; dim: embed dim.
        stages, placement: the pruner's.
        stage_lengths: per stage, the per-image token counts after it (cu_seqlens differences; an
            EViT fused token included); empty for the dense model.
        stage_capacity: per stage, the packed buffer's row count (what the linear layers run on).

    Returns:
        token_fraction (mean over blocks of MLP tokens per image / n_tokens), padded_tokens,
        packed_tokens, token_ratio (padded / packed), flops_dense, flops_pruned, flop_ratio
        (dense / pruned, actual kept counts), flop_ratio_capacity (dense / pruned with the linear
        layers on the capacity rows), tokens_per_block (attention tokens), longest_per_block,
        mlp_tokens_per_block.
    """
    full = [n_tokens] * batch
    attn, mlp = per_block(depth, stages, placement, full, [list(x) for x in stage_lengths])
    padded, packed, ratio = padded_packed_ratio(attn)
    dense = forward_flops([full] * depth, [full] * depth, dim)
    pruned = forward_flops(attn, mlp, dim)
    out = dict(
        token_fraction=sum(sum(m) for m in mlp) / (depth * batch * n_tokens),
        padded_tokens=padded,
        packed_tokens=packed,
        token_ratio=ratio,
        flops_dense=dense,
        flops_pruned=pruned,
        flop_ratio=dense / pruned,
        flop_ratio_capacity=dense / pruned,
        tokens_per_block=[sum(a) for a in attn],
        longest_per_block=[max(a) for a in attn],
        mlp_tokens_per_block=[sum(m) for m in mlp],
    )
    if stage_capacity is not None:
        rows_a, rows_m = per_block(depth, stages, placement, batch * n_tokens, list(stage_capacity))
        out["flop_ratio_capacity"] = dense / forward_flops(attn, mlp, dim, rows_a, rows_m)
    return out
