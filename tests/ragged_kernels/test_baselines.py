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
    nested_sdpa_attention,
    padded_sdpa_attention,
    ragged_attention,
    varlen_attn_attention,
)
from ragged_kernels.attention.naive import ragged_attention_ref

CPU_BASELINES = {"padded_sdpa": padded_sdpa_attention, "nested_sdpa": nested_sdpa_attention}


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
    assert info.value.__cause__ is not None  # the baseline's own error stays visible
    with pytest.raises(exc, match=match):  # the same message ragged_attention gives
        ragged_attention(*args)


@pytest.mark.parametrize("name", list(CPU_BASELINES), ids=list(CPU_BASELINES))
def test_good_inputs_still_compute(name):
    q, k, v, cu = _inputs()
    got = CPU_BASELINES[name](q, k, v, cu, np.int64(6))
    torch.testing.assert_close(got, ragged_attention_ref(q, k, v, cu).to(q.dtype), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", list(CPU_BASELINES), ids=list(CPU_BASELINES))
def test_a_failure_on_good_inputs_is_re_raised_unchanged(name, monkeypatch):
    boom = RuntimeError("boom")

    def fail(*args, **kwargs):
        raise boom

    monkeypatch.setattr(F, "scaled_dot_product_attention", fail)
    with pytest.raises(RuntimeError) as info:
        CPU_BASELINES[name](*_inputs(), 8)
    assert info.value is boom and info.value.__cause__ is None


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
