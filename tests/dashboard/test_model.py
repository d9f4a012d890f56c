"""The snapshot the pages are rendered from: statistics, identities, regressions, gates."""

from __future__ import annotations

import math
import multiprocessing
import os
import random
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from ci.forking import WorkerLost
from ci.records import Benchmark, Commit, Outcome, Result
from ci.site import render_site
from ci.site.model import (
    commit_slug,
    gate_ok,
    is_worse,
    load_snapshot,
    median_iqr,
    median_iqr_all,
    resolve_sha,
    series_slug,
)
from tests.dashboard.fakes import nan_result
from tools.fixtures import MemoryStore, synthetic_store


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 7, 10, 31], ids=lambda n: f"n{n}")
def test_median_iqr_matches_result_properties(n: int) -> None:
    bench = Benchmark("b.x")
    for _ in range(20):
        samples = tuple(random.lognormvariate(0, 1) for _ in range(n)) + (math.nan,)
        r = Result(bench, "a" * 40, "m", samples)
        med, q1, q3, count, lo, hi = median_iqr(samples)
        assert med == pytest.approx(r.value, rel=1e-12)
        assert (q1, q3) == pytest.approx(r.spread, rel=1e-12)
        assert count == n
        assert (lo, hi) == (min(samples[:-1]), max(samples[:-1]))


def test_median_iqr_all_is_median_iqr_bit_for_bit() -> None:
    rng = random.Random(4)
    samples = [tuple(rng.lognormvariate(0, 1) for _ in range(n)) for n in (0, 1, 2, 3, 4, 5, 10, 10, 10, 31)]
    samples += [(1.0, math.nan, 2.0), (math.inf,) * 10, tuple(float(i % 3) for i in range(10))]
    assert median_iqr_all(samples) == [median_iqr(s) for s in samples]


def test_median_iqr_nothing_finite() -> None:
    med, q1, q3, n, lo, hi = median_iqr((math.nan, math.inf))
    assert n == 0 and all(math.isnan(x) for x in (med, q1, q3, lo, hi))


def test_slugs_are_file_safe_and_distinct() -> None:
    a = series_slug("b.x(p=1)", "m/../../etc")
    b = series_slug("b.x(p=1)", "m2")
    assert a != b and a.isalnum() and len(a) == 16
    assert series_slug("b.x(p=1)", "m2") == b  # stable across calls (and processes: sha256, not hash())
    assert commit_slug("0123abcd" * 5) == "0123abcd" * 5
    evil = commit_slug("../<script>")
    assert evil.startswith("x") and evil[1:].isalnum()


def test_resolve_sha() -> None:
    commits = [Commit("abc123" + "0" * 34), Commit("abd999" + "0" * 34)]
    assert resolve_sha(commits, "abc1") == commits[0].sha
    with pytest.raises(ValueError, match="ambiguous"):
        resolve_sha(commits, "ab")
    with pytest.raises(ValueError, match="not in the store"):
        resolve_sha(commits, "ffff")
    with pytest.raises(ValueError, match="non-empty"):
        resolve_sha(commits, "")


def test_snapshot_series_per_machine_in_history_order() -> None:
    store = synthetic_store(n_commits=12, n_series=5, machines=2)
    snap = load_snapshot(store)
    assert len(snap.series) == 10
    crashed = (store.benchmark_list[1].key, "runner-0")  # no value at commit 7 (asv "failed")
    for s in snap.series:
        want = [i for i in range(12) if not ((s.benchmark.key, s.machine) == crashed and i == 7)]
        assert [p.index for p in s.points] == want
    assert snap.failures_by_sha == {store.commit_list[7].sha: [(store.benchmark_list[1], "runner-0", "failed")]}
    assert sorted((s.benchmark.key, s.machine) for s in snap.series) == sorted(
        (b.key, m) for b in store.benchmark_list for m in ("runner-0", "runner-1"))


class _LooseStore(MemoryStore):
    """Breaks the protocol's promise: results newest first."""

    def results(self, **filters: str | None) -> list[Result]:
        return super().results(**filters)[::-1]


