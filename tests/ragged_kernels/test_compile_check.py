"""Every kernel the library launches on a GPU compiles for the H200 (sm_90), checked without a GPU.

The CPU tests run the kernels in Triton's interpreter, which accepts code that the GPU compiler
rejects. `scripts/compile_check.py` compiles the shipping configurations ahead of time with the
installed Triton and its bundled ptxas; it needs a process without TRITON_INTERPRET.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "compile_check.py"


def test_every_kernel_compiles_for_sm90():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, str(SCRIPT), "--arch", "90"], env=env, capture_output=True, text=True,
                          timeout=600)  # fmt: skip
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(("ok", "FAIL"))]
    names = " ".join(lines)
    for kernel in ("attention D64 fp16", "attention D128 bf16", "pack/unpack", "ragged_linear", "ats sampler"):
        assert kernel in names, out
    assert all(ln.startswith("ok") for ln in lines) and len(lines) >= 20, out


def test_refuses_to_run_interpreted():
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    proc = subprocess.run([sys.executable, str(SCRIPT)], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "TRITON_INTERPRET" in proc.stderr
