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
