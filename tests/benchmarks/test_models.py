"""Model-level benchmark helpers: the results matrix protocol and which backends graph mode skips."""

from __future__ import annotations

import pytest
import torch

from benchmarks import _models
from benchmarks.presets import MODEL_BACKENDS


@pytest.mark.parametrize("backend", ["padded_sdpa", "nested_sdpa"])
def test_backends_that_read_device_values_are_not_captured(backend):
    """A host read (`.item()`, `int(t)`) inside CUDA-graph capture raises and can poison the process's
    later measurements, so such backends must be skipped in graph mode, not recorded as errors.
    Meta tensors have no values: a host read raises there too, which is how it is detected here."""
    import ragged_kernels

    assert backend in MODEL_BACKENDS
    q = torch.empty(10, 2, 32, device="meta")
    cu = torch.empty(3, dtype=torch.int32, device="meta")
    with pytest.raises(RuntimeError, match="item"):
        ragged_kernels.ATTENTION_BACKENDS[backend](q, q, q, cu, 8)
    assert backend in _models.NOT_CAPTURABLE


def test_guarded_and_lookup_map_skips_and_errors():
    results: dict = {}
    _models.guarded(results, "ok", lambda: {"v": 2.5})
    _models.guarded(results, "skip", lambda: (_ for _ in ()).throw(NotImplementedError("no fa2")))
    _models.guarded(results, "err", lambda: 1 / 0)
    assert _models.lookup(results, "ok", "v") == 2.5
    with pytest.raises(NotImplementedError, match="no fa2"):
        _models.lookup(results, "skip", "v")
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        _models.lookup(results, "err", "v")
    with pytest.raises(NotImplementedError, match="not measured"):
        _models.lookup(results, "missing", "v")
    with pytest.raises(NotImplementedError, match="needs a CUDA GPU"):
        _models.lookup({"_global": {"skip": "needs a CUDA GPU"}, "ok": {"values": {"v": 1.0}}}, "ok", "v")
