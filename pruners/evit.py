"""EViT (Liang et al., ICLR 2022), inference path.

Source: github.com/youweiliang/evit `evit.py` (Attention/Block with keep_rate, drop_loc=(3, 6, 9),
base_keep_rate 0.7, `--fuse_token`). Inside blocks 3/6/9, after attention and its residual add, keep
the K = ceil(keep_rate * M) non-CLS tokens with the largest head-mean CLS attention (M = current
non-CLS count, a previously fused token included) and, with fusion, append ONE token
sum_j a_j x_j over the dropped tokens (a_j the raw head-mean attention, not renormalised). The MLP
of the same block then runs on the kept tokens only.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from pruners._ops import ceil_count, host_ceil, rank_desc, with_cls
from pruners.base import AttnInfo, Pruner, per_stage, register


@register
class EViTPruner(Pruner):
    """EViT: keep the most attended tokens (CLS attention, head mean), optionally fuse the rest.

    Args:
        keep_rate: per-stage keep rate of the current non-CLS tokens (scalar or one per stage; 0.7).
        stages: blocks whose attention output is pruned (default (3, 6, 9)).
        fuse_token: fuse the inattentive tokens into one extra token (reference `--fuse_token`).
    """

    name = "evit"
    placement = "after_attention"
    needs_attention = True
    # decide() reads the CLS attention only. The fused token: with the library's packer, summed by the pack
    # kernel from the rows it packs (`fusion_weights`); with the torch packer, on a dense view (`extra_token`).
    needs_tokens = False

    def __init__(
        self, *, keep_rate: float | Sequence[float] = 0.7, stages: Sequence[int] = (3, 6, 9), fuse_token: bool = True
    ) -> None:
        super().__init__(stages)
        self.keep_rates = per_stage(keep_rate, len(self.stages), "keep_rate", self.name)
        if any(not 0 < r <= 1 for r in self.keep_rates):
            raise ValueError(f"evit: keep_rate must be in (0, 1], got {self.keep_rates}")
        if not isinstance(fuse_token, bool):
            raise TypeError(f"evit: fuse_token must be a bool, got {type(fuse_token).__name__}")
        self.fuse_token = fuse_token
        self.fuses_tokens = fuse_token

    def decide(self, stage: int, x: torch.Tensor, valid: torch.Tensor, attn: AttnInfo | None) -> torch.Tensor:
        if attn is None:
            raise ValueError("evit: needs the block's CLS attention")
        tok_valid = valid[:, 1:]
        a = attn.cls_probs.mean(1)[:, 1:]
        k = ceil_count(self.keep_rates[stage], tok_valid.sum(1))
        return with_cls(rank_desc(a, tok_valid) < k[:, None], tok_valid)

    def extra_token(
        self, stage: int, x: torch.Tensor, valid: torch.Tensor, keep: torch.Tensor, attn: AttnInfo | None
    ) -> tuple[torch.Tensor, torch.Tensor] | None:
        if not self.fuse_token:
            return None
        if attn is None:
            raise ValueError("evit: needs the block's CLS attention")
        dropped = valid & ~keep  # keep is the applied mask: CLS is never among the dropped
        w = torch.where(dropped, attn.cls_probs.mean(1), 0.0)
        fused = torch.einsum("bn,bnc->bc", w, x.float()).to(x.dtype)[:, None, :]
        return fused, dropped.any(1, keepdim=True)

    def fusion_weights(self, stage: int, valid: torch.Tensor, attn: AttnInfo | None) -> torch.Tensor | None:
        # extra_token's weights, for the packer to sum over the dropped rows as it packs (no dense view)
        if not self.fuse_token:
            return None
        if attn is None:
            raise ValueError("evit: needs the block's CLS attention")
        return attn.cls_probs.mean(1)

    def tokens_bound(self, stage: int, n_in: int) -> int:
        if self.is_noop(stage, n_in):
            return n_in
        return 1 + host_ceil(self.keep_rates[stage], n_in - 1) + int(self.fuse_token)

    def is_noop(self, stage: int, n_in: int) -> bool:
        # K == M for the largest image implies K == M for every smaller one (see module notes).
        return host_ceil(self.keep_rates[stage], n_in - 1) >= n_in - 1

    def extra_repr(self) -> str:
        return f"stages={self.stages}, keep_rates={self.keep_rates}, fuse_token={self.fuse_token}"
