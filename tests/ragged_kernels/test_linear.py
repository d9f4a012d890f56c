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
