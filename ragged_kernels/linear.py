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

import functools
from collections.abc import Callable
from typing import NamedTuple

import torch
import triton
import triton.language as tl

from ragged_kernels.attention.fwd import compile_with_fallback
from ragged_kernels.runtime import INTERPRET, KernelSpec, device_arch, require_device, traceable_op
from ragged_kernels.segments import clamped_total


@triton.jit(do_not_specialize=["n_rows"])
def _ragged_linear_kernel(
    X, W, B, Y, CU, IDX, RES, LNW, LNB,
    n_rows, n_out, n_in, n_segments, n_src, eps,
    stride_xm, stride_xk, stride_wn, stride_wk, stride_ym, stride_yn, stride_rm, stride_rn,
    HAS_BIAS: tl.constexpr, HAS_CU: tl.constexpr, GATHER: tl.constexpr, NORM: tl.constexpr,
    RESIDUAL: tl.constexpr, GELU: tl.constexpr, DOT_FP32: tl.constexpr, IEEE: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):  # fmt: skip
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    total = n_rows
    if HAS_CU:
        total = clamped_total(CU, n_segments, n_rows)  # any cu_seqlens: never past the buffers
    row0 = pid_m * BLOCK_M
    if row0 >= total:
        return
    rm = row0 + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    m_ok = rm < total
    n_ok = rn < n_out
    if GATHER:  # output row r reads input row IDX[r]; an index outside x contributes a zero row to the product
        src = tl.load(IDX + rm, mask=m_ok, other=-1)
        a_ok = m_ok & (src >= 0) & (src < n_src)
        src = tl.where(a_ok, src, 0)
    else:
        src = rm
        a_ok = m_ok
    p_x = X + src.to(tl.int64) * stride_xm
    if NORM:
        # LayerNorm statistics of each row in fp32, summed around the row's first value: a shift that keeps
        # the sum of squares well conditioned when the mean is large against the spread.
        pivot = tl.load(p_x, mask=a_ok, other=0.0).to(tl.float32)
        s1 = tl.zeros((BLOCK_M,), dtype=tl.float32)
        s2 = tl.zeros((BLOCK_M,), dtype=tl.float32)
        for k0 in range(0, n_in, BLOCK_K):
            m_a = a_ok[:, None] & ((k0 + rk) < n_in)[None, :]
            xs = tl.load(p_x[:, None] + (k0 + rk)[None, :] * stride_xk, mask=m_a, other=0.0).to(tl.float32)
            d = tl.where(m_a, xs - pivot[:, None], 0.0)
            s1 += tl.sum(d, 1)
            s2 += tl.sum(d * d, 1)
        shift = s1 / n_in
        mean = pivot + shift
        rstd = 1.0 / tl.sqrt(tl.maximum(s2 / n_in - shift * shift, 0.0) + eps)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, n_in, BLOCK_K):
        k_ok = (k0 + rk) < n_in
        m_a = a_ok[:, None] & k_ok[None, :]
        x = tl.load(p_x[:, None] + (k0 + rk)[None, :] * stride_xk, mask=m_a, other=0.0)
        if NORM:  # the norm's output rounded to x's dtype, as the separate LayerNorm writes it
            g = tl.load(LNW + k0 + rk, mask=k_ok, other=0.0).to(tl.float32)
            b = tl.load(LNB + k0 + rk, mask=k_ok, other=0.0).to(tl.float32)
            xn = (x.to(tl.float32) - mean[:, None]) * rstd[:, None] * g[None, :] + b[None, :]
            x = tl.where(m_a, xn, 0.0).to(X.dtype.element_ty)
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
    if GELU or RESIDUAL:  # the layer's output rounded to y's dtype first, as the unfused linear layer writes it
        acc = acc.to(Y.dtype.element_ty).to(tl.float32)
    if GELU:  # exact (erf) GELU, as timm's Mlp uses
        acc = 0.5 * acc * (1.0 + tl.math.erf(acc * 0.7071067811865476))
    m_y = m_ok[:, None] & n_ok[None, :]
    if RESIDUAL:
        acc += tl.load(RES + rm[:, None].to(tl.int64) * stride_rm + rn[None, :] * stride_rn, mask=m_y,
                       other=0.0).to(tl.float32)
    tl.store(Y + rm[:, None].to(tl.int64) * stride_ym + rn[None, :] * stride_yn, acc.to(Y.dtype.element_ty), mask=m_y)


