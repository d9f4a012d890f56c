"""The render benchmark script still runs (tiny sizes): this checkout alone, and against a baseline
checkout (here the same tree, so the ratios are ~1 and the sizes equal)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tools import bench_render

pytest.importorskip("ci.store")


def test_bench_render_smoke(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--commits", "12", "--series", "6", "--samples", "3", "--work", str(tmp_path)]
    assert bench_render.main([*args, "--baseline", str(bench_render.ROOT)]) == 0
    out = capsys.readouterr().out
    table = out[out.index("| "):]
    assert re.search(r"\| full render: wall +\| [\d.]+ s +\| [\d.]+ s +\| [\d.]+ +\|", table), table
    assert re.search(r"re-render, nothing new: files written \(MB\) +\| 0 \(0\.0 MB\) +\| 0 \(0\.0 MB\)", table), table
    written = re.search(r"after one new commit: files written \(MB\) +\| (\d+) ", table)
    files = re.search(r"\| files +\| (\d+) ", table)
    assert written and files and 0 < int(written.group(1)) < int(files.group(1))
    assert re.search(r"\| site \(served files\) +\| ([\d.]+) MB +\| \1 MB +\| 1\.000 \|", table), table
