"""Durable alerts: every regression change point and failed correctness gate of a history is kept by
the store with its state (detected -> reported -> acknowledged), the same on SQLite and PostgreSQL.
The runner's use of them (a job stopped after ingesting loses none) is in tests/ci/test_runner.py."""

from __future__ import annotations

import contextlib
import math

import pytest

from ci.cli import main
from ci.ingest import ingest_results_dir
from ci.records import Alert, AlertKind, AlertState
from ci.runner.alerts import alert_line, failed_gates, history_alerts
from ci.store import Store
from ci.verdicts import HistorySettings
from tests.ci.conftest import MACHINE, sha_for, write_results
from tests.ci.test_runner import _step_samples

SLOW = "bench_attention.GPUTime.time_gpu(dtype=fp16, batch=1)"
GATE = "bench_correctness.Logits.track_max_abs_diff(backend=padded_sdpa)"
OTHER_GATE = "bench_correctness.Logits.track_max_abs_diff(backend=triton)"


@pytest.fixture
def stepped(tmp_path, store_url):
    """A store with 12 commits: a regression from commit 6 on, a failed gate at commit 9."""
    root = tmp_path / "results"
    write_results(root, [sha_for(i) for i in range(12)], samples=_step_samples)
    with Store(store_url) as store:
        assert ingest_results_dir(store, root).ok
    return store_url


@pytest.mark.slow
def test_a_history_s_alerts_are_its_regressions_and_failed_gates(stepped):
    with Store(stepped) as store:
        found = history_alerts(store, MACHINE)
        assert [(a.kind, a.benchmark.key, a.commit_sha, a.machine) for a in found] == [
            (AlertKind.REGRESSION, SLOW, sha_for(6), MACHINE),
            (AlertKind.GATE, GATE, sha_for(9), MACHINE),
            (AlertKind.GATE, OTHER_GATE, sha_for(9), MACHINE),
        ]
        regression = found[0]
        assert regression.previous_sha == sha_for(5) and regression.ratio == pytest.approx(1.5, rel=0.02)
        assert regression.p_value < HistorySettings().max_pvalue
        assert "max abs diff = 0.01 (fails" in found[1].reason and math.isnan(found[1].p_value)
        assert [v.head_sha for v in failed_gates(store, MACHINE)] == [sha_for(9)] * 2
        assert alert_line(regression).startswith(f"regression at {sha_for(6)[:8]}: {SLOW} x1.5")
        assert alert_line(found[1]).startswith(f"correctness FAILED at {sha_for(9)[:8]}: {GATE} (max abs diff")


def test_alerts_are_kept_once_reported_once_and_closed_by_ack(stepped, capsys):
    with Store(stepped) as store:
        found = history_alerts(store, MACHINE)
        added = store.record_alerts(found)
        assert [a.key for a in added] == [a.key for a in found]
        assert all(a.state == AlertState.DETECTED and a.detected_at is not None for a in added)
        assert store.record_alerts(found) == [], "kept once, whatever finds them again"
        pending = store.alerts(state=AlertState.DETECTED)
        assert [a.key for a in pending] == [a.key for a in found]
        assert pending[0].ratio == found[0].ratio and pending[0].previous_sha == sha_for(5)
        assert store.mark_alerts_reported(pending[:1]) == 1
        assert store.mark_alerts_reported(pending[:1]) == 0, "a reported alert is never reported again"
        assert [a.key for a in store.alerts(state=AlertState.DETECTED)] == [a.key for a in found[1:]]
        (reported,) = store.alerts(state=AlertState.REPORTED)
        assert reported.key == found[0].key and reported.reported_at is not None
        store.record_alerts(found)
        assert store.alerts(state=AlertState.REPORTED) == [reported], "found again, still reported"
    argv = ["ack", "--db", stepped, "--benchmark", GATE, "--commit", sha_for(9), "--who", "me", "--why", "known"]
    assert main(argv) == 0
    assert "closed 1 alert(s): gate on h200-runner" in capsys.readouterr().out
    with Store(stepped) as store:
        states = {a.benchmark.key: a.state for a in store.alerts() if a.commit_sha == sha_for(9)}
        assert states == {GATE: AlertState.ACKNOWLEDGED, OTHER_GATE: AlertState.DETECTED}
        (closed,) = store.alerts(state=AlertState.ACKNOWLEDGED)
        assert closed.acknowledged_at == store.acknowledgements()[0].when


@pytest.mark.slow
def test_an_alert_acknowledged_before_it_is_found_is_kept_closed(stepped):
    with Store(stepped) as store:
        store.acknowledge(SLOW, sha_for(6), "me", "the new tiling trades batch-1 latency")
        added = store.record_alerts(history_alerts(store, MACHINE))
        states = {a.kind: a.state for a in added}
        assert states == {AlertKind.REGRESSION: AlertState.ACKNOWLEDGED, AlertKind.GATE: AlertState.DETECTED}
        assert all(a.kind == AlertKind.GATE for a in store.alerts(state=AlertState.DETECTED))


