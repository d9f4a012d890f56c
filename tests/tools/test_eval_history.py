"""`python -m tools.eval_history` on small asv results dirs written here, where the answers are known:
an obvious step is found by both columns, a flat history flags nothing, and the replay the delays
and the banner come from is the service's own answer prefix by prefix."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest

from ci.records import Benchmark, Direction, Outcome, Result
from ci.verdicts import HistorySettings, SeriesState, change_points, state_change_points
from tests.ci.conftest import sha_for

COMMITS = 40
# One lower-is-better grid (4 series) and one higher-is-better series, with 10 samples a commit.
BENCHES = [
    {"name": "bench_k.K.time_k", "type": "time", "unit": "seconds", "params": [["'a'", "'b'"], ["1", "8"]],
     "param_names": ["kind", "batch"], "version": "v1"},
    {"name": "bench_m.M.track_images_per_s", "type": "track", "unit": "images/s", "params": [], "param_names": [],
     "version": "v1"},
]


def _noisy(rng: np.random.Generator, level: float) -> list[float]:
    return [float(x) for x in level * rng.lognormal(0.0, 0.004, 10)]


def _flat_dir(asv_dir, name: str = "flat") -> Path:
    rng = np.random.default_rng(7)
    return asv_dir([sha_for(i) for i in range(COMMITS)], name=name, benchmarks=BENCHES,
                   samples=lambda bench, j, c: _noisy(rng, 1e-3 * (j + 1) if "time_" in bench else 500.0))


def _evaluate(results: Path, **kw) -> dict:
    from tools.eval_history import evaluate_dir

    args = {"steps": [0.2, -0.2], "seed": 0, "min_commits": 30, "max_series": None, "replay": True,
            "only_steps": False, "pairs": 6, "asv_conf": None, **kw}
    return evaluate_dir(results, **args)


def test_an_obvious_step_is_found_and_a_flat_history_flags_nothing(asv_dir) -> None:
    """20 % steps on 0.4 % noise: every trial found by the service at once and by asv's fit; the
    un-injected history has no regression, no suspicion and no banner for either."""
    report = _evaluate(_flat_dir(asv_dir))
    assert report["series_judged"] == 5 and report["series_unknown_direction"] == 0
    for step in ("+0.2", "-0.2"):
        r = report["steps"][f"judged {step}"]
        assert r["trials"] == 5 and r["found"] == 5 and r["chance"] == 0
        assert r["asv_found"] == 5 and r["asv_chance"] == 0
        assert r["delay_median"] <= 4 and r["not_flagged"] == 0  # a change point once 4 commits hold the step
    bad = report["steps"]["judged +0.2"]
    assert bad["still_open"] == 5 and bad["delay_median"] == 2  # a suspicion once the next commit holds it
    # asv lists increases only: the 4 time series' (1.2x) but not the throughput's (/1.2), which it reads as better.
    assert bad["asv_listed"] == 4
    real = report["real"]["judged"]
    assert real["commits"] == 5 * COMMITS
    assert real["regressed"] == real["suspicions"] == real["asv_regressions"] == 0
    assert report["real"]["banner_up"]["any"] == 0 and report["real"]["banner_commits"] == COMMITS
    ab = report["pairs"]
    assert ab["pairs"] == 6 and ab["injected"] == 6
    assert ab["service_regressed"] == 0 and ab["asv_worse"] == 0
    # +10 % on 0.4 % noise, 10 samples a side: the service finds every one whose head has the 5 runs
    # before it that a noise model needs (it learns from no run after the head): 4, the seeded pairs
    # at commits 2-3 and 4-5 being withheld; asv's factor 1.1 sits at the step itself, so asv finds
    # only those the noise pushed past it.
    assert ab["service_found"] == 4 and 0 <= ab["asv_found"] <= 6
    assert ab["service_regressed_null"] == ab["asv_worse_null"] == 0


def test_a_real_step_shows_in_every_rate(asv_dir) -> None:
    """One series steps up 30 % at commit 25 and stays: one regression on the real history for both
    columns, shown open; the banner is up from the step on and a pair across the step is regressed."""
    rng = np.random.default_rng(3)
    results = asv_dir([sha_for(i) for i in range(COMMITS)], name="step", benchmarks=BENCHES[:1],
                      samples=lambda bench, j, c: _noisy(rng, 1e-3 * (j + 1) * (1.3 if j == 0 and c >= 25 else 1)))
    report = _evaluate(results, pairs=COMMITS)
    real = report["real"]["judged"]
    assert real["regressed"] == real["regressed_open"] == 1 and real["asv_regressions"] == 1
    assert real["asv_listed_found"] == 1 and real["asv_listed_suspected"] == 0  # both name the one step
    assert real["suspicions"] == real["confirmed"] == 1
    up = report["real"]["banner_up"]
    assert up["any"] == up["regression"] + up["suspicion"] == COMMITS - 26  # suspected once 2 commits hold it
    assert report["pairs"]["pairs"] == COMMITS - 1 and report["pairs"]["service_regressed"] >= 1


def test_a_crowd_is_one_alert_for_both_columns_and_a_fixed_regression_is_not_open(asv_dir) -> None:
    """Three series step up 30 % together at commit 25 and stay: one alert of 3 regressions, open, and asv's
    three listed regressions grouped alike are one alert too. A fourth series is 30 % slower over commits
    10-19 only: a regression of its own, which its return closes (asv, which lists only the steps that
    still explain the newest value, does not list it)."""
    rng = np.random.default_rng(11)

    def level(j: int, c: int) -> float:
        up = (j < 3 and c >= 25) or (j == 3 and 10 <= c < 20)
        return 1e-3 * (j + 1) * (1.3 if up else 1.0)

    results = asv_dir([sha_for(i) for i in range(COMMITS)], name="crowd", benchmarks=BENCHES[:1],
                      samples=lambda bench, j, c: _noisy(rng, level(j, c)))
    real = _evaluate(results, steps=[0.2], pairs=0)["real"]
    assert real["judged"]["regressed"] == 4 and real["judged"]["regressed_open"] == 3
    assert real["judged"]["asv_regressions"] == 3
    assert (real["alerts"], real["alert_crowds"], real["open_alerts"]) == (2, 1, 1)
    assert (real["asv_alerts"], real["asv_alert_crowds"]) == (1, 1)


def test_unknown_direction_series_are_counted_apart(asv_dir) -> None:
    rng = np.random.default_rng(5)
    unknown = [{"name": "bench_u.U.track_metric", "type": "track", "unit": "widgets", "params": [],
                "param_names": [], "version": "v1"}]
    results = asv_dir([sha_for(i) for i in range(COMMITS)], name="unknown", benchmarks=unknown,
                      samples=lambda bench, j, c: _noisy(rng, 3.0))
    report = _evaluate(results, steps=[0.2], pairs=3)
    assert report["series_judged"] == 0 and report["series_unknown_direction"] == 1
    r = report["steps"]["unknown +0.2"]
    assert r["trials"] == 1 and r["found"] == 1 and r["asv_found"] == 1
    assert report["pairs"]["injected"] == 0  # nothing of known direction to inject into


def test_series_at_or_through_zero_are_left_out_and_said_so(asv_dir) -> None:
    """A warning count at 0 that goes to 3 has no ratio: a relative step injected into it means
    nothing, so it is left out of the trials under its own name, not as a short series."""
    rng = np.random.default_rng(6)
    benches = BENCHES[1:] + [{"name": "bench_w.W.track_warnings", "type": "track", "unit": "count", "params": [],
                              "param_names": [], "version": "v1"}]
    def samples(bench: str, j: int, c: int) -> list[float]:
        return [0.0 if c < 20 else 3.0] if "warnings" in bench else _noisy(rng, 500.0)

    results = asv_dir([sha_for(i) for i in range(COMMITS)], name="zero", benchmarks=benches, samples=samples)
    report = _evaluate(results, steps=[0.2], pairs=3)
    assert report["skipped"]["at or through zero"] == 1 and report["skipped"]["short"] == 0
    assert report["series_judged"] == 1


def test_replay_is_the_service_answer_prefix_by_prefix() -> None:
    """The tool's per-commit samples, extended one commit at a time, give `change_points` of each
    prefix: the delays measure what `ci run` would have reported after each commit."""
    from tools.eval_history import make_series

    rng = np.random.default_rng(11)
    bench = Benchmark("bench_k.K.time_k")
    results = [Result(bench, f"{c:040x}", "m", tuple(float(x) for x in rng.lognormal(0, 0.01, 8)
                                                     * (1.1 if c >= 20 else 1.0) * (1.3 if c == 9 else 1.0)))
               for c in range(36)]
    s = make_series(bench, "m", results, {}, 0.05, {r.commit_sha: i for i, r in enumerate(results)})
    assert s.n == 36 and all(p is None for p in s.asv)
    settings = HistorySettings()
    state = SeriesState(settings.knobs)
    for p in range(1, s.n + 1):
        state.extend(s.commits[p - 1:p])
        assert state_change_points(state, bench, "m") == change_points(results[:p], settings=settings)
    assert [(cp.index, cp.outcome) for cp in change_points(results)] == [(20, Outcome.REGRESSED)]


@pytest.mark.parametrize(("direction", "step", "factor"), [
    (Direction.LOWER, 0.1, 1.1), (Direction.HIGHER, 0.1, 1 / 1.1), (Direction.LOWER, -0.1, 1 / 1.1),
    (Direction.HIGHER, -0.1, 1.1), (Direction.UNKNOWN, 0.1, 1.1),
], ids=["lower+10", "higher+10", "lower-10", "higher-10", "unknown+10"])
def test_step_factor(direction: Direction, step: float, factor: float) -> None:
    from tools.eval_history import step_factor

    assert step_factor(direction, step) == pytest.approx(factor)


def test_main_prints_a_table_and_strict_json(asv_dir, tmp_path, capsys) -> None:
    from tools.eval_history import main

    out_json = tmp_path / "eval.json"
    results = _flat_dir(asv_dir)
    assert main([str(results), "--steps", "+10", "--no-replay", "--pairs", "2", "--max-series", "2",
                 "--json", str(out_json)]) == 0
    out = capsys.readouterr().out
    assert "| | service | asv |" in out and "+10% steps found within ±2 commits" in out
    assert "delay" not in out  # --no-replay
    data = json.loads(out_json.read_text(), parse_constant=lambda c: pytest.fail(f"non-strict JSON: {c}"))
    assert data[0]["series_judged"] == 2 and data[0]["skipped"]["sampled out"] == 3
    assert data[0]["steps"]["judged +0.1"]["trials"] == 2
    assert not math.isnan(data[0]["seconds"]["total"])
    with pytest.raises(SystemExit):
        main([str(results), "--steps", "10"])  # a size needs its sign


def test_an_unreadable_directory_is_named_and_the_others_still_measured(asv_dir, tmp_path, capsys) -> None:
    """A missing directory, one without benchmarks.json and one whose asv.conf.json is broken each get
    one line on stderr and exit 2; the readable directory's table and JSON are still written."""
    from tools.eval_history import main

    results = _flat_dir(asv_dir)
    empty = tmp_path / "empty" / "results"
    empty.mkdir(parents=True)
    broken = tmp_path / "broken"
    shutil.copytree(results, broken / "results")
    (broken / "asv.conf.json").write_text("{not json")
    refused = tmp_path / "refused"  # every file an error (its machine.json gone): nothing measured, no table
    shutil.copytree(results, refused / "results")
    for machine_json in (refused / "results").glob("*/machine.json"):
        machine_json.unlink()
    out_json = tmp_path / "eval.json"
    args = ["--steps", "+10", "--no-replay", "--pairs", "0", "--max-series", "2", "--json", str(out_json)]
    assert main([str(tmp_path / "missing"), str(empty), str(broken / "results"), str(refused / "results"),
                 str(results), *args]) == 2
    captured = capsys.readouterr()
    errors = captured.err.strip().splitlines()
    assert len(errors) == 4 and all("not evaluated" in e for e in errors)
    assert "not a directory" in errors[0] and "benchmarks.json" in errors[1] and "asv.conf.json" in errors[2]
    assert "no series of 30 or more commits (the longest of those it evaluates has 0;" in errors[3]
    assert f"{COMMITS} errors" in errors[3]
    assert captured.out.count("| | service | asv |") == 1
    assert len(json.loads(out_json.read_text())) == 1
    with pytest.raises(SystemExit):  # checked before minutes of work, not after
        main([str(results), "--json", str(tmp_path / "no-such-folder" / "eval.json")])


