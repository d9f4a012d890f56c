"""ragged_attention against the fp32 oracle (CPU: Triton interpreter, small cases; GPU: full grid)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from ragged_kernels import padded_sdpa_attention, ragged_attention, set_debug
from ragged_kernels.attention.fwd import AttnConfig, default_scale, ragged_attn_fwd
from ragged_kernels.attention.naive import ragged_attention_ref


def _cu(lengths: list[int], device: str) -> torch.Tensor:
    return torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int32, device=device)


def _lowp_ref_error(q, k, v, cu, ref) -> float:
    """PyTorch's own error in the input dtype against the fp32 oracle (padded fused SDPA)."""
    n = int(cu[-1])
    if q.dtype == torch.float32:
        return 0.0
    lowp = padded_sdpa_attention(q, k, v, cu, 0)
    return (lowp[:n].float() - ref[:n]).abs().max().item()


def _check(q, k, v, cu, max_seqlen, poison, **kw):
    """Run into a NaN-poisoned output, compare with the tolerance rule, check padding untouched."""
    out = poison(*q.shape, dtype=q.dtype, device=q.device)
    if q.is_cuda:  # the first call compiles (JIT launch); check the cached launch path, which serves every later one
        ragged_attention(q, k, v, cu, max_seqlen, out=out, **kw)
        out.fill_(float("nan"))
    got = ragged_attention(q, k, v, cu, max_seqlen, out=out, **kw)
    assert got.data_ptr() == out.data_ptr()
    ref = ragged_attention_ref(q, k, v, cu, **kw)
    n = int(cu[-1])
    err = (got[:n].float() - ref[:n]).abs().max().item() if n else 0.0
    tol = 2 * _lowp_ref_error(q, k, v, cu, ref) + (1e-3 if q.dtype != torch.float32 else 2e-5)
    assert err <= tol, f"max abs error {err:.2e} > tolerance {tol:.2e}"
    assert not torch.isnan(got[:n]).any(), "an output row was left unwritten"
    assert torch.isnan(got[n:]).all(), "rows past cu_seqlens[-1] must not be written"


CPU_CASES = {
    "B1-N1-H2-D64-fp16": ([1], 2, 64, torch.float16),
    "B3-N1,63,113-H2-D64-fp16": ([1, 63, 113], 2, 64, torch.float16),
    "B4-onelong197-H1-D64-fp16": ([197, 1, 3, 2], 1, 64, torch.float16),
    "B3-N64equal-H2-D32-fp16": ([64, 64, 64], 2, 32, torch.float16),
    "B4-empty-segments-H2-D64-fp32": ([0, 5, 0, 17], 2, 64, torch.float32),
    "B2-N40,99-H2-D128-bf16": ([40, 99], 2, 128, torch.bfloat16),
    "B2-N70,33-H3-D64-fp32": ([70, 33], 3, 64, torch.float32),
}


@pytest.mark.parametrize("case", list(CPU_CASES), ids=list(CPU_CASES))
def test_matches_oracle(case, device, poison):
    lengths, heads, head_dim, dtype = CPU_CASES[case]
    cu = _cu(lengths, device)
    total = sum(lengths) + 7  # capacity padding past cu_seqlens[-1]
    qkv = torch.randn(total, 3, heads, head_dim, dtype=dtype, device=device)
    q, k, v = qkv.unbind(1)  # strided views of one fused buffer: no copies
    _check(q, k, v, cu, max(lengths) + 5, poison)


# Kernel variants: block and tail shapes of the offline tables (`fwd.CONFIGS`, `fwd.FP32_CONFIGS`; a
# register cap is a compile option the interpreter ignores) and wider tiles from the tuning sweep
# (`tools.bench_kernels --sweep`, 2026-11-29) that no table ships, kept correct for the next sweep.
VARIANTS = {
    "tail=block": AttnConfig(64, 64, 4, 3),
    "tail16": AttnConfig(64, 64, 4, 3, TAIL_N=16),
    "tail32": AttnConfig(64, 64, 4, 3, TAIL_N=32),
    "bn32": AttnConfig(64, 32, 4, 3),
    "bm32-bn16-2warps": AttnConfig(32, 16, 2, 3),
    "bn16-2warps": AttnConfig(64, 16, 2, 3),
    "bm32-bn32-1stage": AttnConfig(32, 32, 4, 1),  # FP32_CONFIGS[64]
    "bm16-bn32-8warps": AttnConfig(16, 32, 8, 1),  # FP32_CONFIGS[128]
    "bm128-bn64-tail32": AttnConfig(128, 64, 8, 3, TAIL_N=32),  # sweep candidates, in no table
    "bm128-bn128": AttnConfig(128, 128, 8, 2),
}


