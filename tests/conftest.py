"""Shared test setup.

- Without CUDA, Triton kernels run in its interpreter: TRITON_INTERPRET=1 must be set before
  triton is first imported, so it is set here, at conftest import time.
- `gpu` tests skip without CUDA; `requires(...)` skips a test whose optional component is
  missing, except in CI (RAGGED_CI_STRICT=1), where a missing component is a failure.
- Every test starts from a fixed seed; kernel outputs under test go into NaN-poisoned buffers.
"""

from __future__ import annotations

import os
import random

import pytest


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


HAS_CUDA = _cuda_available()
if not HAS_CUDA:
    os.environ.setdefault("TRITON_INTERPRET", "1")

STRICT = os.environ.get("RAGGED_CI_STRICT", "") not in ("", "0")


def requires(ok: bool, what: str) -> None:
    """Skip (locally) or fail (in CI) when an optional component `what` is missing."""
    if ok:
        return
    if STRICT:
        pytest.fail(f"missing component in CI: {what}", pytrace=False)
    pytest.skip(f"missing component: {what}")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if HAS_CUDA:
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA GPU (run tools/gpu_check.sh on one)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)


@pytest.fixture(autouse=True)
def _seed() -> None:
    random.seed(0)
    try:
        import numpy as np

        np.random.seed(0)
    except ImportError:
        pass
    try:
        import torch

        torch.manual_seed(0)
    except ImportError:
        pass


@pytest.fixture
def device() -> str:
    return "cuda" if HAS_CUDA else "cpu"


@pytest.fixture
def poison():
    """Return an allocator for NaN-filled output buffers: an unwritten element fails a comparison."""
    import torch

    def make(*shape: int, dtype=torch.float32, device: str = "cpu") -> torch.Tensor:
        return torch.full(shape, float("nan"), dtype=dtype, device=device)

    return make
