"""The structural kernel variants (tools/attention_variants.py) compute what the shipping kernel does, in
Triton's interpreter: fused-qkv views, empty and short segments, several tiles per segment, and a
work list whose programs each take several items."""

from __future__ import annotations

import pytest
import torch

from ragged_kernels.attention.fwd import AttnConfig, default_scale
from ragged_kernels.attention.naive import ragged_attention_ref
from tools import attention_variants as av

HEADS, DIM = 2, 32


def _inputs(lengths, device, dtype=torch.float16, seed=0):
    g = torch.Generator().manual_seed(seed)
    total = sum(lengths)
    qkv = torch.randn(total, 3, HEADS, DIM, generator=g).to(dtype=dtype, device=device)
    cu = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int32, device=device)
    q, k, v = qkv.unbind(1)
    return q, k, v, cu


LENGTHS = [[5, 0, 37, 1], [40]]


@pytest.mark.parametrize("lengths", LENGTHS)
@pytest.mark.parametrize("programs", [1, 3, 64])
@pytest.mark.slow
def test_persistent_matches_reference(lengths, programs, device):
    q, k, v, cu = _inputs(lengths, device)
    cap = max(lengths)
    out = torch.full_like(q, float("nan"))
    av.persistent(q, k, v, cu, cap, default_scale(DIM), out, AttnConfig(16, 32, 4, 1, TAIL_N=16), programs)
    torch.testing.assert_close(out.float(), ragged_attention_ref(q, k, v, cu), atol=2e-3, rtol=0)


def test_persistent_clamps_bad_cu_seqlens(device):
    q, k, v, _ = _inputs([12], device)
    cu = torch.tensor([0, 50, 3], dtype=torch.int32, device=device)  # past the buffer, then backwards
    out = torch.zeros_like(q)
    av.persistent(q, k, v, cu, 64, default_scale(DIM), out, AttnConfig(16, 16, 4, 1), 4)
    clamped = torch.tensor([0, 12, 12], dtype=torch.int32, device=device)
    torch.testing.assert_close(out.float(), ragged_attention_ref(q, k, v, clamped), atol=2e-3, rtol=0)


@pytest.mark.parametrize("lengths", LENGTHS)
def test_short_chain_config_matches_reference(lengths, device):
    q, k, v, cu = _inputs(lengths, device)
    out = torch.empty_like(q)
    av.short_chain(q, k, v, cu, max(lengths), default_scale(DIM), out, AttnConfig(16, 64, 4, 1, TAIL_N=64))
    torch.testing.assert_close(out.float(), ragged_attention_ref(q, k, v, cu), atol=2e-3, rtol=0)


@pytest.mark.parametrize("lengths", LENGTHS)
@pytest.mark.slow
def test_tma_matches_reference(lengths, device):
    if device == "cuda" and torch.cuda.get_device_capability()[0] < 9:
        pytest.skip("TMA descriptors need sm_90")
    q, k, v, cu = _inputs(lengths, device)
    out = torch.zeros_like(q)
    av.tma(q, k, v, cu, max(lengths), default_scale(DIM), out, block_m=16, block_n=16)
    torch.testing.assert_close(out.float(), ragged_attention_ref(q, k, v, cu), atol=2e-3, rtol=0)


def test_tma_refuses_fp32_and_split_heads():
    q, k, v, cu = _inputs([8], "cpu")
    with pytest.raises(ValueError, match="fp16/bf16"):
        av.tma(q.float(), k.float(), v.float(), cu, 8, 1.0, torch.empty(q.shape))
    qt = q.transpose(1, 2).contiguous().transpose(1, 2)  # heads not contiguous within a row
    with pytest.raises(ValueError, match="contiguous"):
        av.tma(qt, k, v, cu, 8, 1.0, torch.empty_like(q))


def test_every_variant_is_offered_where_it_applies():
    short, long = av.variants(197, 132), av.variants(577, 132)
    assert any(n.startswith("chain") for n in short) and not any(n.startswith("chain") for n in long)
    for names in (short, long):
        assert sum(n.startswith("persistent") for n in names) == 4
        assert any(n.endswith(" ws") for n in names)
