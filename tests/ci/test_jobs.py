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
from ci.ingest import ingest_results_dir
from ci.records import JOB_KEY, WITHHELD_OTHER_JOB, Benchmark, Direction, Outcome, Result
from ci.store import Store
from ci.verdicts import JobRelation, NoiseSettings, between_job_drift, compare, job_relation
from ci.verdicts.inputs import not_judged
from tests.ci.conftest import MACHINE, sha_for, write_results

ROOT = Path(__file__).resolve().parents[2]
RECORDED = ROOT / "benchmarks" / "recorded" / "h200-2026-11-29-aa-old-timer"
LEGACY = ROOT / "benchmarks" / "recorded" / "h200-2026-12-main"
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
    assert held.shown == "withheld" and same.shown == "regressed"  # as compare prints them: not "inconclusive"
    (widened,) = compare([base], [head], between_jobs={LAT.key: 0.03})  # 3 x 3 % = 9 % > 6 %
    assert widened.outcome != Outcome.REGRESSED and widened.threshold == pytest.approx(0.09)
    (past,) = compare([base], [_result("b" * 40, 1.15, job="j-2/1", seed=2)], between_jobs={LAT.key: 0.03})
    assert past.outcome == Outcome.REGRESSED and past.threshold == pytest.approx(0.09)
    # Without a model, a change past 3x either way is judged (stingray's x14 and x165 steps at an
    # environment's second commit were withheld); 2x, which runners were seen to move, stays withheld.
    from ci.verdicts.decide import UNKNOWN_DRIFT_BASIS

    (huge,) = compare([base], [_result("b" * 40, 14.0, job="j-2/1", seed=2)], between_jobs={})
    assert huge.outcome == Outcome.REGRESSED and UNKNOWN_DRIFT_BASIS in huge.reason and huge.threshold == 2.0
    (fast,) = compare([base], [_result("b" * 40, 0.2, job="j-2/1", seed=2)], between_jobs={})
    assert fast.outcome == Outcome.IMPROVED
    (double,) = compare([base], [_result("b" * 40, 2.0, job="j-2/1", seed=2)], between_jobs={})
    assert double.outcome == Outcome.INCONCLUSIVE and double.reason == WITHHELD_OTHER_JOB
    odd = Benchmark("b.T.track_widgets", unit="widgets", direction=Direction.UNKNOWN)
    (unknown,) = compare([_result("a" * 40, 1.0, job="j-1/1", bench=odd)],
                         [_result("b" * 40, 14.0, job="j-2/1", bench=odd)], between_jobs={})
    assert unknown.outcome == Outcome.INCONCLUSIVE  # which way is worse is unknown: never judged
    # A model that allows more than no model does (conda's 5 jobs allowed +6,639%) is none: withheld, not
    # "unchanged" under it; past 3x it is judged as without a model.
    from ci.verdicts.noise import SeriesNoise

    wide = {LAT.key: SeriesNoise(sigma=1.0, jump=0.0, jobs=5, multiplier=4.2, allowance=66.4)}
    (same_level,) = compare([base], [_result("b" * 40, 1.04, job="j-2/1", seed=2)], between_jobs=wide)
    assert same_level.outcome == Outcome.INCONCLUSIVE and same_level.reason == WITHHELD_OTHER_JOB
    (far,) = compare([base], [_result("b" * 40, 14.0, job="j-2/1", seed=2)], between_jobs=wide)
    assert far.outcome == Outcome.REGRESSED and UNKNOWN_DRIFT_BASIS in far.reason


