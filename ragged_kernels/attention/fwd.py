"""Triton forward kernel for ragged (varlen), non-causal attention, and its low-dispatch launcher.

Layout is FlashAttention's varlen layout: q/k/v `[total_tokens, heads, head_dim]` (strided views of
one fused qkv buffer are fine), segments given by int32 `cu_seqlens [B+1]` on the device.

Why this shape of kernel (measurements: docs/performance.md):
- One program per (query tile, image, head), tiles over the *capacity* `max_seqlen`, not the actual
  lengths: the grid is known on the host without reading `cu_seqlens`, so no host sync is needed and
  a CUDA graph captured once replays correctly for any lengths within the capacity. Tiles past a
  segment's end return at once (a few hundred empty programs cost well under a microsecond).
- ViT segments are short (<= 197 tokens at 224², <= 577 at 384²), so a whole K/V segment often fits
  one or two key tiles; the config per length bucket is chosen offline (`CONFIGS`), never autotuned
  on the hot path.
- The launch goes through a cached `CompiledKernel` with integer pointers (~6 µs on the H200 against
  15-18 µs for `kernel[grid](...)`; measured 2026-11), so host cost stays near the driver's floor.
- Robust against bad `cu_seqlens` without any check: bounds are clamped to `[0, total_tokens]` and
  a segment with end < start is empty, so no load or store can leave the buffers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

import torch
import triton
import triton.language as tl

from ragged_kernels.attention import native as _native
from ragged_kernels.runtime import INTERPRET, KernelSpec, device_arch, require_device
from ragged_kernels.segments import clamped_segment

LOG2E = 1.4426950408889634


# eq=False: hashed by identity (cheap on the hot path); the table's entries are singletons.
@dataclass(frozen=True, eq=False)
class AttnConfig:
    """One kernel configuration. `TAIL_N` (0: same as BLOCK_N) is the key-block width of the masked
    tail after the last full BLOCK_N block; a narrower tail wastes fewer masked keys (197 = 3 x 64 + 5
    computes 256 keys with one tail width, 208 with TAIL_N 16). `maxnreg` (0: the compiler's choice)
    caps registers per thread, so more programs fit on an SM: on sm_90 the fp16 64 x 32 config takes
    93 registers (5 programs of 128 threads per SM) and fits 80 without spilling (6 per SM).
    (Loading K as rows and lazy rescaling of the accumulator were measured on the H200 on 2026-11-29,
    tied or lost, and removed; docs/performance.md "Tried and refuted".)"""

    BLOCK_M: int
    BLOCK_N: int
    num_warps: int
    num_stages: int
    TAIL_N: int = 0
    maxnreg: int = 0

    @property
    def tail_n(self) -> int:
        return self.TAIL_N or self.BLOCK_N

    @property
    def compile_options(self) -> dict:
        """Triton's compile options for this config (launch keywords; `maxnreg` only when set)."""
        opts = {"num_warps": self.num_warps, "num_stages": self.num_stages}
        if self.maxnreg:
            opts["maxnreg"] = self.maxnreg
        return opts


# Chosen offline on the H200, 2026-11-29 (docs/performance.md "Kernel GPU time", "Tried and refuted").
# tools/bench_kernels.py --sweep: 64 x 64 tiles, 4 warps, 3 stages had the best geomean against FA2
# at both capacities. --variants (17 points of the target grid): a 16-key masked tail after the full blocks cut the
# geomean from 0.709 to 0.670 at the 197-token capacity (with 32-key blocks) and from 0.689 to 0.640
# at 577 (worst point 0.81 -> 0.75); loading K as rows made no difference (within 0.01).
# Indexed by head_dim, then capacity bucket (0: max_seqlen <= 256, 1: longer). Head dim 32 follows 64
# (not swept on its own); head dim 128 keeps 2 stages for shared memory headroom and the full-width
# tail (neither swept yet).
#
# Bucket 2 (`BENCH_VARIANTS=maxnreg tools/bench_kernels.py --variants`): short capacities with
# many (image, head) pairs. The fp16 64 x 32 config takes 93 registers on sm_90, so 5 programs of 128
# threads fit an SM (660 on the H200); B 32 x 99 tokens runs 768 programs, two waves. Capped at 80
# registers (no spill), 6 fit (792): B 32 x 99 went from 0.82 to 0.73 of FA2's time, B 128 x 99 from
# 0.80 to 0.77; at B 1-4 the cap cost 3-15%, hence the bucket. fp32 (upcast math) keeps bucket 0's config.
H200_CONFIGS: dict[int, tuple[AttnConfig, AttnConfig, AttnConfig]] = {
    32: (AttnConfig(64, 32, 4, 3, TAIL_N=16), AttnConfig(64, 64, 4, 3, TAIL_N=16), AttnConfig(64, 32, 4, 3, TAIL_N=16)),
    64: (AttnConfig(64, 32, 4, 3, TAIL_N=16), AttnConfig(64, 64, 4, 3, TAIL_N=16),
         AttnConfig(64, 32, 4, 3, TAIL_N=16, maxnreg=80)),
    128: (AttnConfig(64, 64, 4, 2), AttnConfig(64, 64, 4, 2), AttnConfig(64, 64, 4, 2)),
}
# sm_80 (A100, 108 SMs) and sm_89 (RTX 4000 Ada, 48 SMs: the product's runner), chosen 2026-12-01
# without either card by `python -m tools.choose_configs` (its docstring states the rule): the H200
# entry stands unless ptxas reports that it spills or does not fit the architecture, then the smallest
# change that fits. What that changed (registers/thread, programs/SM from ptxas -v for fp16):
# - sm_80 and sm_89, head dim 64 bucket 2: the H200's 80-register cap spills (156-188 B). sm_80 takes
#   104 registers (4 programs/SM against 3 uncapped at 136); on sm_89 uncapped ptxas already uses 128
#   (4 programs/SM) and no cap adds one without spilling, so the cap is dropped.
# - head dim 128 (2 stages on the H200): one stage on both (the 2-stage build spills there).
# Everything else is the H200 entry. `python -m tools.compile_check` (CI) reports every entry's
# registers, spills, shared memory and programs per SM on all three architectures and fails on a spill.
_C = AttnConfig
CONFIGS: dict[int, dict[int, tuple[AttnConfig, AttnConfig, AttnConfig]]] = {
    90: H200_CONFIGS,
    80: {
        32: H200_CONFIGS[32],
        64: (H200_CONFIGS[64][0], H200_CONFIGS[64][1], _C(64, 32, 4, 3, TAIL_N=16, maxnreg=104)),
        128: (_C(64, 64, 4, 1), _C(64, 64, 4, 1), _C(64, 64, 4, 1)),
    },
    89: {
        32: H200_CONFIGS[32],
        64: (H200_CONFIGS[64][0], H200_CONFIGS[64][1], _C(64, 32, 4, 3, TAIL_N=16)),
        128: (_C(64, 64, 4, 1), _C(64, 64, 4, 1), _C(64, 64, 4, 1)),
    },
}
# fp32 (upcast math, a correctness path nobody timed): the fp16 tiles spill on every architecture
# (57-98 KB of registers' worth: 756-3,612 B spilled per thread at head dim 64, ptxas, 2026-12-01), so
# fp32 takes smaller tiles that spill nowhere (`python -m tools.compile_check`): per head dim, every bucket.
FP32_CONFIGS = {32: AttnConfig(32, 32, 4, 2), 64: AttnConfig(32, 32, 4, 1), 128: AttnConfig(16, 32, 8, 1)}
# Bucket 2 from this many (image, head) pairs on (about two per SM of the H200's 132). Mirrored in native.cpp
# (kWidePairs; a test checks they agree).
WIDE_PAIRS = 256


def config_bucket(max_seqlen: int, pairs: int) -> int:
    """The table's bucket: 1 for capacities above 256 tokens, else 2 from `WIDE_PAIRS` (image, head) pairs,
    else 0. Host ints only (capacities and the batch), so a captured graph keeps its config."""
    return 1 if max_seqlen > 256 else (2 if pairs >= WIDE_PAIRS else 0)


def _table_entry(capability: int, head_dim: int, bucket: int, dtype: torch.dtype) -> AttnConfig:
    if dtype == torch.float32 and not INTERPRET:  # the interpreter runs fp32 math for every dtype anyway
        return FP32_CONFIGS[head_dim]
    return CONFIGS[capability][head_dim][bucket]


def table_config(head_dim: int, max_seqlen: int, pairs: int, dtype: torch.dtype,
                 capability: int = 90) -> tuple[AttnConfig, int]:
    """(the offline table's config, its bucket) for a launch on an architecture (a key of CONFIGS)."""
    bucket = config_bucket(max_seqlen, pairs)
    return _table_entry(capability, head_dim, bucket, dtype), bucket


@triton.jit
def _attn_block(b_q, b_m, b_l, b_acc, p_k0, p_v0, start_n, seqlen, sm_scale_log2, o_d,
                STRIDE_KT: tl.constexpr, STRIDE_VT: tl.constexpr, BLOCK_N: tl.constexpr,
                MASKED: tl.constexpr, UPCAST: tl.constexpr):
    """One key block of the online softmax: scores, running max and sum, rescaled accumulator.
    MASKED is off for full blocks (no bounds test, no -inf fill)."""
    o_n = start_n + tl.arange(0, BLOCK_N)
    m_n = o_n < seqlen
    p_k = p_k0 + o_n[None, :] * STRIDE_KT + o_d[:, None]
    p_v = p_v0 + o_n[:, None] * STRIDE_VT + o_d[None, :]
    if MASKED:
        b_k = tl.load(p_k, mask=m_n[None, :], other=0.0)
        b_v = tl.load(p_v, mask=m_n[:, None], other=0.0)
    else:
        b_k = tl.load(p_k)
        b_v = tl.load(p_v)
    if UPCAST:
        b_k = b_k.to(tl.float32)
        b_v = b_v.to(tl.float32)
        b_s = tl.dot(b_q, b_k, input_precision="ieee")
    else:
        b_s = tl.dot(b_q, b_k)
    b_s = b_s * sm_scale_log2
    if MASKED:
        b_s = tl.where(m_n[None, :], b_s, float("-inf"))
    b_m_new = tl.maximum(b_m, tl.max(b_s, 1))
    b_p = tl.math.exp2(b_s - b_m_new[:, None])
    b_alpha = tl.math.exp2(b_m - b_m_new)
    b_l = b_l * b_alpha + tl.sum(b_p, 1)
    b_acc = b_acc * b_alpha[:, None]
    if UPCAST:
        b_acc += tl.dot(b_p, b_v, input_precision="ieee")
    else:
        b_acc += tl.dot(b_p.to(b_v.dtype), b_v)
    return b_m_new, b_l, b_acc


@triton.jit
def attn_tile(Q, K, V, Out, bos, seqlen, start_m, i_h, sm_scale_log2,
              STRIDE_QT: tl.constexpr, STRIDE_QH: tl.constexpr, STRIDE_KT: tl.constexpr, STRIDE_KH: tl.constexpr,
              STRIDE_VT: tl.constexpr, STRIDE_VH: tl.constexpr, STRIDE_OT: tl.constexpr, STRIDE_OH: tl.constexpr,
              HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, UPCAST: tl.constexpr,
              TAIL_N: tl.constexpr):
    """One query tile of one (image, head): rows `start_m ...` of the segment at `bos` of length `seqlen`
    (`start_m < seqlen`), attended over the whole segment and stored. Public for the structural variants
    (tools/attention_variants.py); Triton inlines it (the kernel's PTX for sm_90/sm_89 was the same as
    with the body written inline, debug info aside, 2026-12-01)."""
    o_m = start_m + tl.arange(0, BLOCK_M)
    o_d = tl.arange(0, HEAD_DIM)
    m_m = o_m < seqlen

    p_q = Q + (bos + o_m)[:, None] * STRIDE_QT + i_h.to(tl.int64) * STRIDE_QH + o_d[None, :]
    b_q = tl.load(p_q, mask=m_m[:, None], other=0.0)
    if UPCAST:
        b_q = b_q.to(tl.float32)

    b_m = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    b_l = tl.zeros([BLOCK_M], dtype=tl.float32)
    b_acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)

    p_k0 = K + bos * STRIDE_KT + i_h.to(tl.int64) * STRIDE_KH
    p_v0 = V + bos * STRIDE_VT + i_h.to(tl.int64) * STRIDE_VH
    # Full key blocks without masks, then the rest in (narrower) masked tail blocks.
    n_full = (seqlen // BLOCK_N) * BLOCK_N
    for start_n in range(0, n_full, BLOCK_N):
        b_m, b_l, b_acc = _attn_block(b_q, b_m, b_l, b_acc, p_k0, p_v0, start_n, seqlen, sm_scale_log2, o_d,
                                      STRIDE_KT, STRIDE_VT, BLOCK_N, False, UPCAST)
    for start_n in range(n_full, seqlen, TAIL_N):
        b_m, b_l, b_acc = _attn_block(b_q, b_m, b_l, b_acc, p_k0, p_v0, start_n, seqlen, sm_scale_log2, o_d,
                                      STRIDE_KT, STRIDE_VT, TAIL_N, True, UPCAST)

    b_o = b_acc / b_l[:, None]
    p_o = Out + (bos + o_m)[:, None] * STRIDE_OT + i_h.to(tl.int64) * STRIDE_OH + o_d[None, :]
    tl.store(p_o, b_o.to(Out.dtype.element_ty), mask=m_m[:, None])


@triton.jit(do_not_specialize=["total_tokens"])
def _ragged_attn_fwd_kernel(
    Q,
    K,
    V,
    Out,
    CU,
    total_tokens,
    sm_scale_log2,
    STRIDE_QT: tl.constexpr,
    STRIDE_QH: tl.constexpr,
    STRIDE_KT: tl.constexpr,
    STRIDE_KH: tl.constexpr,
    STRIDE_VT: tl.constexpr,
    STRIDE_VH: tl.constexpr,
    STRIDE_OT: tl.constexpr,
    STRIDE_OH: tl.constexpr,
    HEADS: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    UPCAST: tl.constexpr,
    TAIL_N: tl.constexpr,
):
    i_m = tl.program_id(0)
    i_bh = tl.program_id(1)
    i_b = i_bh // HEADS
    i_h = i_bh % HEADS

    bos, eos = clamped_segment(CU, i_b, total_tokens, True)
    seqlen = eos - bos
    start_m = i_m * BLOCK_M
    if start_m >= seqlen:
        return

    attn_tile(Q, K, V, Out, bos, seqlen, start_m, i_h, sm_scale_log2, STRIDE_QT, STRIDE_QH, STRIDE_KT, STRIDE_KH,
              STRIDE_VT, STRIDE_VH, STRIDE_OT, STRIDE_OH, HEAD_DIM, BLOCK_M, BLOCK_N, UPCAST, TAIL_N)


SUPPORTED_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
MAX_GRID_Y = 65535  # CUDA's limit on the grid's second axis, which carries B x heads
SUPPORTED_HEAD_DIMS = (32, 64, 128)



class LaunchKey(NamedTuple):
    """What a compiled kernel of the Python launch path is specialised on, the key of its cache. The hot
    path looks the cache up with a plain tuple of these fields in this order (equal to the record and
    with the same hash, without building one per call); a miss stores the record."""

    dtype: torch.dtype
    heads: int
    head_dim: int
    q_strides: tuple[int, ...]
    k_strides: tuple[int, ...]
    v_strides: tuple[int, ...]
    out_strides: tuple[int, ...]
    config: AttnConfig
    bucket: int  # two buckets may share a config (fp32's bucket 2); the native entry point registers per bucket
    alignment: bool | tuple[bool, ...]  # True: every pointer 16-byte aligned; else per pointer (q, k, v, out, cu)
    device_index: int


class CompiledLaunch(NamedTuple):
    """A compiled kernel as the Python launch path calls it: the `CompiledKernel`, its function handle and
    packed metadata, the constexpr arguments it is called with, and the config it was compiled with (the
    table's, or a smaller one where the GPU's shared memory is short)."""

    kernel: Any  # a triton CompiledKernel (triton has no type information: Any)
    function: object
    metadata: object
    constexprs: tuple
    config: AttnConfig


# Keyed by `LaunchKey` records; the hot path looks up a plain tuple of the same fields, hence this type.
LaunchFields = tuple[torch.dtype, int, int, tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...],
                     AttnConfig, int, bool | tuple[bool, ...], int]
