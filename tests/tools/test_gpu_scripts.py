"""The GPU-only tools, on a machine without one: a clear message and exit status 2, no traceback."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GPU_SCRIPTS = ["bench_ats_sampler", "bench_kernels", "bench_native_launch", "bench_ragged_linear",
               "profile_pruned_forward", "profile_end_to_end_setup"]


@pytest.mark.parametrize("script", GPU_SCRIPTS)
def test_gpu_script_without_cuda_says_so(script):
    pytest.importorskip("torch")
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    r = subprocess.run([sys.executable, "-m", f"tools.{script}"], capture_output=True, text=True,
                       cwd=ROOT, env=env, timeout=300)
    assert r.returncode == 2, r.stderr[-2000:]
    assert "Traceback" not in r.stderr and ("GPU" in r.stderr or "CUDA" in r.stderr), r.stderr[-2000:]


@pytest.mark.parametrize("head_dim", [32, 64, 128])
def test_the_variant_sweep_starts_from_the_h200_table(head_dim: int) -> None:
    """`--variants` (and `compile_check --variants`) read the config table by head dim; the table
    became keyed by architecture first, and the lookup raised KeyError until 2026-12-05."""
    from ragged_kernels.attention.fwd import H200_CONFIGS
    from tools.bench_kernels import variants

    got = variants(head_dim)
    shipping = list({repr(c): c for c in H200_CONFIGS[head_dim]}.values())
    assert got[: len(shipping)] == shipping and len(got) > len(shipping)