@pytest.mark.slow
def test_record_alerts_takes_only_alerts(stepped):
    with Store(stepped) as store:
        with pytest.raises(TypeError, match="Alert records"):
            store.record_alerts(["regression"])  # type: ignore[list-item]
        assert store.record_alerts([]) == [] and store.mark_alerts_reported([]) == 0
        bench = store.benchmarks()[0]
        one = Alert(AlertKind.GATE, bench, MACHINE, sha_for(1), reason="x")
        assert len(store.record_alerts([one, one])) == 1, "the same alert twice is one"


def test_a_counter_going_up_from_zero_is_an_alert_that_names_its_two_values(tmp_path):
    """A count at 0 that goes to 4 (declared lower-is-better) has no ratio: its history alert says
    "0 -> 4", never "xnan". Undeclared, a track count's direction is unknown: reported, not an alert."""
    bench = {"name": "bench_io.Counts.track_warnings", "type": "track", "unit": "count", "params": [],
             "param_names": [], "version": "v1", "direction": "lower"}
    root = tmp_path / "results"
    write_results(root, [sha_for(i) for i in range(20)], benchmarks=[bench],
                  samples=lambda name, j, c: [0.0 if c < 12 else 4.0] * 3)
    with Store(str(tmp_path / "h.sqlite")) as store:
        assert ingest_results_dir(store, root).ok
        (alert,) = history_alerts(store, MACHINE)
    assert alert.commit_sha == sha_for(12) and alert.previous_sha == sha_for(11) and math.isnan(alert.ratio)
    line = alert_line(alert)
    assert line.startswith(f"regression at {sha_for(12)[:8]}: bench_io.Counts.track_warnings 0 -> 4 (by difference")
    assert "nan" not in line


def _ran(name: str, j: int) -> list[float]:
    """A point's samples where it ran: a time's, or a track's."""
    return [1e-3 * (j + 1) * (1 + 0.01 * k) for k in range(5)] if "time_" in name else [100.0 + j] * 3


@contextlib.contextmanager
def _crashes(tmp_path, store_url, samples, n):  # noqa: ANN001, ANN202
    """A store of `n` commits written with `samples` (None: asv recorded an error), and its CRASH alerts."""
    root = tmp_path / "results"
    write_results(root, [sha_for(i) for i in range(n)], samples=samples)
    with Store(store_url) as store:
        assert ingest_results_dir(store, root).ok
        yield store, [a for a in history_alerts(store, MACHINE) if a.kind == AlertKind.CRASH]


def test_a_benchmark_that_stops_running_is_an_alert_at_each_commit_it_started_failing(tmp_path, store_url):
    """A history job noted a benchmark asv recorded as failed and exited 0: one that started crashing
    on main went unguarded from then on. Now each commit where a timing series failed to run while it
    ran at the commit before is a CRASH alert naming the range to bisect; the failures after it are
    the same alert; one that never ran there, a skipped point (NaN) and a correctness series (the
    gates' to judge) are none; it is kept and reported once like any alert."""
    fails = {"time_gpu": {2, 3, 6}, "track_images_per_s": {0, 1}}

    def samples(name: str, j: int, c: int) -> list[float] | None:
        for part, at in fails.items():
            if part in name and j == 0 and c in at:
                return None
        if "track_max_abs_diff" in name:
            return None if c == 4 else [1e-4] * 3
        return _ran(name, j)

    with _crashes(tmp_path, store_url, samples, 8) as (store, crashes):
        got = [(a.benchmark.name.rsplit(".", 1)[1], a.commit_sha, a.previous_sha) for a in crashes]
        assert got == [("time_gpu", sha_for(2), sha_for(1)), ("time_gpu", sha_for(6), sha_for(5))], got
        assert "bisect 00000001" in alert_line(crashes[0]) and "it ran at 00000001" in alert_line(crashes[0])
        assert len(store.record_alerts(crashes)) == 2 and store.record_alerts(crashes) == []  # kept once


def test_benchmarks_that_stop_running_at_one_commit_are_reported_under_one_headline(tmp_path, store_url):
    """A commit that broke the suite stops many benchmarks at once (53 of uxarray's at one commit): one
    headline, the members below it, each still failing the job; a lone one is its own line."""
    from ci.runner.jobs import alert_report

    def samples(name: str, j: int, c: int) -> list[float] | None:
        if c == 3 and "time_gpu" in name:
            return None  # every point of the grid stops at commit 3
        if c == 5 and "track_images_per_s" in name:
            return None
        return _ran(name, j)

    with _crashes(tmp_path, store_url, samples, 7) as (store, crashes):
        report = alert_report(store, MACHINE, crashes)
    head = f"alert: 4 benchmarks failed to run at {sha_for(3)[:8]} on {MACHINE}, where the commit before measured them"
    assert report[0] == (head, False)
    assert [fails for _, fails in report[1:]] == [True] * 5
    assert all(line.startswith("  benchmark FAILED to run at " + sha_for(3)[:8]) for line, _ in report[1:5])
    assert report[5][0].startswith(f"benchmark FAILED to run at {sha_for(5)[:8]}: bench_model")
