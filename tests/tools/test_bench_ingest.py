"""The ingest benchmark script still runs (tiny sizes): generate, ingest twice, read, judge."""

from __future__ import annotations

import pytest

from tools import bench_ingest


def test_bench_ingest_smoke(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench_ingest.main(["--commits", "4", "--series", "2", "--samples", "3", "--budget", "600"]) == 0
    out = capsys.readouterr().out
    assert "generated 4 files" in out
    assert "4 unchanged; rows True" in out  # the second ingest writes nothing
    assert "change points, all series" in out and "A/B verdicts, newest pair" in out