def test_a_comparison_whose_every_timing_series_was_withheld_judged_nothing():
    other = Benchmark("bench_attention.GPUTime.time_gpu", (("B", "64"),))
    base = [_result("a" * 40, 1.0, job="j-1/1", seed=1), _result("a" * 40, 1.0, job="j-1/1", seed=3, bench=other)]
    head = [_result("b" * 40, 1.0, job="j-2/1", seed=2), _result("b" * 40, 1.0, job="j-2/1", seed=4, bench=other)]
    why = not_judged(compare(base, head, between_jobs={}))
    assert why is not None and why.startswith("no performance series was judged: all 2 were withheld"), why
    # one series with a between-job model is judged: the other's withholding is listed, not an error
    assert not_judged(compare(base, head, between_jobs={LAT.key: 0.03})) is None
    assert not_judged(compare(base, head)) is None, "measured in one job: nothing is withheld"
    # a series new on head is not a series withheld
    assert not_judged(compare(base[:1], head, between_jobs={LAT.key: 0.03})) is None


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
    # Two jobs and no other history: every timing series is withheld, so nothing was judged, which
    # is an error (exit 2), never a pass.
    assert main(["compare", "--db", db, "--base", base, "--head", head, "--no-save"]) == 2
    out, err = capsys.readouterr()
    assert "not measured in one job" in out
    lines = [ln for ln in out.splitlines() if ln.startswith(("regressed", "improved"))]
    assert lines == [], lines
    assert "error: no performance series was judged: all" in err and "were withheld" in err, err
    comment = tmp_path / "c.md"
    assert main(["comment", "--db", db, "--base", base, "--head", head, "--out", str(comment)]) == 2
    body = comment.read_text()
    assert "same job" not in body and "Measured in one job" not in body
    assert "Nothing records that base and head were measured in one job" in body
    assert "### ⚠️ Withheld: base and head not measured in one job" in body
    assert "**❌ Nothing was compared:** no performance series was judged" in body
    assert "No regression" not in body


def _slower_head(name: str, j: int, c: int) -> list[float]:
    """Tight samples, head (commit 1) 6 % slower: a regression by the in-job rule; gates pass."""
    if "max_abs_diff" in name:
        return [0.001] * 8
    base = 1e-4 * (j + 1) if "time_" in name else 100.0 + j
    return [base * (1.06 if c == 1 else 1.0) * (1 + 0.001 * k) for k in range(8)]


@pytest.mark.parametrize("how", ["one-call", "rewritten", "legacy"])
def test_only_a_marker_bound_to_the_files_gives_the_in_job_rule(tmp_path, capsys, how):
    """Base and head written by one asv call ("one-call") are judged by the in-job rule, and the CLI
    and the comment say so. When head's result file was rewritten after the runner marked it (as a
    plain `asv run` would), or the sidecars hold only a bare per-commit marker of the same job (as
    the runner wrote before markers were bound to files), nothing proves one job: the cross-job rule
    (no drift history here, so the timing series are withheld) and the words say which."""
    base, head = sha_for(0), sha_for(1)
    root = tmp_path / "results"
    root.mkdir()
    write_results(root, [base, head], samples=_slower_head, job="gha-1.1-pr/3f9a0c5d2e71")
    if how == "rewritten":  # a later asv run of head, outside the runner: the same values, new bytes
        (path,) = (root / MACHINE).glob(f"{head[:8]}-*.json")
        marked = path.read_bytes()
        write_results(root, [head], samples=lambda name, j, c: _slower_head(name, j, 1))
        assert path.read_bytes() != marked
    elif how == "legacy":
        for sha in (base, head):
            (root / MACHINE / f"gpu-env-{sha[:8]}.json").write_text(json.dumps({"job": "local-684349a63813/2"}))
    db = str(tmp_path / "h.sqlite")
    assert main(["ingest", "--db", db, str(root)]) == 0
    capsys.readouterr()
    code = main(["compare", "--db", db, "--base", base, "--head", head, "--no-save"])
    out = capsys.readouterr().out
    comment = tmp_path / "c.md"
    main(["comment", "--db", db, "--base", base, "--head", head, "--out", str(comment)])
    body = comment.read_text()
    if how == "one-call":
        assert code == 1 and "in-job rule: base and head were measured in one job" in out, out
        assert "**In-job rule.** Measured in one job (`gha-1.1-pr/3f9a0c5d2e71`)" in body
        return
    # every timing series withheld (the gates passed): nothing was judged, an error
    assert code == 2 and "warning: cross-job rule: base and head were not measured in one job" in out, out
    assert "a side has no verified job marker" in out and "in-job rule" not in out
    assert "**Cross-job rule.** **⚠️ Nothing records that base and head were measured in one job**" in body
    assert "In-job rule" not in body and "Measured in one job" not in body