def test_an_asv_conf_named_but_absent_is_an_error(asv_dir, tmp_path, capsys) -> None:
    """`--asv-conf` naming no file measured with asv's default thresholds and exited 0; it is now a
    usage error (exit 2) naming the file, before any work, as `ci ingest --config` is."""
    from tools.eval_history import main

    missing = tmp_path / "no-such" / "asv.conf.json"
    with pytest.raises(SystemExit) as exit_:
        main([str(_flat_dir(asv_dir)), "--no-replay", "--asv-conf", str(missing)])
    assert exit_.value.code == 2
    captured = capsys.readouterr()
    assert captured.err.strip().splitlines()[-1].endswith(f"--asv-conf: {missing}: no such file")
    assert captured.out == ""


def test_a_step_that_a_later_real_change_undoes_is_not_counted_as_one_that_should_stay_open() -> None:
    """"Still open" is asked only of injected steps whose level stays up: a real improvement later in
    the series brings the level back, and the dashboard then rightly shows the regression fixed."""
    from tools.eval_history import lasts, make_series, shuffled

    bench = Benchmark("bench_k.K.time_k")

    def series(later: float):
        results = [Result(bench, f"{c:040x}", "m", (1.0 * (later if c >= 40 else 1.0),) * 3) for c in range(50)]
        return make_series(bench, "m", results, {}, 0.05, {r.commit_sha: i for i, r in enumerate(results)})

    assert lasts(series(1.0), 20, 1.1)  # nothing after: the step stays
    assert not lasts(series(0.9), 20, 1.1)  # a real -10% at commit 40 undoes the +10% at 20
    assert lasts(series(0.9), 20, 1.3)  # a +30% step is still more than half up after it
    flat = series(1.0)
    null = shuffled(flat, 0)
    assert sorted(null.shas) == sorted(flat.shas) and null.shas != flat.shas  # a reordering, values kept
    assert sorted(null.levels.tolist()) == sorted(flat.levels.tolist())


