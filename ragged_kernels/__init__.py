"""Ragged (variable-length, non-causal) attention and token pack/unpack for token-pruned ViTs.

Public API:
- `ragged_attention(q, k, v, cu_seqlens, max_seqlen, *, scale=None)`: the Triton kernel;
- `pack_tokens` / `unpack_tokens`: keep mask -> packed tokens + cu_seqlens, and back;
- `ATTENTION_BACKENDS`: name -> function with the same call shape (ours and the baselines);
- `launch_path()` / `forced_launch_path(...)`: which launch path `ragged_attention` takes (native C++
  entry point or Python), and a context that forces one.
"""

from ragged_kernels.attention import forced_launch_path, launch_path, ragged_attention, set_debug
from ragged_kernels.baselines import (
    fa2_varlen_attention,
    flex_attention_varlen,
    nested_sdpa_attention,
    padded_sdpa_attention,
    varlen_attn_attention,
)
from ragged_kernels.pack import pack_tokens, unpack_tokens

ATTENTION_BACKENDS = {
    "triton": ragged_attention,
    "fa2_varlen": fa2_varlen_attention,
    "varlen_attn": varlen_attn_attention,
    "padded_sdpa": padded_sdpa_attention,
    "nested_sdpa": nested_sdpa_attention,
    "flex": flex_attention_varlen,
}

__all__ = [
    "ATTENTION_BACKENDS",
    "fa2_varlen_attention",
    "flex_attention_varlen",
    "forced_launch_path",
    "launch_path",
    "nested_sdpa_attention",
    "pack_tokens",
    "padded_sdpa_attention",
    "ragged_attention",
    "set_debug",
    "unpack_tokens",
    "varlen_attn_attention",
]