def test_change_points_see_history_order_from_a_loose_store() -> None:
    pytest.importorskip("ci.verdicts.history")
    loose = _LooseStore(**vars(synthetic_store(n_commits=30, n_series=5)))
    assert loose.results()[0].commit_sha == loose.commit_list[-1].sha
    got = load_snapshot(loose)
    assert all([p.index for p in s.points] == sorted(p.index for p in s.points) for s in got.series)
    want = load_snapshot(synthetic_store(n_commits=30, n_series=5))
    assert [s.changes for s in got.series] == [s.changes for s in want.series]
    assert any(s.changes for s in want.series)


def test_a_series_shows_only_its_current_benchmark_version() -> None:
    """As asv publishes: results of an older benchmark version (other benchmark code) are dropped,
    also from a store that returns results newest first."""
    from dataclasses import replace

    for cls in (MemoryStore, _LooseStore):
        store = cls(**vars(synthetic_store(n_commits=10, n_series=2, machines=1)))
        first = store.benchmark_list[0]
        pos = {c.sha: i for i, c in enumerate(store.commit_list)}
        store.result_list = [
            replace(r, benchmark_version="v1" if pos[r.commit_sha] < 6 else "v2") if r.benchmark == first else r
            for r in store.result_list
        ]
        snap = load_snapshot(store)
        (changed,) = [s for s in snap.series if s.benchmark == first]
        assert [p.index for p in changed.points] == [6, 7, 8, 9]
        (other,) = [s for s in snap.series if s.benchmark != first]
        assert len(other.points) >= 9  # unversioned results are all kept


def test_snapshot_rejects_result_on_unknown_commit() -> None:
    store = synthetic_store(n_commits=4, n_series=3)
    store.result_list.append(nan_result(store.benchmark_list[2], "f" * 40, "runner-0"))
    with pytest.raises(ValueError, match="f{40}.*commit history"):
        load_snapshot(store)


def test_regressions_open_and_acknowledged() -> None:
    store = synthetic_store(n_commits=30, n_series=6)
    snap = load_snapshot(store)
    verdict_regs = {(r.benchmark.key, r.sha): r for r in snap.regressions if r.source == "verdict"}
    b2, b3, b0 = (store.benchmark_list[i].key for i in (2, 3, 0))
    open_reg = verdict_regs[(b2, store.commit_list[15].sha)]
    acked = verdict_regs[(b3, store.commit_list[10].sha)]
    failed = verdict_regs[(b0, store.commit_list[27].sha)]
    assert open_reg.is_open and open_reg.outcome == Outcome.REGRESSED and open_reg.machines == ("runner-0",)
    assert not acked.is_open and acked.ack is not None and "bigger tile" in acked.ack.why
    assert failed.is_open and failed.outcome == Outcome.FAILED
    # newest first
    positions = [snap.position[r.sha] for r in snap.regressions]
    assert positions == sorted(positions, reverse=True)


def test_a_benchmark_that_ran_again_after_a_crash_verdict_is_fixed() -> None:
    """A compare stored "failed to run on head" for a commit; the benchmark ran at a later commit, so
    the failure is fixed there ("ran again at"), not an open regression for good. A crash with no later
    value stays open, and so does a correctness gate whose later values are not this rule's to judge."""
    from ci.records import Verdict

    store = synthetic_store(n_commits=12, n_series=6)
    bench = store.benchmark_list[2]
    crash = {"benchmark": bench, "outcome": Outcome.FAILED, "base_value": 1e-5, "head_value": math.nan,
             "ratio": math.nan, "reason": "failed to run on head"}
    store.verdict_list.append(Verdict(**crash, base_sha=store.commit_list[7].sha, head_sha=store.commit_list[8].sha))
    store.verdict_list.append(Verdict(**crash, base_sha=store.commit_list[10].sha, head_sha=store.commit_list[11].sha))
    store.result_list = [r for r in store.result_list if not (
        r.benchmark == bench and r.commit_sha in (store.commit_list[8].sha, store.commit_list[11].sha))]
    regs = {r.sha: r for r in load_snapshot(store).regressions
            if r.source == "verdict" and r.benchmark == bench and r.outcome == Outcome.FAILED}
    fixed, still = regs[store.commit_list[8].sha], regs[store.commit_list[11].sha]
    assert fixed.fixed_by == store.commit_list[9].sha and not fixed.is_open
    assert still.is_open and not still.fixed_by
    gate = next(r for r in load_snapshot(store).regressions if r.benchmark == store.benchmark_list[0])
    assert gate.outcome == Outcome.FAILED and gate.is_open  # a gate verdict (value past its limit)