_compiled: dict[LaunchFields, CompiledLaunch] = {}


def ragged_attn_fwd(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cu_seqlens: torch.Tensor,
    max_seqlen: int,
    scale: float,
    out: torch.Tensor,
    config: AttnConfig | None = None,
) -> torch.Tensor:
    """Launch the kernel on validated inputs (see `ragged_attention` for the contract).

    `config` overrides the offline table (the tuning sweep in tools/bench_kernels.py)."""
    return launch_validated(q, k, v, cu_seqlens, max_seqlen, scale, out, config=config, q_strides=q.stride(),
                            k_strides=k.stride(), v_strides=v.stride(), device_index=q.get_device())


def launch_validated(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens: torch.Tensor, max_seqlen: int, scale: float,
    out: torch.Tensor, *, config: AttnConfig | None, q_strides: tuple[int, ...], k_strides: tuple[int, ...],
    v_strides: tuple[int, ...], device_index: int,
) -> torch.Tensor:
    """`ragged_attn_fwd` with the strides of q/k/v and q's device index (`Tensor.get_device()`) already read
    by the caller, which keys on them too.

    The hot path is lean on purpose (host cost is a product target): one cache lookup keyed on
    what Triton specialises on (`LaunchKey`), then `CompiledKernel.run` with integer pointers. The
    caller's values come as keywords rather than a record: building a NamedTuple per call cost 1.2 µs
    against 0.16 µs for five keywords on this project's 2-core CPU machine (2026-12-05)."""
    sq, sk, sv = q_strides, k_strides, v_strides
    total, heads, head_dim = q.shape
    batch = cu_seqlens.shape[0] - 1
    if batch * heads > MAX_GRID_Y:
        return _launch_in_chunks(q, k, v, cu_seqlens, max_seqlen, scale, out, config, sq, sk, sv, device_index)
    if config is None:
        cfg, bucket = table_config(head_dim, max_seqlen, batch * heads, q.dtype, device_arch(device_index))
    else:
        cfg, bucket = config, config_bucket(max_seqlen, batch * heads)
    grid_m = (max_seqlen + cfg.BLOCK_M - 1) // cfg.BLOCK_M
    if grid_m == 0 or batch <= 0 or total == 0:
        return out
    sm_scale_log2 = scale * LOG2E
    if INTERPRET or not q.is_cuda:
        require_device(q, "ragged_attention")
        _launch_jit(q, k, v, out, cu_seqlens, total, sm_scale_log2, heads, head_dim, cfg, (grid_m, batch * heads, 1))
        return out
    p_q, p_k, p_v, p_o, p_cu = q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(), cu_seqlens.data_ptr()
    # Triton specialises pointers on 16-byte alignment, so alignment is part of the cache key.
    aligned = ((p_q | p_k | p_v | p_o | p_cu) & 15) == 0
    align = True if aligned else tuple(p % 16 == 0 for p in (p_q, p_k, p_v, p_o, p_cu))
    so = out.stride()
    key: LaunchFields = (q.dtype, heads, head_dim, sq, sk, sv, so, cfg, bucket, align, device_index)
    entry = _compiled.get(key)
    if entry is None:

        def launch(c: AttnConfig):
            with torch.cuda.device(device_index):
                return _launch_jit(q, k, v, out, cu_seqlens, total, sm_scale_log2, heads, head_dim, c,
                                   (grid_m, batch * heads, 1))

        ck, cfg = compile_with_fallback(launch, cfg)
        consts = (sq[0], sq[1], sk[0], sk[1], sv[0], sv[1], so[0], so[1], heads, head_dim, cfg.BLOCK_M, cfg.BLOCK_N,
                  q.dtype == torch.float32, cfg.tail_n)
        launch_key = LaunchKey._make(key)
        _compiled[launch_key] = CompiledLaunch(ck, ck.function, ck.packed_metadata, consts, cfg)
        _offer_native(launch_key, ck, config, aligned)
        return out
    ck, function, metadata, consts, _ = entry
    stream = torch._C._cuda_getCurrentRawStream(device_index)
    if device_index == torch._C._cuda_getDevice():
        # Triton 3.4+: run(gx, gy, gz, stream, function, packed_metadata, launch_metadata, enter_hook,
        # exit_hook, *every argument of the signature, constexprs included (the launcher skips them)).
        ck.run(grid_m, batch * heads, 1, stream, function, metadata,
               None, None, None, p_q, p_k, p_v, p_o, p_cu, total, sm_scale_log2, *consts)
    else:  # the kernel is loaded in its device's context: launch from there (multi-GPU callers)
        with torch.cuda.device(device_index):
            ck.run(grid_m, batch * heads, 1, stream, function, metadata,
                   None, None, None, p_q, p_k, p_v, p_o, p_cu, total, sm_scale_log2, *consts)
    return out


