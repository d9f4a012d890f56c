"""Fused blocks: a DeiT block as five launches on rows [R, C] instead of timm's eight or more.

    norm1 + qkv  ->  attention  ->  proj + residual  ->  norm2 + fc1 + GELU  ->  fc2 + residual

Every linear layer is `ragged_kernels.linear.ragged_linear` with its neighbours fused in (the LayerNorm
before it, the GELU or the residual add after it), and the head reads the class rows straight from the
packed buffer through the same kernel (gather + final norm + head: one launch). The blocks before the
first pruning stage run on the dense batch as rows too, with uniform `cu_seqlens` (`uniform_cu`), so
one forward is one chain of these launches, dense or pruned alike; `dense` models run it with the
library's ragged attention kernel over the uniform segments.

Why: at batch 1-4 a DeiT forward is a chain of ~110-150 kernels of a few µs each on the H200, even
compiled by inductor and captured (dense DeiT-S B 1: 112 kernels, 0.41 ms; 2026-12-01,
docs/performance.md "Serving batches"), and a pruned forward adds each stage's decision and packing on
top. Pruning shortens the GEMMs little at M <= 4 x 197 rows; fewer launches shorten the chain. What the
fusion leaves is measured on a GPU (`tools.bench_e2e --fused`), dense and pruned alike: a fused dense
forward is as much a "fastest dense model" as a compiled one.

Numerics: each fused step rounds where the unfused layers write their outputs (the norm's output, each
layer's output, in the model's dtype), so a fused forward differs from the unfused one by accumulation
order only; `tests/pruners/test_fused.py` holds them to the same tolerance as the other backends.
"""

from __future__ import annotations

import torch
from torch import nn

from pruners._ops import uniform_cu_seqlens
from pruners.layers import is_plain_mlp


def _is_identity_or_noop(m: nn.Module | None) -> bool:
    """Identity, None, or a dropout that drops nothing (timm's DeiT builds Dropout(p=0.0))."""
    return m is None or isinstance(m, nn.Identity) or (isinstance(m, nn.Dropout) and m.p == 0.0)


def _plain_norm(norm: nn.Module) -> bool:
    """An affine LayerNorm over the last dimension: torch's, or timm's subclass (`timm.layers.LayerNorm`,
    what DeiT builds, which computes `F.layer_norm` or the same norm through a fused kernel)."""
    return isinstance(norm, nn.LayerNorm) and norm.elementwise_affine and norm.weight is not None \
        and norm.bias is not None and len(norm.normalized_shape) == 1


def unfusable(backbone: nn.Module) -> str | None:
    """Why `backbone`'s blocks and head cannot run fused (None: they can). The fused block computes
    exactly timm's pre-norm block with LayerNorms, a qkv/proj attention and a GELU MLP; anything more
    (layer scale, q/k norms, gates, drop path, other norms or activations) is named, not silently skipped."""
    for i, blk in enumerate(backbone.blocks):
        a, mlp = getattr(blk, "attn", None), getattr(blk, "mlp", None)
        if a is None or mlp is None or not isinstance(getattr(a, "qkv", None), nn.Linear) \
                or not isinstance(getattr(a, "proj", None), nn.Linear):
            return f"block {i} is not a timm Block with qkv and proj linear layers"
        if not (_plain_norm(blk.norm1) and _plain_norm(blk.norm2)):
            return f"block {i}'s norms are not affine LayerNorms"
        extras = {"ls1": blk.ls1, "ls2": blk.ls2, "drop_path1": blk.drop_path1, "drop_path2": blk.drop_path2,
                  "attn.q_norm": a.q_norm, "attn.k_norm": a.k_norm, "attn.norm": getattr(a, "norm", None),
                  "attn.proj_drop": a.proj_drop, "attn.gate": getattr(a, "gate", None),
                  "mlp.norm": getattr(mlp, "norm", None), "mlp.drop1": getattr(mlp, "drop1", None),
                  "mlp.drop2": getattr(mlp, "drop2", None)}
        for name, m in extras.items():
            if not _is_identity_or_noop(m):
                return f"block {i} has {name} ({type(m).__name__}), which the fused block does not compute"
        if not is_plain_mlp(mlp):
            return f"block {i}'s MLP is not fc1 -> exact GELU -> fc2"
    head_extras = (getattr(backbone, "fc_norm", None), getattr(backbone, "head_drop", None))
    if not _plain_norm(backbone.norm) or not isinstance(backbone.head, nn.Linear) \
            or not all(_is_identity_or_noop(m) for m in head_extras):
        return "the head is not norm -> linear on the class token"
    return None


class FusedBlocks:
    """The fused forward's steps over a backbone's blocks (see the module docstring).

    Args:
        backbone: a timm DeiT that `unfusable` accepts.
        attend: packed attention `(q, k, v, cu_seqlens, max_seqlen, *, scale) -> [R, H, D]`.
    """

    def __init__(self, backbone: nn.Module, attend) -> None:
        reason = unfusable(backbone)
        if reason is not None:
            raise ValueError(f"fused_blocks: {reason}")
        from ragged_kernels.linear import ragged_linear

        self.linear = ragged_linear
        self.attend = attend
        self._uniform: dict[tuple, torch.Tensor] = {}

    def uniform_cu(self, batch: int, n: int, device: torch.device) -> torch.Tensor:
        """int32 [batch+1] = 0, n, 2n, ...: the dense batch's rows as segments. Built on the first forward of
        a batch size (before any CUDA-graph capture: graph mode warms up eagerly first) and kept."""
        if torch.compiler.is_compiling():  # a constant of the traced graph
            return uniform_cu_seqlens(batch, n, device)
        key = (batch, n, device)
        cu = self._uniform.get(key)
        if cu is None:
            cu = self._uniform[key] = uniform_cu_seqlens(batch, n, device)
        return cu

    @staticmethod
    def _norm(norm: nn.LayerNorm) -> tuple[torch.Tensor, torch.Tensor, float]:
        return norm.weight, norm.bias, norm.eps

    def attention(self, blk: nn.Module, x: torch.Tensor, cu: torch.Tensor, n: int):
        """(x + proj(attention(norm1(x))), q, k, v) on rows x [R, C]; q, k, v [R, H, D] views of the qkv rows."""
        a = blk.attn
        rows, width = x.shape
        qkv = self.linear(x, a.qkv.weight, a.qkv.bias, cu, norm=self._norm(blk.norm1))
        q, k, v = qkv.view(rows, 3, a.num_heads, a.head_dim).unbind(1)
        o = self.attend(q, k, v, cu, n, scale=a.scale)
        return self.linear(o.reshape(rows, width), a.proj.weight, a.proj.bias, cu, residual=x), q, k, v

    def mlp(self, blk: nn.Module, x: torch.Tensor, cu: torch.Tensor) -> torch.Tensor:
        """x + fc2(GELU(fc1(norm2(x)))) on rows x [R, C]."""
        mlp = blk.mlp
        h = self.linear(x, mlp.fc1.weight, mlp.fc1.bias, cu, norm=self._norm(blk.norm2), gelu=True)
        return self.linear(h, mlp.fc2.weight, mlp.fc2.bias, cu, residual=x)

    def head(self, backbone: nn.Module, x: torch.Tensor, cu: torch.Tensor) -> torch.Tensor:
        """Logits [B, classes]: each segment's first row (its class token), normed, through the head."""
        return self.linear(x, backbone.head.weight, backbone.head.bias, rows=cu[:-1], norm=self._norm(backbone.norm))


__all__ = ["FusedBlocks", "unfusable"]
