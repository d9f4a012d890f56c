"""ragged_linear (experimental): kept rows equal torch's linear, rows past the total are untouched."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from ragged_kernels.linear import ragged_linear

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def _case(rows=150, n_in=80, n_out=100, total=101, dtype=torch.float32, seed=0):
    """Several row, column and K tiles at the interpreter's 64-wide tiles (ragged_linear.BLOCKS)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, n_in, generator=g).to(DEVICE, dtype)
    w = (torch.randn(n_out, n_in, generator=g) / n_in**0.5).to(DEVICE, dtype)
    b = torch.randn(n_out, generator=g).to(DEVICE, dtype)
    cu = torch.tensor([0, total // 2, total], dtype=torch.int32, device=DEVICE)
    return x, w, b, cu


@pytest.mark.parametrize("gelu", [False, True])
@pytest.mark.parametrize("total", [0, 1, 64, 101, 150])
def test_kept_rows_match_torch_and_padding_rows_are_untouched(gelu, total):
    x, w, b, cu = _case(total=total)
    out = torch.full((x.shape[0], w.shape[0]), 7.0, device=DEVICE)
    ragged_linear(x, w, b, cu, gelu=gelu, out=out)
    ref = F.linear(x.double(), w.double(), b.double())
    ref = F.gelu(ref) if gelu else ref
    torch.testing.assert_close(out[:total].double(), ref[:total], atol=1e-4, rtol=1e-4)
    assert torch.all(out[total:] == 7.0), "rows past cu_seqlens[-1] must not be written"


def test_fp16_strided_input_without_bias():
    x, w, _, cu = _case(rows=70, n_in=72, n_out=20, total=66, dtype=torch.float16)
    xs = torch.cat([x, x], dim=1)[:, ::2]  # a strided view (stride 2 along K)
    out = ragged_linear(xs, w, None, cu)
    ref = F.linear(xs.float(), w.float())
    torch.testing.assert_close(out[:66].float(), ref[:66], atol=2e-2, rtol=2e-2)


def test_a_total_past_the_buffer_is_clamped_not_an_out_of_bounds_write():
    x, w, b, cu = _case(rows=90, total=90)
    cu[-1] = 10_000  # malformed cu_seqlens: the kernel must stay inside the buffers
    out = ragged_linear(x, w, b, cu)
    torch.testing.assert_close(out.double(), F.linear(x.double(), w.double(), b.double()), atol=1e-4, rtol=1e-4)


def test_bad_inputs_raise_clear_errors():
    x, w, b, cu = _case()
    with pytest.raises(ValueError, match=r"\[R, K\]"):
        ragged_linear(x[:, :5], w, b, cu)
    with pytest.raises(TypeError, match="share a dtype"):
        ragged_linear(x, w.double(), b, cu)
    with pytest.raises(ValueError, match="bias must be"):
        ragged_linear(x, w, b[:3], cu)
    with pytest.raises(ValueError, match="int32"):
        ragged_linear(x, w, b, cu.long())
    with pytest.raises(ValueError, match="out must be"):
        ragged_linear(x, w, b, cu, out=torch.empty(3, 3, device=DEVICE))


def test_a_gpu_with_less_shared_memory_gets_fewer_stages_then_smaller_k_blocks(monkeypatch):
    """Tuned on the H200; where the tiles do not fit a smaller GPU's shared memory the launch steps
    down and remembers what fits (simulated limit: at most 2 stages of 32-wide K blocks)."""
    from triton.runtime.errors import OutOfResources

    from ragged_kernels import linear

    calls = []

    class FakeKernel:
        def __getitem__(self, grid):
            def run(*args, BLOCK_K, num_stages, **kw):
                calls.append((BLOCK_K, num_stages))
                if num_stages > 2 or BLOCK_K > 32:
                    raise OutOfResources(200000, 101376, "shared memory")

            return run

    monkeypatch.setattr(linear, "_ragged_linear_kernel", FakeKernel())
    monkeypatch.setattr(linear, "_FITTED", {})
    x, w = torch.randn(8, 64, device=DEVICE), torch.randn(16, 64, device=DEVICE)
    cu = torch.tensor([0, 8], dtype=torch.int32, device=DEVICE)
    blocks = (64, 64, 64, 4, 4)
    linear.ragged_linear(x, w, None, cu, blocks=blocks)
    assert calls == [(64, 4), (64, 3), (64, 2), (64, 1), (32, 1)]
    calls.clear()
    linear.ragged_linear(x, w, None, cu, blocks=blocks)
    assert calls == [(32, 1)]  # remembered


# -- ragged_layer_norm ----------------------------------------------------------------------------
@pytest.mark.parametrize("total", [0, 1, 9, 37])
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm_of_the_kept_rows_matches_torch(total, affine):
    from ragged_kernels.linear import ragged_layer_norm

    g = torch.Generator().manual_seed(total)
    x = (torch.randn(40, 48, generator=g) * 3 + 1).to(DEVICE)
    x[total:] = float("nan")  # padding rows: never read into a kept row
    w = torch.randn(48, generator=g).to(DEVICE) if affine else None
    b = torch.randn(48, generator=g).to(DEVICE) if affine else None
    cu = torch.tensor([0, total // 2, total], dtype=torch.int32, device=DEVICE)
    y = ragged_layer_norm(x, w, b, 1e-6, cu)
    assert y.shape == x.shape and y.dtype == x.dtype
    torch.testing.assert_close(y[:total], torch.nn.functional.layer_norm(x[:total], (48,), w, b, 1e-6),
                               rtol=1e-5, atol=1e-5)


def test_layer_norm_fp16_strided_rows_and_a_total_past_the_buffer():
    from ragged_kernels.linear import ragged_layer_norm

    wide = torch.randn(30, 2, 64).half().to(DEVICE)
    x = wide[:, 1]  # row stride 128
    w, b = torch.rand(64).half().to(DEVICE), torch.rand(64).half().to(DEVICE)
    y = ragged_layer_norm(x, w, b, 1e-5, torch.tensor([0, 1000], dtype=torch.int32, device=DEVICE))  # clamped
    expect = torch.nn.functional.layer_norm(x.float(), (64,), w.float(), b.float(), 1e-5).half()
    torch.testing.assert_close(y, expect, rtol=2e-3, atol=2e-3)


def test_layer_norm_bad_inputs():
    from ragged_kernels.linear import ragged_layer_norm

    x, cu = torch.randn(8, 16, device=DEVICE), torch.tensor([0, 8], dtype=torch.int32, device=DEVICE)
    with pytest.raises(ValueError, match="unit stride"):
        ragged_layer_norm(x.t(), None, None, 1e-5, cu)
    with pytest.raises(TypeError, match="float16"):
        ragged_layer_norm(x.double(), None, None, 1e-5, cu)
    with pytest.raises(ValueError, match="weight"):
        ragged_layer_norm(x, torch.ones(15, device=DEVICE), None, 1e-5, cu)
    with pytest.raises(ValueError, match="cu_seqlens"):
        ragged_layer_norm(x, None, None, 1e-5, cu.long())


# -- fused neighbours: norm before the product, GELU or a residual after it, gathered rows -----------------------
def _norm_case(rows=150, n_in=80, n_out=100, seed=0, dtype=torch.float32, mean=0.0):
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(rows, n_in, generator=g) * 2 + mean).to(DEVICE, dtype)
    w = (torch.randn(n_out, n_in, generator=g) / n_in**0.5).to(DEVICE, dtype)
    b = torch.randn(n_out, generator=g).to(DEVICE, dtype)
    ln = (torch.rand(n_in, generator=g) + 0.5).to(DEVICE, dtype), torch.randn(n_in, generator=g).to(DEVICE, dtype)
    return x, w, b, ln


@pytest.mark.parametrize("gelu", [False, True], ids=["plain", "gelu"])
@pytest.mark.parametrize("mean", [0.0, 300.0], ids=["centred", "mean300"])
@pytest.mark.parametrize("total", [None, 1, 101], ids=["all", "total1", "total101"])
def test_norm_before_the_product_equals_layer_norm_then_linear(gelu, mean, total):
    """LayerNorm fused into the product's prologue (two passes over each row block's inputs): the same as
    the separate norm and layer, also for rows whose mean is 150x their spread (the shifted sums)."""
    x, w, b, (lw, lb) = _norm_case(mean=mean)
    cu = None if total is None else torch.tensor([0, total // 2, total], dtype=torch.int32, device=DEVICE)
    out = torch.full((x.shape[0], w.shape[0]), float("nan"), device=DEVICE)
    ragged_linear(x, w, b, cu, norm=(lw, lb, 1e-6), gelu=gelu, out=out)
    ref = F.linear(F.layer_norm(x.double(), (x.shape[1],), lw.double(), lb.double(), 1e-6), w.double(), b.double())
    ref = F.gelu(ref) if gelu else ref
    n = x.shape[0] if total is None else total
    torch.testing.assert_close(out[:n].double(), ref[:n], atol=2e-4, rtol=2e-4)
    assert torch.isnan(out[n:]).all(), "rows past cu_seqlens[-1] must not be written"


def test_residual_after_the_product_in_place_and_beside():
    x, w, b, _ = _norm_case(n_out=72)
    res = torch.randn(x.shape[0], 72, device=DEVICE)
    ref = res.double() + F.linear(x.double(), w.double(), b.double())
    beside = ragged_linear(x, w, b, residual=res)
    torch.testing.assert_close(beside.double(), ref, atol=1e-4, rtol=1e-4)
    acc = res.clone()
    assert ragged_linear(x, w, b, residual=acc, out=acc) is acc  # x += layer(h): in place
    torch.testing.assert_close(acc.double(), ref, atol=1e-4, rtol=1e-4)


def test_gathered_rows_read_the_indexed_input_rows_and_zero_rows_outside():
    """The head's gather: output row r reads input row rows[r]; an index outside x contributes nothing
    (a zero row in the product, after the norm: the output row is the bias)."""
    x, w, b, (lw, lb) = _norm_case(rows=90)
    rows = torch.tensor([0, 89, 45, -1, 90, 7, 7], dtype=torch.int32, device=DEVICE)
    out = ragged_linear(x, w, b, norm=(lw, lb, 1e-6), rows=rows)
    normed = F.layer_norm(x.double(), (x.shape[1],), lw.double(), lb.double(), 1e-6)
    picked = torch.cat([normed, torch.zeros_like(normed[:1])])[torch.tensor([0, 89, 45, 90, 90, 7, 7])]
    ref = F.linear(picked, w.double(), b.double())
    assert out.shape == (7, w.shape[0])
    torch.testing.assert_close(out.double(), ref, atol=2e-4, rtol=2e-4)


def test_fp16_fusions_round_where_the_separate_layers_write():
    """fp16: the norm's output and the layer's output are rounded to fp16 where the unfused layers write
    them, so the fused results sit within fp16 rounding of eager's (fp32 math on fp16 values)."""
    x, w, b, (lw, lb) = _norm_case(rows=70, n_in=96, n_out=80, dtype=torch.float16, mean=3.0)
    res = torch.randn(70, 80, device=DEVICE).half()
    h = F.layer_norm(x.float(), (96,), lw.float(), lb.float(), 1e-6).half()
    lin = F.linear(h.float(), w.float(), b.float()).half()
    torch.testing.assert_close(ragged_linear(x, w, b, norm=(lw, lb, 1e-6)), lin, atol=2e-3, rtol=2e-3)
    torch.testing.assert_close(ragged_linear(x, w, b, norm=(lw, lb, 1e-6), gelu=True), F.gelu(lin.float()).half(),
                               atol=2e-3, rtol=2e-3)
    x2 = torch.randn(70, 80, device=DEVICE).half()
    w2 = (torch.randn(80, 80) / 9).half().to(DEVICE)
    expect = (res.float() + F.linear(x2.float(), w2.float(), b.float()).half().float()).half()
    torch.testing.assert_close(ragged_linear(x2, w2, b, residual=res), expect, atol=2e-3, rtol=2e-3)


def test_fused_bad_inputs_raise_clear_errors():
    x, w, b, (lw, lb) = _norm_case()
    with pytest.raises(TypeError, match="norm must be"):
        ragged_linear(x, w, b, norm=(lw, lb))
    with pytest.raises(ValueError, match="norm weight must be a contiguous"):
        ragged_linear(x, w, b, norm=(lw[:5], lb, 1e-6))
    with pytest.raises(TypeError, match="norm bias must be"):
        ragged_linear(x, w, b, norm=(lw, lb.double(), 1e-6))
    with pytest.raises(ValueError, match="eps"):
        ragged_linear(x, w, b, norm=(lw, lb, -1.0))
    with pytest.raises(ValueError, match="residual must be"):
        ragged_linear(x, w, b, residual=torch.zeros(3, w.shape[0], device=DEVICE))
    with pytest.raises(ValueError, match="rows must be a contiguous int32"):
        ragged_linear(x, w, b, rows=torch.zeros(3, dtype=torch.int64, device=DEVICE))
    with pytest.raises(ValueError, match="out must be"):  # with rows, the output has len(rows) rows
        ragged_linear(x, w, b, rows=torch.zeros(3, dtype=torch.int32, device=DEVICE), out=torch.empty_like(x[:, :1]))


def test_small_grids_step_their_tiles_down_to_fill_the_sms(monkeypatch):
    """The tables are tuned for B 32-64; one image's layers would run a handful of 128 x 256 programs."""
    from ragged_kernels import linear

    monkeypatch.setattr(linear, "INTERPRET", False)
    monkeypatch.setattr(linear, "BLOCKS", (128, 256, 64, 8, 3))  # the H200's tables (the interpreter's are 64-wide)
    monkeypatch.setattr(linear, "BLOCKS_GELU", (128, 128, 64, 8, 3))
    assert linear.blocks_for(90, False) == (128, 256, 64, 8, 3)
    assert linear.blocks_for(90, False, 64 * 197, 1152, 132) == (128, 256, 64, 8, 3)  # B 64: enough programs
    assert linear.blocks_for(90, False, 4 * 197, 1152, 132) == (64, 64, 64, 4, 3)  # 13 x 18 = 234 programs
    assert linear.blocks_for(90, False, 197, 1152, 132) == (32, 64, 64, 4, 3)  # the smallest step: 7 x 18
    assert linear.blocks_for(89, True, 197, 384, 48) == (32, 64, 32, 4, 3)
    assert linear.blocks_for(90, True, 4 * 197, 3072, 132) == (128, 128, 64, 8, 3)  # 7 x 24 = 168


def test_the_custom_op_matches_its_fake_for_every_fusion():
    """`linear_op` (what a compiled graph calls): the fake implementation gives the real output's shape,
    dtype and strides for each fusion a DeiT block uses (opcheck compares outputs bit for bit, so every
    output row is computed here: no cu_seqlens)."""
    from ragged_kernels.linear import linear_op

    x, w, b, (lw, lb) = _norm_case(rows=20, n_in=24, n_out=16)
    res = torch.randn(20, 16, device=DEVICE)
    rows = torch.tensor([3, 0, 19], dtype=torch.int32, device=DEVICE)
    for args in ((x, w, b, None, False, None, None, 0.0, None, None),
                 (x, w, b, None, False, lw, lb, 1e-6, None, None),
                 (x, w, b, None, True, lw, lb, 1e-6, None, None),
                 (x, w, None, None, False, None, None, 0.0, res, None),
                 (x, w, b, None, False, lw, lb, 1e-6, None, rows)):
        torch.library.opcheck(linear_op, args)
    cu = torch.tensor([0, 7, 20], dtype=torch.int32, device=DEVICE)
    torch.testing.assert_close(linear_op(x, w, b, cu, True, lw, lb, 1e-6, None, None),
                               ragged_linear(x, w, b, cu, gelu=True, norm=(lw, lb, 1e-6)), rtol=0, atol=0)
