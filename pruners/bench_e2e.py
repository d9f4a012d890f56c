"""End-to-end throughput (images/s) per model x pruner x backend x batch, eager and graph mode.

Timing: every configuration is warmed up first (Triton compiles, cuDNN/cuBLAS heuristics, graph
capture; `--warmup` forwards, at least 0.3 s, and until the time per forward is steady), then each
repeat synchronises, runs `iters` forwards back to back, synchronises again and reads the host
clock; the reported number is the median over repeats (host clocks only ever span synchronised
regions, so host dispatch cost is included, as it is for a real server).

Pruner settings target ~50 % fewer token-blocks than the dense model (`--budget 0.5`: mean over the
12 blocks of tokens kept / tokens in), and the measured token fraction is printed per row.

Kept counts: before warm-up, one untimed eager forward of each configuration on the measured batch
records every packing's `cu_seqlens` and capacity (a wrapper around the model's pack function that
is removed again before anything is timed; the graph-mode rows run the wrapped eager model inside
the graph wrapper). From these per-image lengths each row gets the padded-to-packed token ratio and
the dense/pruned FLOP ratio (`token_stats`); the end-of-run "targets" table turns them into the
issue-4 checks (`target_rows`). Nothing in the timed region reads a value back to the host.

Decisions: in fp16 the backends' own keep decisions differ in a few tokens (Threshold-L2 norms, ATS
samples, near-ties of top-k), so by default every configuration of a (model, pruner, batch) replays
the masks its first configuration took on the bench images (`PrunedDeiT.keep_override`; the pruner
still runs, so its cost stays in the timing), and the targets table checks the kept counts agree.
`--own-decisions` lets each backend decide for itself.

Models are built once per (model, pruner) (timm init, threshold calibration) and kept on the GPU in
fp16; each configuration wraps the shared backbone and a copy of the bound pruner in a fresh
`PrunedDeiT` (the same objects `build_pruned_model` makes, without rebuilding the backbone).

Usage (on a GPU machine):
    python -m pruners.bench_e2e --models deit_small_patch16_224 deit_base_patch16_224 --batches 1 4 64 256
    # the issue-4 points not measured in run 3 first, then the default grid, stop starting at 300 s:
    python -m pruners.bench_e2e --order issue4-first --time-box 300 --repeats 5 --min-time 0.1
    # print the planned configurations in order and exit (works without CUDA):
    python -m pruners.bench_e2e --order issue4-first --dry-run
Exit status: 0 ok, 2 no CUDA or a bad argument (every argument is checked before the CUDA check).
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass

import torch

from pruners import (
    BACKENDS,
    MODELS,
    PRUNERS,
    GraphedPrunedModel,
    PrunedDeiT,
    build_pruned_model,
    create_pruner,
    synthetic_images,
)

# Issue 4 targets (H200, fp16, one run).
LARGE_BATCHES = (64, 256)  # target 2: batches 64..256 (inclusive)
SERVING_BATCHES = (1, 4)  # target 1
TARGET_2B_FRACTION = 0.9  # gain over padded_sdpa within 10 % of the padded/packed token ratio
TARGET_2C_FRACTION = 0.85  # pruned/dense speed-up >= 0.85 x the FLOP ratio
TARGET_3_MODEL, TARGET_3_BATCHES = "deit_base_patch16_384", (1, 64)

# What the first end-to-end run (2026-11-29, docs/device-logs.md) did not reach before its time box: (model, batches).
# deit_base_patch16_384 stops at 64 (target 3 is batch 1-64; B=256 at 384 is not needed).
ISSUE4_UNMEASURED = (("deit_base_patch16_224", (64, 256)), ("deit_base_patch16_384", (1, 4, 16, 64)))
ISSUE4_BACKENDS = ("triton", "fa2_varlen", "padded_sdpa", "dense")
ORDERS = ("grid", "issue4-first")


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


# -- kept counts -> token and FLOP ratios (pure functions) ----------------------------------------------


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


def forward_flops(
    attn_lengths: Sequence[Sequence[int]],
    mlp_lengths: Sequence[Sequence[int]],
    dim: int,
    attn_rows: Sequence[int] | None = None,
    mlp_rows: Sequence[int] | None = None,
) -> float:
    """FLOPs of the transformer blocks (multiply-add = 2 FLOPs), from per-image token counts.

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
        FLOPs summed over blocks.
    """
    if len(attn_lengths) != len(mlp_lengths):
        raise ValueError("attn_lengths and mlp_lengths must have one entry per block each")
    total = 0.0
    for j, (a, m) in enumerate(zip(attn_lengths, mlp_lengths, strict=True)):
        ra = sum(a) if attn_rows is None else attn_rows[j]
        rm = sum(m) if mlp_rows is None else mlp_rows[j]
        total += 8.0 * dim * dim * ra + 16.0 * dim * dim * rm + 4.0 * dim * sum(x * x for x in a)
    return total


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


class record_packing:
    """Context manager: while active, every pack of `model` (a PrunedDeiT) logs (cu_seqlens, capacity).

    The bench's hook for kept counts (the model exposes keep masks, but not the EViT fused token nor
    the capacities): it wraps the instance's pack function and restores it on exit. Use it around an
    untimed forward only; reading the lengths (`lengths()`) syncs with the device.
    """

    def __init__(self, model: PrunedDeiT) -> None:
        self.model = model
        self.log: list[tuple[torch.Tensor, int]] = []

    def __enter__(self) -> record_packing:
        self._orig = orig = self.model._pack
        log = self.log

        def logged(packed_cu: tuple[torch.Tensor, torch.Tensor], capacity: int):
            log.append((packed_cu[1].detach().clone(), int(capacity)))
            return packed_cu

        class Logged:  # the model's packer (`dense` and `rows`), logging every packing
            name = orig.name

            def dense(self, x, keep, capacity, keep_first=True):
                return logged(orig.dense(x, keep, capacity, keep_first), capacity)

            def rows(self, x, cu, n, keep, capacity):
                return logged(orig.rows(x, cu, n, keep, capacity), capacity)

            def to_dense(self, x, cu, index):
                return orig.to_dense(x, cu, index)

        self.model._pack = Logged()
        return self

    def __exit__(self, *exc) -> None:
        self.model._pack = self._orig

    def lengths(self) -> tuple[list[list[int]], list[int]]:
        """(per stage: per-image lengths, per stage: capacity rows)."""
        lens = [(cu[1:] - cu[:-1]).tolist() for cu, _ in self.log]
        return lens, [cap for _, cap in self.log]


def measure_tokens(inner: PrunedDeiT, x: torch.Tensor) -> dict:
    """`token_stats` of the decisions `inner` takes on `x` (one untimed eager forward, syncs once)."""
    bb = inner.backbone
    depth, n_tokens, dim = len(bb.blocks), 1 + inner.num_patches, bb.embed_dim
    if inner.backend == "dense":
        return token_stats(depth, n_tokens, x.shape[0], dim, (), "before_block", [])
    with record_packing(inner) as rec:
        inner(x)
    lens, caps = rec.lengths()
    pr = inner.pruner
    return token_stats(depth, n_tokens, x.shape[0], dim, pr.stages, pr.placement, lens, caps)


# -- the plan: configurations, order, time box ----------------------------------------------------------


@dataclass(frozen=True)
class Config:
    """One timed configuration. `pruner` is None for the dense model (it does not depend on one)."""

    model: str
    pruner: str | None
    batch: int
    backend: str
    mode: str = "eager"  # "eager" or "graph"
    exact: bool = False  # eager exact_capacity
    rlinear: bool = False  # build_pruned_model(ragged_linear=True): linear layers over the kept rows only
    reread: bool = False  # the dense model's second reading, after the model's pruned configurations

    @property
    def mode_label(self) -> str:
        return (self.mode + ("+exact" if self.exact else "") + ("+rlin" if self.rlinear else "")
                + ("+again" if self.reread else ""))

    def __str__(self) -> str:
        return f"{self.model} {self.pruner or '-'} B={self.batch} {self.backend}/{self.mode_label}"


def grid_configs(
    models: Iterable[str],
    pruners: Sequence[str],
    batches: Iterable[int],
    backends: Sequence[str],
    exact_capacity: bool = False,
    nesting: str = "pruner",
    exact_backends: Sequence[str] | None = None,
    ragged_linear: bool = False,
) -> list[Config]:
    """Configurations of a grid; the dense model before the pruned ones of each (model, batch) and once
    more after all of the model's (the faster reading counts: `best_dense`).

    Args:
        exact_capacity: add an eager exact_capacity configuration for ragged pruners.
        ragged_linear: add a triton graph configuration with `ragged_linear=True` for ragged pruners
            (experimental: their graph mode's linear layers over the kept rows only).
        nesting: "pruner" (model, pruner, batch: the historical order) or "batch" (model, batch,
            pruner: every (model, batch) completes its target set before the next one starts).
        exact_backends: the backends that get the exact_capacity variant (default: all pruned ones).
    """
    if nesting not in ("pruner", "batch"):
        raise ValueError(f"nesting must be 'pruner' or 'batch', got {nesting!r}")
    out: list[Config] = []
    for model in models:
        pairs = (
            [(p, b) for p in pruners for b in batches]
            if nesting == "pruner"
            else [(p, b) for b in batches for p in pruners]
        )
        dense_done: set[int] = set()
        for pruner, batch in pairs:
            if "dense" in backends and batch not in dense_done:
                dense_done.add(batch)
                out.append(Config(model, None, batch, "dense"))
            for backend in backends:
                if backend == "dense":
                    continue
                out.append(Config(model, pruner, batch, backend))
                if backend == "triton":
                    out.append(Config(model, pruner, batch, backend, "graph"))
                if exact_capacity and PRUNERS[pruner].ragged and (exact_backends is None or backend in exact_backends):
                    out.append(Config(model, pruner, batch, backend, "eager", True))
                if ragged_linear and backend == "triton" and PRUNERS[pruner].ragged:
                    out.append(Config(model, pruner, batch, backend, "graph", rlinear=True))
        # The dense model again after the model's pruned ones: the first configuration of a process has
        # read up to ~15% slow on the H200 (session 7, run 6), and 2c divides by dense. The faster of
        # the two readings counts (`best_dense`): the conservative choice for the pruned/dense ratios.
        for batch in sorted(dense_done, key=[b for _, b in pairs].index):
            out.append(Config(model, None, batch, "dense", reread=True))
    return out


def best_dense(rows: Sequence[dict]) -> dict[tuple, dict]:
    """(model, batch) -> the dense row with the most images/s (dense is read first and last)."""
    out: dict[tuple, dict] = {}
    for r in rows:
        if r["backend"] == "dense":
            key = (r["model"], r["batch"])
            if key not in out or r["img_per_s"] > out[key]["img_per_s"]:
                out[key] = r
    return out


def plan(
    order: str,
    models: Sequence[str],
    pruners: Sequence[str],
    batches: Sequence[int],
    backends: Sequence[str],
    exact_capacity: bool = False,
    ragged_linear: bool = False,
) -> list[Config]:
    """Configurations in run order.

    "grid": models x pruners x batches x backends, as before. "issue4-first": first the issue-4
    points run 3 did not measure (ISSUE4_UNMEASURED, backends ISSUE4_BACKENDS within `backends`, the
    given pruners, batch-major so each (model, batch) completes its target set; with
    `exact_capacity`, triton eager+exact for the ragged pruners, not the baselines), then the rest of
    the grid. Duplicates run once, at their first position.
    """
    if order not in ORDERS:
        raise ValueError(f"order must be one of {ORDERS}, got {order!r}")
    grid = grid_configs(models, pruners, batches, backends, exact_capacity, ragged_linear=ragged_linear)
    if order == "grid":
        return grid
    first_backends = [b for b in backends if b in ISSUE4_BACKENDS]
    first: list[Config] = []
    for model, model_batches in ISSUE4_UNMEASURED:
        first += grid_configs(
            [model],
            pruners,
            model_batches,
            first_backends,
            exact_capacity,
            nesting="batch",
            exact_backends=("triton",),
            ragged_linear=ragged_linear,
        )
    seen: set[Config] = set()
    out = []
    for cfg in first + grid:
        if cfg not in seen:
            seen.add(cfg)
            out.append(cfg)
    return out


@dataclass
class PlanResult:
    rows: list[dict]
    failed: list[tuple[Config, str]]
    skipped: list[Config]  # not started: the time box ran out


def run_plan(
    configs: Sequence[Config],
    measure: Callable[[Config], dict],
    time_box: float | None = None,
    clock: Callable[[], float] = time.monotonic,
    start: float | None = None,
    on_row: Callable[[dict], None] | None = None,
    on_error: Callable[[Config, str], None] | None = None,
) -> PlanResult:
    """Run `measure` on each configuration in order; start none once `time_box` seconds have passed.

    A configuration already running when the box ends finishes (the box bounds starts, not ends).
    RuntimeError/NotImplementedError (out of memory, a missing baseline) fail that configuration only.

    Args:
        configs: the plan.
        measure: Config -> result row.
        time_box: seconds from `start` after which no configuration starts; None = no limit.
        clock: seconds (monotonic).
        start: the clock value the box counts from (default: now).
        on_row, on_error: progress callbacks.

    Returns:
        rows (each with config_s and elapsed_s added), failures, configurations never started.
    """
    start = clock() if start is None else start
    res = PlanResult([], [], [])
    for i, cfg in enumerate(configs):
        if time_box is not None and clock() - start >= time_box:
            res.skipped = list(configs[i:])
            break
        t0 = clock()
        try:
            row = measure(cfg)
        except (RuntimeError, NotImplementedError) as e:
            res.failed.append((cfg, str(e)))
            if on_error:
                on_error(cfg, str(e))
            continue
        now = clock()
        row["config_s"], row["elapsed_s"] = now - t0, now - start
        res.rows.append(row)
        if on_row:
            on_row(row)
    return res


def describe_skipped(skipped: Sequence[Config]) -> list[str]:
    """One line per (model, pruner, batch): the backends/modes not started."""
    groups: dict[tuple, list[str]] = {}
    for c in skipped:
        groups.setdefault((c.model, c.pruner or "-", c.batch), []).append(f"{c.backend}/{c.mode_label}")
    return [f"{m} {p} B={b}: {', '.join(v)}" for (m, p, b), v in groups.items()]


# -- targets -------------------------------------------------------------------------------------------


def _status(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def _same_decisions(rows: Sequence[dict]) -> bool:
    keys = ("tokens_per_block", "longest_per_block", "mlp_tokens_per_block", "flops_pruned")
    sigs = {tuple(json.dumps(r.get(k)) for k in keys) for r in rows}
    return len(sigs) <= 1


def target_rows(rows: Sequence[dict]) -> list[dict]:
    """Issue-4 target figures per (model, pruner, batch) that has a triton row.

    triton best = the fastest triton row without exact_capacity or ragged_linear (graph or eager: the
    same packed capacities as the eager baselines, so the comparison is about attention and
    overheads); its kept counts give the token and FLOP ratios. Against `dense` the fastest triton
    row of any mode counts (eager+exact and graph+rlin included when measured: the triton path's
    answers to capacity rows).
    Statuses: PASS / MISS, "n/a" where the target does not apply, "no data" where a row it needs was
    not measured.
        1   (B 1, 4):     triton graph >= 3x fa2_varlen and >= 4x padded_sdpa
        2a  (B 64-256):   triton best >= fa2_varlen and >= padded_sdpa
        2b  (B 64-256, ragged pruners): (best / padded_sdpa) >= 0.9 x token_ratio
        2c  (B 64-256):   (best any mode / dense) >= 0.85 x flop_ratio
        3   (deit_base_patch16_384, B 1-64): triton best >= fa2_varlen
    """
    dense = best_dense(rows)
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        if r["backend"] != "dense":
            groups.setdefault((r["model"], r["pruner"], r["batch"]), []).append(r)
    out = []
    for (model, pruner, batch), grp in groups.items():
        tri = [r for r in grp if r["backend"] == "triton"]
        # The same packed capacities as the eager baselines: not +exact, not +rlin (which the
        # baselines' pipelines could use as well); those count against dense only.
        plain = [r for r in tri if not r["mode"].endswith(("+exact", "+rlin"))]
        if not tri:
            continue
        best_any = max(tri, key=lambda r: r["img_per_s"])
        best = max(plain, key=lambda r: r["img_per_s"]) if plain else best_any
        graph = next((r for r in tri if r["mode"] == "graph"), None)
        fa2 = next((r for r in grp if r["backend"] == "fa2_varlen" and r["mode"] == "eager"), None)
        pad = next((r for r in grp if r["backend"] == "padded_sdpa" and r["mode"] == "eager"), None)
        den = dense.get((model, batch))
        v = best["img_per_s"]
        t = dict(
            model=model,
            pruner=pruner,
            batch=batch,
            ragged=bool(best.get("ragged", False)),
            triton_best_mode=best["mode"],
            triton_best=v,
            fa2_varlen=fa2["img_per_s"] if fa2 else None,
            padded_sdpa=pad["img_per_s"] if pad else None,
            dense=den["img_per_s"] if den else None,
            token_ratio=best["token_ratio"],
            flop_ratio=best["flop_ratio"],
            flop_ratio_capacity=best.get("flop_ratio_capacity"),
            vs_fa2=v / fa2["img_per_s"] if fa2 else None,
            vs_padded=v / pad["img_per_s"] if pad else None,
            vs_dense_mode=best_any["mode"],
            vs_dense=best_any["img_per_s"] / den["img_per_s"] if den else None,
            same_decisions=_same_decisions([r for r in grp if r["backend"] in ("triton", "fa2_varlen", "padded_sdpa")]),
        )
        t["frac_2b"] = t["vs_padded"] / t["token_ratio"] if t["vs_padded"] else None
        t["frac_2c"] = t["vs_dense"] / t["flop_ratio"] if t["vs_dense"] else None
        serving = batch in SERVING_BATCHES and image_size(model) == 224  # target 1: DeiT-S/B at 224²
        large = LARGE_BATCHES[0] <= batch <= LARGE_BATCHES[1]
        if not serving:
            t["t1"] = "n/a"
        elif graph is None or fa2 is None or pad is None:
            t["t1"] = "no data"
        else:
            t["t1"] = _status(graph["img_per_s"] >= 3 * fa2["img_per_s"] and graph["img_per_s"] >= 4 * pad["img_per_s"])
        if not large:
            t["t2a"] = t["t2b"] = t["t2c"] = "n/a"
        else:
            t["t2a"] = "no data" if fa2 is None or pad is None else _status(t["vs_fa2"] >= 1 and t["vs_padded"] >= 1)
            if not t["ragged"]:
                t["t2b"] = "n/a"
            else:
                t["t2b"] = "no data" if pad is None else _status(t["frac_2b"] >= TARGET_2B_FRACTION)
            t["t2c"] = "no data" if den is None else _status(t["frac_2c"] >= TARGET_2C_FRACTION)
        if model != TARGET_3_MODEL or not TARGET_3_BATCHES[0] <= batch <= TARGET_3_BATCHES[1]:
            t["t3"] = "n/a"
        else:
            t["t3"] = "no data" if fa2 is None else _status(t["vs_fa2"] >= 1)
        out.append(t)
    return out


def _f(x, fmt: str) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, fmt)


def throughput_table(rows: Sequence[dict]) -> list[str]:
    """Markdown: images/s per (model, pruner, batch) and backend/mode."""
    cols = [
        ("triton", "graph"),
        ("triton", "eager"),
        ("triton", "eager+exact"),
        ("triton", "graph+rlin"),
        ("fa2_varlen", "eager"),
        ("padded_sdpa", "eager"),
        ("nested_sdpa", "eager"),
    ]
    by = {(r["model"], r["pruner"], r["batch"], r["backend"], r["mode"]): r for r in rows}
    dense = {k: r["img_per_s"] for k, r in best_dense(rows).items()}
    keys = sorted({(r["model"], r["pruner"], r["batch"]) for r in rows if r["backend"] != "dense"}, key=str)
    head = "| model | pruner | batch | " + " | ".join(f"{b} {m}" for b, m in cols) + " | dense | tokens |"
    lines = [head, "|" + "---|" * (len(cols) + 5)]
    for m, p, b in keys:
        cells = [_f(by[(m, p, b, be, mo)]["img_per_s"], ".0f") if (m, p, b, be, mo) in by else "—" for be, mo in cols]
        frac = next(r["token_fraction"] for r in rows if (r["model"], r["pruner"], r["batch"]) == (m, p, b))
        lines.append(f"| {m} | {p} | {b} | " + " | ".join(cells) + f" | {_f(dense.get((m, b)), '.0f')} | {frac:.3f} |")
    return lines


def targets_table(targets: Sequence[dict]) -> list[str]:
    """Markdown: the issue-4 target figures and PASS/MISS per (model, pruner, batch)."""
    head = (
        "| model | pruner | batch | ragged | triton best | img/s | /fa2 | /padded | /dense | pad/packed tokens "
        "| 2b reached | FLOP ratio | FLOP ratio @cap | 2c reached | same kept | 1 | 2a | 2b | 2c | 3 |"
    )
    lines = [head, "|" + "---|" * 20]
    for t in targets:
        cells = [
            t["model"],
            t["pruner"],
            str(t["batch"]),
            "yes" if t["ragged"] else "no",
            t["triton_best_mode"],
            f"{t['triton_best']:.0f}",
            _f(t["vs_fa2"], ".2f"),
            _f(t["vs_padded"], ".2f"),
            _f(t["vs_dense"], ".2f")
            + ("" if t["vs_dense_mode"] == t["triton_best_mode"] else f" ({t['vs_dense_mode']})"),
            _f(t["token_ratio"], ".3f"),
            _f(t["frac_2b"], ".2f"),
            _f(t["flop_ratio"], ".2f"),
            _f(t["flop_ratio_capacity"], ".2f"),
            _f(t["frac_2c"], ".2f"),
            "yes" if t["same_decisions"] else "NO",
            t["t1"],
            t["t2a"],
            t["t2b"],
            t["t2c"],
            t["t3"],
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


# -- GPU measurement -----------------------------------------------------------------------------------


def _warm_up(fn, x: torch.Tensor, min_n: int, min_s: float = 0.3, max_s: float = 1.5, tol: float = 0.05) -> int:
    """Untimed calls: at least `min_n` and `min_s` seconds, then until two consecutive ~25 ms chunks
    agree within `tol` per call, at most `max_s` (as `benchmarks._models.warm_up`, which asv runs
    against older commits and so cannot import this). H200 session 5: the first configuration at a
    new size read 10,927 images/s after 5 warm-up forwards, the next one (other backend) 14,011.

    Returns:
        calls made.
    """
    t_start, n, prev, chunk = time.perf_counter(), 0, None, max(1, min_n)
    while True:
        t0 = time.perf_counter()
        for _ in range(chunk):
            fn(x)
        torch.cuda.synchronize()
        now = time.perf_counter()
        n, dt = n + chunk, (now - t0) / chunk
        steady = prev is not None and abs(dt - prev) <= tol * prev
        if n >= min_n and ((now - t_start >= min_s and steady) or now - t_start >= max(max_s, min_s)):
            return n
        prev, chunk = dt, max(1, min(1000, int(0.025 / max(dt, 1e-6))))


def _time(fn, x: torch.Tensor, repeats: int, min_time: float) -> float:
    """Median seconds per call over `repeats`, each repeat >= min_time long (synchronised host clock)."""
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn(x)
    torch.cuda.synchronize()
    one = max(time.perf_counter() - t0, 1e-6)
    iters = max(1, min(500, int(min_time / one)))
    times = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(iters):
            fn(x)
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) / iters)
    return statistics.median(times)


class ModelCache:
    """Backbones per model and bound (calibrated) pruners per (model, pruner), built once.

    Built with `build_pruned_model` (seed 0, so the backbone equals what every backend would build)
    and moved to `device`/`dtype`; `make` wraps them in a fresh PrunedDeiT (a copy of the pruner) per
    configuration, as `build_pruned_model(...).to(device, dtype)` would.

    Args:
        budget: see `budget_options`.
        device, dtype: where the models run (the bench: CUDA, fp16).
        calibrated_capacity: Threshold-L2 with max_keep="calibrate" (a per-stage static capacity
            learned on the calibration images, so graph mode runs the later blocks below full size).
        same_decisions: every configuration of a (model, pruner, batch) replays the keep masks the
            first one measured took on the bench images (`PrunedDeiT.keep_override`; the pruner still
            computes its own, so its cost stays in the timing). Issue 4 compares backends "with the
            same pruning decisions"; in fp16 the backends' own decisions differ in a few tokens
            (Threshold-L2 norms, ATS samples, near-ties of top-k). eager+exact configurations keep
            their own: their dense views are narrower, so the masks do not fit.
    """

    def __init__(self, budget: float, device: str | torch.device = "cuda", dtype: torch.dtype = torch.float16,
                 calibrated_capacity: bool = False, same_decisions: bool = True) -> None:
        self.budget = budget
        self.calibrated_capacity = calibrated_capacity
        self.same_decisions = same_decisions
        self.decisions: dict[tuple, list[torch.Tensor]] = {}
        self.device, self.dtype = device, dtype
        self.backbones: dict[str, torch.nn.Module] = {}
        self.pruners: dict[tuple[str, str | None], torch.nn.Module] = {}

    def _parts(self, model_name: str, pruner_name: str | None):
        key = (model_name, pruner_name)
        if key not in self.pruners:
            n0 = (image_size(model_name) // 16) ** 2
            options = {} if pruner_name is None else budget_options(pruner_name, self.budget, n0)
            if self.calibrated_capacity and pruner_name == "threshold_l2":
                options["max_keep"] = "calibrate"  # per-stage caps learned with the thresholds
            pr = None if pruner_name is None else create_pruner(pruner_name, **options)
            built = build_pruned_model(model_name, pr, "dense" if pr is None else "reference")
            if model_name not in self.backbones:
                self.backbones[model_name] = built.backbone.to(self.device, self.dtype)
            self.pruners[key] = built.pruner.to(self.device, self.dtype)
            del built
        return self.backbones[model_name], self.pruners[key]

    def make(self, cfg: Config) -> tuple[torch.nn.Module, PrunedDeiT]:
        """(the model to time, its eager PrunedDeiT) for a configuration."""
        backbone, pruner = self._parts(cfg.model, cfg.pruner)
        inner = PrunedDeiT(
            backbone, copy.deepcopy(pruner), cfg.backend, exact_capacity=cfg.exact, ragged_linear=cfg.rlinear
        ).eval()
        return (GraphedPrunedModel(inner) if cfg.mode == "graph" else inner), inner


@torch.no_grad()
def bench_one(cfg: Config, cache: ModelCache, repeats: int, min_time: float, warmup: int) -> dict:
    """Throughput and kept-count figures of one configuration; returns a result row."""
    torch.cuda.reset_peak_memory_stats()
    model, inner = cache.make(cfg)
    try:
        x = synthetic_images(cfg.batch, image_size(cfg.model), seed=1).half().cuda()
        decisions = "own"
        key = (cfg.model, cfg.pruner, cfg.batch)
        if cache.same_decisions and cfg.pruner is not None and not cfg.exact:
            if key in cache.decisions:
                inner.keep_override, decisions = cache.decisions[key], "replayed"
            else:
                inner.record, decisions = True, "recorded"
        stats = measure_tokens(inner, x)  # untimed, eager; the pack hook is gone afterwards
        if inner.record:  # the first configuration: from now on it replays what it just decided, as the rest do
            cache.decisions[key] = inner.keep_override = [k.clone() for k in inner.recorded_keeps]
            inner.record = False
        _warm_up(model, x, warmup)
        sec = _time(model, x, repeats, min_time)
        peak = torch.cuda.max_memory_allocated() / 2**30
    finally:
        del model, inner
        torch.cuda.empty_cache()
    ragged = cfg.pruner is not None and bool(cache.pruners[(cfg.model, cfg.pruner)].ragged)
    return dict(
        table="throughput",
        model=cfg.model,
        pruner=cfg.pruner,
        backend=cfg.backend,
        mode=cfg.mode_label,
        batch=cfg.batch,
        img_per_s=cfg.batch / sec,
        ms=sec * 1e3,
        ragged=ragged,
        decisions=decisions,
        peak_gib=peak,
        **stats,
    )


HEADER = (
    f"{'model':24} {'pruner':13} {'backend':12} {'mode':12} {'batch':>5} {'img/s':>10} {'ms':>9} {'tokens':>6} "
    f"{'pad/pk':>6} {'FLOPx':>6} {'GiB':>6} {'t[s]':>6}"
)


def _row_line(r: dict) -> str:
    return (
        f"{r['model']:24} {r['pruner'] or '-':13} {r['backend']:12} {r['mode']:12} {r['batch']:>5} "
        f"{r['img_per_s']:10.1f} {r['ms']:9.3f} {r['token_fraction']:6.3f} {r['token_ratio']:6.3f} "
        f"{r['flop_ratio']:6.2f} {r['peak_gib']:6.2f} {r['elapsed_s']:6.0f}"
    )


def _arg_type(convert: Callable[[str], float], ok: Callable[[float], bool], expected: str) -> Callable[[str], float]:
    """An argparse `type`: `convert`, then `ok`; argparse names the argument in the error."""

    def parse(text: str) -> float:
        try:
            value = convert(text)
        except ValueError:
            value = None
        if value is None or not ok(value):
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
        return value

    return parse


_positive_int = _arg_type(int, lambda n: n >= 1, "an integer >= 1")
_non_negative_int = _arg_type(int, lambda n: n >= 0, "an integer >= 0")
_positive_seconds = _arg_type(float, lambda t: math.isfinite(t) and t > 0, "a finite number of seconds > 0")
_non_negative_seconds = _arg_type(float, lambda t: math.isfinite(t) and t >= 0, "a finite number of seconds >= 0")
_budget = _arg_type(float, lambda b: BUDGET_MIN < b <= BUDGET_MAX, f"a number in ({BUDGET_MIN}, {BUDGET_MAX}]")


def json_path_problem(path: str) -> str | None:
    """Why the results could not be written to `path` (None: they can), checked without creating it."""
    if not path:
        return "empty file name"
    if os.path.isdir(path):
        return "is a folder, not a file name"
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        return f"folder {folder} does not exist"
    if os.path.exists(path) and not os.access(path, os.W_OK):
        return "file is not writable"
    if not os.path.exists(path) and not os.access(folder, os.W_OK | os.X_OK):
        return f"folder {folder} is not writable"
    return None


def main(argv: list[str] | None = None) -> int:
    """CLI entry point; see the module docstring. Every argument is checked before the CUDA check."""
    t_start = time.monotonic()
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["deit_small_patch16_224", "deit_base_patch16_224"], choices=MODELS)
    ap.add_argument("--pruners", nargs="+", default=list(PRUNERS), choices=sorted(PRUNERS))
    ap.add_argument("--backends", nargs="+", default=list(BACKENDS), choices=BACKENDS)
    ap.add_argument("--batches", nargs="+", type=_positive_int, default=[1, 4, 64, 256], help="images per forward")
    ap.add_argument(
        "--budget",
        type=_budget,
        default=0.5,
        help=f"mean token fraction per block (0.5 = ~50%% pruning), in ({BUDGET_MIN}, {BUDGET_MAX}]: the first 3 of "
        "the 12 blocks always see every token, so 0.25 would mean keeping nothing; 1 = no pruning",
    )
    ap.add_argument("--repeats", type=_positive_int, default=7)
    ap.add_argument("--min-time", type=_non_negative_seconds, default=0.2, help="seconds per repeat")
    ap.add_argument("--warmup", type=_non_negative_int, default=5,
                    help="untimed forwards at least; then for >= 0.3 s and until steady (at most 1.5 s)")
    ap.add_argument("--exact-capacity", action="store_true", help="also time eager exact_capacity for ragged pruners")
    ap.add_argument(
        "--ragged-linear",
        action="store_true",
        help="also time triton graph mode with ragged_linear=True for ragged pruners (experimental)",
    )
    ap.add_argument(
        "--calibrated-capacity",
        action="store_true",
        help="Threshold-L2 with max_keep='calibrate': per-stage capacity caps learned on the calibration images "
        "(every backend shares them, so decisions still agree)",
    )
    ap.add_argument(
        "--own-decisions",
        action="store_true",
        help="let every backend take its own keep decisions (default: each (model, pruner, batch) replays the "
        "decisions of its first configuration, so the backends are timed on the same packed tokens)",
    )
    ap.add_argument(
        "--order",
        choices=ORDERS,
        default="grid",
        help="grid: models x pruners x batches (default); issue4-first: first the issue-4 points run 3 did not "
        "measure (deit_base_patch16_224 B 64/256, deit_base_patch16_384 B 1/4/16/64; backends triton graph+eager, "
        "fa2_varlen, padded_sdpa, dense; --pruners), then the grid",
    )
    ap.add_argument(
        "--time-box",
        type=_positive_seconds,
        default=None,
        metavar="SECONDS",
        help="start no configuration once SECONDS have passed since main() began (after the imports; the "
        "running configuration finishes, then the tables print); the ones not started are listed",
    )
    ap.add_argument("--dry-run", action="store_true", help="print the planned configurations in order and exit")
    ap.add_argument("--json", help="write the rows (throughput, targets, skipped) to this file as JSON "
                    "(its folder must exist and be writable; checked before anything runs)")
    args = ap.parse_args(argv)
    if args.json is not None and (problem := json_path_problem(args.json)):
        ap.error(f"argument --json: cannot write {args.json!r}: {problem}")
    configs = plan(
        args.order, args.models, args.pruners, args.batches, args.backends, args.exact_capacity, args.ragged_linear
    )
    if args.dry_run:
        for i, c in enumerate(configs):
            print(f"{i:4} {c}")
        return 0
    if not torch.cuda.is_available():
        print("bench_e2e needs a CUDA GPU", file=sys.stderr)
        return 2
    print(f"{len(configs)} configurations, order {args.order}, time box {args.time_box or 'none'}")
    print(HEADER)
    cache = ModelCache(args.budget, calibrated_capacity=args.calibrated_capacity,
                       same_decisions=not args.own_decisions)

    def on_error(cfg: Config, msg: str) -> None:
        print(
            f"{cfg.model:24} {cfg.pruner or '-':13} {cfg.backend:12} {cfg.mode_label:12} {cfg.batch:>5} failed: {msg}"
        )

    res = run_plan(
        configs,
        lambda c: bench_one(c, cache, args.repeats, args.min_time, args.warmup),
        time_box=args.time_box,
        start=t_start,
        on_row=lambda r: print(_row_line(r), flush=True),
        on_error=on_error,
    )
    print("\n### throughput (images/s)\n")
    print("\n".join(throughput_table(res.rows)))
    targets = target_rows(res.rows)
    print("\n### targets\n")
    print(
        "triton best = fastest triton graph/eager row; /x = its images/s over x (eager); /dense uses the fastest "
        "triton row of any mode (named when it is +exact) and the faster of dense's two readings (first and "
        "last); pad/packed tokens = sum over blocks "
        "of B x longest / sum of lengths (its kept counts); 2b reached = (/padded) / (pad/packed), target >= "
        f"{TARGET_2B_FRACTION}; FLOP ratio = dense / pruned from the kept counts (@cap: linear layers on the "
        f"packed capacity rows); 2c reached = (/dense) / FLOP ratio, target >= {TARGET_2C_FRACTION}\n"
    )
    print("\n".join(targets_table(targets)))
    if res.failed:
        print(f"\n{len(res.failed)} configurations failed:")
        for c, msg in res.failed:
            print(f"  {c}: {msg.splitlines()[0] if msg else ''}")
    if res.skipped:
        print(f"\ntime box ({args.time_box:.0f} s) reached: {len(res.skipped)} configurations not started:")
        for line in describe_skipped(res.skipped):
            print(f"  {line}")
    print(f"\ntotal {time.monotonic() - t_start:.0f} s")
    if args.json:
        out = list(res.rows) + [dict(table="targets", **t) for t in targets]
        out += [dict(table="skipped", **asdict(c)) for c in res.skipped]
        out += [dict(table="failed", error=msg, **asdict(c)) for c, msg in res.failed]
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