def test_a_regression_verdict_whose_level_came_back_is_fixed() -> None:
    """stingray's ten series x10 slower at one commit and back at the next stayed "10 open regressions"
    once both pairs were compared. A verdict's regression is fixed at the first of two commits in a row
    back within a quarter of its step from the base (one that stays up stays open:
    `test_regressions_open_and_acknowledged`)."""
    from ci.records import Verdict

    store = synthetic_store(n_commits=12, n_series=6)
    bench = store.benchmark_list[3]
    base = next(r.value for r in store.result_list if r.benchmark == bench and r.commit_sha == store.commit_list[6].sha)
    store.verdict_list.append(Verdict(benchmark=bench, outcome=Outcome.REGRESSED, base_value=base, head_value=10 * base,
                                      ratio=10.0, base_sha=store.commit_list[6].sha, head_sha=store.commit_list[7].sha,
                                      reason="+900% beyond the threshold"))
    snap = load_snapshot(store)
    (spike,) = [r for r in snap.regressions if r.source == "verdict" and r.benchmark == bench
                and r.sha == store.commit_list[7].sha]
    assert spike.fixed_by == store.commit_list[8].sha and not spike.is_open


def test_baseline_sha_must_exist() -> None:
    store = synthetic_store(n_commits=5, n_series=3)
    with pytest.raises(ValueError, match="not in the store"):
        load_snapshot(store, baseline_sha="0" * 40)
    snap = load_snapshot(store, baseline_sha=store.commit_list[2].sha[:8])
    assert snap.baseline_sha == store.commit_list[2].sha


def test_correctness_points_show_the_worst_sample() -> None:
    """ci.verdicts.gates judges the worst repeat; the dashboard must show that value, not the median."""
    store = MemoryStore(commit_list=[Commit("a" * 40)])
    diff = Benchmark("c.track_diff", unit="max abs diff", kind="correctness")
    top1 = Benchmark("c.track_top1", unit="top-1 agreement", direction="higher", kind="correctness")
    store.benchmark_list = [diff, top1]
    store.result_list = [Result(diff, "a" * 40, "m", (0.001, 0.001, 0.005)),
                         Result(top1, "a" * 40, "m", (1.0, 1.0, 0.98))]
    snap = load_snapshot(store)
    by_unit = {s.benchmark.unit: s for s in snap.series}
    assert by_unit["max abs diff"].points[0].value == 0.005
    assert gate_ok(0.005, by_unit["max abs diff"].gate) is False
    assert by_unit["top-1 agreement"].points[0].value == 0.98
    assert gate_ok(0.98, by_unit["top-1 agreement"].gate) is False
    assert gate_ok(1.0, by_unit["top-1 agreement"].gate) is True
    assert gate_ok(0.0039, by_unit["max abs diff"].gate) is True


@pytest.mark.parametrize(("ratio", "direction", "threshold", "want"), [
    (1.2, "lower", 0.05, True), (0.8, "lower", 0.05, False), (1.04, "lower", 0.05, None),
    (1.2, "higher", 0.05, False), (0.8, "higher", 0.05, True), (math.nan, "higher", 0.05, None),
    (1.3, "lower", 0.45, None), (1.3, "lower", math.nan, None), (0.955, "lower", 0.05, None),
], ids=["slower", "faster", "within-noise", "more-throughput", "less-throughput", "nan", "noisy-series",
        "noise-unknown", "log-symmetric"])
def test_is_worse_respects_direction_and_noise(ratio: float, direction: str, threshold: float,
                                               want: bool | None) -> None:
    from ci.records import Direction

    assert is_worse(Direction(direction), ratio, threshold) is want


