"""tools/aa_spread.py on the recorded H200 data: the A/A figures in docs/performance.md come from it."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
AA = ROOT / "benchmarks" / "recorded" / "h200-2026-11-29-aa-old-timer"


def _aa_spread():
    from tools import aa_spread

    return aa_spread


def _rows(out: str) -> dict[str, str]:
    rows = [line for line in out.splitlines() if line.startswith("| ") and not line.startswith("| series")]
    return {r.split(" | ")[0][2:]: r for r in rows}


def test_two_runs_of_one_commit_are_an_aa_pair(capsys):
    """Two results dirs of the same commit: every GPU-time series of both runs is paired once."""
    assert _aa_spread().main([str(AA / "partA"), "d0d5b401", "--also", str(AA / "partA2"), "--bench", "time_gpu"]) == 0
    out = capsys.readouterr().out
    rows = _rows(out)
    assert len(rows) == 57  # 45 AttentionKernels + 6 AttentionKernelsPR + 6 PackTokens
    assert "39/57 run pairs (68%) differ by less than 3%" in out
    # Every capturable series is within 3%; the misses are the host-bound eager-events fallbacks.
    misses = {name for name, row in rows.items() if row.rstrip(" |").endswith("0/1")}
    assert misses and all("padded_sdpa" in m or "nested_sdpa" in m for m in misses)


def test_one_dir_of_one_commit_has_no_pair(capsys):
    assert _aa_spread().main([str(AA / "partA"), "d0d5b401", "--bench", "time_gpu"]) == 0
    assert "0/0 run pairs" in capsys.readouterr().out
