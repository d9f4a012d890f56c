"""How the service is packaged: `pip install .[service]` installs `ci` (the dashboard's site,
`ci.site`, included) and the asv suite's `benchmarks` with their data files and the `ragged-ci`
command, no GPU stack, and every one of their modules imports without torch (checked in a fresh
interpreter, since tests/conftest.py imports torch, in which importing torch, torchvision, triton or
timm raises)."""

from __future__ import annotations

import email
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from tests.ci.test_runner import template  # noqa: F401  (fixture: a toy repository with an asv suite)

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
for pkg in ("ci", "benchmarks"):
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
    assert int(proc.stdout.split()[0]) > 40  # ci (with ci.site) and benchmarks were all walked


def _wheel(tmp_path: Path) -> Path:
    src = tmp_path / "src"  # a copy, so setuptools' build/ and egg-info stay out of the checkout
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    for pkg in ("ci", "benchmarks", "tools", "tests"):
        shutil.copytree(ROOT / pkg, src / pkg, ignore=shutil.ignore_patterns("__pycache__", "recorded"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w",
                    str(tmp_path), str(src)], check=True, capture_output=True, timeout=300)  # fmt: skip
    (wheel,) = tmp_path.glob("*.whl")
    return wheel


def test_the_wheel_carries_the_service_and_no_harness(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path)
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        info = next(n for n in names if n.endswith(".dist-info/METADATA"))
        meta = email.message_from_bytes(zf.read(info))
        entry_points = zf.read(info.replace("METADATA", "entry_points.txt")).decode()
    migrations = {p.relative_to(ROOT).as_posix() for p in (ROOT / "ci/store/migrations").rglob("*") if p.is_file()
                  and "__pycache__" not in p.parts}
    templates = {p.relative_to(ROOT).as_posix() for p in (ROOT / "ci/site/templates").rglob("*") if p.is_file()
                 and "__pycache__" not in p.parts}  # the vendored chart library too
    assert migrations and migrations <= names, sorted(migrations - names)
    assert templates and templates <= names, sorted(templates - names)
    assert {"ci/cli.py", "ci/site/render.py", "benchmarks/gpu_env.py"} <= names
    assert not [n for n in names if n.startswith("dashboard/")]  # the site moved into ci/site/
    assert not [n for n in names if n.startswith(("tools/", "tests/"))]
    assert "ragged-ci = ci.cli:main" in entry_points
    base = [re.split(r"[\s<>=!~;\[]", r)[0] for r in meta.get_all("Requires-Dist") if "extra ==" not in r]
    assert base and not set(base) & set(BLOCKED), base  # the GPU stack is the `kernels` extra


def test_the_installed_command_works_from_any_directory_on_the_repository_it_is_pointed_at(
    tmp_path: Path, template: tuple[Path, dict[str, str]]  # noqa: F811  (the fixture)
) -> None:
    """`ragged-ci` from an installed wheel (not this checkout), run from an unrelated folder: it finds
    the asv suite in the repository `--repo` names and runs it through the real asv CLI."""
    import os

    repo, shas = template
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target),
                    str(_wheel(tmp_path))], check=True, capture_output=True, timeout=300)  # fmt: skip
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "PYTHONPATH": str(target), "HOME": str(home)}
    env.pop("ASV_MACHINE", None)

    def ragged_ci(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(target / "bin" / "ragged-ci"), *args], cwd=elsewhere, env=env, capture_output=True,
                              text=True, timeout=600)  # fmt: skip

    where = subprocess.run([sys.executable, "-c", "import ci; print(ci.__file__)"], cwd=elsewhere, env=env,
                           capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    assert Path(where).is_relative_to(target), where
    assert "continuous" in ragged_ci("--help").stdout
    same = ragged_ci("continuous", "--repo", str(repo), "main", "HEAD")
    assert same.returncode == 2 and f"({shas['C'][:12]}) are the same commit" in same.stderr, same.stderr
    demo = ragged_ci("demo", "--commits", "2")
    assert demo.returncode == 2 and "no checkout of the project here" in demo.stderr, demo.stderr
    db = tmp_path / "h.sqlite"
    run = ragged_ci("continuous", "--repo", str(repo), "--db", str(db), "--machine", "cibox", shas["B"], shas["C"])
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-3000:]
    assert "❌ Performance check failed" in run.stdout and "bench_toy.Toy.time_work" in run.stdout
    assert db.is_file() and not (elsewhere / ".asv").exists(), "the store is where --db says, nothing in the cwd"