def test_colours_follow_each_series_noise() -> None:
    # Two series step +20% at the newest commit: one at 1% noise, one at CPU-like ±30%; only the
    # quiet one is coloured (a fixed 1% band painted both red).
    quiet = Benchmark("b.Quiet.time_x")
    noisy = Benchmark("b.NoisyCPU.time_x")
    wobble = (0.3, -0.2, 0.15, -0.1, 0.0, -0.3, 0.25, 0.05, -0.15)  # in units of each series' noise
    store = MemoryStore(commit_list=[Commit(f"{i:040x}", subject=f"c{i}") for i in range(30)],
                        benchmark_list=[quiet, noisy])
    for i, c in enumerate(store.commit_list):
        for bench, scale in ((quiet, 0.03), (noisy, 1.0)):
            centre = 1e-3 * (1.2 if i == 29 else 1.0 if i == 28 else 1 + scale * wobble[i % len(wobble)])
            store.result_list.append(Result(bench, c.sha, "m", tuple(centre * (1 + 0.001 * k) for k in range(5))))
    by_name = {s.benchmark.name: s for s in load_snapshot(store).series}
    newest = store.commit_list[-1].sha
    for name, want in (("b.Quiet.time_x", True), ("b.NoisyCPU.time_x", None)):
        s = by_name[name]
        r = s.points[-1].value / s.points[-2].value
        assert is_worse(s.benchmark.direction, r, s.thresholds[newest]) is want, (name, r, s.thresholds[newest])
    assert by_name["b.NoisyCPU.time_x"].threshold > 0.3 > 0.02 <= by_name["b.Quiet.time_x"].threshold < 0.1


def test_change_point_regression_undone_later_is_not_open(tmp_path: Path) -> None:
    """...and its row on the regressions page is badged "undone", not "regressed" (it looked open)."""
    pytest.importorskip("ci.verdicts.history")
    store = synthetic_store(n_commits=60, n_series=3)
    bench = store.benchmark_list[2]
    # Series 2 steps up 30% at commit 30 (open verdict); bring it back down from commit 45.
    store.result_list = [
        Result(r.benchmark, r.commit_sha, r.machine, tuple(x / 1.3 for x in r.samples), r.run_id)
        if r.benchmark == bench and store.commit_list.index(
            next(c for c in store.commit_list if c.sha == r.commit_sha)) >= 45 else r
        for r in store.result_list
    ]
    snap = load_snapshot(store)
    steps = [r for r in snap.regressions if r.source == "change point" and r.benchmark == bench]
    assert len(steps) == 1 and steps[0].sha == store.commit_list[30].sha
    assert steps[0].fixed_by == store.commit_list[45].sha and not steps[0].is_open
    verdict = next(r for r in snap.regressions if r.source == "verdict" and r.benchmark == bench)
    # a stored verdict's regression closes where its level came back, as the change point's does
    assert verdict.fixed_by == store.commit_list[45].sha and not verdict.is_open
    from ci.site import render_site

    render_site(store, tmp_path / "site")
    page = (tmp_path / "site" / "regressions.html").read_text()
    row = next(r for r in page.split("<tr")[1:] if "level restored at" in r and store.commit_list[30].sha[:10] in r)
    assert '<span class="badge undone">undone</span>' in row and "badge regressed" not in row


@pytest.mark.slow
def test_parallel_change_points_equal_serial(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("ci.verdicts.history")
    import ci.site.judge as dm  # the series are judged there (forked workers)

    store = synthetic_store(n_commits=40, n_series=8, machines=2)
    monkeypatch.setattr(dm, "_PARALLEL_MIN_SERIES", 10**9)
    serial = load_snapshot(store)
    monkeypatch.setattr(dm, "_PARALLEL_MIN_SERIES", 2)  # forks workers when the box has >= 2 CPUs
    parallel = load_snapshot(store)
    assert [s.changes for s in parallel.series] == [s.changes for s in serial.series]
    assert parallel.regressions == serial.regressions
    assert sum(len(s.changes) for s in serial.series) >= 2  # the step of series 2 on both machines


@pytest.mark.timeout(60)  # multiprocessing.Pool waited for the dead worker's series forever
@pytest.mark.slow
def test_a_judging_worker_killed_is_an_error_naming_its_series(monkeypatch: pytest.MonkeyPatch) -> None:
    import ci.site.judge as dm  # the series are judged there (forked workers)

    if "fork" not in multiprocessing.get_all_start_methods():
        pytest.skip("no fork: the series are always judged in one process")
    monkeypatch.setattr(dm, "_PARALLEL_MIN_SERIES", 1)
    monkeypatch.setattr(dm, "fork_workers", lambda items, least: 2 if items >= least else 1)
    store = synthetic_store(n_commits=12, n_series=6, machines=2)
    parent = os.getpid()
    real = dm._judge

    def dies(bench: Benchmark, machine: str, *args: Any) -> Any:
        if machine == "runner-1" and os.getpid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)
        return real(bench, machine, *args)

    monkeypatch.setattr(dm, "_judge", dies)
    t0 = time.perf_counter()
    with pytest.raises(WorkerLost, match=r"; \d+ series not judged \(change points, suspicions\): .+ on runner-"):
        load_snapshot(store)
    assert time.perf_counter() - t0 < 10
    assert multiprocessing.active_children() == []