def test_a_series_trials_of_one_step_size_sit_at_distinct_commits() -> None:
    """Two trials at one commit are one trial counted twice: each of a series' trials of a step size
    has its own commit while the series has enough, the first is the same for any count, and a series
    with fewer commits than trials still gets a commit for each."""
    from tools.eval_history import EDGE, make_series, trial_k

    bench = Benchmark("bench_k.K.time_k")

    def series(n: int):
        results = [Result(bench, f"{c:040x}", "m", (1.0,) * 3) for c in range(n)]
        return make_series(bench, "m", results, {}, 0.05, {r.commit_sha: i for i, r in enumerate(results)})

    short = series(2 * EDGE + 4)  # 5 commits to draw from
    for seed in range(40):
        ks = [trial_k(seed, short, 0.1, t) for t in range(5)]
        assert sorted(ks) == list(range(EDGE, EDGE + 5)), ks
        assert all(trial_k(seed, short, 0.1, t) == k for t, k in enumerate(ks))  # stable
    tiny = series(2 * EDGE + 1)  # 2 commits, 4 trials: the last ones repeat, nothing hangs
    assert {trial_k(0, tiny, 0.1, t) for t in range(4)} <= {EDGE, EDGE + 1}


def test_asvs_worsening_steps_count_the_ones_undone_later_too() -> None:
    """`asv_worsening`: the fit's rises past the threshold between adjacent levels, a later fix or not
    (the service's count of regressions holds both); `detect_regressions` lists only the one not
    undone, and lists a climb in steps each under the threshold, which this does not count."""
    from tools.eval_history import asv_jumps, asv_worsening, make_series

    def series(direction: Direction):
        bench = Benchmark("bench_k.K.time_k", direction=direction)
        results = [Result(bench, f"{c:040x}", "m", (1.0,) * 3) for c in range(40)]
        return make_series(bench, "m", results, {}, 0.05, {r.commit_sha: i for i, r in enumerate(results)})

    # asv's fit: 1.0, then +20% (undone), back to 1.0, then +3% (under 5%), then +10% (stays)
    steps = [(0, 10, 1.0, 1.0, 0.0), (10, 20, 1.2, 1.2, 0.0), (20, 30, 1.0, 1.0, 0.0), (30, 35, 1.03, 1.03, 0.0),
             (35, 40, 1.133, 1.133, 0.0)]
    assert asv_worsening(series(Direction.LOWER), steps) == 2
    assert len(asv_jumps(steps, 0.05)) == 1  # the +20% was undone: not listed
    assert asv_worsening(series(Direction.HIGHER), steps) == 2  # asv's reading, as its list's: a rise
    climb = [(0, 10, 1.0, 1.0, 0.0), (10, 20, 1.04, 1.04, 0.0), (20, 30, 1.08, 1.08, 0.0)]
    assert asv_worsening(series(Direction.LOWER), climb) == 0 and len(asv_jumps(climb, 0.05)) == 1


