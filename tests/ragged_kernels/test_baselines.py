"""The baselines' errors: no checks on success, but a failure on bad inputs raises ragged_attention's
clear error (chained to the original); on good inputs, device errors and a missing backend, the
original exception propagates unchanged."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from ragged_kernels import (
    fa2_varlen_attention,
    flex_attention_varlen,
    nested_sdpa_attention,
    padded_sdpa_attention,
    ragged_attention,
    varlen_attn_attention,
)
from ragged_kernels.attention.naive import ragged_attention_ref

CPU_BASELINES = {
    "padded_sdpa": padded_sdpa_attention,
    "padded_sdpa_bound": lambda *a, **kw: padded_sdpa_attention(*a, pad_to_bound=True, **kw),
    "nested_sdpa": nested_sdpa_attention,
    "flex": flex_attention_varlen,  # eager FlexAttention on the CPU (compiled on CUDA)
}
pytestmark = pytest.mark.filterwarnings("ignore:.*flex_attention called without torch.compile:UserWarning")


def _inputs():
    q, k, v = torch.randn(3, 10, 2, 64).unbind(0)
    return q, k, v, torch.tensor([0, 4, 10], dtype=torch.int32)


BAD_INPUTS = {
    "k-shape-mismatch": (lambda q, k, v, cu: (q, k[:-1], v, cu, 8), ValueError, "one shape"),
    "q-4d": (lambda q, k, v, cu: (q[None], k[None], v[None], cu, 8), ValueError, "total_tokens, heads, head_dim"),
    "cu-list": (lambda q, k, v, cu: (q, k, v, cu.tolist(), 8), TypeError, "cu_seqlens must be a tensor"),
    "cu-empty": (lambda q, k, v, cu: (q, k, v, cu[:0], 8), ValueError, "int32 \\[B\\+1\\]"),
    "q-list": (lambda q, k, v, cu: (q.tolist(), k, v, cu, 8), TypeError, "q, k and v must be tensors"),
}


@pytest.mark.parametrize("bad", list(BAD_INPUTS), ids=list(BAD_INPUTS))
@pytest.mark.parametrize("name", list(CPU_BASELINES), ids=list(CPU_BASELINES))
def test_bad_inputs_raise_the_shared_clear_errors(name, bad):
    make, exc, match = BAD_INPUTS[bad]
    args = make(*_inputs())
    with pytest.raises(exc, match=match) as info:
        CPU_BASELINES[name](*args)
    if name != "flex":  # flex checks first (its docstring says why); the others explain their own failure
        assert info.value.__cause__ is not None  # the baseline's own error stays visible
    with pytest.raises(exc, match=match):  # the same message ragged_attention gives
        ragged_attention(*args)


@pytest.mark.parametrize("name", list(CPU_BASELINES), ids=list(CPU_BASELINES))
def test_good_inputs_still_compute(name):
    q, k, v, cu = _inputs()
    got = CPU_BASELINES[name](q, k, v, cu, np.int64(6))
    torch.testing.assert_close(got, ragged_attention_ref(q, k, v, cu).to(q.dtype), atol=1e-5, rtol=1e-5)


SDPA_BASELINES = [name for name in CPU_BASELINES if name != "flex"]


@pytest.mark.parametrize("name", SDPA_BASELINES, ids=SDPA_BASELINES)
def test_a_failure_on_good_inputs_is_re_raised_unchanged(name, monkeypatch):
    boom = RuntimeError("boom")

    def fail(*args, **kwargs):
        raise boom

    monkeypatch.setattr(F, "scaled_dot_product_attention", fail)
    with pytest.raises(RuntimeError) as info:
        CPU_BASELINES[name](*_inputs(), 8)
    assert info.value is boom and info.value.__cause__ is None


def test_flex_block_mask_is_the_segment_mask():
    """The document mask FlexAttention gets: row i may attend to row j exactly when both lie in one
    segment; rows past cu_seqlens[-1] form a segment of their own."""
    from ragged_kernels.baselines import flex_block_mask, segment_ids

    cu = torch.tensor([0, 3, 3, 7, 9], dtype=torch.int32)
    assert segment_ids(cu, 12).tolist() == [0, 0, 0, 2, 2, 2, 2, 3, 3, 4, 4, 4]
    mask = flex_block_mask(cu, 12)
    dense = mask.to_dense()  # [1, 1, q blocks, kv blocks]: one 128-row block holds all 12 rows
    assert dense.shape[-2:] == (1, 1) and bool(dense.all())
    doc = segment_ids(cu, 12)
    want = doc[:, None] == doc[None, :]
    got = torch.tensor([[bool(mask.mask_mod(0, 0, torch.tensor(i), torch.tensor(j))) for j in range(12)]
                        for i in range(12)])
    assert torch.equal(got, want)


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_padded_sdpa_rows_find_their_segment(compiled):
    """The unpad step's row -> (segment, position) map, with empty segments, rows past the end and a
    `cu_seqlens` that starts above 0 (a chunk of a longer batch), eager and under torch.compile (on the GPU
    inductor once got this wrong for a sliced `cu_seqlens`; tests/pruners/test_compiled.py has the GPU case)."""
    from ragged_kernels.baselines import _segment_of_rows

    def expected(bounds, total):
        segs, poss = [], []
        for r in range(total):
            b = max(0, min(len(bounds) - 2, sum(e <= r for e in bounds[1:])))
            segs.append(b)
            poss.append(r - bounds[b])
        return segs, poss

    f = _segment_of_rows
    if compiled:
        f = torch.compile(_segment_of_rows, fullgraph=True, dynamic=False, backend="aot_eager")
    for bounds, total in (([0, 3, 3, 7, 9], 12), ([4, 6, 6, 10], 12), ([0, 0, 5], 5)):
        seg, pos = f(torch.tensor(bounds, dtype=torch.int32), total)
        assert (seg.tolist(), pos.tolist()) == expected(bounds, total)


@pytest.mark.parametrize("lengths", [[5, 0, 7], [1], [130, 3, 64]], ids=["with-empty", "one-token", "past-a-block"])
def test_flex_matches_the_oracle_on_ragged_segments(lengths):
    total = sum(lengths)
    q, k, v = torch.randn(3, total + 4, 2, 32).unbind(0)  # 4 capacity rows past the last segment
    cu = torch.tensor([0, *np.cumsum(lengths)], dtype=torch.int32)
    got = flex_attention_varlen(q, k, v, cu, max(lengths))
    ref = ragged_attention_ref(q, k, v, cu)
    torch.testing.assert_close(got[:total], ref[:total], atol=1e-5, rtol=1e-5)


def test_padded_sdpa_to_the_bound_matches_padding_to_the_longest():
    q, k, v, cu = _inputs()
    torch.testing.assert_close(padded_sdpa_attention(q, k, v, cu, 9, pad_to_bound=True),
                               padded_sdpa_attention(q, k, v, cu, 9), atol=1e-6, rtol=1e-6)


def test_no_segments_give_zeros_like_ragged_attention_leaves_them():
    """cu_seqlens of length 1 (B = 0) is valid input (ragged_attention accepts it): no row is
    covered, so both CPU baselines return zeros (NestedTensor itself needs at least one segment)."""
    q, k, v, cu = _inputs()
    assert not padded_sdpa_attention(q, k, v, cu[:1], 8).any()
    assert not nested_sdpa_attention(q, k, v, cu[:1], 8).any()


@pytest.mark.parametrize(
    "error", [torch.OutOfMemoryError("CUDA out of memory"), torch.AcceleratorError("CUDA error: an illegal memory "
                                                                                   "access was encountered")],
    ids=["oom", "accelerator"],
)
def test_device_errors_propagate_even_on_bad_inputs(error, monkeypatch):
    """head_dim 48 fails the shared check, but a device error is not the inputs' fault: it propagates."""

    def fail(*args, **kwargs):
        raise error

    monkeypatch.setattr(F, "scaled_dot_product_attention", fail)
    q, k, v = torch.randn(3, 10, 2, 48).unbind(0)
    with pytest.raises(type(error)) as info:
        padded_sdpa_attention(q, k, v, torch.tensor([0, 4, 10], dtype=torch.int32), 8)
    assert info.value is error