def test_a_regression_is_fixed_only_when_its_level_returns() -> None:
    """A later step that leaves the level up (half way back, or a further regression) fixes nothing,
    however noisy the series; back three quarters of the way or more, it is fixed."""
    from types import SimpleNamespace as At

    from ci.records import Direction
    from ci.site.model import recovery

    up = (1.0, 1.2)  # a +20% regression
    for direction, before, after, later in ((Direction.LOWER, *up, 1.1), (Direction.HIGHER, 1.2, 1.0, 1.1)):
        assert recovery(before, after, [At(after=later, commit_sha="half")], direction) == ""
    assert recovery(*up, [At(after=1.3, commit_sha="worse"), At(after=1.04, commit_sha="back")],
                    Direction.LOWER) == "back"
    assert recovery(*up, [At(after=0.9, commit_sha="below")], Direction.LOWER) == "below"
    assert recovery(1.2, 1.0, [At(after=1.19, commit_sha="back")], Direction.HIGHER) == "back"
    assert recovery(*up, [At(after=1.1, commit_sha="half")], Direction.UNKNOWN) == ""
    # A series at or through zero: the same rule on the difference (0 -> 4, back to 1 fixes it, to 2 does not).
    assert recovery(0.0, 4.0, [At(after=2.0, commit_sha="half"), At(after=1.0, commit_sha="back")],
                    Direction.LOWER) == "back"
    assert recovery(3.0, 0.0, [At(after=2.0, commit_sha="back")], Direction.HIGHER) == ""
    assert recovery(3.0, 0.0, [At(after=2.5, commit_sha="back")], Direction.HIGHER) == "back"


def test_a_counter_that_starts_at_zero_shows_its_regression() -> None:
    """A warning count at 0 that goes to 5 (no ratio) is a change-point regression on the dashboard,
    open until the count returns; a series that never leaves zero or below shows none."""
    from ci.records import Machine

    counter = Benchmark("bench_io.Counts.track_warnings", (), unit="unit")
    offset = Benchmark("bench_io.Drift.track_offset", (), unit="unit")
    shas = [f"{i:040x}" for i in range(30)]
    results = [Result(counter, sha, "m", (0.0 if i < 12 else 5.0,)) for i, sha in enumerate(shas)]
    results += [Result(offset, sha, "m", (-1.0 - 0.01 * (i % 2),)) for i, sha in enumerate(shas)]
    store = MemoryStore(machine_list=[Machine("m")], benchmark_list=[counter, offset], result_list=results,
                        commit_list=[Commit(sha) for sha in shas])
    snap = load_snapshot(store)
    (reg,) = [r for r in snap.regressions if r.source == "change point"]
    assert reg.benchmark == counter and reg.sha == shas[12] and reg.is_open
    assert (reg.base_value, reg.head_value) == (0.0, 5.0) and math.isnan(reg.ratio)


