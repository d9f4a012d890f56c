"""Job identity and between-job drift: a comparison says whether base and head were measured in one
job, and never passes in-job statistics off as evidence across jobs."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest

from ci.cli import main
from ci.records import JOB_KEY, WITHHELD_OTHER_JOB, Benchmark, Outcome, Result
from ci.verdicts import JobRelation, between_job_drift, compare, job_relation

ROOT = Path(__file__).resolve().parents[2]
RECORDED = ROOT / "benchmarks" / "recorded" / "h200-2026-11-29-s3"
LAT = Benchmark("bench_attention.GPUTime.time_gpu", (("B", "8"),))


def _result(sha: str, level: float, *, job: str | None, n: int = 10, noise: float = 0.005, seed: int = 0,
            bench: Benchmark = LAT) -> Result:
    rng = np.random.default_rng(seed)
    env = ((JOB_KEY, job),) if job is not None else ()
    return Result(bench, sha, "h200", tuple(float(x) for x in level * rng.lognormal(0, noise, n)),
                  run_id=f"h200/{sha}/env", environment=env)  # fmt: skip


def test_relation_comes_from_the_job_markers():
    a, b = _result("a" * 40, 1.0, job="gha-1.1-pr/1"), _result("b" * 40, 1.0, job="gha-1.1-pr/1")
    assert job_relation([a], [b]).relation == JobRelation.SAME
    other = _result("b" * 40, 1.0, job="gha-2.1-pr/1")
    assert job_relation([a], [other]).relation == JobRelation.DIFFERENT
    # One unmarked result on a side: nothing says the two were measured together.
    assert job_relation([a], [b, _result("b" * 40, 1.0, job=None)]).relation == JobRelation.UNKNOWN
    assert job_relation([], [b]).relation == JobRelation.UNKNOWN
    # Two asv calls of one runner job are two jobs here: only one call interleaves its commits.
    assert job_relation([a], [_result("b" * 40, 1.0, job="gha-1.1-pr/2")]).relation == JobRelation.DIFFERENT


def test_drift_is_the_spread_of_successive_jobs_and_leaves_out_the_compared_commits():
    rng = np.random.default_rng(7)
    levels = np.exp(rng.normal(0, 0.02, 30))  # a 2 % job-to-job level, samples 0.5 % within a job
    history = [_result(f"{i:040x}", float(x), job=f"local-{i}/1", seed=i) for i, x in enumerate(levels)]
    drift = between_job_drift(history)
    # Successive differences of independent 2 % levels spread by 2 % x sqrt(2).
    assert drift[LAT.key] == pytest.approx(0.02 * math.sqrt(2), rel=0.35)
    assert between_job_drift(history[:4]) == {}, "fewer than 5 jobs: unknown"
    huge = [*history[:4], _result("f" * 40, 50.0, job="x/1")]
    assert between_job_drift(huge, exclude_commits={"f" * 40}) == {}, "the compared commit is not history"
    with pytest.raises(ValueError, match="min_jobs"):
        between_job_drift(history, min_jobs=2)


def test_across_jobs_a_series_is_withheld_without_drift_and_judged_past_its_drift():
    base = _result("a" * 40, 1.0, job="j-1/1", seed=1)
    # +6 %: far outside the tight in-job noise, p tiny; a regression when measured in one job.
    head = _result("b" * 40, 1.06, job="j-2/1", seed=2)
    (same,) = compare([base], [head])
    assert same.outcome == Outcome.REGRESSED
    (held,) = compare([base], [head], between_jobs={})
    assert held.outcome == Outcome.INCONCLUSIVE and held.reason == WITHHELD_OTHER_JOB
    assert held.ratio == pytest.approx(same.ratio), "the ratio is still shown"
    (widened,) = compare([base], [head], between_jobs={LAT.key: 0.03})  # 3 x 3 % = 9 % > 6 %
    assert widened.outcome != Outcome.REGRESSED and widened.threshold == pytest.approx(0.09)
    (past,) = compare([base], [_result("b" * 40, 1.15, job="j-2/1", seed=2)], between_jobs={LAT.key: 0.03})
    assert past.outcome == Outcome.REGRESSED and past.threshold == pytest.approx(0.09)


def _rewrite(src: Path, dest: Path, sha: str) -> Path:
    """A copy of a recorded asv results folder whose commit is `sha` (file names follow)."""
    shutil.copytree(src, dest)
    machine = dest / "h200"
    (result,) = [p for p in machine.glob("*-virtualenv-*.json")]
    data = json.loads(result.read_text())
    old = data["commit_hash"]
    data["commit_hash"] = sha
    result.unlink()
    (machine / result.name.replace(old[:8], sha[:8])).write_text(json.dumps(data))
    sidecar = machine / f"gpu-env-{old[:8]}.json"
    sidecar.rename(machine / f"gpu-env-{sha[:8]}.json")
    return dest


def test_two_jobs_of_one_commit_are_not_passed_off_as_an_ab(tmp_path, capsys):
    """The recorded H200 pair: two asv jobs of commit d0d5b40, ~7 minutes apart. Compared as base
    and head (shas rewritten) they used to give 4 "regressions" of up to +24.8% at p = 3.6e-11, exit 1,
    and a comment saying "measured in the same job"."""
    base, head = "1" * 40, "2" * 40
    db = str(tmp_path / "h.sqlite")
    assert main(["ingest", "--db", db, str(_rewrite(RECORDED / "partA", tmp_path / "a", base))]) == 0
    assert main(["ingest", "--db", db, str(_rewrite(RECORDED / "partA2", tmp_path / "b", head))]) == 0
    capsys.readouterr()
    assert main(["compare", "--db", db, "--base", base, "--head", head, "--no-save"]) == 0
    out = capsys.readouterr().out
    assert "not measured in one job" in out
    lines = [ln for ln in out.splitlines() if ln.startswith(("regressed", "improved"))]
    assert lines == [], lines
    comment = tmp_path / "c.md"
    assert main(["comment", "--db", db, "--base", base, "--head", head, "--out", str(comment)]) == 0
    body = comment.read_text()
    assert "same job" not in body and "Measured in one job" not in body
    assert "Nothing records that base and head were measured in one job" in body
    assert "### ⚠️ Withheld: base and head not measured in one job" in body
    assert "🟡 No regression confirmed" in body
