"""How the dashboard judges each series: its change points, suspicions and noise thresholds, over
forked workers when there are many series (`_judge_all`; the children read their inputs from the
module-level `_FORK_INPUT`), the change-point regressions and whether a later step fixed them
(`recovery`), and the colouring of a correctness value (`gate_ok`; a change's is `ci.records.is_worse`'s)."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from ci.forking import fork_map, fork_workers
from ci.records import (
    Acknowledgement,
    Benchmark,
    Direction,
    Kind,
    Outcome,
    Result,
)
from ci.site.fmt import fmt_step, fmt_value
from ci.site.series import ChangeMark, Regression, Series
from ci.verdicts import (
    AlertGroup,
    ChangePoint,
    JobMove,
    Suspect,
    SuspectTrack,
    change_points,
    commit_levels,
    exact_steps,
    expire,
    group_changes,
    hold_at_job_moves,
    job_moves,
    judge_levels,
    levels_to_judge,
    passes_gate,
)

# Below this many series, starting worker processes costs more than it saves (~0.1 s).
_PARALLEL_MIN_SERIES = 64


class SeriesInput(NamedTuple):
    """What judging one series reads (`_judge`'s arguments, in its order)."""

    benchmark: Benchmark
    machine: str
    results: list[Result]
    shas: list[str]  # its commits with a level
    levels: np.ndarray
    stored: list[ChangePoint] | None  # change points a store kept (None: compute them)
    track: SuspectTrack | None  # the previous render's suspicion test of it (None: from scratch)
    floor: float  # the series' threshold from the project
    difference: bool = False  # at or through zero: judged by difference (`levels` of either sign)


class Judged(NamedTuple):
    """One series judged: its change points, suspicions, thresholds (one per commit and one for the
    next) and the suspicion test to keep."""

    change_points: list[ChangePoint]
    suspects: list[Suspect]
    thresholds: list[float]
    track: SuspectTrack


# The fork children read the series from here (inherited memory, nothing pickled on the way in).
_FORK_INPUT: dict[tuple[str, str], SeriesInput] = {}


def _judge(bench: Benchmark, machine: str, results: list[Result], shas: list[str], levels: np.ndarray,
           cps: list[ChangePoint] | None = None, track: SuspectTrack | None = None, floor: float = 0.0,
           difference: bool = False) -> Judged:
    """A series' change points (computed from `results` unless given), suspicions and per-commit
    noise thresholds (one more at the end: what the next commit will need), the last two only for
    the commits after `track` when it still matches (`ci.verdicts.judge_levels`); `floor` is the
    series' threshold from the project; `difference`: judged by difference (a series at or
    through zero, its `levels` of either sign)."""
    if cps is None:
        cps = change_points(results, floor=floor)
    found, thresholds, track = judge_levels(bench, machine, shas, levels, cps, track=track, floor=floor,
                                            difference=difference)
    return Judged(cps, found, thresholds.tolist(), track)


def _judge_chunk(keys: list[tuple[str, str]]) -> list[tuple[tuple[str, str], Judged]]:
    return [(k, _judge(*_FORK_INPUT[k])) for k in keys]


def _judge_all(
    inputs: dict[tuple[str, str], SeriesInput],
) -> dict[tuple[str, str], Judged]:
    """Change points (`ci.verdicts.change_points`, where not already known), suspicions and noise
    thresholds of every series, over all CPUs this process may use.

    Computed here, change points were most of a full render's CPU (5.4 ms per 1,000-commit series
    on an idle box, 2026-11-29; a store that keeps states now gives them, docs/performance.md
    "Dashboard render"); the work is independent per series, so it is split across forked workers;
    without fork (macOS/Windows), for few series, or when the previous render's tracks leave only
    the new commits to judge (0.1 s for 500 series after one commit, 2026-12-02) it runs here.
    """
    global _FORK_INPUT
    keys = sorted(inputs)
    workers = fork_workers(sum(inputs[k].track is None for k in keys), _PARALLEL_MIN_SERIES)
    if workers == 1:
        return {k: _judge(*inputs[k]) for k in keys}
    _FORK_INPUT = inputs
    try:
        parts = fork_map(_judge_chunk, [keys[i::workers] for i in range(workers)], workers,
                         names=lambda chunk: (f"{key} on {machine}" for key, machine in chunk),
                         lost="series not judged (change points, suspicions)")
    finally:
        _FORK_INPUT = {}
    return {k: out for part in parts for k, out in part}


def _job_moves(inputs: dict[tuple[str, str], SeriesInput], found: dict[tuple[str, str], Judged]
               ) -> dict[str, dict[str, JobMove]]:
    """Per machine, the commits with a suspicion at which its whole job moved (`ci.verdicts.job_moves`),
    read from every series of the machine judged by ratio."""
    by_machine: dict[str, list[tuple[str, str]]] = {}
    for key, given in inputs.items():
        if not given.difference and key in found:
            by_machine.setdefault(given.machine, []).append(key)
    out: dict[str, dict[str, JobMove]] = {}
    for machine, keys in by_machine.items():
        candidates = {x.commit_sha for key in keys for x in found[key].suspects}
        if candidates:
            out[machine] = job_moves(((inputs[key].benchmark, inputs[key].shas, inputs[key].levels,
                                       np.asarray(found[key].thresholds)) for key in keys), candidates)
    return out


def _levels(s: Series, raw: list[Result] | None) -> tuple[list[str], np.ndarray, bool]:
    """The series' per-commit levels as `ci.verdicts` reads them, and whether they are judged by
    difference (`ci.verdicts.by_difference`: then every finite level, of either sign; else the
    positive ones): from the runs' medians when every commit has one result (no second median per
    result), else pooled from the raw samples."""
    if raw is None or len(set(s.shas)) == len(s.shas):
        return levels_to_judge(s.shas, s.values)
    return levels_to_judge(*commit_levels(raw, signed=True))


def track_name(benchmark_key: str, machine: str) -> str:
    """The name a series' `SuspectTrack` is kept under (`Snapshot.tracks`)."""
    return f"{benchmark_key}\0{machine}"


def add_history_verdicts(series: list[Series], raw: dict[tuple[str, str], list[Result]],
                         acks: dict[tuple[str, str], Acknowledgement], regressions: list[Regression],
                         stored: dict[tuple[str, str], list[ChangePoint]] | None = None,
                         tracks: dict[str, SuspectTrack] | None = None,
                         runs: tuple[dict[str, list[str]], dict[tuple[str, str], dict[str, str]]] | None = None,
                         floor_for: Callable[[str], float] | None = None,
                         failed: dict[tuple[str, str], set[str]] | None = None,
                         ) -> tuple[dict[str, SuspectTrack], list[AlertGroup]]:
    """Each series' change marks, suspicions and thresholds, and the change-point regressions;
    returns the series' suspicion tracks for the next snapshot and the crowds of change points
    (`ci.verdicts.group_changes` over `runs`: each machine's commits and their environments), whose
    members at a change of the recorded environment are labelled with it instead of left open.
    `failed`: the commits at which each series (key, machine) failed to run, which a regression's reason
    names where they lie between its step and the commit before it (`after_failures`)."""
    tracks = tracks or {}
    inputs: dict[tuple[str, str], SeriesInput] = {}
    for s in series:
        key = (s.benchmark.key, s.machine)
        if s.benchmark.kind == Kind.CORRECTNESS:
            continue  # the gates judge those, not steps
        if s.benchmark.kind == Kind.EXACT:  # no noise: a step wherever the value moved (ci.verdicts.exact)
            s.changes.extend(ChangeMark(s.shas[i], after / before if before else math.nan, Outcome.CHANGED)
                             for i, before, after in exact_steps(s.shas, s.values.tolist()))
            continue
        shas, levels, difference = _levels(s, raw.get(key))
        s.by_difference = difference
        if levels.size or bool(np.any(s.values <= 0)):  # at or through zero: steps by difference only
            inputs[key] = SeriesInput(s.benchmark, s.machine, raw.get(key, []), shas, levels,
                                      None if stored is None else stored.get(key, []), tracks.get(track_name(*key)),
                                      floor_for(s.benchmark.key) if floor_for is not None else 0.0, difference)
    found = _judge_all(inputs)
    moves = _job_moves(inputs, found)
    order, envs = runs if runs is not None else ({}, {})
    every = [cp for judged in found.values() for cp in judged.change_points]
    # How many series each machine measured at the commits of its change points (`AlertGroup.measured`).
    at: dict[str, set[str]] = defaultdict(set)
    for cp in every:
        at[cp.machine].add(cp.commit_sha)
    measured: dict[tuple[str, str], int] = defaultdict(int)
    for given in inputs.values():
        for sha in at.get(given.machine, set()).intersection(given.shas):
            measured[(given.machine, sha)] += 1
    groups = [g for g in group_changes(every, order, envs if runs else None, measured) if g.crowd]
    changed = {(cp.benchmark.key, cp.machine, cp.commit_sha): "; ".join(g.environment)
               for g in groups if g.environment_change for cp in g.members}
    kept: dict[str, SuspectTrack] = {}
    for s in series:
        key = (s.benchmark.key, s.machine)
        if key not in found:
            continue
        cps, s.suspects, thr, kept[track_name(*key)] = found[key]
        if s.suspects and moves.get(s.machine):
            s.suspects = hold_at_job_moves(s.suspects, inputs[key].levels, moves[s.machine])
        machine_commits = order.get(s.machine, [])
        if s.suspects and s.shas and s.shas[-1] in machine_commits:
            # A series that stopped reporting: its open suspicions expire, listed, never open for years.
            s.suspects = expire(s.suspects, s.shas[-1], machine_commits[machine_commits.index(s.shas[-1]) + 1:])
        s.thresholds = dict(zip(inputs[key].shas, thr[:-1], strict=True))
        s.threshold = thr[-1]
        for i, cp in enumerate(cps):
            s.changes.append(ChangeMark(cp.commit_sha, cp.ratio, cp.outcome))
            if cp.outcome in (Outcome.REGRESSED, Outcome.FAILED):
                regressions.append(Regression(
                    benchmark=s.benchmark, sha=cp.commit_sha, outcome=cp.outcome, ratio=cp.ratio,
                    base_value=cp.before, head_value=cp.after, source="change point", machines=(s.machine,),
                    reason="; ".join(filter(None, (
                        after_a_dip(cp, cps[i - 1] if i else None, s.benchmark.unit),
                        after_failures(cp, (failed or {}).get(key), machine_commits),
                        level_now(cp, cps[i + 1:], inputs[key].shas, inputs[key].levels, s.benchmark.unit)))),
                    ack=acks.get((s.benchmark.key, cp.commit_sha)),
                    fixed_by=recovery(cp.before, cp.after, cps[i + 1:], s.benchmark.direction),
                    environment=changed.get((s.benchmark.key, s.machine, cp.commit_sha), "")))
    return kept, groups


# A step back after an opposite one at most this many commits earlier is read against the level
# before both (the detector's span each side, `ci.verdicts.HistorySettings.span`).
DIP_COMMITS = 32


def after_failures(cp: Any, failed: set[str] | None, commits: Sequence[str]) -> str:
    """Where a series failed to run at commits between a step's commit and the one before it (its
    previous value): the step may have come at the first of them, and the commit it is shown at may have
    only brought the benchmark back. MDAnalysis' `time_contact_matrix(10000)` timed out at three commits
    and came back 20x slower at the commit that made it 2-37x faster elsewhere, blamed on it
    (2026-12-07). "" where it ran at every commit between."""
    if not failed:
        return ""
    at = {sha: i for i, sha in enumerate(commits)}
    lo, hi = at.get(cp.previous_sha), at.get(cp.commit_sha)
    if lo is None or hi is None:
        return ""
    between = [sha for sha in commits[lo + 1:hi] if sha in failed]
    if not between:
        return ""
    return (f"it failed to run at the {len(between)} commit(s) before this one, from {between[0][:10]}: the change "
            "may have come there")


def after_a_dip(cp: Any, previous: Any, unit: str) -> str:
    """What a regression that ends a short improvement (a dip of a time, a rise of a throughput) is
    against the level before that improvement; "" for any other. Against the dip alone, uxarray's
    `time_face_bounds` read "+202334.3%, 36.8 µs -> 74.4 ms" after a 7-commit stretch at 36.8 µs, where
    its level before was 65.8 ms (+13.1%), and 11 of 14 such steps of two real histories only put the
    level back where it was (2026-12-07)."""
    if (previous is None or previous.outcome != Outcome.IMPROVED or not 0 < cp.index - previous.index <= DIP_COMMITS
            or not (math.isfinite(previous.before) and math.isfinite(cp.after))):
        return ""
    net = cp.after / previous.before if previous.before > 0 < cp.after else math.nan
    return (f"{fmt_step(net, previous.before, cp.after)} against {fmt_value(previous.before, unit)} before the "
            f"{cp.index - previous.index}-commit improvement at {previous.commit_sha[:8]}, which it ends")


# The newest commits whose median is a regression's level now (`level_now`), and how far from the
# level after its step (a share of the step's own size, on a log scale) that level must be to be named.
NOW_COMMITS = 5
NOW_SHARE = 1 / 3


def level_now(cp: Any, later: Sequence[Any], shas: Sequence[str], levels: np.ndarray, unit: str) -> str:
    """Where the series is now, for a change point that no later one follows, when that is a third of
    the step or more away from the level after it; "" otherwise. A partial recovery too small for a
    step of its own left the step's size as the regression's: jaxion's +17.1% read so while its level
    had come back to +10.3% (2026-12-07), and a level that kept climbing read as the first step only.

    Args:
        cp: the change point (`before`, `after`, `commit_sha`).
        later: the series' change points after it (this says nothing when there is one).
        shas, levels: the series' commits and per-commit levels that `cp` was found on.
        unit: the benchmark's unit, for the value.

    Returns:
        E.g. "level now 2.25 s, +10.3% against before the step (median of the newest 5 commits)".
    """
    if later or cp.commit_sha not in shas or not (cp.before > 0 and cp.after > 0):
        return ""
    if levels.size - shas.index(cp.commit_sha) < NOW_COMMITS:  # the step's own commits are the level after it
        return ""
    now = float(np.median(levels[-NOW_COMMITS:]))
    if not now > 0 or abs(math.log(now / cp.after)) < NOW_SHARE * abs(math.log(cp.after / cp.before)):
        return ""
    return (f"level now {fmt_value(now, unit)}, {fmt_step(now / cp.before, cp.before, now)} against before the step "
            f"(median of the newest {NOW_COMMITS} commits)")


def recovery(before: float, after: float, later: Sequence[Any], direction: Direction) -> str:
    """The first later change point that brought the level back (at least three quarters of the way
    to the level the regression left), or "": a regression is fixed only when its level returns. A
    later step that leaves the level where the regression put it, or higher, fixes nothing; nor does
    a series' noise: on a noisy runner a threshold of 37% "closed" +10% regressions whose level
    stayed up (96 of 124 on a real GitHub-hosted history, 2026-12-05). A change-point regression is
    shown open (`Regression.is_open`, unless acknowledged) exactly when this is "" (its `fixed_by`).

    Args:
        before: the regression's level before its step (`ChangePoint.before`).
        after: its level after the step (`ChangePoint.after`).
        later: the series' change points after it, oldest first (anything with `after` and `commit_sha`).
        direction: which way is better for the series (unknown: read as lower is better).

    Returns:
        The sha of the change point that undid the step, or "".
    """
    sign = -1.0 if direction == Direction.HIGHER else 1.0
    if not (before > 0 and after > 0):
        # A series at or through zero (`ci.verdicts.absolute`): the same rule on its levels' difference.
        rise = sign * (after - before)
        if not (math.isfinite(rise) and rise > 0):
            return ""
        return next((cp.commit_sha for cp in later if sign * (cp.after - before) <= rise / 4), "")
    rise = sign * math.log(after / before)  # how far worse the regression took the level (> 0)
    for cp in later:
        if cp.after > 0 and sign * math.log(cp.after / before) <= rise / 4:
            return cp.commit_sha
    return ""


def gate_ok(value: float, gate: tuple[float, bool] | None) -> bool | None:
    """Whether a correctness value passes its gate.

    Args:
        value: the run's worst sample (see `Point`).
        gate: (limit, strictly-below) from GATES, or None.

    Returns:
        True/False, or None when there is no gate or no finite value.
    """
    if gate is None or not math.isfinite(value):
        return None
    return passes_gate(value, gate)