@pytest.mark.parametrize("variant", list(VARIANTS), ids=list(VARIANTS))
def test_kernel_variants_match_oracle(variant, device, poison):
    # Lengths around the block edges: 1, one full block (64), full blocks + a 1-key tail (129),
    # a tail longer than TAIL_N (64 + 50) and an empty segment.
    lengths = [1, 64, 0, 129, 114] if device == "cuda" else [1, 64, 0, 129]
    heads, head_dim = (12, 64) if device == "cuda" else (1, 32)
    cu = _cu(lengths, device)
    qkv = torch.randn(sum(lengths) + 3, 3, heads, head_dim, dtype=torch.float16, device=device)
    # A dominant key late in the 129-token segment: the running max jumps there by far more than 16
    # (log2): the online softmax must rescale exactly there (GPU, fp16 dots).
    qkv[65 + 100, 1] *= 20
    q, k, v = qkv.unbind(1)
    out = poison(*q.shape, dtype=q.dtype, device=device)
    ragged_attn_fwd(q, k, v, cu, max(lengths), default_scale(head_dim), out, VARIANTS[variant])
    n = sum(lengths)
    ref = ragged_attention_ref(q, k, v, cu)
    assert (out[:n].float() - ref[:n]).abs().max().item() < 2e-3
    assert torch.isnan(out[n:]).all()


def test_a_gpu_with_less_shared_memory_gets_a_smaller_config():
    """The table is tuned on the H200; where a config needs more shared memory than the GPU has,
    the launch steps down (fewer stages, then a smaller key block), never changing the query tile."""
    from triton.runtime.errors import OutOfResources

    from ragged_kernels.attention.fwd import compile_with_fallback, smaller_config

    cfg = AttnConfig(64, 64, 4, 2, TAIL_N=16)
    steps = [cfg]
    while (nxt := smaller_config(steps[-1])) is not None:
        steps.append(nxt)
    assert [(c.BLOCK_M, c.BLOCK_N, c.num_stages, c.tail_n) for c in steps] == [
        (64, 64, 2, 16), (64, 64, 1, 16), (64, 32, 1, 16), (64, 16, 1, 16)]

    tried = []

    def launch(c):  # a GPU whose shared memory fits one stage of 32-key blocks only
        tried.append(c)
        if c.num_stages > 1 or c.BLOCK_N > 32:
            raise OutOfResources(120000, 101376, "shared memory")
        return "kernel"

    from dataclasses import astuple

    kernel, used = compile_with_fallback(launch, cfg)
    assert kernel == "kernel" and astuple(used) == astuple(steps[2])
    assert [astuple(c) for c in tried] == [astuple(c) for c in steps[:3]]
    with pytest.raises(OutOfResources):
        compile_with_fallback(lambda c: (_ for _ in ()).throw(OutOfResources(1, 0, "shared memory")), cfg)


def test_more_programs_than_the_grid_axis_holds_launch_in_chunks(device, poison, monkeypatch):
    """B x heads above CUDA's 65,535 limit on the grid's second axis: the batch is launched in slices
    (here the limit is lowered to 8 so a small case takes the path: 9 images x 2 heads, 3 slices)."""
    from ragged_kernels.attention import fwd

    monkeypatch.setattr(fwd, "MAX_GRID_Y", 8)
    grids = []
    real = fwd._launch_jit
    monkeypatch.setattr(fwd, "_launch_jit", lambda *a: (grids.append(a[-1]), real(*a))[1])
    lengths = [3, 1, 0, 7, 2, 5, 1, 4, 6]
    cu = _cu(lengths, device)
    q, k, v = torch.randn(sum(lengths) + 2, 3, 2, 32, dtype=torch.float16, device=device).unbind(1)
    _check(q, k, v, cu, 8, poison)
    if device == "cpu":  # the interpreter compiles nothing: one _launch_jit per launch
        assert [g[1] for g in grids] == [8, 8, 2], "expected slices of 4, 4 and 1 images x 2 heads"
    monkeypatch.setattr(fwd, "MAX_GRID_Y", 3)  # fewer than 4 images per slice: no usable slice
    with pytest.raises(ValueError, match="at most 0 heads"):
        ragged_attention(q, k, v, cu, 8)