def test_a_suspicion_on_a_series_that_stopped_reporting_expires() -> None:
    """A step on a series' two last commits, then the series reports no more while its machine goes
    on: the suspicion stays open for `confirm_within` commits, then expires, listed with why."""
    from dataclasses import replace

    from ci.verdicts import SuspectSettings, SuspectState

    store = synthetic_store(n_commits=40, n_series=8)
    bench = [b for b in store.benchmark_list[4:] if b.unit == "seconds"][0]  # series 2 and 3 step on their own
    at = {c.sha: i for i, c in enumerate(store.commit_list)}

    wait = SuspectSettings().confirm_within
    for after, state in ((wait - 1, SuspectState.SUSPECTED), (wait, SuspectState.EXPIRED)):
        end = 26 + after  # commits 0 .. end - 1; the series' last result at 25
        kept = [replace(r, samples=tuple(x * 1.5 for x in r.samples)) if r.benchmark == bench and at[r.commit_sha] >= 24
                else r for r in store.result_list
                if at[r.commit_sha] < end and (r.benchmark != bench or at[r.commit_sha] <= 25)]
        snap = load_snapshot(replace(store, result_list=kept, commit_list=store.commit_list[:end],
                                     verdict_list=[v for v in store.verdict_list if at.get(v.head_sha, 0) < end],
                                     failure_list=[f for f in store.failure_list if at[f.commit_sha] < end]))
        (s,) = [s for s in snap.series if s.benchmark == bench]
        (x,) = [x for x in s.suspects if x.commit_sha == store.commit_list[24].sha]
        assert x.state == state, (after, x)
    assert "unresolved: no data since" in x.reason and x.resolved_sha == store.commit_list[25 + wait].sha
    assert x not in snap.open_suspects


def test_a_job_that_moved_every_series_puts_no_suspicion_on_the_overview(tmp_path: Path) -> None:
    """Eight series of one machine, every one +50% at one commit and +30% at the next, back after:
    the whole job moved (a shared runner's slower host), so the dashboard raises no suspicion there,
    where each series read alone would have raised one; held a third commit it raises all eight, the
    reason saying the whole job moved."""
    from ci.records import Machine

    benches = [Benchmark(f"bench_m.S{i}.time_x", ()) for i in range(8)]
    shas = [f"{i:040x}" for i in range(26)]

    def store(plan: list[float]) -> MemoryStore:
        rng = random.Random(0)
        results = [Result(b, sha, "m", tuple(1e-3 * plan[i] * (1 + 0.01 * rng.gauss(0, 1)) for _ in range(5)))
                    for b in benches for i, sha in enumerate(shas[:len(plan)])]
        return MemoryStore(machine_list=[Machine("m")], benchmark_list=benches, result_list=results,
                           commit_list=[Commit(sha) for sha in shas[:len(plan)]])

    moved = load_snapshot(store([1.0] * 20 + [1.5, 1.3] + [1.0] * 4))
    assert moved.open_suspects == [] and [x for s in moved.series for x in s.suspects] == []
    held = load_snapshot(store([1.0] * 20 + [1.5] * 3))
    assert len(held.open_suspects) == 8
    assert all(x.commit_sha == shas[20] and "whole job moved" in x.reason for x in held.open_suspects)
    (crowd,) = held.suspect_crowds()  # one alert, not eight
    assert len(crowd) == 8 and all(x.job_move.startswith("the whole job moved at this commit (8 of 8") for x in crowd)
    # The overview lists them as that one alert, biggest first, not as eight rows of the table.
    out = tmp_path / "site"
    render_site(store([1.0] * 20 + [1.5] * 3), out)
    page = (out / "index.html").read_text()
    assert "8 series suspected at" in page and "held a third commit" in page and "and 5 more" in page
    assert '<table class="suspects">' not in page.split('id="resolved"')[0]


