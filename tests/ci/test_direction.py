"""Which way is better comes from the benchmark's declaration (asv's type, the suite's `direction`
attribute, a known unit), never a guess: an undeclared direction is reported as unknown, from
benchmarks.json through the store, the A/B verdicts, the history and the PR comment."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from ci.cli import main
from ci.ingest import ingest_results_dir
from ci.ingest.asv_files import load_benchmarks_json
from ci.outputs.comment import render_comment
from ci.records import UNKNOWN_DIRECTION, Benchmark, Direction, Kind, Outcome, Result, declared_semantics, is_worse
from ci.store import Store
from ci.verdicts import compare, exit_code
from ci.verdicts.history import change_points
from tests.ci.conftest import sha_for, write_results

RECORDED = Path(__file__).resolve().parents[2] / "benchmarks" / "recorded"


@pytest.mark.parametrize(("bench_type", "unit", "declared", "expected"), [
    pytest.param("time", "seconds", None, (Direction.LOWER, Kind.LATENCY), id="time"),
    pytest.param("time", "seconds", "higher", (Direction.LOWER, Kind.LATENCY), id="time-ignores-attribute"),
    pytest.param("peakmemory", "bytes", None, (Direction.LOWER, Kind.MEMORY), id="asv-runner-peakmemory"),
    pytest.param("memory", "bytes", None, (Direction.LOWER, Kind.MEMORY), id="asv-runner-memory"),
    pytest.param("track", "images/s", None, (Direction.HIGHER, Kind.THROUGHPUT), id="known-unit"),
    pytest.param("track", "GB/s", None, (Direction.UNKNOWN, Kind.OTHER), id="unknown-unit-undeclared"),
    pytest.param("track", "samples/s", None, (Direction.UNKNOWN, Kind.OTHER), id="samples-per-s-undeclared"),
    pytest.param("track", "GB/s", "higher", (Direction.HIGHER, Kind.OTHER), id="unknown-unit-declared"),
    pytest.param("track", "GB/s", "Lower", (Direction.LOWER, Kind.OTHER), id="declared-any-case"),
    pytest.param("track", "max abs diff", "lower", (Direction.LOWER, Kind.CORRECTNESS), id="declared-gate"),
    pytest.param("track", "GB/s", "sideways", (Direction.UNKNOWN, Kind.OTHER), id="declared-nonsense"),
    pytest.param("track", "GB/s", 1, (Direction.UNKNOWN, Kind.OTHER), id="declared-not-text"),
])
def test_direction_comes_from_the_declaration(bench_type, unit, declared, expected):
    assert declared_semantics(bench_type, unit, declared) == expected


def test_is_worse_never_guesses():
    assert is_worse(Direction.LOWER, 1.3) is True and is_worse(Direction.HIGHER, 1.3) is False
    assert is_worse(Direction.UNKNOWN, 1.3) is None and is_worse(Direction.UNKNOWN, 0.7) is None


def test_old_recorded_datasets_read_as_before():
    """Result sets recorded before the suite declared `direction` are read through their units."""
    info = load_benchmarks_json(RECORDED / "h200-2026-11-29-quick" / "quick")
    assert info["bench_correctness.ModelCorrectnessPR.track_top1_agreement"].direction == Direction.HIGHER
    assert info["bench_correctness.KernelError.track_max_abs_error"].direction == Direction.LOWER
    assert info["bench_end_to_end.EndToEndPR.track_peak_memory"].kind == Kind.MEMORY
    assert all(b.direction != Direction.UNKNOWN for b in info.values())
    old = load_benchmarks_json(RECORDED / "h200-2026-11-29")
    assert old["bench_end_to_end.EndToEnd.track_images_per_s"].direction == Direction.HIGHER


THROUGHPUT = {"name": "bench_io.Copy.track_bandwidth", "type": "track", "unit": "GB/s", "params": [],
              "param_names": [], "version": "1"}


def _bandwidth(slow_head: float):
    def make(name: str, j: int, c: int) -> list[float]:
        level = 100.0 * (slow_head if c == 1 else 1.0)
        return [level * (1 + 0.002 * k) for k in range(12)]
    return make


@pytest.mark.parametrize(("declared", "outcome", "code"), [
    pytest.param(None, Outcome.INCONCLUSIVE, 0, id="undeclared-is-unknown-not-improved"),
    pytest.param("higher", Outcome.REGRESSED, 1, id="declared-higher-regressed"),
    pytest.param("lower", Outcome.IMPROVED, 0, id="declared-lower-improved"),
])
def test_a_30pct_throughput_loss_is_never_read_as_an_improvement(store_url, tmp_path, declared, outcome, code):
    """The issue's case: a GB/s benchmark (unit not on UNIT_SEMANTICS) lost 30% and read
    "improved", exit 0, because an unknown unit was taken as lower-is-better."""
    bench = {**THROUGHPUT, **({"direction": declared} if declared else {})}
    root = tmp_path / "res"
    write_results(root, [sha_for(0), sha_for(1)], benchmarks=[bench], samples=_bandwidth(0.7))
    with Store(store_url) as store:
        assert ingest_results_dir(store, root).ok
        (stored,) = store.benchmarks()
        base, head = store.results(commit_sha=sha_for(0)), store.results(commit_sha=sha_for(1))
    assert stored.direction == (Direction(declared) if declared else Direction.UNKNOWN)
    (v,) = compare(base, head)
    assert v.outcome == outcome and exit_code([v]) == code, v.reason
    assert v.ratio == pytest.approx(0.7, rel=0.01)
    if declared is None:
        assert v.reason.startswith(UNKNOWN_DIRECTION) and "-30.0% beyond the threshold and significant" in v.reason


def test_the_cli_reports_an_unknown_direction(tmp_path, capsys):
    root = tmp_path / "res"
    write_results(root, [sha_for(0), sha_for(1)], benchmarks=[THROUGHPUT], samples=_bandwidth(0.7), job="job-1")
    db = str(tmp_path / "h.sqlite")
    assert main(["ingest", "--db", db, str(root)]) == 0
    assert main(["compare", "--db", db, "--base", sha_for(0), "--head", sha_for(1)]) == 0
    out = capsys.readouterr().out
    assert "inconclusive" in out and "unknown direction" in out and "improved" not in out


def test_a_later_declaration_reaches_series_stored_without_one(store_url, tmp_path):
    """A series first stored of unknown direction takes the direction its benchmark declares
    later; an undeclared ingest afterwards never erases it."""
    root = tmp_path / "res"
    write_results(root, [sha_for(0)], benchmarks=[THROUGHPUT])
    with Store(store_url) as store:
        ingest_results_dir(store, root)
        assert store.benchmarks()[0].direction == Direction.UNKNOWN
        write_results(root, [sha_for(1)], benchmarks=[{**THROUGHPUT, "direction": "higher"}])
        ingest_results_dir(store, root)
        assert store.benchmarks()[0].direction == Direction.HIGHER
        write_results(root, [sha_for(2)], benchmarks=[THROUGHPUT])
        ingest_results_dir(store, root)
        assert store.benchmarks()[0].direction == Direction.HIGHER
    with Store(store_url) as again:  # and a fresh process sees it too
        assert again.benchmarks()[0].direction == Direction.HIGHER


def test_a_series_of_unknown_direction_is_looked_up_once_not_per_file(store_url, tmp_path, monkeypatch):
    """Ids of series stored of unknown direction were not cached (so that a later declaration is
    seen): every file of an undeclared benchmark looked its series up again, one query per file.
    Now an undeclared series' id is kept too, for files that declare nothing either. (The files'
    writes are counted: the check for jobs of another speed after them reads the series once.)"""
    from sqlalchemy import event

    from tests.ci.conftest import outside_speed_check

    root = tmp_path / "res"
    write_results(root, [sha_for(c) for c in range(6)], benchmarks=[THROUGHPUT])
    lookups: list[str] = []
    in_check = outside_speed_check(monkeypatch)

    def count(_conn, _cursor, statement, *_args) -> None:
        if statement.lstrip().upper().startswith("SELECT") and "FROM benchmarks" in statement and not in_check:
            lookups.append(statement)

    with Store(store_url) as store:
        event.listen(store.engine, "before_cursor_execute", count)
        assert ingest_results_dir(store, root).ok
        first = len(lookups)
        write_results(root, [sha_for(c) for c in range(6, 12)], benchmarks=[THROUGHPUT])
        assert ingest_results_dir(store, root).ok
        assert first <= 2 and len(lookups) == first, lookups  # the first file's: looked up, inserted, read back
        assert store.benchmarks()[0].direction == Direction.UNKNOWN


def test_history_steps_of_unknown_direction_are_reported_not_judged():
    bench = Benchmark("bench_io.Copy.track_bandwidth", unit="GB/s", direction=Direction.UNKNOWN, kind=Kind.OTHER)
    rng = np.random.default_rng(0)
    series = [Result(bench, f"c{i:04d}", "h200", tuple(float(x) for x in lvl * rng.lognormal(0, 0.01, 10)))
              for i, lvl in enumerate([1.0] * 40 + [0.7] * 30)]
    (cp,) = change_points(series)
    assert cp.commit_sha == "c0040" and cp.outcome == Outcome.INCONCLUSIVE


def test_the_comment_shows_unknown_directions_above_the_fold():
    bench = Benchmark("bench_io.Copy.track_bandwidth", unit="GB/s", direction=Direction.UNKNOWN, kind=Kind.OTHER)
    rng = np.random.default_rng(3)
    base = Result(bench, "a" * 40, "h200", tuple(100 * rng.lognormal(0, 0.01, 12)))
    head = Result(bench, "b" * 40, "h200", tuple(70 * rng.lognormal(0, 0.01, 12)))
    verdicts = compare([base], [head])
    body = render_comment(verdicts, [], base_sha="a" * 40, head_sha="b" * 40, environment={}, dashboard_url=None)
    assert "1 of unknown direction" in body.splitlines()[3] and "🟡" in body.splitlines()[3]
    section = body[body.index("### ❔ Direction unknown"):]
    row = section.split("\n### ")[0]
    assert "track_bandwidth" in row and re.search(r"\| 0\.70\d× \|", row), row  # no "~": it is confirmed
    assert body.index("### ❔ Direction unknown") < body.index("### Environment") and "<details>" not in body


def test_the_dashboard_colours_an_unknown_direction_neither_way():
    from ci.site.model import is_worse as dashboard_is_worse

    assert dashboard_is_worse(Direction.UNKNOWN, 0.5, 0.02) is None
    assert dashboard_is_worse(Direction.UNKNOWN, 1.5, 0.02) is None
    assert dashboard_is_worse(Direction.LOWER, 1.5, 0.02) is True
    assert dashboard_is_worse(Direction.HIGHER, 0.5, 0.02) is True


@pytest.mark.parametrize(("before", "after"), [(919.9, 13962.0), (100.0, 130.0), (2.515, 2.155)])
def test_a_change_of_unknown_direction_judged_by_asvs_rule_is_never_a_speed_up(before, after):
    """One value a side with asv's statistics (asv compare's rule): the verdict's reason names the
    unknown direction after the change ("+1417.8% beyond the threshold and significant (unknown
    direction: ...)"), not at its start. mujoco-warp's comment listed a 15x rise of such a series as
    "Faster, not confirmed (no action needed)", 28 of them as "unconfirmed speed-up(s)" (2026-12-07)."""
    from ci.outputs.groups import group_verdicts

    bench = Benchmark("benchmark.Cloth.track_metric", unit="unit", direction=Direction.UNKNOWN, kind=Kind.OTHER)

    def result(sha: str, v: float) -> Result:
        return Result(bench, sha, "gpu", (v,), stats=(v * 0.99, v * 1.01, v * 0.995, v * 1.005, 1.0, 10.0))

    (verdict,) = compare([result("a" * 40, before)], [result("b" * 40, after)])
    assert verdict.outcome == Outcome.INCONCLUSIVE and UNKNOWN_DIRECTION in verdict.reason
    assert [k for k, rows in group_verdicts([verdict]).items() if rows] == ["unknown"]
    body = render_comment([verdict], [], base_sha="a" * 40, head_sha="b" * 40, environment={}, dashboard_url=None)
    assert "1 of unknown direction" in body.splitlines()[3] and "speed-up" not in body and "Faster" not in body
    assert "| 🟡 of unknown direction | 1 |" in body and not re.search(r"\| ~\d", body)


def _conf(path: Path, directions: object = None) -> Path:
    """An asv.conf.json beside `res/` (ingest finds it), with `regressions_directions` when given."""
    import json

    conf = {"version": 1, "project": "io", "results_dir": "res",
            **({"regressions_directions": directions} if directions is not None else {})}
    path.write_text(json.dumps(conf))
    return path


def test_a_project_declares_the_direction_of_series_that_declare_none(tmp_path, capsys):
    """mujoco-warp's 252 series (`track_metric` in asv's default unit "unit") were never judged: a
    foreign suite cannot declare `direction` without the project's shim. `regressions_directions`
    in asv.conf.json says which way is better by series name; a benchmark's own declaration wins,
    the store keeps what the files said, and taking the key out takes the directions back."""
    from sqlalchemy import select

    from ci.store.models import BenchmarkRow

    declared = {**THROUGHPUT, "name": "bench_io.Copy.track_rate", "direction": "lower"}
    root = tmp_path / "res"
    write_results(root, [sha_for(0), sha_for(1)], benchmarks=[THROUGHPUT, declared], samples=_bandwidth(0.7),
                  job="job-1")
    _conf(tmp_path / "asv.conf.json", {"bench_io\\.Copy\\.track_": "higher"})
    db = str(tmp_path / "h.sqlite")
    assert main(["ingest", "--db", db, str(root)]) == 0
    assert main(["compare", "--db", db, "--base", sha_for(0), "--head", sha_for(1)]) == 1
    out = capsys.readouterr().out
    assert "unknown direction" not in out and re.search(r"regressed.*track_bandwidth", out), out
    with Store(db) as store:
        got = {b.name: b.direction for b in store.benchmarks()}
        with store.engine.connect() as conn:
            raw = dict(conn.execute(select(BenchmarkRow.name, BenchmarkRow.direction)).all())
    assert got == {"bench_io.Copy.track_bandwidth": Direction.HIGHER, "bench_io.Copy.track_rate": Direction.LOWER}
    assert raw["bench_io.Copy.track_bandwidth"] == Direction.UNKNOWN  # the store keeps what the file said

    _conf(tmp_path / "asv.conf.json")  # the key taken out: the next ingest keeps that
    assert main(["ingest", "--db", db, str(root)]) == 0
    assert main(["compare", "--db", db, "--base", sha_for(0), "--head", sha_for(1)]) == 0
    assert "unknown direction" in capsys.readouterr().out
    # An explicit asv.conf.json decides over the stored one, its directions too.
    other = _conf(tmp_path / "other.json", [["bench_io\\.Copy\\.track_band", "higher"]])
    assert main(["compare", "--db", db, "--base", sha_for(0), "--head", sha_for(1), "--config", str(other)]) == 1


@pytest.mark.parametrize(("directions", "said"), [
    pytest.param({"bench": "up"}, 'must map to "lower" or "higher"', id="not-a-direction"),
    pytest.param({"(": "lower"}, "bad regex", id="bad-regex"),
    pytest.param("lower", "must be an object of regex", id="not-an-object"),
    pytest.param([["bench", "lower", "x"]], "must be an object of regex", id="not-pairs"),
])
def test_a_malformed_directions_entry_is_an_error_naming_the_file(tmp_path, capsys, directions, said):
    root = tmp_path / "res"
    write_results(root, [sha_for(0)], benchmarks=[THROUGHPUT])
    conf = _conf(tmp_path / "asv.conf.json", directions)
    assert main(["ingest", "--db", str(tmp_path / "h.sqlite"), str(root)]) != 0
    err = capsys.readouterr().err
    assert str(conf) in err and said in err and "regressions_directions" in err, err


def test_the_dashboard_reads_a_changed_direction_without_a_new_run(tmp_path):
    """The render keeps each series' identity for the next one (`ci.site.snapshot.ColumnsCache`): a
    direction the project declares later must reach the pages although no series ran again."""
    root = tmp_path / "res"
    write_results(root, [sha_for(c) for c in range(6)], benchmarks=[THROUGHPUT])
    _conf(tmp_path / "asv.conf.json")
    db, site = str(tmp_path / "h.sqlite"), tmp_path / "site"
    assert main(["ingest", "--db", db, str(root)]) == 0
    assert main(["dashboard", "--db", db, "--out", str(site)]) == 0
    assert "declares which way is better" in (site / "index.html").read_text()
    _conf(tmp_path / "asv.conf.json", {".*": "higher"})
    assert main(["ingest", "--db", db, str(root)]) == 0
    assert main(["dashboard", "--db", db, "--out", str(site)]) == 0
    page = (site / "index.html").read_text()
    assert "declares which way is better" not in page and "declare no direction" not in page


def test_a_directions_pattern_that_backtracks_is_an_error_not_a_hang(tmp_path, capsys):
    """As `regressions_thresholds`' patterns: matched with a time limit, and one that backtracks
    without end on a series name stops the command with an error naming it."""
    import time

    from ci.records import Project

    project = Project.from_asv_conf({"regressions_directions": {"(a|a)*$": "lower", "bench": "higher"}})
    t0 = time.monotonic()
    with pytest.raises(ValueError, match="catastrophic backtracking"):
        project.direction_for("a" * 40 + "!")
    assert project.direction_for("bench_io.Copy") == Direction.HIGHER and time.monotonic() - t0 < 5
    root = tmp_path / "res"
    write_results(root, [sha_for(0), sha_for(1)], benchmarks=[{**THROUGHPUT, "name": "a" * 40 + "!"}])
    _conf(tmp_path / "asv.conf.json", {"(a|a)*$": "lower"})
    db = str(tmp_path / "h.sqlite")
    assert main(["ingest", "--db", db, str(root)]) == 2  # the files went in, reported; the file is not kept
    shown = capsys.readouterr()
    assert "regressions_directions: the pattern '(a|a)*$'" in shown.err and "2 inserted" in shown.out
    with Store(db, read_only=True) as store, store.engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT count(*) FROM runs").scalar() == 2
        assert store.project() is None
    # Fixed, it is taken; such a file again is refused, and the store keeps the last good one.
    _conf(tmp_path / "asv.conf.json", {"b": "lower"})
    assert main(["ingest", "--db", db, str(root)]) == 0
    conf = _conf(tmp_path / "asv.conf.json", {"(a|a)*$": "lower"})
    assert main(["ingest", "--db", db, str(root)]) == 2
    assert f"{conf}: regressions_directions: the pattern '(a|a)*$'" in capsys.readouterr().err
    main(["compare", "--db", db, "--base", sha_for(0), "--head", sha_for(1)])  # the store kept the last file's
    assert "withheld" in capsys.readouterr().out


def test_ingest_names_a_directions_entry_that_matches_nothing_and_the_series_left_unjudged(tmp_path, capsys):
    """A mistyped pattern judges nothing and said nothing: ingest names it, and says how many series
    are still never judged and what declares a direction for them."""
    root = tmp_path / "res"
    write_results(root, [sha_for(0)], benchmarks=[THROUGHPUT])
    db = str(tmp_path / "h.sqlite")
    _conf(tmp_path / "asv.conf.json")
    assert main(["ingest", "--db", db, str(root)]) == 0
    err = capsys.readouterr().err
    assert "note: 1 of 1 series declare no direction (e.g. 'bench_io.Copy.track_bandwidth')" in err
    assert "regressions_directions" in err
    _conf(tmp_path / "asv.conf.json", {"benchmarks\\.io": "higher"})  # the module is bench_io
    assert main(["ingest", "--db", db, str(root)]) == 0
    err = capsys.readouterr().err
    assert "warning: regressions_directions: 'benchmarks\\\\.io' (higher) decides for no series: it matches none of " \
           "the 1 stored series" in err
    assert "1 of 1 series declare no direction" in err
    _conf(tmp_path / "asv.conf.json", {"bench_io\\.": "higher", "bench_io\\.Copy": "lower"})  # the second is shadowed
    assert main(["ingest", "--db", db, str(root)]) == 0
    err = capsys.readouterr().err
    assert "declare no direction" not in err and "matches none" not in err
    assert "'bench_io\\\\.Copy' (lower) decides for no series: an earlier entry matches each of the 1 series" in err
    _conf(tmp_path / "asv.conf.json", {"bench_io\\.": "higher", "bench_io\\.Copy\\.track_rate": "lower"})
    write_results(root, [sha_for(1)], benchmarks=[THROUGHPUT, {**THROUGHPUT, "name": "bench_io.Copy.track_rate",
                                                               "direction": "higher"}])
    assert main(["ingest", "--db", db, str(root)]) == 0
    assert "'bench_io\\\\.Copy\\\\.track_rate' (lower) decides for no series: each of the 1 series it matches " \
           "declares a direction of its own" in capsys.readouterr().err
    _conf(tmp_path / "asv.conf.json", {"bench_io\\.": "higher"})
    assert main(["ingest", "--db", db, str(root)]) == 0
    err = capsys.readouterr().err
    assert "declare no direction" not in err and "decides for no" not in err
    assert "regressions_directions 'bench_io\\\\.': higher" in err  # what ingest kept, said once


def test_a_verdict_saved_under_another_direction_is_no_open_regression_now(tmp_path):
    """A compare's saved "regressed" stayed an open regression on the dashboard after the project said
    the move was for the better (its `regressions_directions` changed), while `compare` said improved;
    and saving a verdict read with the project's direction raised SeriesRedefined once a suite declared
    the other one meanwhile (both found by a review, 2026-12-07)."""
    from ci.site.snapshot import load_snapshot

    root = tmp_path / "res"
    write_results(root, [sha_for(0), sha_for(1)], benchmarks=[THROUGHPUT], samples=_bandwidth(0.7), job="job-1")
    _conf(tmp_path / "asv.conf.json", {"bench_io": "higher"})
    db = str(tmp_path / "h.sqlite")
    assert main(["ingest", "--db", db, str(root)]) == 0
    assert main(["compare", "--db", db, "--base", sha_for(0), "--head", sha_for(1)]) == 1  # saved: regressed
    with Store(db) as store:
        assert [r.benchmark.key for r in load_snapshot(store).regressions if r.source == "verdict"] == \
            ["bench_io.Copy.track_bandwidth"]
        held = store.verdicts()
    _conf(tmp_path / "asv.conf.json", {"bench_io": "lower"})
    assert main(["ingest", "--db", db, str(root)]) == 0
    with Store(db) as store:
        assert not [r for r in load_snapshot(store).regressions if r.source == "verdict"]
    # A suite declares the direction the verdicts were not read with: saving them again still works.
    write_results(root, [sha_for(2)], benchmarks=[{**THROUGHPUT, "direction": "lower"}], samples=_bandwidth(0.7))
    assert main(["ingest", "--db", db, str(root)]) == 0
    with Store(db) as store:
        store.save_verdicts(held)
        assert {b.direction for b in store.benchmarks()} == {Direction.LOWER}


def test_the_in_memory_store_reads_directions_as_the_store_does():
    """`tools.fixtures.MemoryStore` (the dashboard's tests, `tools.bench_render`) follows the store's
    contract: a series that declares no direction reads the project's `regressions_directions`, in
    every read that hands out a benchmark, and a series that declares one keeps its own."""
    from ci.records import Commit, Project, Verdict
    from tools.fixtures import T0, Failure, MemoryStore

    unknown = Benchmark(name="bench_io.Copy.track_bandwidth", params=(), unit="GB/s",
                        direction=Direction.UNKNOWN, kind=Kind.OTHER)
    own = Benchmark(name="bench_io.Copy.track_latency", params=(), unit="GB/s",
                    direction=Direction.LOWER, kind=Kind.OTHER)
    commit = Commit(sha=sha_for(0), branch="main", time=T0)
    results = [Result(benchmark=b, commit_sha=commit.sha, machine="m", samples=(1.0,)) for b in (unknown, own)]
    verdict = Verdict(benchmark=unknown, outcome=Outcome.UNCHANGED, base_value=1.0, head_value=1.0, ratio=1.0,
                      base_sha=commit.sha, head_sha=commit.sha, machine="m")
    mem = MemoryStore(commit_list=[commit], benchmark_list=[unknown, own], result_list=results,
                      verdict_list=[verdict], failure_list=[Failure(unknown, commit.sha, "m", "failed")])

    def directions() -> list[Direction]:
        return [b.direction for b in mem.benchmarks()] + [r.benchmark.direction for r in mem.results()] + [
            mem.verdicts()[0].benchmark.direction, mem.failures()[0].benchmark.direction]

    assert directions() == [Direction.UNKNOWN, Direction.LOWER] * 2 + [Direction.UNKNOWN] * 2
    mem.project_conf = Project(directions=((r"bench_io\.Copy\.", "higher"),))
    assert directions() == [Direction.HIGHER, Direction.LOWER] * 2 + [Direction.HIGHER] * 2
    assert mem.benchmark_list[0].direction == Direction.UNKNOWN  # what was given is kept