def compiled_launches() -> list[CompiledLaunch]:
    """The kernels this process compiled, as the Python launch path calls them, for tools that time the
    bare launch (`tools.bench_kernels`' host-cost breakdown)."""
    return list(_compiled.values())


def smaller_config(cfg: AttnConfig) -> AttnConfig | None:
    """The next config to try when `cfg` needs more shared memory than the GPU has: one pipeline
    stage fewer, then half the key block; the query tile (and so the grid) never changes. None when
    nothing smaller is left."""
    if cfg.num_stages > 1:
        return replace(cfg, num_stages=cfg.num_stages - 1)
    if cfg.BLOCK_N > 16:
        half = cfg.BLOCK_N // 2
        return replace(cfg, BLOCK_N=half, TAIL_N=min(cfg.tail_n, half))
    return None


def compile_with_fallback(launch, cfg, smaller=smaller_config):
    """`launch(cfg)` (compile + first launch), stepping down to `smaller(cfg)` while the GPU lacks
    the shared memory: the tables are tuned on the H200 (227 KB per block); a consumer GPU has
    ~100 KB, less than e.g. fp32 at head dim 128 with two stages needs (115 KB). Used by the
    attention kernel (AttnConfig, `smaller_config`) and `ragged_kernels.linear` (its block tuples).

    Returns:
        (what `launch` returned, the config it ran with).
    """
    from triton.runtime.errors import OutOfResources

    while True:
        try:
            return launch(cfg), cfg
        except OutOfResources:
            step = smaller(cfg)
            if step is None:
                raise
            cfg = step


