"""The ingest benchmark script still runs (tiny sizes): generate, ingest twice, read, judge."""

from __future__ import annotations

import pytest

from tools import bench_ingest


def test_bench_ingest_smoke(capsys: pytest.CaptureFixture[str]) -> None:
    """This tree against itself as the base: both columns, the migration check, the targets."""
    from pathlib import Path

    root = Path(bench_ingest.__file__).resolve().parents[1]
    code = bench_ingest.main(["--commits", "12", "--series", "20", "--samples", "3", "--base", str(root)])
    out = capsys.readouterr().out
    assert "generated 12 + 1 files" in out
    assert "12 unchanged; rows same: True" in out  # the second ingest writes nothing
    assert "| change points, one new commit" in out and "equal to a recomputation: True" in out
    assert "sqlite: reads identical to the base tree's: True" in out
    assert "migrated in place" in out and "reads back identical: True" in out
    assert "load average" in out
    assert code == 0