def test_the_recorded_bare_markers_are_unknown():
    """benchmarks/recorded/h200-2026-12-main: sidecars of 2026-12-02 with a bare per-commit `job`
    marker (no record of the file it was written for) ingest without error, every run's job unknown."""
    legacy = [json.loads(p.read_text()) for p in sorted((LEGACY / "h200").glob("gpu-env-*.json"))]
    assert sum("job" in s for s in legacy) >= 30 and not any("asv_calls" in s for s in legacy)
    with Store("sqlite://") as store:
        report = ingest_results_dir(store, LEGACY)
        results = store.results()
    assert report.ok and report.count("inserted") == 35, report.summary()
    assert results and not any(JOB_KEY in dict(r.environment) or "job" in dict(r.environment) for r in results)


def _one_value_history(step_at: int | None, n: int = 30):
    """`samples` for `write_results` over n commits: each commit's job at its own level (1 % lognormal
    job-to-job drift, 0.5 % within the job), and the first timing point of commit `step_at` 15 % slower."""
    levels = np.exp(np.random.default_rng(17).normal(0.0, 0.01, n))

    def samples(name: str, j: int, c: int) -> list[float]:
        if "max_abs_diff" in name:
            return [0.001] * 6
        rng = np.random.default_rng([c, j, len(name)])
        base = (1e-4 * (j + 1) if "time_" in name else 100.0 + j) * float(levels[c])
        if c == step_at and "time_" in name and j == 0:
            base *= 1.15
        return [float(x) for x in base * rng.lognormal(0.0, 0.005, 6)]

    return samples


def test_one_value_points_are_judged_across_jobs_with_asvs_statistics(tmp_path):
    """Most CI histories record one value per point (asv without --record-samples) with asv's own
    statistics. Such results were never tested (the A/B rule needed 5 raw samples a side): a +15 %
    step read "inconclusive". Now asv's rule (factor, non-overlapping 99 % intervals) decides with the
    history's allowance as the factor: the step is a regression, an unchanged pair is not."""
    from ci.verdicts import compare_commits

    shas = [sha_for(i) for i in range(30)]
    root = tmp_path / "results"
    root.mkdir()
    write_results(root, shas, samples=_one_value_history(step_at=29), record_samples=False)
    with Store(tmp_path / "h.sqlite") as store:
        ingest_results_dir(store, root)
        stepped = compare_commits(store, shas[28], shas[29], MACHINE)
        assert not stepped.jobs.together and stepped.drift_known >= 5
        regressed = [v for v in stepped.verdicts if v.outcome == Outcome.REGRESSED]
        assert [v.benchmark.key for v in regressed] == ["bench_attention.GPUTime.time_gpu(dtype=fp16, batch=1)"], [
            (v.benchmark.key, v.outcome, v.reason) for v in stepped.verdicts]
        assert regressed[0].ratio == pytest.approx(1.15, rel=0.03) and "asv compare's rule" in regressed[0].reason
        unchanged = compare_commits(store, shas[27], shas[28], MACHINE)
        assert not [v for v in unchanged.verdicts if v.outcome in (Outcome.REGRESSED, Outcome.IMPROVED)], [
            (v.benchmark.key, v.outcome, v.reason) for v in unchanged.verdicts]
        assert sum(v.outcome == Outcome.UNCHANGED for v in unchanged.verdicts) >= 5
        assert all(r.samples == (r.value,) and r.asv_stats() for r in store.results())


def test_a_new_environment_borrows_the_job_drift_of_its_twin_on_the_same_host(tmp_path):
    """geocat-comp's history: a py3.10 environment with too few jobs beside a long py3.13 one on the same
    runner withheld a x3 step that its twin called a regression. A series without a model of its own
    learns from the same benchmark in another environment of its host, and says so; with no twin it is
    withheld as before."""
    from ci.verdicts.inputs import compare_commits, pick_machines

    rng = np.random.default_rng(3)
    drift = np.exp(rng.normal(0, 0.02, 12))  # each job's level: 2 % between jobs

    def samples(name: str, j: int, c: int) -> list[float]:
        level = (1e-4 * (j + 1) if "time_" in name else 100.0 + j) * float(drift[c])
        if "time_gpu" in name and c == 11:
            level *= 3.0
        return [level * (1 + 0.002 * k) for k in range(6)]

    shas = [sha_for(i) for i in range(12)]
    alone, both = tmp_path / "alone", tmp_path / "both"
    write_results(alone, shas[10:], env_name="py310", samples=samples, first_commit=10)
    write_results(both, shas, env_name="py313", samples=samples)
    write_results(both, shas[10:], env_name="py310", samples=samples, first_commit=10)
    for root, borrowed in ((alone, False), (both, True)):
        with Store(tmp_path / f"{root.name}.sqlite") as store:
            assert ingest_results_dir(store, root).ok
            new = next(m.name for m in store.machines() if m.env_name == "py310")
            machines = pick_machines(store, shas[10], shas[11], None)
            verdicts = compare_commits(store, shas[10], shas[11], machines).verdicts
            mine = [v for v in verdicts if v.machine == new and "time_gpu" in v.benchmark.key]
            assert mine
            if borrowed:
                from ci.records import machine_labels

                twin = machine_labels(store.machines())[next(m.name for m in store.machines() if m.env_name == "py313")]
                assert twin.endswith("[py313]")  # named as readers know it, not by its bare key
                assert all(v.outcome == Outcome.REGRESSED and f"history of {twin} (the same benchmark, another "
                           "environment of this host)" in v.reason for v in mine), [v.reason for v in mine]
            else:
                assert all(v.outcome == Outcome.INCONCLUSIVE and v.reason == WITHHELD_OTHER_JOB for v in mine)


