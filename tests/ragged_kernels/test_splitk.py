"""The experimental split-over-keys kernel (ragged_kernels.attention.splitk) against the oracle."""

from __future__ import annotations

import pytest
import torch

from ragged_kernels.attention.fwd import default_scale
from ragged_kernels.attention.naive import ragged_attention_ref
from ragged_kernels.attention.splitk import SplitConfig, _buffers, ragged_attn_fwd_splitk


def _cu(lengths, device):
    return torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int32, device=device)


@pytest.mark.parametrize("split", [2, 3])
def test_splitk_matches_the_oracle_and_resets_its_counters(split, device):
    """Edge lengths (1, empty, one block, block + tail, a split left without keys); twice, so the second
    launch runs on the counters the first reset."""
    lengths = [1, 0, 64, 129, 40] if device == "cuda" else [1, 0, 33, 70]
    heads, head_dim = (12, 64) if device == "cuda" else (2, 32)
    cu = _cu(lengths, device)
    cfg = SplitConfig(BLOCK_M=64, BLOCK_N=32, TAIL_N=16, SPLIT=split)
    for seed in range(2):
        torch.manual_seed(seed)
        qkv = torch.randn(sum(lengths) + 3, 3, heads, head_dim, device=device,
                          dtype=torch.float16 if device == "cuda" else torch.float32)
        q, k, v = qkv.unbind(1)
        out = torch.full_like(q, float("nan"))
        ragged_attn_fwd_splitk(q, k, v, cu, max(lengths) + 5, default_scale(head_dim), out, cfg)
        ref = ragged_attention_ref(q, k, v, cu)
        n = sum(lengths)
        assert (out[:n].float() - ref[:n]).abs().max().item() < (2e-3 if device == "cuda" else 1e-4)
    assert all(int(c.abs().sum()) == 0 for _, _, c in _buffers[next(iter(_buffers))])


@pytest.mark.gpu
def test_gpu_splitk_many_launches_many_tiles():
    """Races between the splits of a tile would show as wrong rows now and then: 20 launches of 64 images."""
    torch.manual_seed(0)
    for split in (2, 4):
        cfg = SplitConfig(SPLIT=split)
        for _ in range(10):
            lengths = torch.randint(1, 198, (64,)).tolist()
            cu = _cu(lengths, "cuda")
            q, k, v = torch.randn(sum(lengths), 3, 12, 64, device="cuda", dtype=torch.float16).unbind(1)
            out = ragged_attn_fwd_splitk(q, k, v, cu, 197, default_scale(64), torch.empty_like(q), cfg)
            ref = ragged_attention_ref(q, k, v, cu)
            assert (out.float() - ref).abs().max().item() < 2e-3