class LinearBlocks(NamedTuple):
    """One launch configuration of the linear kernel: its tile (output rows, output columns, K step) and
    Triton's launch options. A tuple, so `blocks=` takes a plain 5-tuple in this order too."""

    BLOCK_M: int
    BLOCK_N: int
    BLOCK_K: int
    num_warps: int
    num_stages: int


# The tables' LinearBlocks. Chosen on the H200 (2026-11-29,
# `tools/bench_ragged_linear.py --batch 32 --sweep`, DeiT-B layers at kept 0.5): 128 x 256 tiles were
# fastest for qkv, proj and fc2; fc1 with the fused GELU preferred 128 x 128 (47.1 vs 51.9 µs).
# The interpreter's cost is per program and loop step, not per element: 64-wide tiles keep a DeiT-tiny
# forward in CPU tests at seconds (16-wide ones took minutes).
BLOCKS = LinearBlocks(64, 64, 64, 1, 1) if INTERPRET else LinearBlocks(128, 256, 64, 8, 3)
BLOCKS_GELU = LinearBlocks(64, 64, 64, 1, 1) if INTERPRET else LinearBlocks(128, 128, 64, 8, 3)
# sm_80 and sm_89 (no card here): 128 x 128 with 32-wide K steps. Chosen on 2026-12-01 from a ptxas
# report that compiled the strides unspecialised (204-292 B of spills for 128 x 256 there); compiled as
# the JIT specialises them (2026-12-04, `python -m tools.compile_check`), nothing spills, and 128 x 256 x 64
# with 3 stages needs 144 KB of shared memory, more than sm_89's 99 KB per block. Unchanged until timed
# on such a card.
ARCH_BLOCKS = {arch: (LinearBlocks(128, 128, 32, 8, 3), LinearBlocks(128, 128, 32, 8, 3)) for arch in (80, 89)}


def blocks_for(capability: int, gelu: bool, n_rows: int | None = None, n_out: int | None = None,
               sms: int | None = None) -> LinearBlocks:
    """The blocks a launch on this architecture starts from.

    With the output's size (`n_rows`, `n_out`) and the GPU's SM count (`sms`), a grid of fewer programs
    than SMs steps its tile down (BLOCK_N to 64 first, then BLOCK_M to 32; 4 warps from 64 x 64 down):
    the tables are tuned for B 32-64, where a DeiT-S qkv of one image (197 x 1152) would run 10 programs
    of 128 x 256 on 132 SMs. The interpreter keeps its 64-wide tiles (its cost is per program)."""
    cfg = BLOCKS_GELU if gelu else BLOCKS
    if not INTERPRET and capability in ARCH_BLOCKS:
        cfg = ARCH_BLOCKS[capability][gelu]
    if INTERPRET or n_rows is None or n_out is None or sms is None:
        return cfg
    bm, bn, bk, warps, stages = cfg
    while triton.cdiv(n_rows, bm) * triton.cdiv(n_out, bn) < sms and (bn > 64 or bm > 32):
        if bn > 64:
            bn //= 2
        else:
            bm //= 2
        if bm * bn <= 64 * 64:
            warps = 4
    return LinearBlocks(bm, bn, bk, warps, stages)


_SMS: dict[int, int] = {}  # CUDA device index -> its SM count


def _sm_count(device: torch.device) -> int | None:
    if device.type != "cuda":
        return None
    index = torch.cuda.current_device() if device.index is None else device.index
    if index not in _SMS:
        _SMS[index] = torch.cuda.get_device_properties(index).multi_processor_count
    return _SMS[index]