def test_a_machine_that_stopped_measuring_expires_its_suspicions_and_is_named(tmp_path: Path) -> None:
    """Machine b measures the first 20 commits, the last two of them 50% slower, then stops while a
    goes on: without a next commit of b the suspicion would stay open for ever. Once a has measured
    `QUIET_AFTER` newer commits it expires, naming b, and the overview says b stopped; a nightly
    runner (every fifth commit) that is only one run late is not stopped."""
    from ci.records import Machine
    from ci.site.snapshot import QUIET_AFTER
    from ci.verdicts import SuspectState

    bench = Benchmark("bench_m.S.time_x", ())
    shas = [f"{i:040x}" for i in range(40)]

    def store(b_until: int, nightly_last: int) -> MemoryStore:
        rng = random.Random(0)
        results = []
        for i, sha in enumerate(shas):
            for machine, runs in (("a", True), ("b", i < b_until), ("n", i % 5 == 0 and i <= nightly_last)):
                if runs:
                    slow = 1.5 if machine == "b" and i >= b_until - 2 else 1.0
                    results.append(Result(bench, sha, machine, tuple(1e-3 * slow * (1 + 0.01 * rng.gauss(0, 1))
                                                                     for _ in range(5))))
        return MemoryStore(machine_list=[Machine("a"), Machine("b"), Machine("n")], benchmark_list=[bench],
                           result_list=results, commit_list=[Commit(sha) for sha in shas])

    soon = load_snapshot(store(20 + QUIET_AFTER + 1, 35))  # b measured until 11 commits before the end
    assert soon.quiet == {} and len(soon.open_suspects) == 1
    snap = load_snapshot(store(20, 35))  # b stopped 20 commits before the end; n's last run at 35
    assert list(snap.quiet) == ["b"] and snap.quiet["b"] == (shas[19], 20)
    (x,) = [x for s in snap.series if s.machine == "b" for x in s.suspects]
    assert x.state == SuspectState.EXPIRED and x not in snap.open_suspects
    assert f"b measured nothing since {shas[19][:10]} while other machines measured {QUIET_AFTER} newer" in x.reason
    assert x.resolved_sha == shas[19 + QUIET_AFTER]
    out = tmp_path / "site"
    render_site(store(20, 35), out)
    page = " ".join((out / "index.html").read_text().split())
    assert "1 machine stopped measuring" in page and "20 newer commits measured on other machines" in page
    # Jobs kept apart by their speed (`ci.ingest.speed`) come when the runner lands on that host: never stopped.
    from ci.records.provenance import SPEED_KEY

    by_speed = store(20, 35)
    by_speed = MemoryStore(machine_list=[Machine("a"), Machine("b", host=((SPEED_KEY, "slower"),)), Machine("n")],
                           benchmark_list=by_speed.benchmark_list, result_list=by_speed.result_list,
                           commit_list=by_speed.commit_list)
    assert load_snapshot(by_speed).quiet == {}


def test_an_open_regression_names_its_level_now_when_it_moved_since_the_step() -> None:
    """jaxion's `time_simulation` stepped 2.03 -> 2.37 s (+17.1%) and came back to 2.25 s, too little for
    a step of its own: the regression names the level now (+10.8%). A level that stayed, one with a later
    change point, or one with too few commits after the step gets nothing."""
    import numpy as np

    from ci.records import Benchmark, Outcome
    from ci.site.judge import NOW_COMMITS, level_now
    from ci.verdicts import ChangePoint

    bench = Benchmark("b.DarkMatterGas.time_simulation", unit="seconds")
    shas = [f"{i:08d}" + "a" * 32 for i in range(36)]
    step = ChangePoint(bench, shas[23], 2.03, 2.37, 2.37 / 2.03, Outcome.REGRESSED, index=23)
    back = np.array([2.03] * 23 + [2.37] * 6 + [2.25] * 7)
    assert level_now(step, [], shas, back, "seconds") == \
        "level now 2.25 s, +10.8% against before the step (median of the newest 5 commits)"
    assert level_now(step, [], shas, np.array([2.03] * 23 + [2.37] * 13), "seconds") == ""  # it stayed
    assert level_now(step, [step], shas, back, "seconds") == ""  # a later step explains the level
    late = ChangePoint(bench, shas[36 - NOW_COMMITS + 1], 2.03, 2.37, 2.37 / 2.03, Outcome.REGRESSED)
    assert level_now(late, [], shas, back, "seconds") == ""  # too few commits after it
    climbing = np.array([2.03] * 23 + [2.37] * 6 + [2.9] * 7)  # kept rising: said too
    assert level_now(step, [], shas, climbing, "seconds").startswith("level now 2.9 s, +42.9%")