def test_a_step_is_in_the_data_unless_it_is_inside_the_noise_or_a_real_change_undoes_it() -> None:
    """`detectable`: the trials the recall is also read on. A +10% step at 20 is in a quiet series'
    data; not where a real -10% at 20 or 21 cancels it, not in a series whose noise is 5%; a real
    -10% 6 commits later, or a real +10% next to it, leaves it in."""
    from tools.eval_history import detectable, make_series

    bench = Benchmark("bench_k.K.time_k")
    rng = np.random.default_rng(0)

    def series(change_at: int | None, change: float = 0.9, noise: float = 0.002):
        values = 1 + noise * rng.standard_normal(50)
        if change_at is not None:
            values[change_at:] *= change
        results = [Result(bench, f"{c:040x}", "m", (float(v),) * 3) for c, v in enumerate(values)]
        return make_series(bench, "m", results, {}, 0.05, {r.commit_sha: i for i, r in enumerate(results)})

    assert detectable(series(None), 20, 1.1, 3.0)
    assert not detectable(series(20), 20, 1.1, 3.0)  # cancelled at its own commit
    assert not detectable(series(21), 20, 1.1, 3.0)  # one commit at +10%, then back
    assert not detectable(series(None, noise=0.05), 20, 1.1, 3.0)  # 10% is under 3 sigmas of 5% noise
    assert detectable(series(26), 20, 1.1, 3.0)  # a later real change: the step held 6 commits
    assert detectable(series(21, change=1.1), 20, 1.1, 3.0)  # the same way: nothing undone
    assert detectable(series(21), 20, 1 / 1.1, 3.0)  # an injected improvement the real -10% continues