@pytest.mark.gpu
def test_gpu_batch_times_heads_past_the_grid_limit(poison):
    lengths = torch.randint(0, 5, (6000,)).tolist()  # 6000 x 12 heads = 72,000 programs per query tile
    cu = _cu(lengths, "cuda")
    qkv = torch.randn(sum(lengths), 3, 12, 32, dtype=torch.float16, device="cuda")
    _check(*qkv.unbind(1), cu, 4, poison)


def test_max_seqlen_is_only_a_bound(device, poison):
    cu = _cu([10, 30], device)
    q, k, v = torch.randn(3, 40, 2, 64, dtype=torch.float16, device=device).unbind(0)
    _check(q, k, v, cu, 197, poison)


def test_custom_scale(device, poison):
    cu = _cu([17, 9], device)
    q, k, v = torch.randn(3, 26, 2, 64, device=device).unbind(0)
    _check(q, k, v, cu, 17, poison, scale=0.3)


def test_all_equal_lengths_match_dense_sdpa(device):
    batch, seq, heads, dim = 3, 48, 2, 64
    x = torch.randn(3, batch, seq, heads, dim, device=device)
    q, k, v = (t.reshape(batch * seq, heads, dim) for t in x)
    cu = _cu([seq] * batch, device)
    got = ragged_attention(q, k, v, cu, seq)
    dense = torch.nn.functional.scaled_dot_product_attention(*(t.transpose(1, 2) for t in x)).transpose(1, 2)
    torch.testing.assert_close(got, dense.reshape(batch * seq, heads, dim), atol=2e-5, rtol=1e-4)


def test_default_scale_uses_real_head_dim(device):
    cu = _cu([5], device)
    q, k, v = torch.randn(3, 5, 1, 32, device=device).unbind(0)
    torch.testing.assert_close(
        ragged_attention(q, k, v, cu, 5), ragged_attention(q, k, v, cu, 5, scale=1 / math.sqrt(32))
    )


@pytest.mark.parametrize(
    "cu_values",
    [[0, 500, 20], [0, -40, 9], [7, 3, 1000], [-5, 2**30, 2**31 - 1]],
    ids=["past-end", "negative", "decreasing", "huge"],
)
def test_garbage_cu_seqlens_never_leave_the_buffers(cu_values, device):
    """Without debug mode nothing is checked on the host, but the kernel must stay in bounds."""
    total, heads, dim = 24, 2, 32
    big_out = torch.full((total + 16, heads, dim), float("nan"), device=device)
    out = big_out[8 : 8 + total]
    q, k, v = torch.randn(3, total, heads, dim, device=device).unbind(0)
    cu = torch.tensor(cu_values, dtype=torch.int32, device=device)
    ragged_attention(q, k, v, cu, 32, out=out)
    assert torch.isnan(big_out[:8]).all() and torch.isnan(big_out[8 + total :]).all()


BAD_INPUTS = {
    "q-2d": (lambda q, k, v, cu: (q[:, 0], k[:, 0], v[:, 0], cu, 8), ValueError, "total_tokens, heads, head_dim"),
    "shape-mismatch": (lambda q, k, v, cu: (q, k[:-1], v, cu, 8), ValueError, "one shape"),
    "int-dtype": (lambda q, k, v, cu: (q.int(), k.int(), v.int(), cu, 8), TypeError, "dtype"),
    "mixed-dtype": (lambda q, k, v, cu: (q, k.half(), v, cu, 8), TypeError, "share a dtype"),
    "head-dim-48": (lambda q, k, v, cu: (q[..., :48], k[..., :48], v[..., :48], cu, 8), ValueError, "head_dim"),
    "non-contiguous-head-dim": (lambda q, k, v, cu: (q[..., ::2], k[..., ::2], v[..., ::2], cu, 8), ValueError,
                                "head_dim"),
    "cu-int64": (lambda q, k, v, cu: (q, k, v, cu.long(), 8), ValueError, "int32"),
    "cu-2d": (lambda q, k, v, cu: (q, k, v, cu[None], 8), ValueError, "int32 \\[B\\+1\\]"),
    "cu-list": (lambda q, k, v, cu: (q, k, v, cu.tolist(), 8), TypeError, "cu_seqlens must be a tensor"),
    "max-seqlen-tensor": (lambda q, k, v, cu: (q, k, v, cu, torch.tensor(8)), TypeError, "host int"),
    "max-seqlen-float": (lambda q, k, v, cu: (q, k, v, cu, 8.0), TypeError, "host int"),
    "max-seqlen-negative-numpy": (lambda q, k, v, cu: (q, k, v, cu, np.int64(-1)), TypeError, "non-negative"),
    "device-mismatch": (lambda q, k, v, cu: (q, k, v, cu.to("meta"), 8), ValueError, "one device"),
}