def _check_vector(name: str, t: torch.Tensor, n: int, x: torch.Tensor) -> None:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a tensor, got {type(t).__name__}")
    if t.dim() != 1 or t.shape[0] != n or not t.is_contiguous():
        raise ValueError(f"{name} must be a contiguous [{n}], got {tuple(t.shape)}")
    if t.device != x.device:
        raise ValueError(f"{name} must be on x's device ({x.device}), got {t.device}")
    if t.dtype not in (x.dtype, torch.float32):
        raise TypeError(f"{name} must be {x.dtype} or float32, got {t.dtype}")


def _validate(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, cu_seqlens: torch.Tensor | None,
              norm: tuple | None, residual: torch.Tensor | None, rows: torch.Tensor | None) -> tuple[int, int, int]:
    """`ragged_linear`'s argument checks (metadata only: the fake implementation runs them too);
    returns (input rows S, output rows R, output columns N)."""
    if x.dim() != 2 or weight.dim() != 2 or x.shape[1] != weight.shape[1]:
        raise ValueError(f"x must be [R, K] and weight [N, K], got {tuple(x.shape)} and {tuple(weight.shape)}")
    if weight.dtype != x.dtype or (bias is not None and bias.dtype != x.dtype):
        raise TypeError(f"x, weight and bias must share a dtype, got {x.dtype}, {weight.dtype}, "
                        f"{None if bias is None else bias.dtype}")  # fmt: skip
    if x.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        raise TypeError(f"x must be float16, bfloat16 or float32, got {x.dtype}")
    if bias is not None and tuple(bias.shape) != (weight.shape[0],):
        raise ValueError(f"bias must be [{weight.shape[0]}], got {tuple(bias.shape)}")
    if cu_seqlens is not None and (cu_seqlens.dtype != torch.int32 or cu_seqlens.dim() != 1
                                   or cu_seqlens.numel() < 2):
        raise ValueError(
            f"cu_seqlens must be int32 [B+1] with B >= 1, got {cu_seqlens.dtype} {tuple(cu_seqlens.shape)}"
        )
    if rows is not None and (rows.dtype != torch.int32 or rows.dim() != 1 or not rows.is_contiguous()):
        raise ValueError(f"rows must be a contiguous int32 [R], got {rows.dtype} {tuple(rows.shape)} strides "
                         f"{rows.stride()}")
    tensors = [x, weight] + [t for t in (bias, cu_seqlens, rows, residual) if t is not None]
    if any(t.device != x.device for t in tensors):
        raise ValueError("x, weight, bias, cu_seqlens, rows and residual must be on one device")
    require_device(x, "ragged_linear")
    n_src, n_in = x.shape
    n_rows = n_src if rows is None else rows.shape[0]
    n_out = weight.shape[0]
    if norm is not None:  # a (weight, bias, eps) tuple: ragged_linear checks that before either path
        ln_w, ln_b, eps = norm
        _check_vector("norm weight", ln_w, n_in, x)
        _check_vector("norm bias", ln_b, n_in, x)
        if not isinstance(eps, float | int) or not eps >= 0:
            raise ValueError(f"norm eps must be a number >= 0, got {eps!r}")
    if residual is not None and (tuple(residual.shape) != (n_rows, n_out) or residual.dtype != x.dtype):
        raise ValueError(f"residual must be {x.dtype} [{n_rows}, {n_out}], got {residual.dtype} "
                         f"{tuple(residual.shape)}")
    if n_in == 0 and norm is not None and n_rows and n_out:
        raise ValueError("norm needs at least one input column")
    return n_src, n_rows, n_out


