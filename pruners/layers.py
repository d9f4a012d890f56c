"""The layers of the unfused packed forward: attention backends, the patch embedding and a block's steps.

- `reference_attention`: packed attention in plain PyTorch (the `reference` backend, and the path
  threshold calibration runs on); `attention_fn` picks a backend's packed attention by name.
- `PatchGemm`: the patch embedding as one GEMM (every built model, `dense` included).
- `BlockLayers`: a timm Block's steps written over its submodules (norm1, attn.qkv, attn.proj, ls1,
  drop_path1, norm2, mlp, ls2, drop_path2) on either layout, dense [B, N, C] or packed rows [R, C], with
  `ragged_linear`'s row-skipping linear layers and LayerNorms on packed rows where asked.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from pruners._ops import dense_index, gather_dense, pack_dense_torch

AttentionFn = Callable[..., torch.Tensor]


def reference_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens: torch.Tensor, max_seqlen: int, *, scale=None
) -> torch.Tensor:
    """Packed attention in plain PyTorch: gather to [B, max_seqlen], masked SDPA, pack back (no host sync).

    Args:
        q, k, v: [R, H, D] packed rows.
        cu_seqlens: int32 [B+1].
        max_seqlen: host upper bound of the segment lengths.
        scale: softmax scale (default D ** -0.5).

    Returns:
        [R, H, D]; rows past cu_seqlens[-1] are zero.
    """
    R, H, D = q.shape
    index = dense_index(cu_seqlens, max_seqlen, R)
    qd, kd, vd, valid = gather_dense(q, index), gather_dense(k, index), gather_dense(v, index), index[1]
    o = F.scaled_dot_product_attention(
        qd.transpose(1, 2), kd.transpose(1, 2), vd.transpose(1, 2), attn_mask=valid[:, None, None, :], scale=scale
    )
    packed, _ = pack_dense_torch(o.transpose(1, 2).reshape(*valid.shape, H * D), valid, R)
    return packed.view(R, H, D)


def attention_fn(backend: str, sync_free: bool = False) -> AttentionFn:
    """The packed attention `(q, k, v, cu_seqlens, max_seqlen, *, scale) -> [R, H, D]` of `backend`
    (`reference`, or a key of `ragged_kernels.ATTENTION_BACKENDS`); `sync_free` pads padded_sdpa to the
    capacity bound instead of reading the longest kept length back."""
    if backend == "reference":
        return reference_attention
    try:
        import ragged_kernels
    except ImportError as e:  # the kernel library is part of this repository: a missing one is a broken install
        raise RuntimeError(f"backend {backend!r} needs the ragged_kernels package ({e})") from e
    if backend == "padded_sdpa" and sync_free:
        return functools.partial(ragged_kernels.padded_sdpa_attention, pad_to_bound=True)
    return ragged_kernels.ATTENTION_BACKENDS[backend]


def is_plain_mlp(mlp: nn.Module) -> bool:
    """timm's Mlp with Linear layers and exact GELU (what DeiT uses): fc1 + act can be fused. The one
    statement of the rule: the ragged_linear MLP (`BlockLayers.mlp`) and the fused blocks
    (`pruners.fused.unfusable`) both ask it."""
    act = getattr(mlp, "act", None)
    return (
        isinstance(getattr(mlp, "fc1", None), nn.Linear)
        and isinstance(getattr(mlp, "fc2", None), nn.Linear)
        and isinstance(act, nn.GELU)
        and act.approximate == "none"
    )


def epilogue_applies(mlp: nn.Module, h: torch.Tensor) -> bool:
    """Whether `BlockLayers.mlp` runs fc1 + GELU on rows `h` [R, C] as cuBLASLt's GELU epilogue: a plain
    MLP with an fc1 bias, on CUDA in fp16/bf16 (where the tanh GELU is within rounding of exact GELU)."""
    return (h.is_cuda and h.dim() == 2 and h.dtype in (torch.float16, torch.bfloat16) and is_plain_mlp(mlp)
            and mlp.fc1.bias is not None)


class PatchGemm(nn.Conv2d):
    """A patch embedding (Conv2d with stride == kernel, no padding) computed as one GEMM.

    Why: on the H200, cuDNN runs DeiT-B's 16x16/16 fp16 patch convolution as an sm80 implicit-GEMM
    kernel plus two NCHW<->NHWC transposes, ~560 us at B 64 (9% of the dense forward; 2026-11-29,
    docs/performance.md "Where the pruned forward's time goes"). The same product as unfold + one cuBLAS
    GEMM, [B*h*w, C*p*q] x [C*p*q, out], moves the
    image once. Same parameters (`weight` [out, C, p, q], `bias`) and state_dict keys as the Conv2d it
    replaces, same output [B, out, h, w] (a permuted view; timm's `flatten(2).transpose(1, 2)` of it is
    contiguous). Only the summation order of each dot product differs (fp32 accumulation either way).
    """

    @classmethod
    def replacing(cls, conv: nn.Module) -> nn.Module:
        """`conv` as a PatchGemm sharing its parameters, or `conv` itself when it is no patch convolution."""
        if (
            type(conv) is not nn.Conv2d
            or conv.stride != conv.kernel_size
            or conv.padding not in ((0, 0), "valid")
            or conv.dilation != (1, 1)
            or conv.groups != 1
        ):
            return conv
        new = cls(conv.in_channels, conv.out_channels, conv.kernel_size, conv.stride, bias=conv.bias is not None,
                  device="meta")
        new.weight = conv.weight
        new.bias = conv.bias
        return new

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, C, H, W = x.shape
        p, q = self.kernel_size
        h, w = H // p, W // q  # as the convolution: a remainder of rows/columns is dropped
        cols = x[:, :, : h * p, : w * q].reshape(B, C, h, p, w, q).permute(0, 2, 4, 1, 3, 5).reshape(B * h * w, -1)
        y = F.linear(cols, self.weight.reshape(self.out_channels, -1), self.bias)
        return y.view(B, h, w, self.out_channels).permute(0, 3, 1, 2)


class BlockLayers:
    """A timm Block's attention and MLP halves over its submodules, on dense [B, N, C] (cu None) or packed
    rows [R, C] with `cu_seqlens` cu.

    Args:
        attend: packed attention (`attention_fn`); the dense layout always runs PyTorch SDPA, the same code
            under every backend, so the first keep decisions are bitwise identical across backends.
        ragged_linear: on packed rows, run qkv, proj and the MLP (fc1 with its GELU fused) through
            `ragged_kernels.linear.ragged_linear` and the LayerNorms through `ragged_layer_norm`, which
            skip the capacity rows past cu_seqlens[-1] on the device.
        gelu_epilogue: on packed rows of a CUDA fp16/bf16 model, a plain MLP's fc1 + GELU as one cuBLASLt
            GEMM with its (tanh) GELU epilogue (`ForwardOptions.gelu_epilogue`).
    """

    def __init__(self, attend: AttentionFn, ragged_linear: bool = False, gelu_epilogue: bool = False) -> None:
        self.attend = attend
        self.gelu_epilogue = gelu_epilogue
        self.linear_fn: Callable[..., torch.Tensor] | None = None
        self.layer_norm_fn: Callable[..., torch.Tensor] | None = None
        if ragged_linear:
            import ragged_kernels.linear

            self.linear_fn = ragged_kernels.linear.ragged_linear
            self.layer_norm_fn = ragged_kernels.linear.ragged_layer_norm

    def linear(self, layer: nn.Module, x: torch.Tensor, cu: torch.Tensor | None) -> torch.Tensor:
        """`layer(x)`; on packed rows with `ragged_linear`, only the rows before cu_seqlens[-1]."""
        if cu is None or self.linear_fn is None or not isinstance(layer, nn.Linear):
            return layer(x)
        return self.linear_fn(x, layer.weight, layer.bias, cu)

    def norm(self, norm: nn.Module, x: torch.Tensor, cu: torch.Tensor | None) -> torch.Tensor:
        """`norm(x)`; on packed rows with `ragged_linear`, a LayerNorm runs on the rows before cu_seqlens[-1] only."""
        # Gated on `linear_fn` (the one switch: calibration runs layers without it).
        if cu is None or self.linear_fn is None or not isinstance(norm, nn.LayerNorm) or x.dim() != 2 \
                or tuple(norm.normalized_shape) != (x.shape[1],):
            return norm(x)
        return self.layer_norm_fn(x, norm.weight, norm.bias, norm.eps, cu)

    def qkv(
        self, blk: nn.Module, h: torch.Tensor, cu: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        a = blk.attn
        qkv = self.linear(a.qkv, h, cu).unflatten(-1, (3, a.num_heads, a.head_dim))
        q, k, v = qkv.unbind(-3)
        return a.q_norm(q), a.k_norm(k), v

    def attn_out(self, blk: nn.Module, h: torch.Tensor, o: torch.Tensor, cu: torch.Tensor | None) -> torch.Tensor:
        a = blk.attn
        o = a.norm(o.flatten(-2))
        gate = getattr(a, "gate", None)
        if gate is not None:
            o = o * gate(h).sigmoid()
        return blk.drop_path1(blk.ls1(a.proj_drop(self.linear(a.proj, o, cu))))

    def attention(
        self, blk: nn.Module, x: torch.Tensor, cu: torch.Tensor | None, n: int
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Residual-added attention output and the q, k, v it used, on either layout."""
        h = self.norm(blk.norm1, x, cu)
        q, k, v = self.qkv(blk, h, cu)
        if cu is None:  # dense [B, N, H, D]: the same SDPA for every backend
            o = F.scaled_dot_product_attention(
                q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), scale=blk.attn.scale
            ).transpose(1, 2)
        else:
            o = self.attend(q, k, v, cu, n, scale=blk.attn.scale)
        return x + self.attn_out(blk, h, o, cu), q, k, v

    def mlp(self, blk: nn.Module, x: torch.Tensor, cu: torch.Tensor | None) -> torch.Tensor:
        h = self.norm(blk.norm2, x, cu)
        mlp = blk.mlp
        if cu is not None and self.gelu_epilogue and epilogue_applies(mlp, h):
            # cuBLASLt's GEMM with its bias + GELU epilogue: one kernel, no second pass over fc1's output.
            h = torch._addmm_activation(mlp.fc1.bias, h, mlp.fc1.weight.t(), use_gelu=True)
            h = mlp.fc2(mlp.norm(mlp.drop1(h)))
            return x + blk.drop_path2(blk.ls2(mlp.drop2(h)))
        if cu is None or self.linear_fn is None or not is_plain_mlp(mlp):
            return x + blk.drop_path2(blk.ls2(mlp(h)))
        # timm Mlp: fc1 -> act -> drop1 -> norm -> fc2 -> drop2; fc1 and its exact GELU in one kernel.
        h = self.linear_fn(h, mlp.fc1.weight, mlp.fc1.bias, cu, gelu=True)
        h = self.linear(mlp.fc2, mlp.norm(mlp.drop1(h)), cu)
        return x + blk.drop_path2(blk.ls2(mlp.drop2(h)))


__all__ = ["AttentionFn", "BlockLayers", "PatchGemm", "attention_fn", "epilogue_applies", "is_plain_mlp",
           "reference_attention"]