def test_the_targets_are_read_off_the_report_met_or_not(asv_dir) -> None:
    """Each target is met or not on the numbers the table shows, and one the history cannot answer (no
    suspicion to confirm, or too few trials behind a rate) says so instead of passing."""
    from tools.eval_history.report import MIN_TRIALS, render, targets

    report = _evaluate(_flat_dir(asv_dir), steps=[0.1, 0.05])
    aims = {what: (value, bar, ok) for what, value, bar, ok in targets(report)}
    r = report["steps"]["judged +0.1"]
    assert r["trials"] == 5 < MIN_TRIALS
    # 5 of 5 found is 100%, but its 95% interval runs from 48%: a rate on 5 trials meets nothing
    assert aims["+10% steps found within ±2 commits"] == ("100.0%", "90.0%", None)
    assert aims["suspicions later confirmed"] == ("n/a", "50.0%", None)  # a flat history raises none
    fewer = "regressions on the un-injected series per 1,000 commit-series, at most asv's (none of asv's neither " \
            "flagged nor suspected)"
    assert aims[fewer][2] is True
    # Fewer than asv's is no win where asv's are real: one of asv's listed that the service neither flags nor
    # suspects fails the target (OpenBLAS's real step read "0.00 against 4.56, met").
    real = report["real"]["judged"]
    real["asv_regressions"] += 1
    real["asv_listed_placed"] += 1
    assert dict((w, ok) for w, _, _, ok in targets(report))[fewer] is False
    real["asv_listed_suspected"] += 1
    assert dict((w, ok) for w, _, _, ok in targets(report))[fewer] is True
    real["asv_regressions"] -= 1
    real["asv_listed_placed"] -= 1
    real["asv_listed_suspected"] -= 1
    # neither side calls a pair regressed: there is nothing to be fewer than
    assert aims["adjacent real pairs called regressed by cross-job A/B, fewer than asv's rule"][2] is None
    for step in ("judged +0.1", "judged +0.05"):  # as if read on 100 trials each
        for key in ("trials", "found", "asv_found", "found_lasting", "still_open"):
            report["steps"][step][key] *= 20
    aims = {what: (value, bar, ok) for what, value, bar, ok in targets(report)}
    assert aims["+10% steps found within ±2 commits"] == ("100.0%", "90.0%", True)
    assert aims["+5% steps found, at least asv's fitted steps"][2] is True
    assert aims["…90th-percentile delay before the first flag (commits)"][2] is True
    assert "| +10% steps found within ±2 commits | 100.0% | 90.0% | met |" in render(report)
    r["found"] = int(0.89 * r["trials"])  # under the bar, however it rounds
    assert dict((w, ok) for w, _, _, ok in targets(report))["+10% steps found within ±2 commits"] is False
    assert "**not met**" in render(report)