def test_the_false_alarm_rate_is_shared_over_the_series_judged_not_those_withheld(tmp_path):
    """OpenBLAS's pair: 14 series with a history among 222, the rest withheld for want of one; the 14
    shared the family's false-alarm rate "over 222 series" and their allowances widened for series that
    could raise no alarm. The family is the series a noise model judges."""
    from ci.verdicts.inputs import compare_commits
    from tests.ci.conftest import BENCHMARKS

    rng = np.random.default_rng(5)
    drift = np.exp(rng.normal(0, 0.02, 12))

    def samples(name: str, j: int, c: int) -> list[float]:
        level = (1e-4 * (j + 1) if "time_" in name else 100.0 + j) * float(drift[c])
        return [level * (1 + 0.002 * k) for k in range(6)]

    shas = [sha_for(i) for i in range(12)]
    root = tmp_path / "res"
    write_results(root, shas[:10], benchmarks=BENCHMARKS[:1], samples=samples)
    write_results(root, shas[10:], samples=samples, first_commit=10)  # every benchmark, at base and head only
    # A family rate small enough to be shared at a handful of series (the defaults share it past 100).
    noise = NoiseSettings(false_alarm=0.05, family_false_alarm=0.1)
    with Store(tmp_path / "h.sqlite") as store:
        assert ingest_results_dir(store, root).ok
        comparison = compare_commits(store, shas[10], shas[11], [MACHINE], noise=noise)
    modelled = [v for v in comparison.verdicts if "between jobs" in v.reason]
    withheld = [v for v in comparison.verdicts if v.reason == WITHHELD_OTHER_JOB]
    assert modelled and withheld
    assert all(f"shared over {len(modelled)} series" in v.reason for v in modelled), [v.reason for v in modelled]


def test_an_acknowledgement_covers_only_a_streak_of_failed_runs_on_its_machine():
    """`not_run_since`, which `known_broken` and `ci ack` read: every run of the machine from the
    acknowledged commit through the base failed. A skipped point or a run without the benchmark breaks
    the streak: an ack of m1's one-off failure at c3 silenced m2's failure that started at c6, where m2
    had skipped it at c3-c5 (2026-12-07)."""
    from types import SimpleNamespace

    from ci.verdicts.inputs import not_run_since

    class Store:
        runs = {"m1": [f"c{i}" for i in range(7)], "m2": [f"c{i}" for i in range(7)]}
        points = {"m1": {"c3": "failed"}, "m2": {"c3": "skipped", "c4": "skipped", "c5": "skipped", "c6": "failed"}}

        def run_commits(self, machine):
            return self.runs[machine]

        def failures(self, *, benchmark_key=None, machine=None, commit_sha=None):
            return [SimpleNamespace(commit_sha=sha, status=status) for sha, status in self.points[machine].items()]

    store = Store()
    assert not_run_since(store, "k", "m1", "c3") and not_run_since(store, "k", "m1", "c3", "c3")
    assert not not_run_since(store, "k", "m1", "c3", "c4")  # it did not fail at c4
    assert not not_run_since(store, "k", "m2", "c3", "c6")  # skipped at c3-c5: no streak of failures
    assert not_run_since(store, "k", "m2", "c6", "c6") and not not_run_since(store, "k", "m2", "c9")
