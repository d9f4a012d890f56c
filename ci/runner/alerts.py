"""A history job's alerts: every regression change point, every failed correctness gate and every
benchmark that started failing to run in the machine's history, kept in the store
(`ci.store.Store.record_alerts`) from the moment a job finds them until a job has reported them
(exit 1) or a maintainer has acknowledged them (`ci ack`).

A job used to report only the steps its own commits made visible (`ci.verdicts.newly_detected`) and
the gates of its own commits: one cancelled or timed out after ingesting lost them for good, since
the next job's commits made nothing new visible and judged no gate of the commits before. Now each
history job finds every alert of the history from the store (the detector's `detect_all`, the gates'
`correctness_gates`), keeps the new ones, and reports every one not reported yet, whichever job's
commits produced it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

from ci.records import Alert, AlertKind, Kind, Outcome, Verdict
from ci.text import printable

if TYPE_CHECKING:
    from ci.store import Store, StoreReads


def history_alerts(store: Store, machine: str, branch: str | None = None,
                   floor_for: Callable[[str], float] | None = None) -> list[Alert]:
    """Every regression change point and failed correctness gate of one asv machine's history.

    Args:
        store: a `ci.store.Store` (the detector keeps its states there, `ci.verdicts.detect_all`).
        machine: asv machine name (every environment and host of it, `ci.verdicts.machine_keys`).
        branch: only this branch's commits for the change points (the job's `--dashboard-branch`);
            None for every commit. Gates are judged at every commit of the machine.
        floor_for: each series' threshold (`ci.project.ProjectSettings.floor_for`); None: the
            project the store keeps (`ci.project.project_settings(store)`).

    Returns:
        Alerts (state "detected"), regressions first, each group by series key then machine.
    """
    from ci.project import project_settings
    from ci.verdicts import detect_all, machine_keys

    if floor_for is None:
        floor_for = project_settings(store).floor_for
    keys = machine_keys(store, machine)
    regressions = [
        Alert(AlertKind.REGRESSION, cp.benchmark, cp.machine or m, cp.commit_sha, previous_sha=cp.previous_sha,
              ratio=cp.ratio, p_value=cp.p_value,
              reason=f"{_step_words(cp.ratio, cp.before, cp.after)} between {cp.previous_sha[:8]} and "
                     f"{cp.commit_sha[:8]} (p={cp.p_value:.2g})")
        for m in keys for cp in detect_all(store, machine=m, branch=branch, floor_for=floor_for)
        if cp.outcome == Outcome.REGRESSED
    ]  # fmt: skip
    gates = [
        Alert(AlertKind.GATE, v.benchmark, v.machine or m, v.head_sha, ratio=v.ratio, reason=v.reason)
        for m in keys for v in failed_gates(store, m)
    ]  # fmt: skip
    return regressions + gates + [a for m in keys for a in started_failing(store, m)]


def started_failing(store: StoreReads, machine: str) -> list[Alert]:
    """Where a benchmark stopped running on one machine: each commit at which asv recorded it as
    failed (an error, not a skip) while it ran at the machine's commit before that measured it. A
    history job reported such a commit as a note and exited 0, so a benchmark that started crashing
    on main went unguarded from then on; a check that did not run is not a pass. Consecutive
    failures are one alert, at the first; a benchmark that never ran on the machine is none (its pull
    request's comment said it failed to run; uxarray's history holds 124 such series, which an alert
    each would have reported at once). Correctness series are the gates' (`failed_gates`).

    Args:
        store: the store's read side.
        machine: a machine key.

    Returns:
        CRASH alerts, by series key then commit.
    """
    failed = [f for f in store.failures(machine=machine) if f.status == "failed"
              and f.benchmark.kind != Kind.CORRECTNESS]  # fmt: skip
    if not failed:
        return []
    position = {sha: i for i, sha in enumerate(dict.fromkeys(store.run_commits(machine)))}
    by_key: dict[str, list[str]] = {}
    bench_of = {}
    for f in failed:
        by_key.setdefault(f.benchmark.key, []).append(f.commit_sha)
        bench_of[f.benchmark.key] = f.benchmark
    out = []
    for key in sorted(by_key):
        fails = set(by_key[key])
        ran = {r.commit_sha for r in store.results(benchmark_key=key, machine=machine)}
        seen = sorted((fails | ran) & position.keys(), key=position.__getitem__)
        before = ""
        for sha in seen:
            if sha in fails and sha not in ran and before in ran:
                reason = f"failed to run (asv recorded an error); it ran at {before[:8]}"
                out.append(Alert(AlertKind.CRASH, bench_of[key], machine, sha, previous_sha=before, reason=reason))
            before = sha
    return out


def failed_gates(store: StoreReads, machine: str) -> list[Verdict]:
    """The failed correctness gates (`ci.verdicts.correctness_gates`) at every commit of one machine.

    A commit's correctness results come from the series' reads (a few series, one query each); a
    commit with a correctness point that did not run is read as the gates of a job read it
    (`ci.verdicts.results_with_crashes`: a crash, or a skipped check that ran elsewhere, fails).

    Args:
        store: the store's read side (`ci.store.StoreReads`; a `ci.store.Store` is one).
        machine: a machine key.

    Returns:
        FAILED verdicts, by series key then commit.
    """
    from ci.verdicts import correctness_gates, results_with_crashes

    series = [b for b in store.benchmarks() if b.kind == Kind.CORRECTNESS]
    if not series:
        return []
    missed = sorted({f.commit_sha for f in store.failures(machine=machine) if f.benchmark.kind == Kind.CORRECTNESS})
    results = [r for b in series for r in store.results(benchmark_key=b.key, machine=machine)
               if r.commit_sha not in missed]  # fmt: skip
    results += [r for sha in missed for r in results_with_crashes(store, sha, machine)
                if r.benchmark.kind == Kind.CORRECTNESS]  # fmt: skip
    failed = [v for v in correctness_gates(results) if v.outcome == Outcome.FAILED]
    return sorted(failed, key=lambda v: (v.benchmark.key, v.head_sha, v.machine))


def alert_line(alert: Alert) -> str:
    """The job log's line for an alert it reports (one printable line)."""
    where = f" on {alert.machine}" if alert.machine else ""
    if alert.kind == AlertKind.CRASH:
        bisect = f"; bisect {alert.previous_sha[:8]}..{alert.commit_sha[:8]}" if alert.previous_sha else ""
        return printable(f"benchmark FAILED to run at {alert.commit_sha[:8]}: {alert.benchmark.key} ({alert.reason})"
                         f"{where}{bisect}")
    if alert.kind == AlertKind.GATE:
        return printable(f"correctness FAILED at {alert.commit_sha[:8]}: {alert.benchmark.key} ({alert.reason}){where}")
    change = f"x{alert.ratio:.3f}" if math.isfinite(alert.ratio) else alert.reason.split(" between ")[0]
    return printable(f"regression at {alert.commit_sha[:8]}: {alert.benchmark.key} {change} "
                     f"(p={alert.p_value:.2g}){where}; bisect {alert.previous_sha[:8]}..{alert.commit_sha[:8]}")


def _step_words(ratio: float, before: float, after: float) -> str:
    """A step's size: its ratio, or for a series at or through zero its two levels."""
    if math.isfinite(ratio):
        return f"x{ratio:.3f}"
    return f"{before:.6g} -> {after:.6g} (by difference: no ratio at or below zero)"