def test_without_the_replay_no_delay_is_reported_as_measured(asv_dir) -> None:
    """--no-replay measures no delay: the JSON said ">30" and every trial "not flagged" (2026-12-07)."""
    report = _evaluate(_flat_dir(asv_dir), steps=[0.1], replay=False, pairs=0)
    r = report["steps"]["judged +0.1"]
    assert r["found"] > 0
    assert all(math.isnan(r[k]) for k in ("delay_median", "delay_p90", "not_flagged", "asv_delay_median",
                                          "asv_delay_p90", "asv_not_flagged"))


def test_a_long_measurement_says_how_far_it_is(monkeypatch, capsys) -> None:
    """A 20,000-commit history measured for more than 15 minutes without a line: `fork_map` now prints
    its progress on stderr (here at every item), in order or not, and still returns the results in order."""
    from tools.eval_history import trials

    monkeypatch.setattr(trials, "PROGRESS_S", 0.0)
    assert trials.fork_map(lambda x: x * x, list(range(40)), "series") == [x * x for x in range(40)]
    lines = capsys.readouterr().err.splitlines()
    assert lines and all(line.startswith("... ") and line.split()[3:6] == ["40", "series", "measured"]
                         for line in lines)
    assert lines[-1].startswith("... 40 of 40 series")
    assert trials.fork_map(lambda x: x + 1, [1, 2, 3]) == [2, 3, 4]  # no `what`: nothing printed
    assert not capsys.readouterr().err


def test_a_step_measures_past_the_threshold_where_the_detector_measures_it() -> None:
    """`measures`: the +5% trials the service can report at all (it reports no step under the series'
    threshold). A +6% step passes a 5% threshold and a +4% one does not; a real +3% step 10 commits
    after k lifts a +4% step past it over the 32 commits the detector reads, and a real -3% at k pulls
    a +6% one under it."""
    from tools.eval_history import make_series, measures

    bench = Benchmark("bench_k.K.time_k")
    rng = np.random.default_rng(1)

    def series(change_at: int | None = None, change: float = 1.0):
        values = 1 + 0.001 * rng.standard_normal(80)
        if change_at is not None:
            values[change_at:] *= change
        results = [Result(bench, f"{c:040x}", "m", (float(v),) * 3) for c, v in enumerate(values)]
        return make_series(bench, "m", results, {}, 0.05, {r.commit_sha: i for i, r in enumerate(results)},
                           floor=0.05)

    assert measures(series(), 40, 1.06, 32)
    assert not measures(series(), 40, 1.04, 32)
    assert measures(series(50, 1.03), 40, 1.04, 32)
    assert not measures(series(40, 0.97), 40, 1.06, 32)
    assert measures(series(), 40, 1 / 1.06, 32)  # an improvement measures its own way
    assert not measures(series(40, 1.2), 40, 1 / 1.06, 32)  # a real +20% turns it into a rise


