"""DynamicViT (Rao et al., NeurIPS 2021, arXiv 2106.02034), inference path.

Source: github.com/raoyongming/DynamicViT `vit.py` (PredictorLG, VisionTransformerDiffPruning.forward)
and `main.py` (DeiT: PRUNING_LOC=[3, 6, 9], KEEP_RATE=[r, r**2, r**3]). Three learned predictors run
*before* blocks 3/6/9 on the non-CLS tokens; stage s keeps the top `int(N0 * rho**s)` tokens by
log P(keep), where N0 is the initial patch count (the reference hard-codes 14*14; we use the model's
`num_patches`, so 576 at 384 px). Predictor weights are seeded (trunc_normal std .02, zero bias, as
the reference initialises them) unless a DynamicViT checkpoint is given.

`mode="threshold"` is a labelled non-reference variant: keep where P(keep) > 0.5 (the deterministic
analogue of the training-time hard decision), which gives per-image (ragged) counts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from pruners._ops import rank_desc, with_cls
from pruners.base import AttnInfo, ModelInfo, Pruner, per_stage, register


class PredictorLG(nn.Module):
    """DynamicViT's score predictor; module names match the reference so its checkpoints load."""

    def __init__(self, embed_dim: int) -> None:
        super().__init__()
        self.in_conv = nn.Sequential(nn.LayerNorm(embed_dim), nn.Linear(embed_dim, embed_dim), nn.GELU())
        self.out_conv = nn.Sequential(
            nn.Linear(embed_dim, embed_dim // 2),
            nn.GELU(),
            nn.Linear(embed_dim // 2, embed_dim // 4),
            nn.GELU(),
            nn.Linear(embed_dim // 4, 2),
            nn.LogSoftmax(dim=-1),
        )

    def forward(self, x: torch.Tensor, policy: torch.Tensor, skip_first: bool = False) -> torch.Tensor:
        """Log-probabilities [B, N, 2] (index 0 = keep) for tokens x [B, N, C] with policy [B, N] bool.

        skip_first: x is [B, 1 + N, C] with the class token first, which is left out (the reference
        slices x[:, 1:]). Every layer is row-wise except the policy-weighted mean, so the whole predictor
        runs on all 1 + N rows (the class token weighted 0 in the mean) and only its output is sliced:
        no strided [B, N, C] input is copied for the norm or a Linear."""
        h = self.in_conv(x)
        c = h.shape[-1]
        if skip_first:
            w = torch.zeros(h.shape[:2], dtype=h.dtype, device=h.device)
            w[:, 1:] = policy
        else:
            w = policy.to(h.dtype)
        # Mean of the global half over the currently present tokens (reference: policy-weighted mean),
        # as one batched product [B, 1, N] x [B, N, C/2] instead of a weighted copy and a sum.
        glob = torch.bmm(w[:, None, :], h[..., c // 2 :]) / w.sum(1).clamp_min(1)[:, None, None]
        # The reference applies out_conv[0] to cat([local, glob expanded over the tokens]). The same
        # Linear split over its input halves needs no [B, N, C] concatenation, and the global half is
        # one row per image instead of N: local @ W_l^T + (glob @ W_g^T + b).
        first = self.out_conv[0]
        w_local, w_glob = first.weight[:, : c // 2], first.weight[:, c // 2 :]
        y = F.linear(h[..., : c // 2], w_local) + F.linear(glob, w_glob, first.bias)
        out = self.out_conv[1:](y)
        return out[:, 1:] if skip_first else out


def _init_weights(m: nn.Module) -> None:
    if isinstance(m, nn.Linear):
        nn.init.trunc_normal_(m.weight, std=0.02)
        nn.init.zeros_(m.bias)
    elif isinstance(m, nn.LayerNorm):
        nn.init.ones_(m.weight)
        nn.init.zeros_(m.bias)


@register
class DynamicViTPruner(Pruner):
    """DynamicViT token pruning with three (configurable) learned predictors.

    Args:
        rho: base keep rate; stage s keeps int(N0 * rho**(s+1)) tokens (reference default 0.7).
        keep_ratios: explicit cumulative keep ratio per stage (overrides rho).
        stages: block indices the predictors run before (default (3, 6, 9)).
        mode: "ratio" (reference, fixed count) or "threshold" (variant: keep where P(keep) > 0.5).
        min_keep: threshold mode only: always keep the top `min_keep` tokens per image.
        checkpoint_path: a DynamicViT checkpoint (keys `score_predictor.<i>.*`, optionally under
            "model"); without it predictors get seeded random weights.
    """

    name = "dynamicvit"
    placement = "before_block"

    def __init__(
        self,
        *,
        rho: float | None = None,
        keep_ratios: Sequence[float] | None = None,
        stages: Sequence[int] = (3, 6, 9),
        mode: Literal["ratio", "threshold"] = "ratio",
        min_keep: int = 1,
        checkpoint_path: str | None = None,
    ) -> None:
        super().__init__(stages)
        if mode not in ("ratio", "threshold"):
            raise ValueError(f"dynamicvit: mode must be 'ratio' or 'threshold', got {mode!r}")
        if keep_ratios is not None and rho is not None:
            raise ValueError("dynamicvit: give rho (ratio rho**(s+1) at stage s) or keep_ratios, not both")
        if keep_ratios is None:
            rho = 0.7 if rho is None else rho
            if isinstance(rho, bool) or not isinstance(rho, (int, float)) or not 0 < rho <= 1:
                raise ValueError(f"dynamicvit: rho must be in (0, 1], got {rho!r}")
            keep_ratios = tuple(rho ** (s + 1) for s in range(len(self.stages)))
        self.keep_ratios = per_stage(keep_ratios, len(self.stages), "keep_ratios", self.name)
        if any(not 0 < r <= 1 for r in self.keep_ratios):
            raise ValueError(f"dynamicvit: keep ratios must be in (0, 1], got {self.keep_ratios}")
        if isinstance(min_keep, bool) or not isinstance(min_keep, int) or min_keep < 1:
            raise ValueError(f"dynamicvit: min_keep must be an int >= 1, got {min_keep!r}")
        self.mode = mode
        self.min_keep = min_keep
        self.checkpoint_path = checkpoint_path
        self.ragged = mode == "threshold"
        self.predictors = nn.ModuleList()

    def bind(self, info: ModelInfo) -> None:
        super().bind(info)
        if len(self.predictors) == len(self.stages) and self.predictors[0].in_conv[1].in_features == info.embed_dim:
            return
        with torch.random.fork_rng(devices=[]):
            # A seed derived from the backbone seed: same seed -> same predictors under every backend.
            torch.manual_seed(info.seed + 1_000_003)
            preds = nn.ModuleList(PredictorLG(info.embed_dim) for _ in self.stages)
            preds.apply(_init_weights)
        if self.checkpoint_path is not None:
            state = torch.load(self.checkpoint_path, map_location="cpu", weights_only=True)
            state = state.get("model", state)
            sub = {k[len("score_predictor.") :]: v for k, v in state.items() if k.startswith("score_predictor.")}
            if not sub:
                raise ValueError(f"dynamicvit: no 'score_predictor.*' weights in {self.checkpoint_path}")
            preds.load_state_dict(sub)
        self.predictors = preds

    def _count(self, stage: int) -> int:
        assert self.info is not None
        return int(self.info.num_patches * self.keep_ratios[stage])

    def decide(self, stage: int, x: torch.Tensor, valid: torch.Tensor, attn: AttnInfo | None) -> torch.Tensor:
        tok_valid = valid[:, 1:]
        logp = self.predictors[stage](x, tok_valid, skip_first=True)
        rank = rank_desc(logp[..., 0], tok_valid)
        if self.mode == "ratio":
            keep = rank < self._count(stage)
        else:
            keep = (logp[..., 0] > logp[..., 1]) | (rank < self.min_keep)
        return with_cls(keep, tok_valid)

    def tokens_bound(self, stage: int, n_in: int) -> int:
        if self.mode == "ratio":
            return 1 + min(n_in - 1, self._count(stage))
        return n_in

    def is_noop(self, stage: int, n_in: int) -> bool:
        return self.mode == "ratio" and self._count(stage) >= n_in - 1

    def extra_repr(self) -> str:
        return f"stages={self.stages}, keep_ratios={self.keep_ratios}, mode={self.mode!r}"
