"""Threshold-L2: keep the tokens whose residual-stream L2 norm exceeds a per-stage threshold.

No reference repository (a ragged baseline this project defines). Scores are
||x_j||_2 of the block input (before norm1, where norms still differ); CLS is never scored and always
kept; at least `min_keep` tokens (the largest norms) survive per image. Thresholds are absolute, one
per stage, either given or calibrated: tau_s = quantile(1 - keep_ratio_s) of the non-CLS token norms
at stage s over a calibration batch, stage after stage (stage s sees the tokens stages < s kept).

Capacity: the packed buffer after a stage must hold the most tokens any image can keep, a host int
known before the forward (graph mode captures it). Uncapped, that is every token of the stage
before, so the blocks after a stage run at the unpruned size. `max_keep` caps the tokens an image
keeps (the largest norms win), per stage or for all; `max_keep="calibrate"` learns the cap on the
calibration batch: (1 + capacity_margin) x the most tokens any calibration image kept at that stage.
An image that would keep more then loses its lowest-norm surplus tokens.

Batch capacity: a per-image cap must cover the image that keeps the most, but a batch's total
concentrates around B x the mean (its spread grows as sqrt(B), not B). With `max_keep="calibrate"`
the calibration also records the mean tokens an image keeps per stage (mu), and the packed buffer of
a batch of B images holds B x mu' + (cap - mu') x sqrt(B) non-CLS tokens, mu' = (1 + batch_margin) mu:
the per-image cap at B = 1, close to B x mu' for large batches (DeiT-B B 64: the buffer after the
last stage drops from 45 to ~36 tokens per image; 2026-11-29, docs/performance.md "End to end
against the fastest dense model"). A batch that would
keep more is water-filled: the largest per-image limit c with sum_i min(k_i, c) <= budget, and each
image keeps its top min(k_i, c) tokens by norm. So an image's decision depends on its batch only when
the batch overflows the budget; every backend applies the same rule, so their decisions stay equal.
`batch_margin=None` turns it off (the per-image caps alone size the buffers).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from pruners._ops import dense_index, gather_dense, rank_desc, uniform_cu_seqlens, with_cls
from pruners.base import AttnInfo, Pruner, per_stage, register


@register
class ThresholdL2Pruner(Pruner):
    """Per-image (ragged) pruning by residual-stream token norm.

    Args:
        stages: blocks the pruning runs before (default (3, 6, 9)).
        thresholds: absolute tau per stage; None = calibrate (see `build_pruned_model`).
        keep_ratio: calibration target, fraction of the current tokens kept per stage (0.7).
        min_keep: tokens always kept per image (top by norm), >= 1.
        max_keep: optional cap on non-CLS tokens kept per image (a tighter static capacity): an int,
            one per stage, or "calibrate" (learned with the thresholds; see the module docstring).
        capacity_margin: with max_keep="calibrate", the headroom over the calibration maximum (0.25).
        batch_margin: with max_keep="calibrate", the headroom of a batch's budget over the calibration
            mean (0.1; see the module docstring), or None for no batch budget.
    """

    name = "threshold_l2"
    placement = "before_block"
    ragged = True
    capacity_hint = "pass max_keep='calibrate': a per-stage cap and batch budget learned with the thresholds"

    def __init__(
        self,
        *,
        stages: Sequence[int] = (3, 6, 9),
        thresholds: float | Sequence[float] | None = None,
        keep_ratio: float | Sequence[float] = 0.7,
        min_keep: int = 1,
        max_keep: int | Sequence[int] | str | None = None,
        capacity_margin: float = 0.25,
        batch_margin: float | None = 0.1,
    ) -> None:
        super().__init__(stages)
        n = len(self.stages)
        self.keep_ratios = per_stage(keep_ratio, n, "keep_ratio", self.name)
        if any(not 0 < r <= 1 for r in self.keep_ratios):
            raise ValueError(f"threshold_l2: keep_ratio must be in (0, 1], got {self.keep_ratios}")
        if isinstance(min_keep, bool) or not isinstance(min_keep, int) or min_keep < 1:
            raise ValueError(f"threshold_l2: min_keep must be an int >= 1, got {min_keep!r}")
        self.calibrate_caps = max_keep == "calibrate"
        if isinstance(max_keep, str) and not self.calibrate_caps:
            raise ValueError(f"threshold_l2: max_keep must be an int, one per stage, 'calibrate' or None, "
                             f"got {max_keep!r}")
        caps = None if self.calibrate_caps else per_stage(max_keep, n, "max_keep", self.name)
        if caps is not None and any(isinstance(c, bool) or not isinstance(c, int) or c < min_keep for c in caps):
            raise ValueError(f"threshold_l2: max_keep must be ints >= min_keep ({min_keep}), got {max_keep!r}")
        if isinstance(capacity_margin, bool) or not isinstance(capacity_margin, (int, float)) or not (
            0 <= capacity_margin < math.inf
        ):
            raise ValueError(f"threshold_l2: capacity_margin must be a finite number >= 0, got {capacity_margin!r}")
        if batch_margin is not None and (
            isinstance(batch_margin, bool) or not isinstance(batch_margin, (int, float))
            or not 0 <= batch_margin < math.inf
        ):
            raise ValueError(f"threshold_l2: batch_margin must be a finite number >= 0 or None, got {batch_margin!r}")
        self.min_keep, self.capacity_margin = min_keep, float(capacity_margin)
        self.batch_margin = None if batch_margin is None else float(batch_margin)
        # Per-stage mean of the non-CLS tokens a calibration image keeps (after its cap): host floats,
        # learned with max_keep="calibrate" (None = unknown: no batch budget).
        self.mean_keeps: tuple[float | None, ...] = (None,) * n
        # Per-stage caps (host ints, None = uncapped): given, or filled in by calibration.
        self.max_keeps: tuple[int | None, ...] = caps if caps is not None else (None,) * n
        taus = per_stage(thresholds, n, "thresholds", self.name)
        self.calibrate_taus = taus is None
        if taus is not None and any(not math.isfinite(t) and t != float("-inf") for t in taus):
            raise ValueError(f"threshold_l2: thresholds must be finite (or -inf), got {taus}")
        self.register_buffer("thresholds", torch.tensor(taus if taus else [float("nan")] * n, dtype=torch.float32))
        self.calibrated = taus is not None and not self.calibrate_caps
        self.calibrating = False

    @property
    def max_keep(self) -> int | None:
        """The cap of a single-cap pruner (the same at every stage), else None."""
        caps = set(self.max_keeps)
        return caps.pop() if len(caps) == 1 else None

    def _apply(self, fn, recurse: bool = True):
        # Keep thresholds in fp32 through model.half(): fp16 would round tau (norms ~10-100) by up to ~0.06.
        taus = self.thresholds.detach().clone()
        out = super()._apply(fn, recurse)
        self.thresholds = taus.to(self.thresholds.device)
        return out

    def decide(self, stage: int, x: torch.Tensor, valid: torch.Tensor, attn: AttnInfo | None) -> torch.Tensor:
        norms = torch.linalg.vector_norm(x, dim=-1, dtype=torch.float32)  # fp32 sums, no fp32 copy of x
        return self._keep_by_norms(stage, norms, valid)

    def decide_packed(self, stage, x, cu_seqlens, max_seqlen, qkv=None, scale=None):
        """`decide` with the norms taken on the packed rows: only [B, N] scalars are gathered into the
        dense view, not the [B, N, C] tokens (the same values: each row's norm is the same reduction)."""
        norms = torch.linalg.vector_norm(x, dim=-1, dtype=torch.float32)
        if x.is_cuda and self.calibrated and not self.calibrating:
            # One kernel for the rest of the stage (`pruners.kernels.threshold`): the same masks.
            from pruners.kernels.threshold import threshold_keep_fused

            if cu_seqlens is None:  # the first stage: dense [B, N, C], every position valid
                b, n = norms.shape
                cu_seqlens = uniform_cu_seqlens(b, n, x.device)
                norms = norms.reshape(-1)
            return threshold_keep_fused(norms, cu_seqlens, max_seqlen, self.thresholds[stage:stage + 1],
                                        self.min_keep, self.max_keeps[stage],
                                        self.batch_budget(stage, cu_seqlens.shape[0] - 1))
        if cu_seqlens is None:
            return self._keep_by_norms(stage, norms, torch.ones_like(norms, dtype=torch.bool))
        index = dense_index(cu_seqlens, max_seqlen, x.shape[0])
        return self._keep_by_norms(stage, gather_dense(norms, index), index[1])

    def _keep_by_norms(self, stage: int, norms: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        """The decision from every position's token norm [B, N] (CLS first; any value at invalid positions)."""
        tok_valid = valid[:, 1:]
        norms = norms[:, 1:]
        if self.calibrating and self.calibrate_taus:
            q = 1.0 - self.keep_ratios[stage]
            # Calibration only (outside any timed or captured forward): boolean indexing is fine here.
            self.thresholds[stage] = torch.quantile(norms[tok_valid], q) if q > 0 else float("-inf")
        elif not self.calibrated and not self.calibrating:
            what = "thresholds and capacity caps are" if self.calibrate_caps else "thresholds are"
            raise ValueError(f"threshold_l2: {what} not calibrated; pass thresholds=... / max_keep=... or calibrate")
        rank = rank_desc(norms, tok_valid)
        keep = (norms > self.thresholds[stage]) | (rank < self.min_keep)
        if self.calibrating and self.calibrate_caps:
            # Host reads, calibration only: the most tokens any calibration image keeps here, plus headroom,
            # and (under that cap) the mean, which sizes a batch's budget.
            most = int((keep & tok_valid).sum(1).max())
            cap = min(max(self.min_keep, math.ceil(most * (1.0 + self.capacity_margin))), tok_valid.shape[1])
            self.max_keeps = _replace(self.max_keeps, stage, cap)
            mean = float((keep & tok_valid & (rank < cap)).sum(1, dtype=torch.float64).mean())
            self.mean_keeps = _replace(self.mean_keeps, stage, mean)
        cap = self.max_keeps[stage]
        if cap is not None:
            keep = keep & (rank < cap)
        budget = None if self.calibrating else self.batch_budget(stage, norms.shape[0])
        if budget is not None:
            # Water-filling (module docstring): the largest c in [0, N] with sum_i min(k_i, c) <= budget.
            # keep is a prefix in rank order per image (ranks < k_i), so min(k_i, c) is `rank < c` on it.
            k = (keep & tok_valid).sum(1)
            levels = torch.arange(norms.shape[1] + 1, device=k.device)
            fits = torch.minimum(k[None, :], levels[:, None]).sum(1) <= budget  # a prefix of the levels
            keep = keep & (rank < fits.sum() - 1)
        return with_cls(keep, tok_valid)

    def batch_budget(self, stage: int, batch: int) -> int | None:
        """The most non-CLS tokens a batch of `batch` images keeps after `stage` (host int), or None when
        only the per-image cap bounds it (no calibrated mean, `batch_margin=None`, or no tighter than
        batch x cap). See the module docstring."""
        cap, mean = self.max_keeps[stage], self.mean_keeps[stage]
        if cap is None or mean is None or self.batch_margin is None or batch < 1:
            return None
        mu = min(float(cap), mean * (1.0 + self.batch_margin))
        budget = max(batch * self.min_keep, math.ceil(batch * mu + (cap - mu) * math.sqrt(batch) - 1e-9))
        return budget if budget < batch * cap else None

    def rows_bound(self, stage: int, n_in: int, batch: int) -> int:
        bound = batch * self.tokens_bound(stage, n_in)
        budget = self.batch_budget(stage, batch)
        return bound if budget is None else min(bound, batch + budget)

    def tokens_bound(self, stage: int, n_in: int) -> int:
        cap = self.max_keeps[stage]
        return n_in if cap is None else min(n_in, 1 + cap)

    def extra_repr(self) -> str:
        caps = f", max_keeps={self.max_keeps}" if any(c is not None for c in self.max_keeps) else ""
        if any(m is not None for m in self.mean_keeps) and self.batch_margin is not None:
            caps += f", mean_keeps={tuple(None if m is None else round(m, 2) for m in self.mean_keeps)}"
        return f"stages={self.stages}, keep_ratios={self.keep_ratios}, calibrated={self.calibrated}{caps}"


def _replace(values: tuple, i: int, value) -> tuple:
    out = list(values)
    out[i] = value
    return tuple(out)