def test_jobs_that_move_every_series_together_are_reported(tmp_path) -> None:
    """Runners of mixed hardware that the files do not tell apart: a fifth of the jobs on a host 15%
    slower are kept apart at ingest (`ci.ingest.speed`) and the report says so; what is left of the
    runner moves no more together than a history without them, none past 5%."""
    from tools.eval_history.series import job_shifts
    from tools.synthetic_history import write_history

    for name, share in (("mixed", 0.2), ("plain", 0.0)):
        write_history(tmp_path / name, benchmarks=12, grids=0, commits=40, envs=1, noise=0.01, step=0.2,
                      step_share=0.0, seed=5, slow_share=share, hide_host=True)
    mixed = _evaluate(tmp_path / "mixed" / "results", steps=[0.1], replay=False, only_steps=True, pairs=0)
    ((machine, shift),) = mixed["job_shifts"].items()
    assert shift["beyond_5pct"] == 0 and shift["jobs"] <= 36
    ((apart, kept),) = mixed["speed_hosts"].items()
    assert apart == "runner [virtualenv-py3.11, slower jobs]" and 4 <= kept["jobs"] <= 12
    assert kept["shift"].startswith("+1")
    plain = _evaluate(tmp_path / "plain" / "results", steps=[0.1], replay=False, only_steps=True, pairs=0)
    assert [v["beyond_5pct"] for v in plain["job_shifts"].values()] == [0] and plain["speed_hosts"] == {}
    from tools.eval_history.report import render

    assert f"{machine} " in render(mixed) and "moved every series together" in render(mixed)
    assert f"{apart}: {kept['jobs']} jobs, {kept['shift']}" in render(mixed)
    # Too few slow jobs to keep apart (2 of 40): they stay in the runner's series, each a commit where
    # the whole job moved, at which suspicions wait for a third commit; the history without them has none.
    write_history(tmp_path / "few", benchmarks=12, grids=0, commits=40, envs=1, noise=0.01, step=0.2,
                  step_share=0.0, seed=5, slow_share=0.08, hide_host=True)
    few = _evaluate(tmp_path / "few" / "results", steps=[0.1], replay=False, only_steps=True, pairs=0)
    assert few["speed_hosts"] == {} and few["job_moves"] == {"runner": 2} and plain["job_moves"] == {"runner": 0}
    assert "Commits where the whole job moved" in render(few) and "runner 2." in render(few)
    assert "another speed that the files do not record (`ci.ingest.speed`): none." in render(plain)
    assert job_shifts([]) == {}


def test_a_history_shorter_than_21_commits_is_evaluated_with_its_steps_nearer_the_ends(asv_dir) -> None:
    """asv histories of 13 to 20 commits (MDAnalysis', devito's) could not be evaluated at all: each
    trial's step sat 10 commits from either end. On a series shorter than 21 commits it sits as far from
    them as the series allows, at least 6 (`edge_for`); --min-commits takes 13."""
    from tools.eval_history import main
    from tools.eval_history.series import EDGE, MIN_EDGE, edge_for

    assert [edge_for(n) for n in (13, 16, 20, 21, 500)] == [MIN_EDGE, 7, 9, EDGE, EDGE]
    rng = np.random.default_rng(3)
    short = asv_dir([sha_for(i) for i in range(15)], name="short", benchmarks=BENCHES,
                    samples=lambda bench, j, c: _noisy(rng, 1e-3 * (j + 1) if "time_" in bench else 500.0))
    report = _evaluate(short, min_commits=13)
    r = report["steps"]["judged +0.2"]
    assert report["series_judged"] == 5 and r["trials"] == 5 and r["found"] == 5, r
    with pytest.raises(SystemExit):
        main([str(short), "--min-commits", str(2 * MIN_EDGE)])
