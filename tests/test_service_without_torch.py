"""The service (`ci`, `dashboard`) and the asv suite's modules import on a machine without torch:
`pip install .[service]` installs no GPU stack. Checked in a fresh interpreter (tests/conftest.py
imports torch) in which importing torch, torchvision, triton or timm raises ImportError."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

BLOCKED = ("torch", "torchvision", "triton", "timm")
CHECK = r"""
import importlib, importlib.abc, pathlib, sys

BLOCKED = {blocked!r}


class NoGpuStack(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"{{name}} is blocked: the service must not need it")
        return None


sys.meta_path.insert(0, NoGpuStack())
names = []
for pkg in ("ci", "dashboard", "benchmarks"):
    for path in sorted(pathlib.Path(pkg).rglob("*.py")):
        parts = path.with_suffix("").parts
        if parts[-1] == "__main__" or "migrations" in parts:  # runs the CLI / needs alembic's context
            continue
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
for name in names:
    importlib.import_module(name)
loaded = sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED + ("ragged_kernels", "pruners"))
assert not loaded, loaded
print(len(names), "modules")
"""


def test_every_service_module_imports_without_the_gpu_stack() -> None:
    code = CHECK.format(blocked=BLOCKED)
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert int(proc.stdout.split()[0]) > 40  # ci, dashboard and benchmarks were all walked