def test_a_regression_that_ends_a_short_improvement_is_read_against_the_level_before_it() -> None:
    """uxarray's `time_face_bounds` went 65.8 ms -> 36.8 us for 7 commits -> 74.4 ms: the step back read
    "+202334.3%" against the dip alone; its reason now gives +13.1% against the level before the dip.
    A step after a longer stretch, after a regression, or the first step of a series gets none."""
    from ci.records import Benchmark, Outcome
    from ci.site.judge import DIP_COMMITS, after_a_dip
    from ci.verdicts import ChangePoint

    bench = Benchmark("face_bounds.FaceBounds.time_face_bounds", unit="seconds")

    def cp(index: int, before: float, after: float, outcome: Outcome) -> ChangePoint:
        return ChangePoint(bench, f"{index:08d}" + "a" * 32, before, after, after / before, outcome, index=index)

    dip = cp(18, 0.0658, 36.8e-6, Outcome.IMPROVED)
    back = cp(25, 36.8e-6, 0.07444, Outcome.REGRESSED)
    assert after_a_dip(back, dip, "seconds") == "+13.1% against 65.8 ms before the 7-commit improvement at 00000018, " \
                                                "which it ends"
    assert after_a_dip(back, None, "seconds") == ""
    assert after_a_dip(back, cp(18, 0.0658, 0.070, Outcome.REGRESSED), "seconds") == ""
    assert after_a_dip(cp(25 + DIP_COMMITS, 36.8e-6, 0.07444, Outcome.REGRESSED), dip, "seconds") == ""


def test_a_step_after_failed_runs_says_it_may_have_come_at_the_first_of_them(tmp_path: Path) -> None:
    """A benchmark that failed to run at three commits and came back 20x slower: the change point is at
    the commit it came back (its first value after the step), which may only have fixed the crash
    (MDAnalysis' `time_contact_matrix(10000)`, blamed on the commit that made it faster elsewhere,
    2026-12-07). The regression's reason names the failed commits; a step with no failure before it
    says nothing of them."""
    from ci.ingest import ingest_results_dir
    from ci.store import Store
    from tests.ci.conftest import sha_for, write_results

    def samples(name: str, j: int, c: int) -> list[float] | None:
        level = 1e-4 * (j + 1) * (20.0 if c >= 12 else 1.0)
        if "time_gpu" in name and j == 0 and c in (9, 10, 11):
            return None
        return [level * (1 + 0.003 * k) for k in range(6)]

    root = tmp_path / "results"
    write_results(root, [sha_for(i) for i in range(20)], samples=samples)
    with Store(tmp_path / "h.sqlite") as store:
        ingest_results_dir(store, root)
        regs = [r for r in load_snapshot(store).regressions if r.source == "change point"]
    assert regs and all(r.sha == sha_for(12) for r in regs), [(r.benchmark.key, r.sha) for r in regs]
    named = [r for r in regs if "failed to run" in r.reason]
    assert [r.benchmark.key for r in named] == ["bench_attention.GPUTime.time_gpu(dtype=fp16, batch=1)"]
    assert f"failed to run at the 3 commit(s) before this one, from {sha_for(9)[:10]}" in named[0].reason


def test_a_comparison_across_a_range_of_commits_is_no_regression_of_its_head() -> None:
    """A stored verdict whose base is not the commit its machine measured before head (`ci compare` of a
    range) may have its change at any commit between: PlasmaPy's page of a commit flat against its
    parent listed 4 regressions "at this commit" (2026-12-07). It is listed on the commit page with its
    base, not as a regression of head; the same verdict against head's predecessor is one."""
    from dataclasses import replace

    from ci.records import Verdict

    store = synthetic_store(n_commits=30, n_series=6)
    bench = store.benchmark_list[4]
    step = Verdict(benchmark=bench, outcome=Outcome.REGRESSED, base_value=1e-3, head_value=1.3e-3, ratio=1.3,
                   base_sha=store.commit_list[19].sha, head_sha=store.commit_list[20].sha,
                   machine=store.result_list[0].machine)
    store.verdict_list.append(step)
    store.verdict_list.append(replace(step, base_sha=store.commit_list[10].sha, head_sha=store.commit_list[24].sha))
    snap = load_snapshot(store)
    at = {r.sha for r in snap.regressions if r.source == "verdict" and r.benchmark == bench}
    assert at == {store.commit_list[20].sha}
    assert [v.base_sha for v in snap.verdicts_by_sha[store.commit_list[24].sha]] == [store.commit_list[10].sha]