@pytest.mark.parametrize("fn", [fa2_varlen_attention, varlen_attn_attention], ids=["fa2_varlen", "varlen_attn"])
def test_a_missing_backend_is_still_not_implemented_on_bad_inputs(fn):
    """On the CPU (no FA2) both raise NotImplementedError, bad inputs or not: the benchmarks skip on it."""
    if torch.cuda.is_available():
        pytest.skip("on a GPU these backends exist")
    q, k, v, cu = _inputs()
    with pytest.raises(NotImplementedError):
        fn(q, k, v, cu, 8)
    with pytest.raises(NotImplementedError):
        fn(q[None], k[None], v[None], cu.tolist(), 8)


@pytest.mark.gpu
@pytest.mark.parametrize("lengths", [[197, 99, 40, 1], [577, 300]], ids=["197-cap", "577-cap"])
def test_gpu_flex_compiled_matches_the_oracle(lengths):
    total = sum(lengths)
    q, k, v = torch.randn(3, total + 8, 12, 64, device="cuda", dtype=torch.float16).unbind(0)
    cu = torch.tensor([0, *np.cumsum(lengths)], dtype=torch.int32, device="cuda")
    got = flex_attention_varlen(q, k, v, cu, max(lengths))
    ref = ragged_attention_ref(q, k, v, cu)
    assert (got[:total].float() - ref[:total]).abs().max().item() < 2e-2
