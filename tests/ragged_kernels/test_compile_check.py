"""Every kernel the library and the pruners launch on a GPU fits sm_80, sm_89 and sm_90 without
spilling, checked without a GPU (`ragged_kernels.aot`, `tools.compile_check`).

The CPU tests run the kernels in Triton's interpreter, which accepts code that the GPU compiler
rejects and says nothing of registers or shared memory. `tools.compile_check` compiles the shipping
configurations ahead of time with the installed Triton and its bundled ptxas; it needs a process
without TRITON_INTERPRET.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ["-m", "tools.compile_check"]
ENV = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}


def test_every_shipping_kernel_fits_every_architecture_without_spilling():
    proc = subprocess.run([sys.executable, *SCRIPT], env=ENV, cwd=ROOT, capture_output=True, text=True, timeout=1500)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(("ok", "FAIL"))]
    for arch in ("sm_80", "sm_89", "sm_90"):
        names = " ".join(ln for ln in lines if f" {arch} " in ln)
        for kernel in ("attention D64 float16", "attention D128 bfloat16", "pack/unpack", "ragged_linear",
                       "ats sampler", "ats stage", "threshold-L2 stage", "CLS scores", "ragged_layer_norm"):
            assert kernel in names, (arch, kernel, out)
    assert all(ln.startswith("ok") for ln in lines) and len(lines) >= 3 * 40, out
    assert all("programs/SM" in ln and "registers" in ln for ln in lines)
    # Only sm_90's measured configs may spill, and only by what KNOWN_SPILLS records (nothing since 2026-12-04).
    spilled = [ln for ln in lines if " 0 B spilled" not in ln]
    assert all(" sm_90 " in ln and "known spill" in ln for ln in spilled), spilled
    from tools.compile_check import KNOWN_SPILLS

    assert len(spilled) <= len(KNOWN_SPILLS)


def test_refuses_to_run_interpreted():
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    proc = subprocess.run([sys.executable, *SCRIPT], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "TRITON_INTERPRET" in proc.stderr


def test_programs_per_sm_and_problems_from_the_limits():
    from ragged_kernels.aot import ARCHS, KernelSpec, Report, arch_of

    spec = KernelSpec("k", None, {}, {}, {"num_warps": 4})
    ada = ARCHS[89]
    r = Report(spec, ada, registers=128, spill_bytes=0, stack_bytes=0, shared_bytes=24576, limit="registers")
    assert r.by_limit() == {"registers": 4, "threads": 12, "blocks": 24, "shared memory": 4} and not r.problems
    heavy = Report(spec, ada, 255, 16, 16, 120 * 1024, "shared memory")
    assert heavy.programs_per_sm == 0
    assert heavy.problems == ["spills 16 B", f"{120 * 1024} B shared > {99 * 1024} B per block",
                              "no program fits an SM"]
    assert [arch_of(c) for c in ((9, 0), (10, 0), (8, 0), (8, 6), (8, 9), (7, 5))] == [90, 90, 80, 89, 89, 80]


def test_a_spill_outside_the_known_list_fails_the_report(monkeypatch):
    """The gate can fail: a report line for a spilling spec that KNOWN_SPILLS does not name is FAIL."""
    pytest.importorskip("triton")
    from ragged_kernels import aot
    from tools import compile_check

    spec = aot.KernelSpec("made-up", None, {}, {}, {"num_warps": 4})
    fake = aot.Report(spec, aot.ARCHS[89], 96, 24, 24, 2048, "registers")
    monkeypatch.setattr(compile_check, "specs_for", lambda c, v: [spec])
    monkeypatch.setattr(aot, "report", lambda s, c: fake)
    ok, line = compile_check._line((89, False, 0))
    assert not ok and line.startswith("FAIL sm_89 made-up") and "spills 24 B" in line
    monkeypatch.setitem(compile_check.KNOWN_SPILLS, (89, "made-up"), 24)
    ok, line = compile_check._line((89, False, 0))
    assert ok and "known spill" in line


@pytest.mark.parametrize("arch", [80, 89])
def test_the_tables_for_cards_we_lack_follow_their_rule(arch):
    """CONFIGS[80] and CONFIGS[89] at DeiT's head dim are what `tools.choose_configs`' rule picks from
    ptxas's report (buckets 0 and 2: the one kept and the one the rule changed)."""
    from ragged_kernels.attention import fwd

    code = ("from tools.choose_configs import choose\n"
            f"for bucket in (0, 2):\n    print(repr(choose({arch}, 64, bucket, verbose=False)[0]))")
    proc = subprocess.run([sys.executable, "-c", code], env=ENV, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    table = fwd.CONFIGS[arch][64]
    assert proc.stdout.strip().splitlines() == [repr(table[0]), repr(table[2])]