@pytest.mark.parametrize("name", list(BAD_INPUTS), ids=list(BAD_INPUTS))
def test_bad_inputs_raise_clear_errors(name):
    make, exc, match = BAD_INPUTS[name]
    q, k, v = torch.randn(3, 10, 2, 64).unbind(0)
    cu = _cu([4, 6], "cpu")
    with pytest.raises(exc, match=match):
        ragged_attention(*make(q, k, v, cu))


@pytest.mark.parametrize("out", [[1], "out", np.zeros((10, 2, 64), dtype=np.float32)], ids=["list", "str", "ndarray"])
def test_a_non_tensor_out_gets_a_clear_type_error(out):
    q, k, v = torch.randn(3, 10, 2, 64).unbind(0)
    with pytest.raises(TypeError, match="out must be a tensor .* got (list|str|ndarray)"):
        ragged_attention(q, k, v, _cu([4, 6], "cpu"), 8, out=out)


def test_a_mismatched_out_tensor_is_still_a_value_error():
    q, k, v = torch.randn(3, 10, 2, 64).unbind(0)
    for out in (torch.empty(9, 2, 64), torch.empty(10, 2, 64, dtype=torch.float16), torch.empty(10, 2, 128)[..., ::2]):
        with pytest.raises(ValueError, match="out must match q's shape, dtype and device"):
            ragged_attention(q, k, v, _cu([4, 6], "cpu"), 8, out=out)


@pytest.mark.parametrize("scale", ["0.3", float("nan"), float("inf"), True, [0.3]], ids=str)
def test_a_bad_scale_gets_a_clear_error(scale):
    q, k, v = torch.randn(3, 10, 2, 64).unbind(0)
    with pytest.raises(TypeError, match="scale must be a finite real number"):
        ragged_attention(q, k, v, _cu([4, 6], "cpu"), 8, scale=scale)


def test_numpy_integer_bounds_are_host_ints(device):
    """A capacity computed with NumPy (np.int64) is a host int like any other: same result, no error."""
    cu = _cu([7, 12], device)
    q, k, v = torch.randn(3, 19, 2, 32, device=device).unbind(0)
    torch.testing.assert_close(ragged_attention(q, k, v, cu, np.int64(12)), ragged_attention(q, k, v, cu, 12))


def test_cpu_tensors_without_the_interpreter_get_a_clear_error(monkeypatch):
    from ragged_kernels import runtime
    from ragged_kernels.attention import fwd

    monkeypatch.setattr(fwd, "INTERPRET", False)
    monkeypatch.setattr(runtime, "INTERPRET", False)  # read by require_device, the one check
    q, k, v = torch.randn(3, 10, 2, 64).unbind(0)
    with pytest.raises(ValueError, match="TRITON_INTERPRET=1"):
        ragged_attention(q, k, v, _cu([4, 6], "cpu"), 8)


@pytest.mark.parametrize(
    "cu_values,match",
    [([0, 6, 4], "non-decreasing"), ([1, 4, 10], "must be 0"), ([0, 4, 11], "exceeds"), ([0, 1, 10], "max_seqlen")],
    ids=["decreasing", "nonzero-start", "past-total", "longer-than-max"],
)
def test_debug_mode_checks_values(cu_values, match):
    q, k, v = torch.randn(3, 10, 2, 64).unbind(0)
    set_debug(True)
    try:
        with pytest.raises(ValueError, match=match):
            ragged_attention(q, k, v, torch.tensor(cu_values, dtype=torch.int32), 8)
    finally:
        set_debug(False)


