"""A minimal `ragged_kernels` written into the temporary asv repository (PyTorch-CPU pack/unpack).

It stands in for the library so the asv mechanism is tested on its own: commit A is this file,
commit B the same with `SLOW_S` > 0, a deliberate slowdown of pack_tokens. A sleep, not extra
work: on a loaded 2-core CI box extra CPU work is stretched by preemption on both sides alike.
"""

STUB = """
import time

import torch

SLOW_S = 0.0


def pack_tokens(x, keep, *, capacity=None):
    if SLOW_S:
        time.sleep(SLOW_S)
    flat = x.reshape(-1, x.shape[-1])[keep.reshape(-1)]
    cu = torch.zeros(keep.shape[0] + 1, dtype=torch.int32)
    cu[1:] = keep.sum(1).cumsum(0)
    return flat, cu


def unpack_tokens(packed, keep, cu_seqlens):
    out = packed.new_zeros(*keep.shape, packed.shape[-1])
    out[keep] = packed
    return out
"""