def _launch_in_chunks(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens: torch.Tensor, max_seqlen: int,
                      scale: float, out: torch.Tensor, config: AttnConfig | None, sq: tuple[int, ...],
                      sk: tuple[int, ...], sv: tuple[int, ...], device_index: int) -> torch.Tensor:
    """B x heads programs exceed the grid's second axis (65,535): launch the kernel on consecutive
    slices of images. A slice of `cu_seqlens` still holds absolute token offsets, so every launch
    writes its own rows of `out`; slices start at multiples of 4 images to keep the 16-byte pointer
    alignment the common kernel was compiled for."""
    heads = q.shape[1]
    step = (MAX_GRID_Y // heads) // 4 * 4
    if step == 0:
        raise ValueError(f"ragged_attention supports at most {MAX_GRID_Y // 4} heads, got {heads}")
    batch = cu_seqlens.shape[0] - 1
    for b0 in range(0, batch, step):
        launch_validated(q, k, v, cu_seqlens[b0 : min(batch, b0 + step) + 1], max_seqlen, scale, out,
                         config=config, q_strides=sq, k_strides=sk, v_strides=sv, device_index=device_index)
    return out


def _offer_native(key: LaunchKey, ck, config: AttnConfig | None, aligned: bool) -> None:
    """Register the kernel just compiled for `key` with the native entry point (native.py) where it
    launches the same kernel: the table's config, a fresh contiguous output, 16-byte aligned pointers.
    Kernels compiled before the entry point was enabled stay on the Python path."""
    if not _native.ENABLED:
        return
    if config is None and aligned and key.out_strides == (key.heads * key.head_dim, key.head_dim, 1):
        _native.register(ck, key.dtype, key.heads, key.head_dim, key.q_strides, key.k_strides, key.v_strides,
                         key.bucket, key.device_index, key.config.BLOCK_M)


def _launch_jit(q, k, v, out, cu_seqlens, total, sm_scale_log2, heads, head_dim, cfg: AttnConfig, grid):
    sq, sk, sv, so = q.stride(), k.stride(), v.stride(), out.stride()
    return _ragged_attn_fwd_kernel[grid](
        q, k, v, out, cu_seqlens, total, sm_scale_log2,
        STRIDE_QT=sq[0], STRIDE_QH=sq[1], STRIDE_KT=sk[0], STRIDE_KH=sk[1],
        STRIDE_VT=sv[0], STRIDE_VH=sv[1], STRIDE_OT=so[0], STRIDE_OH=so[1],
        HEADS=heads, HEAD_DIM=head_dim, BLOCK_M=cfg.BLOCK_M, BLOCK_N=cfg.BLOCK_N,
        UPCAST=INTERPRET or q.dtype == torch.float32, TAIL_N=cfg.tail_n, **cfg.compile_options,
    )


_PTR = {torch.float16: "*fp16", torch.bfloat16: "*bf16", torch.float32: "*fp32"}


def attention_spec(head_dim: int, dtype: torch.dtype, cfg: AttnConfig, heads: int = 12):
    """The `ragged_kernels.aot.KernelSpec` of one compilation: q/k/v strided views of a fused qkv buffer
    (what the pruned model passes), a contiguous output."""
    ptr, row = _PTR[dtype], 3 * heads * head_dim
    args = dict(Q=ptr, K=ptr, V=ptr, Out=ptr, CU="*i32", total_tokens="i32", sm_scale_log2="fp32")
    consts = dict(STRIDE_QT=row, STRIDE_QH=head_dim, STRIDE_KT=row, STRIDE_KH=head_dim, STRIDE_VT=row,
                  STRIDE_VH=head_dim, STRIDE_OT=heads * head_dim, STRIDE_OH=head_dim, HEADS=heads, HEAD_DIM=head_dim,
                  BLOCK_M=cfg.BLOCK_M, BLOCK_N=cfg.BLOCK_N, UPCAST=dtype == torch.float32, TAIL_N=cfg.tail_n)
    name = f"attention D{head_dim} {str(dtype).removeprefix('torch.')} {cfg}"
    return KernelSpec(name, _ragged_attn_fwd_kernel, args, consts, cfg.compile_options)


def compile_specs(capability: int) -> list:
    """Every compilation the table ships for an architecture (a key of CONFIGS): each head dim, dtype and
    bucket, the fp32 fallback of a register-capped bucket included; one spec per distinct compilation."""
    out, seen = [], set()
    for head_dim in SUPPORTED_HEAD_DIMS:
        for dtype in SUPPORTED_DTYPES:
            for bucket in range(3):
                cfg = _table_entry(capability, head_dim, bucket, dtype)
                key = (head_dim, dtype, repr(cfg))
                if key not in seen:
                    seen.add(key)
                    out.append(attention_spec(head_dim, dtype, cfg))
    return out


def default_scale(head_dim: int) -> float:
    return 1.0 / math.sqrt(head_dim)
