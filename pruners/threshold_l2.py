"""Threshold-L2: keep the tokens whose residual-stream L2 norm exceeds a per-stage threshold.

No reference repository (project-defined ragged baseline, reference notes section 5). Scores are
||x_j||_2 of the block input (before norm1, where norms still differ); CLS is never scored and always
kept; at least `min_keep` tokens (the largest norms) survive per image. Thresholds are absolute, one
per stage, either given or calibrated: tau_s = quantile(1 - keep_ratio_s) of the non-CLS token norms
at stage s over a calibration batch, stage after stage (stage s sees the tokens stages < s kept).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from pruners._ops import rank_desc
from pruners.base import AttnInfo, Pruner, per_stage, register


@register
class ThresholdL2Pruner(Pruner):
    """Per-image (ragged) pruning by residual-stream token norm.

    Args:
        stages: blocks the pruning runs before (default (3, 6, 9)).
        thresholds: absolute tau per stage; None = calibrate (see `build_pruned_model`).
        keep_ratio: calibration target, fraction of the current tokens kept per stage (0.7).
        min_keep: tokens always kept per image (top by norm), >= 1.
        max_keep: optional cap on non-CLS tokens kept per image (a tighter static capacity).
    """

    name = "threshold_l2"
    placement = "before_block"
    ragged = True

    def __init__(
        self,
        *,
        stages: Sequence[int] = (3, 6, 9),
        thresholds: float | Sequence[float] | None = None,
        keep_ratio: float | Sequence[float] = 0.7,
        min_keep: int = 1,
        max_keep: int | None = None,
    ) -> None:
        super().__init__(stages)
        n = len(self.stages)
        self.keep_ratios = per_stage(keep_ratio, n, "keep_ratio", self.name)
        if any(not 0 < r <= 1 for r in self.keep_ratios):
            raise ValueError(f"threshold_l2: keep_ratio must be in (0, 1], got {self.keep_ratios}")
        if not isinstance(min_keep, int) or min_keep < 1:
            raise ValueError(f"threshold_l2: min_keep must be an int >= 1, got {min_keep!r}")
        if max_keep is not None and (not isinstance(max_keep, int) or max_keep < min_keep):
            raise ValueError(f"threshold_l2: max_keep must be an int >= min_keep or None, got {max_keep!r}")
        self.min_keep, self.max_keep = min_keep, max_keep
        taus = per_stage(thresholds, n, "thresholds", self.name)
        if taus is not None and any(not math.isfinite(t) and t != float("-inf") for t in taus):
            raise ValueError(f"threshold_l2: thresholds must be finite (or -inf), got {taus}")
        self.register_buffer("thresholds", torch.tensor(taus if taus else [float("nan")] * n, dtype=torch.float32))
        self.calibrated = taus is not None
        self.calibrating = False

    def _apply(self, fn, recurse: bool = True):
        # Keep thresholds in fp32 through model.half(): fp16 would round tau (norms ~10-100) by up to ~0.06.
        taus = self.thresholds.detach().clone()
        out = super()._apply(fn, recurse)
        self.thresholds = taus.to(self.thresholds.device)
        return out

    def decide(self, stage: int, x: torch.Tensor, valid: torch.Tensor, attn: AttnInfo | None) -> torch.Tensor:
        tok_valid = valid[:, 1:]
        norms = x[:, 1:].float().norm(dim=-1)
        if self.calibrating:
            q = 1.0 - self.keep_ratios[stage]
            # Calibration only (outside any timed or captured forward): boolean indexing is fine here.
            self.thresholds[stage] = torch.quantile(norms[tok_valid], q) if q > 0 else float("-inf")
        elif not self.calibrated:
            raise ValueError("threshold_l2: thresholds are not calibrated; pass thresholds=... or calibrate")
        rank = rank_desc(norms, tok_valid)
        keep = (norms > self.thresholds[stage]) | (rank < self.min_keep)
        if self.max_keep is not None:
            keep = keep & (rank < self.max_keep)
        keep = keep & tok_valid
        return torch.cat([torch.ones_like(keep[:, :1]), keep], dim=1)

    def tokens_bound(self, stage: int, n_in: int) -> int:
        return n_in if self.max_keep is None else min(n_in, 1 + self.max_keep)

    def extra_repr(self) -> str:
        return f"stages={self.stages}, keep_ratios={self.keep_ratios}, calibrated={self.calibrated}"
