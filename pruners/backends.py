"""The attention backends a pruned model can run, and which of them can be captured or compiled.

A module of its own because the model (`pruners.model`), graph mode (`pruners.graph`) and the
compiled forward (`pruners.compiled`) all check against it, and the model builds the other two.
"""

from __future__ import annotations

BACKENDS = ("triton", "fa2_varlen", "padded_sdpa", "nested_sdpa", "dense")
# `reference`: pure-PyTorch packed attention (dense gather + masked SDPA). Not a competitor: it is
# the backend-independent path used for threshold calibration and for CPU tests.
EXTRA_BACKENDS = ("reference",)

# Backends whose forward reads nothing back to the host, so it can be captured as one CUDA graph or
# traced by torch.compile at fixed capacities (built with `sync_free=True`: padded_sdpa then pads to the
# capacity bound instead of reading the batch's longest kept length). The others, and why not:
CAPTURABLE_BACKENDS = ("triton", "fa2_varlen", "padded_sdpa", "dense", "reference")
NOT_CAPTURABLE = {
    "nested_sdpa": "NestedTensor needs the kept total on the host (it reads cu_seqlens[-1] every call), so its "
    "forward syncs and cannot be captured",
}


def check_capturable(backend: str, what: str) -> None:
    """ValueError unless `backend`'s forward can be captured (graph mode) or traced (compile)."""
    if backend in NOT_CAPTURABLE:
        raise ValueError(f"{what} needs a sync-free backend; {backend!r} is not: {NOT_CAPTURABLE[backend]}")
    if backend not in CAPTURABLE_BACKENDS:
        raise ValueError(f"{what} needs one of {CAPTURABLE_BACKENDS}, got {backend!r}")


__all__ = ["BACKENDS", "CAPTURABLE_BACKENDS", "EXTRA_BACKENDS", "NOT_CAPTURABLE", "check_capturable"]
