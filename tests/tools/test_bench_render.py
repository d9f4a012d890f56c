"""The render benchmark script still runs (tiny sizes), in memory and through the SQLite store."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tools import bench_render


@pytest.mark.parametrize("sqlite", [False, True], ids=["memory", "sqlite"])
def test_bench_render_smoke(tmp_path: Path, capsys: pytest.CaptureFixture[str], sqlite: bool) -> None:
    args = ["--commits", "12", "--series", "6", "--samples", "3", "--out", str(tmp_path / "site")]
    if sqlite:
        pytest.importorskip("ci.store")
        args += ["--sqlite", str(tmp_path / "h.sqlite")]
    assert bench_render.main(args) == 0
    out = capsys.readouterr().out
    assert re.search(r"full render: [\d.]+ s wall .* 23 pages", out), out  # 4 pages + style.css + 6 series + 12 commits
    assert "re-render, nothing new" in out and ", 0 written," in out
    written = int(re.search(r"after one new commit: .*?(\d+) written", out).group(1))
    assert 0 < written < 23
