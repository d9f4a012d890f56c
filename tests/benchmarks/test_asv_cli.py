"""The suite under the real asv CLI on the CPU, in a temporary git repository (never /work/main's .asv or git).

The repository holds this project's real asv.conf.json and benchmarks/ plus a stub library
(`_stub_library.py`); commit B slows pack_tokens down on purpose.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.benchmarks._stub_library import STUB

ROOT = Path(__file__).resolve().parents[2]
PY = f"python{sys.version_info.major}.{sys.version_info.minor}"


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.email=t@example.com", "-c", "user.name=t", *args], cwd=repo, check=True,
                   capture_output=True)  # fmt: skip


@pytest.fixture(scope="module")
def asv_repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    tmp = tmp_path_factory.mktemp("asv")
    repo = tmp / "repo"
    repo.mkdir()
    shutil.copy(ROOT / "asv.conf.json", repo)
    shutil.copytree(ROOT / "benchmarks", repo / "benchmarks", ignore=shutil.ignore_patterns("__pycache__", "recorded"))
    (repo / "ragged_kernels").mkdir()
    lib = repo / "ragged_kernels" / "__init__.py"
    lib.write_text(STUB)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "A")
    lib.write_text(STUB.replace("SLOW_S = 0.0", "SLOW_S = 0.02"))
    _git(repo, "commit", "-q", "-am", "B: slow pack_tokens")
    # Hermetic: asv's machine file goes to a temporary HOME; `pythonX.Y` on PATH is this
    # interpreter's base (not a pyenv shim that depends on HOME).
    home, bindir = tmp / "home", tmp / "bin"
    home.mkdir()
    bindir.mkdir()
    (bindir / PY).symlink_to(os.path.realpath(sys._base_executable))
    env = {**os.environ, "HOME": str(home), "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}"}
    env.pop("VIRTUAL_ENV", None)
    env["ASV_MACHINE"] = "cibox"
    subprocess.run([sys.executable, "-m", "asv", "machine", "--yes", "--machine", "cibox"], cwd=repo, env=env,
                   check=True, capture_output=True)  # fmt: skip
    return repo, env


def _asv(repo: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "asv", *args], cwd=repo, env=env, capture_output=True, text=True,
                          timeout=600)  # fmt: skip


def test_asv_check_discovers_suite(asv_repo):
    repo, env = asv_repo
    proc = _asv(repo, env, "check")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "No problems found" in proc.stdout


def test_cpu_subset_records_samples_and_gpu_cases_skip(asv_repo):
    repo, env = asv_repo
    proc = _asv(repo, env, "run", "--machine", "cibox", "--record-samples", "-b", r"PackTokensCPU|KernelError",
                "HEAD^!")  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()
    files = list((repo / ".asv" / "results" / "cibox").glob(f"{head[:8]}-*.json"))
    assert len(files) == 1, files
    data = json.loads(files[0].read_text())
    cols = data["result_columns"]
    pack = dict(zip(cols, data["results"]["bench_pack.PackTokensCPU.time_host"], strict=False))
    assert all(v > 0 for v in pack["result"]), pack["result"]
    assert all(len(s) >= 6 for s in pack["samples"]), "asv needs >= 6 samples per side for its U test"
    # 2 rounds x 5 samples, taken in setup_cache and handed out once each (benchmarks/_replay.py):
    # the second round's process claimed its own chunk, not the first round's again. (Not "all 10
    # distinct": on a coarse VM clock two honest host-time samples can coincide.)
    lengths = [len(s) for s in pack["samples"]]
    assert lengths == [10] * len(lengths), f"sample counts {lengths}"
    repeated = [sorted(s[:5]) == sorted(s[5:]) for s in pack["samples"]]
    assert not any(repeated), f"a round handed out the other round's samples: {pack['samples']}"
    kernel = dict(zip(cols, data["results"]["bench_correctness.KernelError.track_max_abs_error"], strict=False))
    # Without a GPU every case is skipped (NaN in asv's files), not failed (null).
    assert kernel["result"] and all(v != v for v in kernel["result"]), kernel["result"]
    bench_meta = json.loads((repo / ".asv" / "results" / "benchmarks.json").read_text())
    assert bench_meta["bench_correctness.KernelError.track_max_abs_error"]["unit"] == "max abs diff"
    # the suite's declared direction, carried by asv's own discovery (benchmarks.declare)
    assert bench_meta["bench_correctness.KernelError.track_max_abs_error"]["direction"] == "lower"
    assert bench_meta["bench_pack.PackTokensCPU.time_host"]["version"] == "1"


def test_continuous_reports_deliberate_slowdown_and_exits_1(asv_repo):
    repo, env = asv_repo
    proc = _asv(repo, env, "continuous", "--machine", "cibox", "-b", r"PackTokensCPU", "HEAD~1", "HEAD")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "PERFORMANCE DECREASED" in out
    changed = [ln for ln in out.splitlines() if ln.startswith("| +")]
    assert any("PackTokensCPU.time_host('tiny224-b4-keep0.5', 'pack')" in ln for ln in changed), out
