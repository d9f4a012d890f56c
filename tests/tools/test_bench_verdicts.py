"""The verdict benchmark script's loaders and a tiny quality run (`python -m tools.bench_verdicts`)."""

from __future__ import annotations

import numpy as np
import pytest

from ci.records import Direction
from ci.verdicts import VerdictSettings


def test_bench_script_reads_asv_results_and_json(asv_dir, tmp_path) -> None:
    """The quality benchmark's loaders on real asv files, and a tiny run that must find a 50 % slowdown."""
    import json

    from tests.ci.conftest import sha_for
    from tools.bench_verdicts import load_asv_results, load_samples_json, main, run_quality

    rng = np.random.default_rng(3)
    results = asv_dir([sha_for(0), sha_for(1)],
                      samples=lambda name, j, c: [float(x) for x in rng.lognormal(0, 0.01, 40) * (1 + j)])
    sets = load_asv_results(results)
    # 4 GPUTime points + 1 throughput per run, 2 runs; correctness series are left out.
    assert len(sets) == 10 and all(s.samples.size == 40 for s in sets)
    assert {s.direction for s in sets} == {Direction.LOWER, Direction.HIGHER}
    row = run_quality("asv-results", sets, 10, prs=2, series=20, slowed=4, slowdown=1.5, drift=0.0, seed=0,
                      settings=VerdictSettings())
    assert row["source"] == "asv-results (split halves)"
    assert row["detected"] == 1.0 and row["false_alarm"] == 0.0
    assert row["aa_series"] == 32 and row["slowed_series"] == 8

    js = tmp_path / "s.json"
    js.write_text(json.dumps({"a": [1.0, 1.1, 0.9, 1.0, 1.05], "b": [[2.0] * 4, [2.1] * 6], "tiny": [1.0]}))
    assert [s.key for s in load_samples_json(js)] == ["a", "b", "b"]
    assert main(["--samples-json", str(js), "--n", "3", "--prs", "1", "--series", "4", "--slowed", "1",
                 "--skip-history"]) == 0  # no target applies below n=10
    with pytest.raises(SystemExit):
        main(["--slowed", "5", "--series", "4"])
