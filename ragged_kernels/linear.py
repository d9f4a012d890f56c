"""Experimental: a linear layer over packed rows that skips the rows past `cu_seqlens[-1]`.

Why: a pruned forward captured as one CUDA graph sizes its packed buffers by a host-known capacity
(`pack_tokens(..., capacity=R)`), so cuBLAS multiplies all R rows even when the images kept half of
them. The asv suite of 2026-11-29 (commit d0d5b40; docs/performance.md "Tried and refuted") measured
DeiT-B 224 B 32 in graph
mode at 9,005 images/s with Threshold-L2 against 9,736 dense: the ragged pruners' linear layers run
at dense size. Here the grid still covers the capacity (no host sync, graph-safe), but every row
tile that starts at or past the kept total (read from `cu_seqlens[-1]` on the device) returns at
once, so the work follows the kept count.

Status: opt-in in the pruned model (`build_pruned_model(..., ragged_linear=True)`: qkv, proj, fc1 with
its GELU, fc2, and with them the LayerNorms through `ragged_layer_norm`). Measured on the H200
(2026-11-29, docs/performance.md "Opt-in paths"): it pays where the capacity holds many padding rows (Threshold-L2);
at the kept sizes of the other pruners cuBLAS on all rows is as fast. `tools/bench_ragged_linear.py`
compares it with cuBLAS per layer.

Rows past the kept total are left as they were in `out` (garbage for a fresh buffer): the packed
layout's contract is that padding rows are never read into a valid row (pruners/_ops.py).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ragged_kernels.attention.fwd import compile_with_fallback
from ragged_kernels.runtime import INTERPRET, KernelSpec, device_arch


@triton.jit(do_not_specialize=["n_rows"])
def _ragged_linear_kernel(
    X, W, B, Y, CU, n_rows, n_out, n_in, n_segments,
    stride_xm, stride_xk, stride_wn, stride_wk, stride_ym, stride_yn,
    HAS_BIAS: tl.constexpr, GELU: tl.constexpr, DOT_FP32: tl.constexpr, IEEE: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):  # fmt: skip
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    total = tl.load(CU + n_segments)
    total = tl.minimum(tl.maximum(total, 0), n_rows)  # any cu_seqlens: never past the buffers
    row0 = pid_m * BLOCK_M
    if row0 >= total:
        return
    rm = row0 + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    m_ok = rm < total
    n_ok = rn < n_out
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, n_in, BLOCK_K):
        k_ok = (k0 + rk) < n_in
        x = tl.load(
            X + rm[:, None].to(tl.int64) * stride_xm + (k0 + rk)[None, :] * stride_xk,
            mask=m_ok[:, None] & k_ok[None, :], other=0.0,
        )
        w = tl.load(
            W + rn[None, :].to(tl.int64) * stride_wn + (k0 + rk)[:, None] * stride_wk,
            mask=n_ok[None, :] & k_ok[:, None], other=0.0,
        )
        if DOT_FP32:  # the interpreter has no fp16/bf16 dot
            acc += tl.dot(x.to(tl.float32), w.to(tl.float32))
        elif IEEE:  # fp32 inputs: full precision, not TF32 (as the attention kernel's UPCAST path)
            acc += tl.dot(x, w, input_precision="ieee")
        else:
            acc += tl.dot(x, w)
    if HAS_BIAS:
        acc += tl.load(B + rn, mask=n_ok, other=0.0).to(tl.float32)[None, :]
    if GELU:  # exact (erf) GELU, as timm's Mlp uses
        acc = 0.5 * acc * (1.0 + tl.math.erf(acc * 0.7071067811865476))
    tl.store(
        Y + rm[:, None].to(tl.int64) * stride_ym + rn[None, :] * stride_yn,
        acc.to(Y.dtype.element_ty),
        mask=m_ok[:, None] & n_ok[None, :],
    )


# (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages). Chosen on the H200 (2026-11-29,
# `tools/bench_ragged_linear.py --batch 32 --sweep`, DeiT-B layers at kept 0.5): 128 x 256 tiles were
# fastest for qkv, proj and fc2; fc1 with the fused GELU preferred 128 x 128 (47.1 vs 51.9 µs).
# The interpreter's cost is per program and loop step, not per element: 64-wide tiles keep a DeiT-tiny
# forward in CPU tests at seconds (16-wide ones took minutes).
BLOCKS = (64, 64, 64, 1, 1) if INTERPRET else (128, 256, 64, 8, 3)
BLOCKS_GELU = (64, 64, 64, 1, 1) if INTERPRET else (128, 128, 64, 8, 3)
# sm_80 and sm_89 (no card here; ptxas, 2026-12-01): the H200's 128 x 256 tile spills 204-292 B per
# thread and 128 x 128 x 64 60 B, so both take 128 x 128 with 32-wide K steps, which spill nothing.
# (On sm_90 the H200's 128 x 256 spills 208 B too; it was measured fastest there and stays.)
ARCH_BLOCKS = {arch: ((128, 128, 32, 8, 3), (128, 128, 32, 8, 3)) for arch in (80, 89)}


def blocks_for(capability: int, gelu: bool) -> tuple[int, int, int, int, int]:
    """The (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages) a launch on this architecture starts from."""
    if INTERPRET or capability not in ARCH_BLOCKS:
        return BLOCKS_GELU if gelu else BLOCKS
    return ARCH_BLOCKS[capability][gelu]


def ragged_linear(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    cu_seqlens: torch.Tensor,
    *,
    gelu: bool = False,
    out: torch.Tensor | None = None,
    blocks: tuple[int, int, int, int, int] | None = None,
) -> torch.Tensor:
    """`x[:total] @ weight.T + bias` (optionally GELU), total = `cu_seqlens[-1]`, without a host sync.

    Args:
        x: packed rows `[R, K]` (R = the capacity, a host int), fp16/bf16/fp32, CUDA (or CPU in
            Triton's interpreter).
        weight: `[N, K]`, same dtype and device (nn.Linear's layout).
        bias: `[N]` or None.
        cu_seqlens: int32 `[B+1]` on x's device; only its last entry is read (on the device).
        gelu: apply exact GELU to the result (fuses timm Mlp's fc1 + act).
        out: optional `[R, N]` output buffer (rows past the total are left untouched).
        blocks: (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages) instead of `BLOCKS` (tuning sweeps).

    Returns:
        `[R, N]`; rows `>= total` hold whatever `out` held (uninitialised for a fresh buffer).
    """
    if x.dim() != 2 or weight.dim() != 2 or x.shape[1] != weight.shape[1]:
        raise ValueError(f"x must be [R, K] and weight [N, K], got {tuple(x.shape)} and {tuple(weight.shape)}")
    if weight.dtype != x.dtype or (bias is not None and bias.dtype != x.dtype):
        raise TypeError(f"x, weight and bias must share a dtype, got {x.dtype}, {weight.dtype}, "
                        f"{None if bias is None else bias.dtype}")  # fmt: skip
    if x.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        raise TypeError(f"x must be float16, bfloat16 or float32, got {x.dtype}")
    if bias is not None and tuple(bias.shape) != (weight.shape[0],):
        raise ValueError(f"bias must be [{weight.shape[0]}], got {tuple(bias.shape)}")
    if cu_seqlens.dtype != torch.int32 or cu_seqlens.dim() != 1 or cu_seqlens.numel() < 2:
        raise ValueError(
            f"cu_seqlens must be int32 [B+1] with B >= 1, got {cu_seqlens.dtype} {tuple(cu_seqlens.shape)}"
        )
    tensors = [x, weight, cu_seqlens] + ([bias] if bias is not None else [])
    if any(t.device != x.device for t in tensors):
        raise ValueError("x, weight, bias and cu_seqlens must be on one device")
    if not x.is_cuda and not INTERPRET:
        raise ValueError("ragged_linear needs CUDA tensors (on the CPU: TRITON_INTERPRET=1 before triton is imported)")
    n_rows, n_in = x.shape
    n_out = weight.shape[0]
    if out is None:
        out = torch.empty((n_rows, n_out), dtype=x.dtype, device=x.device)
    elif tuple(out.shape) != (n_rows, n_out) or out.dtype != x.dtype or out.device != x.device:
        raise ValueError(f"out must be {x.dtype} [{n_rows}, {n_out}] on {x.device}, got {out.dtype} {tuple(out.shape)}")
    if n_rows == 0 or n_out == 0:
        return out
    chosen = blocks_for(device_arch(x.device), gelu) if blocks is None else blocks

    def launch(cfg: tuple[int, int, int, int, int]) -> None:
        bm, bn, bk, warps, stages = cfg
        grid = (triton.cdiv(n_rows, bm), triton.cdiv(n_out, bn))
        _ragged_linear_kernel[grid](
            x, weight, bias if bias is not None else x, out, cu_seqlens, n_rows, n_out, n_in,
            cu_seqlens.numel() - 1, x.stride(0), x.stride(1), weight.stride(0), weight.stride(1), out.stride(0),
            out.stride(1), HAS_BIAS=bias is not None, GELU=gelu, DOT_FP32=INTERPRET,
            IEEE=x.dtype == torch.float32, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk,
            num_warps=warps, num_stages=stages,
        )  # fmt: skip

    fit_key = (chosen, x.dtype, x.device)
    fitted = _FITTED.get(fit_key)
    if fitted is not None:
        launch(fitted)
    else:  # first call for these blocks on this GPU: step down while its shared memory is too small
        _, _FITTED[fit_key] = compile_with_fallback(launch, chosen, smaller=smaller_blocks)
    return out


def smaller_blocks(cfg: tuple[int, int, int, int, int]) -> tuple[int, int, int, int, int] | None:
    """Tuned on the H200 (227 KB of shared memory per block): on a smaller GPU, one stage fewer,
    then half the K block; None when nothing smaller is left."""
    bm, bn, bk, warps, stages = cfg
    if stages > 1:
        return (bm, bn, bk, warps, stages - 1)
    if bk > 16:
        return (bm, bn, bk // 2, warps, stages)
    return None


# (configured blocks, dtype, device) -> the blocks that fit that GPU's shared memory
_FITTED: dict[tuple, tuple[int, int, int, int, int]] = {}


@triton.jit
def _ragged_layer_norm_kernel(
    X, W, B, Y, CU, n_rows, n_cols, n_segments, stride_x, stride_y, eps,
    HAS_W: tl.constexpr, HAS_B: tl.constexpr, ROWS: tl.constexpr, BLOCK_C: tl.constexpr,
):  # fmt: skip
    total = tl.load(CU + n_segments)
    total = tl.minimum(tl.maximum(total, 0), n_rows)
    row0 = tl.program_id(0) * ROWS
    if row0 >= total:
        return
    r = row0 + tl.arange(0, ROWS)
    c = tl.arange(0, BLOCK_C)
    m_r = r < total
    m_c = c < n_cols
    m = m_r[:, None] & m_c[None, :]
    x = tl.load(X + r[:, None].to(tl.int64) * stride_x + c[None, :], mask=m, other=0.0).to(tl.float32)
    mean = tl.sum(x, 1) / n_cols
    d = tl.where(m, x - mean[:, None], 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(d * d, 1) / n_cols + eps)
    y = d * rstd[:, None]
    if HAS_W:
        y = y * tl.load(W + c, mask=m_c, other=0.0).to(tl.float32)[None, :]
    if HAS_B:
        y = y + tl.load(B + c, mask=m_c, other=0.0).to(tl.float32)[None, :]
    tl.store(Y + r[:, None].to(tl.int64) * stride_y + c[None, :], y.to(Y.dtype.element_ty), mask=m)


def ragged_layer_norm(
    x: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None, eps: float, cu_seqlens: torch.Tensor,
) -> torch.Tensor:
    """`F.layer_norm(x[:total], (C,), weight, bias, eps)`, total = `cu_seqlens[-1]`, without a host sync:
    `ragged_linear`'s companion for the norms between the linear layers of a packed block. Statistics in
    fp32 (mean, then the mean squared deviation), as PyTorch's kernel; results agree to rounding.

    Args:
        x: packed rows `[R, C]`, unit stride along C, C <= 8192.
        weight, bias: `[C]` or None (nn.LayerNorm's parameters, x's dtype or fp32).
        eps: the norm's epsilon.
        cu_seqlens: int32 `[B+1]` on x's device; only its last entry is read (on the device).

    Returns:
        `[R, C]` of x's dtype; rows `>= total` are uninitialised.
    """
    if x.dim() != 2 or x.stride(1) != 1:
        raise ValueError(f"x must be [R, C] with unit stride along C, got {tuple(x.shape)} strides {x.stride()}")
    if x.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        raise TypeError(f"x must be float16, bfloat16 or float32, got {x.dtype}")
    n_rows, n_cols = x.shape
    if n_cols > 8192:
        raise ValueError(f"ragged_layer_norm takes at most 8192 channels, got {n_cols}")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and (tuple(t.shape) != (n_cols,) or not t.is_contiguous()):
            raise ValueError(f"{name} must be a contiguous [{n_cols}], got {tuple(t.shape)}")
    if cu_seqlens.dtype != torch.int32 or cu_seqlens.dim() != 1 or cu_seqlens.numel() < 2:
        raise ValueError(
            f"cu_seqlens must be int32 [B+1] with B >= 1, got {cu_seqlens.dtype} {tuple(cu_seqlens.shape)}"
        )
    if any(t is not None and t.device != x.device for t in (weight, bias, cu_seqlens)):
        raise ValueError("x, weight, bias and cu_seqlens must be on one device")
    if not x.is_cuda and not INTERPRET:
        raise ValueError("ragged_layer_norm needs CUDA tensors (on the CPU: TRITON_INTERPRET=1 before triton is "
                         "imported)")
    out = torch.empty_like(x, memory_format=torch.contiguous_format)
    if n_rows == 0 or n_cols == 0:
        return out
    block_c = triton.next_power_of_2(n_cols)
    rows = max(1, min(16, 8192 // block_c))
    _ragged_layer_norm_kernel[(triton.cdiv(n_rows, rows),)](
        x, weight if weight is not None else x, bias if bias is not None else x, out, cu_seqlens, n_rows, n_cols,
        cu_seqlens.numel() - 1, x.stride(0), out.stride(0), float(eps),
        HAS_W=weight is not None, HAS_B=bias is not None, ROWS=rows, BLOCK_C=block_c,
        num_warps=4 if block_c <= 1024 else 8,
    )  # fmt: skip
    return out


def linear_spec(blocks: tuple[int, int, int, int, int], gelu: bool):
    """The `ragged_kernels.aot.KernelSpec` of `ragged_linear` with these blocks (fp16, with a bias)."""
    import inspect

    bm, bn, bk, warps, stages = blocks
    values = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GELU": gelu, "HAS_BIAS": True, "DOT_FP32": False,
              "IEEE": False}
    args, consts = {}, {}
    for name in inspect.signature(_ragged_linear_kernel.fn).parameters:
        if name in ("X", "W", "B", "Y"):
            args[name] = "*fp16"
        elif name == "CU":
            args[name] = "*i32"
        elif name.isupper():
            if name not in values:
                raise RuntimeError(f"linear_spec does not know ragged_linear's constexpr {name}")
            consts[name] = values[name]
        else:
            args[name] = "i32"
    return KernelSpec(f"ragged_linear {blocks} gelu={gelu}", _ragged_linear_kernel, args, consts,
                      dict(num_warps=warps, num_stages=stages))


def layer_norm_specs() -> list:
    """The shipping compilations of `ragged_layer_norm` (fp16, DeiT widths)."""
    args = dict(X="*fp16", W="*fp16", B="*fp16", Y="*fp16", CU="*i32", n_rows="i32", n_cols="i32", n_segments="i32",
                stride_x="i32", stride_y="i32", eps="fp32")
    return [KernelSpec(f"ragged_layer_norm BLOCK_C={c}", _ragged_layer_norm_kernel, args,
                       dict(HAS_W=True, HAS_B=True, ROWS=max(1, min(16, 8192 // c)), BLOCK_C=c),
                       dict(num_warps=4 if c <= 1024 else 8)) for c in (256, 512, 1024)]


__all__ = ["blocks_for", "layer_norm_specs", "linear_spec", "ragged_layer_norm", "ragged_linear", "smaller_blocks"]
