"""Shared test setup.

- Without CUDA, Triton kernels run in its interpreter: TRITON_INTERPRET=1 must be set before
  triton is first imported, so it is set here, at conftest import time.
- `gpu` tests skip without CUDA; `requires(...)` skips a test whose optional component is
  missing, except in CI (RAGGED_CI_STRICT=1), where a missing component is a failure.
- Every test starts from a fixed seed; kernel outputs under test go into NaN-poisoned buffers.
- `slow` marks what `make test-fast` (`pytest -m "not slow"`) leaves out and `make test` runs:
  `slow_reason` decides by folder, fixture and marker; single slow tests carry `@pytest.mark.slow`.
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterable
from pathlib import Path

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


# What `make test-fast` leaves out, besides the tests marked `slow` one by one. Measured on the
# shared 2-core box on 2026-12-05 at load average 8-9 (other jobs): the tests outside these rules
# took 390 s there, the ones left now ~20 s (`pytest -m "not slow" --durations=0`); a test that took
# 0.3 s or more there carries the mark. Folders: the kernels and the pruned models run Triton's
# interpreter (a DeiT-Ti forward ~1.6 s). Files: whole sites rendered, SQLite stores written and
# read, forked workers, git repositories, subprocesses of the CLI and of the harnesses, wheels built.
# Fixtures: a PostgreSQL server, a headless Chromium, repositories driven through the real asv CLI.
# Markers: a server, a browser or a GPU.
SLOW_FOLDERS = ("tests/ragged_kernels/", "tests/pruners/")
SLOW_FILES = frozenset({
    "tests/ci/test_cli.py", "tests/ci/test_ingest.py", "tests/ci/test_ingest_forked.py",
    "tests/ci/test_ingest_git.py", "tests/ci/test_ingest_hostile.py", "tests/ci/test_jobs.py",
    "tests/ci/test_machines.py", "tests/ci/test_snapshots.py", "tests/ci/test_store.py",
    "tests/dashboard/test_render.py", "tests/dashboard/test_staging.py", "tests/dashboard/test_store.py",
    "tests/test_packaging.py", "tests/tools/test_aa_spread.py", "tests/tools/test_bench_ingest.py",
    "tests/tools/test_bench_render.py", "tests/tools/test_bench_verdicts.py", "tests/tools/test_eval_history.py",
    "tests/tools/test_gpu_scripts.py",
    # The exact tier's tests build pruned models and compile every kernel (8-33 s each on a quiet box,
    # 2026-12-05), and one ingests a recorded history (4 s).
    "tests/benchmarks/test_structure.py", "tests/benchmarks/test_launch_count.py",
    "tests/dashboard/test_exact_history.py", "tests/ci/test_exact_workflow.py",
})
SLOW_FIXTURES = frozenset({"pg_server", "pg_url", "browser", "asv_repo", "template", "toy"})
SLOW_MARKERS = frozenset({"postgres", "browser", "gpu"})
# A test outside the slow set that takes longer than this is named at the end of the run.
FAST_LIMIT_S = 2.0


def slow_reason(path: str, fixtures: Iterable[str], markers: Iterable[str]) -> str | None:
    """Why a test belongs to the slow set (None: it runs in `make test-fast` too).

    Args:
        path: the test file relative to the repository root, with forward slashes.
        fixtures: the names of every fixture the test uses, directly or through other fixtures.
        markers: the names of the test's markers, its parametrization's included.
    """
    folder = next((f for f in SLOW_FOLDERS if path.startswith(f)), None)
    if folder is not None:
        return f"in {folder} (Triton's interpreter)"
    if path in SLOW_FILES:
        return f"in {path}"
    fixture = min(SLOW_FIXTURES.intersection(fixtures), default=None)
    if fixture is not None:
        return f"uses the fixture {fixture}"
    marker = min(SLOW_MARKERS.intersection(markers), default=None)
    if marker is not None:
        return f"marked {marker}"
    return None


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Under `-m "not slow"`, the slow folders and files are not even imported: importing them
    (triton, timm, the pruned models) was ~a third of a fast run's wall time on 2026-12-05."""
    if config.getoption("markexpr", "").strip() != "not slow" or not collection_path.is_relative_to(config.rootpath):
        return None
    path = collection_path.relative_to(config.rootpath).as_posix()
    if path in SLOW_FILES or any(f"{path}/".startswith(f) for f in SLOW_FOLDERS):
        return True
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    root = config.rootpath
    for item in items:
        path = item.path.relative_to(root).as_posix() if item.path.is_relative_to(root) else item.path.as_posix()
        markers = {m.name for m in item.iter_markers()}
        if "slow" not in markers and slow_reason(path, getattr(item, "fixturenames", ()), markers):
            item.add_marker(pytest.mark.slow)
    if HAS_CUDA:
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA GPU (run tools/gpu_check.sh on one)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)


_over_limit: list[tuple[str, float]] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when == "call" and report.duration > FAST_LIMIT_S and "slow" not in report.keywords:
        _over_limit.append((report.nodeid, report.duration))


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    if _over_limit:
        terminalreporter.section(f"tests outside the slow set that took over {FAST_LIMIT_S:g} s")
        for nodeid, seconds in sorted(_over_limit, key=lambda t: -t[1]):
            terminalreporter.write_line(f"{seconds:6.1f} s  {nodeid}  (mark it @pytest.mark.slow if it stays slow)")


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
