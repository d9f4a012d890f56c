"""`tools.repeat_history`: a real history's commits repeated, each copy starting where the last ended."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from ci.ingest import ingest_results_dir
from ci.store import Store
from ci.verdicts import commit_levels
from tools.repeat_history import main, repeat_history
from tools.synthetic_history import write_history


def _levels(results_dir, tmp_path, name="plain_0"):
    with Store(str(tmp_path / "h.sqlite")) as store:
        assert ingest_results_dir(store, results_dir).ok
        machine = next(m.name for m in store.machines())
        series = [r for r in store.results(machine=machine) if r.benchmark.name.endswith(name)]
    return commit_levels(series)[1]


def test_each_copy_starts_where_the_last_ended_and_repeats_the_real_steps(tmp_path):
    write_history(tmp_path / "src", benchmarks=2, grids=0, commits=12, envs=1, noise=0.005, step=0.2,
                  step_share=1.0, seed=1)  # both series step +20% at commit 6
    counts = repeat_history(tmp_path / "src" / "results", tmp_path / "long", 3)
    assert counts == {"commits": 36, "result files": 36, "series scaled": 2,
                      "series stepping back at the joins (past 1e+12x or ingest's limits)": 0, "files left out": 0}
    assert (tmp_path / "long" / "asv.conf.json").is_file()
    src = _levels(tmp_path / "src" / "results", tmp_path / "a")
    long = _levels(tmp_path / "long" / "results", tmp_path / "b")
    assert long.size == 36
    r = np.median(src[-5:]) / np.median(src[:5])
    assert 1.15 < r < 1.25  # the series' own step
    for copy in range(3):
        np.testing.assert_allclose(long[12 * copy:12 * (copy + 1)], src * r ** copy, rtol=1e-12)
    steps = np.abs(np.diff(np.log(long)))
    assert sorted(np.argsort(steps)[-3:].tolist()) == [5, 17, 29]  # the real step, three times; no join steps
    assert all(steps[i] < 0.03 for i in (11, 23))


def test_a_series_that_moves_a_lot_stays_within_bounds_and_dates_end_at_the_real_last(tmp_path):
    """A series whose level rises 9x over the real history (uxarray's import time does) would compound
    to 9**(N-1) over N copies, past what ingest accepts; its scaling is bounded (1e12x over the whole
    history, no value past 1e5), so over 15 copies it steps back at each join, and that is counted.
    No date passes the real last one."""
    write_history(tmp_path / "src", benchmarks=1, grids=0, commits=12, envs=1, noise=0.005, step=8.0,
                  step_share=1.0, seed=1)  # +800% at commit 6: r = 9
    counts = repeat_history(tmp_path / "src" / "results", tmp_path / "long", 15)
    assert counts["series stepping back at the joins (past 1e+12x or ingest's limits)"] == 1
    src = _levels(tmp_path / "src" / "results", tmp_path / "a")
    long = _levels(tmp_path / "long" / "results", tmp_path / "b")
    assert long.size == 180
    bound = min(1e12, 1e5 / src.max()) ** (1 / 14)
    assert 1.5 < bound < 9
    for copy in range(15):
        np.testing.assert_allclose(long[12 * copy:12 * (copy + 1)], src * bound ** copy, rtol=1e-9)
    assert long.max() <= 1e5 * (1 + 1e-9)
    dates = [json.loads(p.read_text())["date"] for p in (tmp_path / "long" / "results").rglob("*.json")
             if p.name not in ("benchmarks.json", "machine.json")]
    real = [json.loads(p.read_text())["date"] for p in (tmp_path / "src" / "results").rglob("*.json")
            if p.name not in ("benchmarks.json", "machine.json")]
    assert max(dates) == max(real) and len(set(dates)) == 180


def test_copies_of_a_history_from_2000_follow_it_rather_than_predate_it(tmp_path):
    """Dated back, the first copy of a history starting on 1 January 2000 would start before 2000
    (ingest warns of such dates, and refuses one before 1970): its copies follow it instead."""
    write_history(tmp_path / "src", benchmarks=1, grids=0, commits=12, envs=1, noise=0.01, step=0.0,
                  step_share=0.0, seed=2)
    runs = [p for p in (tmp_path / "src" / "results").rglob("*.json")
            if p.name not in ("benchmarks.json", "machine.json")]
    for p in runs:
        data = json.loads(p.read_text())
        data["date"] = data["date"] - 1_600_000_000_000 + 946_688_400_000  # 2000-01-01 01:00 on
        p.write_text(json.dumps(data))
    repeat_history(tmp_path / "src" / "results", tmp_path / "long", 3)
    dates = [json.loads(p.read_text())["date"] for p in (tmp_path / "long" / "results").rglob("*.json")
             if p.name not in ("benchmarks.json", "machine.json")]
    real = [json.loads(p.read_text())["date"] for p in runs]
    assert min(real) < 946_688_400_000 + 3_600_000  # the history starts within 2 hours of 2000
    assert min(dates) == min(real) and max(dates) > max(real) and len(set(dates)) == 36


def test_the_same_arguments_write_the_same_bytes(tmp_path):
    write_history(tmp_path / "src", benchmarks=1, grids=1, commits=10, envs=2, noise=0.02, step=0.1,
                  step_share=0.5, seed=4)
    for out in ("a", "b"):
        repeat_history(tmp_path / "src" / "results", tmp_path / out, 2)
    files = [{p.relative_to(tmp_path / out): p.read_bytes() for p in sorted((tmp_path / out).rglob("*")) if p.is_file()}
             for out in ("a", "b")]
    assert files[0] == files[1] and len(files[0]) == 1 + 1 + 1 + 2 * 10 * 2  # conf, benchmarks, machine, runs


def test_bad_inputs_are_refused_and_unreadable_files_counted(tmp_path, capsys):
    write_history(tmp_path / "src", benchmarks=1, grids=0, commits=10, envs=1, noise=0.01, step=0.0,
                  step_share=0.0, seed=0)
    results = tmp_path / "src" / "results"
    machine = next(p for p in results.iterdir() if p.is_dir())
    (machine / "deadbeef-broken.json").write_text("{not json")
    (machine / "cafecafe-list.json").write_text(json.dumps([1, 2]))
    counts = repeat_history(results, tmp_path / "long", 2)
    assert counts["files left out"] == 2 and counts["result files"] == 20
    for argv, message in (([str(results), str(tmp_path / "long")], "exists"),
                          ([str(tmp_path), str(tmp_path / "x")], "benchmarks.json"),
                          ([str(results), str(tmp_path / "y"), "--repeat", "0"], "repeat")):
        with pytest.raises(SystemExit):
            main(argv)
        assert message in capsys.readouterr().err
    assert main([str(results), str(tmp_path / "z"), "--repeat", "1"]) == 0
    assert "10 commits" in capsys.readouterr().out
    assert not math.isnan(_levels(tmp_path / "z" / "results", tmp_path / "c")[0])