GPU_LENGTHS = {
    "B1-N197": [197],
    "B4-ragged224": [197, 120, 60, 1],
    "B8-N40": [40] * 8,
    "B6-N577mix": [577, 288, 300, 1, 63, 577],
    "B5-edges": [0, 1, 63, 113, 0],
    "B32-ragged": None,  # random 138..197
}


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32], ids=["fp16", "bf16", "fp32"])
@pytest.mark.parametrize("head_dim", [32, 64, 128], ids=["D32", "D64", "D128"])
@pytest.mark.parametrize("lengths_id", list(GPU_LENGTHS))
def test_gpu_grid(lengths_id, head_dim, dtype, poison):
    lengths = GPU_LENGTHS[lengths_id] or torch.randint(138, 198, (32,)).tolist()
    cu = _cu(lengths, "cuda")
    qkv = torch.randn(sum(lengths) + 3, 3, 12, head_dim, dtype=dtype, device="cuda")
    _check(*qkv.unbind(1), cu, max(max(lengths), 1), poison)


@pytest.mark.gpu
def test_gpu_graph_replay_with_new_lengths():
    capacity, heads, dim, batch, cap_len = 64 * 197, 12, 64, 64, 197
    qkv = torch.randn(capacity, 3, heads, dim, dtype=torch.float16, device="cuda")
    q, k, v = qkv.unbind(1)
    cu = torch.zeros(batch + 1, dtype=torch.int32, device="cuda")
    out = torch.empty(capacity, heads, dim, dtype=torch.float16, device="cuda")
    cu.copy_(_cu([cap_len] * batch, "cuda"))
    ragged_attention(q, k, v, cu, cap_len, out=out)  # compile + cache the launcher before capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        ragged_attention(q, k, v, cu, cap_len, out=out)
    for _ in range(3):
        lengths = torch.randint(1, cap_len + 1, (batch,)).tolist()
        cu.copy_(_cu(lengths, "cuda"))
        qkv.normal_()
        graph.replay()
        torch.cuda.synchronize()
        n = sum(lengths)
        ref = ragged_attention_ref(q, k, v, cu)
        assert (out[:n].float() - ref[:n]).abs().max().item() < 2e-3



def test_table_config_buckets_and_the_fp32_exception(monkeypatch):
    """Many (image, head) pairs at a short capacity take bucket 2 (the register-capped config for 16-bit
    head dim 64 on sm_90); fp32's upcast math takes its own small tiles on a GPU (the interpreter keeps
    bucket 0's); each architecture reads its own table; the choice reads host ints only."""
    from ragged_kernels.attention import fwd
    from ragged_kernels.attention.fwd import CONFIGS, FP32_CONFIGS, WIDE_PAIRS, table_config

    h200 = CONFIGS[90]
    assert table_config(64, 197, WIDE_PAIRS, torch.float16) == (h200[64][2], 2)
    assert h200[64][2].maxnreg > 0
    assert table_config(64, 197, 12, torch.bfloat16) == (h200[64][0], 0)
    assert table_config(64, 577, 10_000, torch.float16) == (h200[64][1], 1)
    for head_dim in (32, 128):
        assert len(h200[head_dim]) == 3 and not h200[head_dim][2].maxnreg
    monkeypatch.setattr(fwd, "INTERPRET", False)  # as on a GPU
    assert table_config(64, 197, WIDE_PAIRS, torch.float32) == (FP32_CONFIGS[64], 2)
    for arch in (80, 89, 90):
        assert set(CONFIGS[arch]) == {32, 64, 128} and all(len(t) == 3 for t in CONFIGS[arch].values())
        assert table_config(64, 197, WIDE_PAIRS, torch.float16, arch) == (CONFIGS[arch][64][2], 2)
    assert CONFIGS[89][64][2].maxnreg == 0 and CONFIGS[80][64][2].maxnreg == 104  # tools.choose_configs


def test_wide_bucket_matches_the_oracle_in_the_interpreter():
    """A launch in bucket 2 (pairs >= WIDE_PAIRS): same results as the oracle (the config's register cap
    is a compile option the interpreter ignores; the GPU grid's B 32 x 12 heads runs it compiled)."""
    from ragged_kernels.attention.fwd import WIDE_PAIRS

    heads = WIDE_PAIRS // 4 + 1
    lengths = [3, 0, 5, 2]
    cu = _cu(lengths, "cpu")
    q, k, v = torch.randn(3, sum(lengths), heads, 64).unbind(0)
    out = ragged_attention(q, k, v, cu, 8)
    ref = ragged_attention_ref(q, k, v, cu)
    assert (out - ref).abs().max().item() < 1e-4