def ragged_linear(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    cu_seqlens: torch.Tensor | None = None,
    *,
    gelu: bool = False,
    norm: tuple[torch.Tensor, torch.Tensor, float] | None = None,
    residual: torch.Tensor | None = None,
    rows: torch.Tensor | None = None,
    out: torch.Tensor | None = None,
    blocks: LinearBlocks | tuple[int, int, int, int, int] | None = None,
) -> torch.Tensor:
    """`y = x @ weight.T + bias` over packed rows, with a transformer block's neighbours fused in:
    `LayerNorm(x)` before the product (`norm`), exact GELU or a residual add after it, and a gather of
    the input rows (`rows`); the rows past `cu_seqlens[-1]` are skipped on the device, without a host sync.

    One launch for what timm's block runs as two or three kernels (norm1 + qkv, proj + residual,
    norm2 + fc1 + GELU, fc2 + residual): at batch 1-4 a DeiT forward is a chain of ~110-150 kernels of a
    few µs each, so fewer launches, not fewer FLOPs, is what shortens it (docs/performance.md, "End to
    end against the fastest dense model"). Each fused step rounds where the unfused layers write their
    outputs (the norm's output and the layer's output in x's dtype), so results agree with
    `F.linear(F.layer_norm(x))` etc. to the accumulation order.

    Args:
        x: `[S, K]` rows, fp16/bf16/fp32, CUDA (or CPU in Triton's interpreter); any strides.
        weight: `[N, K]`, x's dtype (nn.Linear's layout).
        bias: `[N]` or None.
        cu_seqlens: int32 `[B+1]` on x's device: only its last entry is read (on the device), and output
            rows from it on are neither computed nor written. None: every row.
        gelu: apply exact GELU to the result (timm Mlp's fc1 + act).
        norm: `(weight [K], bias [K], eps)` of a LayerNorm over K applied to each input row first
            (statistics in fp32); weight and bias x's dtype or fp32.
        residual: `[R, N]`, x's dtype: added to the result (after GELU); may be `out` itself.
        rows: int32 `[R]` on x's device: output row r reads input row `rows[r]`; an index outside
            `[0, S)` contributes nothing (that row's product, normed or not, is zero); None: R = S and
            row r reads row r.
        out: optional `[R, N]` output buffer (rows past the total are left untouched).
        blocks: `LinearBlocks` (or a plain tuple in its order) instead of `blocks_for`'s (tuning sweeps).

    Returns:
        `[R, N]`; rows `>= total` hold whatever `out` held (uninitialised for a fresh buffer).

    Example:
        >>> h = ragged_linear(x, blk.attn.qkv.weight, blk.attn.qkv.bias, cu, norm=(ln.weight, ln.bias, ln.eps))
        >>> x = ragged_linear(o, blk.attn.proj.weight, blk.attn.proj.bias, cu, residual=x)
    """
    if norm is not None and not (isinstance(norm, tuple) and len(norm) == 3):
        raise TypeError("norm must be a (weight, bias, eps) tuple of a LayerNorm over x's last dimension")
    if torch.compiler.is_compiling():  # one node of the traced graph (`linear_op`); eager calls skip it
        if out is not None or blocks is not None:
            raise ValueError("ragged_linear under torch.compile allocates its output with its own blocks: out= and "
                             "blocks= are not supported there")
        ln_w, ln_b, eps = norm if norm is not None else (None, None, 0.0)
        return linear_op(x, weight, bias, cu_seqlens, gelu, ln_w, ln_b, float(eps), residual, rows)
    n_src, n_rows, n_out = _validate(x, weight, bias, cu_seqlens, norm, residual, rows)
    n_in = x.shape[1]
    if out is None:
        out = torch.empty((n_rows, n_out), dtype=x.dtype, device=x.device)
    elif tuple(out.shape) != (n_rows, n_out) or out.dtype != x.dtype or out.device != x.device:
        raise ValueError(f"out must be {x.dtype} [{n_rows}, {n_out}] on {x.device}, got {out.dtype} {tuple(out.shape)}")
    if n_rows == 0 or n_out == 0:
        return out
    chosen = (blocks_for(device_arch(x.device), gelu, n_rows, n_out, _sm_count(x.device)) if blocks is None
              else LinearBlocks(*blocks))
    res = residual if residual is not None else out
    ln_w, ln_b, eps = norm if norm is not None else (x, x, 0.0)

    def launch(cfg: LinearBlocks) -> None:
        bm, bn, bk, warps, stages = cfg
        grid = (triton.cdiv(n_rows, bm), triton.cdiv(n_out, bn))
        _ragged_linear_kernel[grid](
            x, weight, bias if bias is not None else x, out, cu_seqlens if cu_seqlens is not None else x,
            rows if rows is not None else x, res, ln_w, ln_b,
            n_rows, n_out, n_in, 0 if cu_seqlens is None else cu_seqlens.numel() - 1, n_src, float(eps),
            x.stride(0), x.stride(1), weight.stride(0), weight.stride(1), out.stride(0), out.stride(1),
            res.stride(0), res.stride(1),
            HAS_BIAS=bias is not None, HAS_CU=cu_seqlens is not None, GATHER=rows is not None,
            NORM=norm is not None, RESIDUAL=residual is not None, GELU=gelu, DOT_FP32=INTERPRET,
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


def _op_norm(weight: torch.Tensor | None, bias: torch.Tensor | None, eps: float) -> tuple | None:
    """`linear_op`'s norm arguments as `ragged_linear`'s `norm` tuple (None: no norm)."""
    return None if weight is None and bias is None else (weight, bias, eps)


def _linear_fake(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, cu_seqlens: torch.Tensor | None,
                 gelu: bool, norm_weight: torch.Tensor | None, norm_bias: torch.Tensor | None, eps: float,
                 residual: torch.Tensor | None, rows: torch.Tensor | None) -> torch.Tensor:
    norm = _op_norm(norm_weight, norm_bias, eps)
    _, n_rows, n_out = _validate(x, weight, bias, cu_seqlens, norm, residual, rows)  # the same errors at trace time
    return x.new_empty((n_rows, n_out))


@traceable_op("ragged_kernels::ragged_linear", _linear_fake)
def linear_op(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, cu_seqlens: torch.Tensor | None,
              gelu: bool, norm_weight: torch.Tensor | None, norm_bias: torch.Tensor | None, eps: float,
              residual: torch.Tensor | None, rows: torch.Tensor | None) -> torch.Tensor:
    """`ragged_linear` as a custom op (`torch.ops.ragged_kernels.ragged_linear`, positional arguments, the
    norm as its weight, bias and eps): what a compiled graph calls, so a compiled forward keeps the fused
    blocks and inductor fuses what lies between them."""
    return ragged_linear(x, weight, bias, cu_seqlens, gelu=gelu, norm=_op_norm(norm_weight, norm_bias, eps),
                         residual=residual, rows=rows)


def smaller_blocks(cfg: LinearBlocks) -> LinearBlocks | None:
    """Tuned on the H200 (227 KB of shared memory per block): on a smaller GPU, one stage fewer,
    then half the K block; None when nothing smaller is left."""
    bm, bn, bk, warps, stages = cfg
    if stages > 1:
        return LinearBlocks(bm, bn, bk, warps, stages - 1)
    if bk > 16:
        return LinearBlocks(bm, bn, bk // 2, warps, stages)
    return None


# (configured blocks, dtype, device) -> the blocks that fit that GPU's shared memory
_FITTED: dict[tuple, LinearBlocks] = {}


@triton.jit
def _ragged_layer_norm_kernel(
    X, W, B, Y, CU, n_rows, n_cols, n_segments, stride_x, stride_y, eps,
    HAS_W: tl.constexpr, HAS_B: tl.constexpr, ROWS: tl.constexpr, BLOCK_C: tl.constexpr,
):  # fmt: skip
    total = clamped_total(CU, n_segments, n_rows)
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
    require_device(x, "ragged_layer_norm")
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


# The fusions `ragged_linear` ships with, as a DeiT block uses them (PrunedDeiT(fused_blocks=True)): norm1 +
# qkv, proj + residual, norm2 + fc1 + GELU, fc2 + residual, and the head's gather of the class rows + norm.
FUSIONS = ({"norm": True}, {"residual": True}, {"norm": True, "gelu": True}, {"gather": True, "norm": True})


def linear_spec(blocks: LinearBlocks, /, gelu: bool, *, norm: bool = False, residual: bool = False,
                gather: bool = False) -> KernelSpec:
    """The `ragged_kernels.aot.KernelSpec` of `ragged_linear` with these blocks and fusions (fp16, a bias,
    cu_seqlens)."""
    import inspect

    bm, bn, bk, warps, stages = blocks
    values = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GELU": gelu, "HAS_BIAS": True, "DOT_FP32": False,
              "IEEE": False, "HAS_CU": True, "GATHER": gather, "NORM": norm, "RESIDUAL": residual}
    # As the JIT compiles a launch on contiguous rows at DeiT widths (C, 3C, 4C: multiples of 16): unit
    # strides along each row are constexprs, the other strides and widths divisible by 16.
    unit = ("stride_xk", "stride_wk", "stride_yn", "stride_rn")
    args, consts = {}, {name: 1 for name in unit}
    for name in inspect.signature(_ragged_linear_kernel.fn).parameters:
        if name in unit:
            continue
        if name in ("X", "W", "B", "Y", "RES", "LNW", "LNB"):
            args[name] = "*fp16"
        elif name in ("CU", "IDX"):
            args[name] = "*i32"
        elif name == "eps":
            args[name] = "fp32"
        elif name.isupper():
            if name not in values:
                raise RuntimeError(f"linear_spec does not know ragged_linear's constexpr {name}")
            consts[name] = values[name]
        else:
            args[name] = "i32"
    fused = "".join(f" {k}" for k, on in (("norm", norm), ("residual", residual), ("gather", gather)) if on)
    return KernelSpec(f"ragged_linear {tuple(blocks)} gelu={gelu}{fused}", _ragged_linear_kernel, args, consts,
                      dict(num_warps=warps, num_stages=stages),
                      divisible=("n_out", "n_in", "stride_xm", "stride_wn", "stride_ym", "stride_rm"))


def fused_spec_makers(capability: int) -> list[tuple[Callable[[LinearBlocks], KernelSpec], LinearBlocks]]:
    """The fused block's compilations on an architecture, as (blocks -> KernelSpec, blocks) for
    `ragged_kernels.aot.fitted`: each of `FUSIONS` at the architecture's table blocks and at the two
    small-batch steps `blocks_for` takes at DeiT sizes (64 x 64 and 32 x 64, 4 warps)."""
    out: list[tuple[Callable[[LinearBlocks], KernelSpec], LinearBlocks]] = []
    for fusion in FUSIONS:
        gelu = fusion.get("gelu", False)
        flags = {k: v for k, v in fusion.items() if k != "gelu"}
        _, _, bk, _, stages = base = blocks_for(capability, gelu)
        for blocks in (base, LinearBlocks(64, 64, bk, 4, stages), LinearBlocks(32, 64, bk, 4, stages)):
            out.append((functools.partial(linear_spec, gelu=gelu, **flags), blocks))
    return out


def layer_norm_specs() -> list:
    """The shipping compilations of `ragged_layer_norm` (fp16, DeiT widths)."""
    args = dict(X="*fp16", W="*fp16", B="*fp16", Y="*fp16", CU="*i32", n_rows="i32", n_cols="i32", n_segments="i32",
                stride_x="i32", stride_y="i32", eps="fp32")
    return [KernelSpec(f"ragged_layer_norm BLOCK_C={c}", _ragged_layer_norm_kernel, args,
                       dict(HAS_W=True, HAS_B=True, ROWS=max(1, min(16, 8192 // c)), BLOCK_C=c),
                       dict(num_warps=4 if c <= 1024 else 8)) for c in (256, 512, 1024)]


__all__ = ["FUSIONS", "LinearBlocks", "blocks_for", "fused_spec_makers", "layer_norm_specs", "linear_op", "linear_spec",
           "ragged_layer_norm", "ragged_linear", "smaller_blocks"]
