"""After an ingest: the jobs of each machine that ran on a host of another speed that the result files
do not record, kept as their own machine (`ci.ingest.speed_rule` says how they are found, and why).

A machine here is what the store keys series by (`ci.records.Machine`: asv machine name, environment,
recorded host). Its jobs that every series reads alike off the jobs around them, many and alike
enough to be a host (`ci.ingest.speed_rule.find_off_speed`), are given to a sibling machine, named
"<machine> [<environment>, slower jobs]" (or "faster jobs"), whose host is the recorded one plus
`speed`; the other jobs stay. The decision is read again from the whole family (the machine and
its siblings, in history order) after every ingest that wrote a run, so a job moves back when later
jobs show that its level held (a step of the history, not another host), and a history ingested in
any order ends the same. The detector's kept states and the dashboard's cache follow by themselves:
both check a machine's runs against what they hold (`ci.verdicts.history`, `ci.site.snapshot`).
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from ci.ingest.speed_rule import SpeedSettings, find_off_speed, job_shifts, off_speed_groups
from ci.records import SHIFT_KEY, SPEED_KEY, Kind, Machine, run_chain
from ci.store import RunValues, Store
from ci.text import printable

_LABELS = {1: "slower", -1: "faster"}


def _family_key(m: Machine) -> tuple[str, str, tuple[tuple[str, str], ...]]:
    return m.machine_name, m.env_name, tuple(kv for kv in m.host if kv[0] != SPEED_KEY)


def _sibling(base: Machine, sign: int, shift: float) -> Machine:
    label = _LABELS[sign]
    if base.name.startswith(f"{base.machine_name} [") and base.name.endswith("]"):
        name = f"{base.name[:-1]}, {label} jobs]"  # "runner [env, host 2]" -> "runner [env, host 2, slower jobs]"
    else:
        name = f"{base.machine_name} [{base.env_name + ', ' if base.env_name else ''}{label} jobs]"
    return replace(
        base,
        name=name,
        asv_name=base.machine_name,
        host=tuple(sorted((*base.host, (SPEED_KEY, label)))),
        extra=tuple(sorted({**dict(base.extra), SHIFT_KEY: f"{np.expm1(shift) * 100:+.1f}%"}.items())),
    )


def _levels(reads: Sequence[tuple[str, RunValues]], order: dict[str, int], skip: set[str]
            ) -> tuple[list[str], dict[str, str], np.ndarray]:
    """(run keys in history order, run key -> the machine holding it, series x runs levels) of a
    family's runs from each machine's `RunValues`, the series of `skip` left out (correctness and
    exact series say nothing of a job's speed)."""
    at: list[tuple[int, int, str]] = []
    where: dict[str, str] = {}
    for machine, got in reads:
        for (run_key, _digest), sha in zip(got.runs, got.commit_shas, strict=True):
            where[run_key] = machine
            at.append((order.get(sha, len(order)), len(at), run_key))
    ranked = sorted(range(len(at)), key=at.__getitem__)
    column = np.empty(len(at), dtype=np.int64)
    column[ranked] = np.arange(len(at))
    keys = [at[i][2] for i in ranked]
    rows: dict[str, int] = {}
    for _machine, got in reads:
        for key in got.series:
            if key not in skip:
                rows.setdefault(key, len(rows))
    levels = np.full((len(rows), len(keys)), np.nan)
    offset = 0
    for _machine, got in reads:
        cols = column[offset : offset + len(got.runs)]
        for i, key in enumerate(got.series):
            if key in rows:
                levels[rows[key], cols] = got.levels[i]
        offset += len(got.runs)
    with np.errstate(invalid="ignore"):
        levels[~(levels > 0)] = np.nan
    return keys, where, levels


_SCAN = "speed scan "  # settings key prefix: a machine's job shifts as last read whole (`_unchanged_tail`)


def _scan_key(machine: str) -> str:
    return _SCAN + hashlib.sha256(machine.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _save_scan(store: Store, machine: Machine, runs: Sequence[tuple[str, str]], shifts: np.ndarray) -> None:
    """Keep a machine's job shifts with the runs they were read from, for the next ingest's
    `_unchanged_tail` (a cache: a store that cannot keep it reads the machine whole next time)."""
    if len(runs) != shifts.size:
        return
    value = json.dumps({"runs": len(runs), "chain": run_chain(runs)[-1],
                        "shifts": base64.b64encode(np.asarray(shifts, dtype="<f8").tobytes()).decode()})
    try:
        store.save_setting(_scan_key(machine.name), value)
    except Exception:  # noqa: BLE001 - a cache
        pass


def _unchanged_tail(store: Store, machine: Machine, k: SpeedSettings, skip: set[str]) -> bool:
    """Whether a machine without a sibling still has no group of off-speed jobs, read from its new
    runs alone: its job shifts kept by the last whole read (`_save_scan`) cover a prefix of its runs,
    the runs after them (and the `neighbours` before, whose shifts the new ones change) are read, and
    the whole vector of shifts, kept and new, gives no group. Exactly the whole read's answer, at
    the cost of the new runs: the shift of a run depends on its `neighbours` each side alone, and
    without a group none is set aside. The kept shifts move on to cover the new runs."""
    text = store.setting(_scan_key(machine.name))
    if not text:
        return False
    try:
        kept = json.loads(text)
        old = np.frombuffer(base64.b64decode(kept["shifts"]), dtype="<f8")
        covered, chain = int(kept["runs"]), str(kept["chain"])
    except (ValueError, KeyError, TypeError):
        return False
    if old.size != covered or not covered:
        return False
    start, first_new = max(0, covered - 2 * k.neighbours), max(0, covered - k.neighbours)
    got = store.run_values(machine.name, runs_after=start)
    if len(got.runs) < covered or run_chain(got.runs[:covered])[-1] != chain:
        return False  # runs were added before the kept ones, replaced or moved: read it whole
    _keys, _where, levels = _levels([(machine.name, got)], {}, skip)
    tail = job_shifts(levels[:, start:], k)[first_new - start :]  # the runs whose neighbours changed
    shifts = np.concatenate((old[:first_new], tail))
    if off_speed_groups(shifts, k):
        return False
    _save_scan(store, machine, got.runs, shifts)
    return True


def split_off_speed_jobs(store: Store, settings: SpeedSettings | None = None) -> tuple[str, ...]:
    """Give each machine's off-speed jobs to a sibling machine, and jobs no longer off-speed back.

    Args:
        store: a store after an ingest.
        settings: the rule's knobs (`ci.ingest.speed_rule.SpeedSettings`).

    Returns:
        One note per machine whose jobs moved (empty when none did).
    """
    k = settings or SpeedSettings()
    machines = store.machines()
    families: dict[tuple[str, str, tuple[tuple[str, str], ...]], list[Machine]] = {}
    for m in machines:
        families.setdefault(_family_key(m), []).append(m)
    order: dict[str, int] | None = None
    skip = {b.key for b in store.benchmarks() if b.kind in (Kind.CORRECTNESS, Kind.EXACT)}
    whole: list[tuple[Machine, list[Machine]]] = []  # the families read whole
    notes = []
    for members in families.values():
        bases = [m for m in members if not m.speed]
        if len(bases) != 1:
            continue  # a sibling whose machine is gone, or two rows of one host: nothing to decide
        base = bases[0]
        total = sum(len(store.run_commits(m.name)) for m in members)
        if total < 2 * k.min_jobs:
            continue
        if len(members) == 1 and _unchanged_tail(store, base, k, skip):
            continue
        whole.append((base, members))
    for base, members in whole:
        if order is None:
            order = {c.sha: i for i, c in enumerate(store.commits())}
        reads = [(m.name, store.run_values(m.name)) for m in members]
        keys, where, levels = _levels(reads, order, skip)
        groups = find_off_speed(levels, k) if levels.shape[0] >= k.min_series else []
        if not groups and len(members) == 1:
            _save_scan(store, base, reads[0][1].runs, job_shifts(levels, k))
        target = {key: base for key in keys}
        for g in groups:
            sibling = _sibling(base, 1 if g.shift > 0 else -1, g.shift)
            for j in g.runs:
                target[keys[j]] = sibling
        siblings = {m.name: m for m in members if m is not base}
        speed_of = {m.name: m.speed for m in members}
        moves = {key: m for key, m in target.items() if speed_of.get(where[key]) != m.speed}
        moved = store.move_runs(moves) if moves else 0
        if not moved:
            continue
        now = {m.name: m.speed for m in store.machines() if _family_key(m) == _family_key(base)}
        for g in groups:
            sibling = _sibling(base, 1 if g.shift > 0 else -1, g.shift)
            name = next((n for n, speed in now.items() if speed == sibling.speed), sibling.name)
            notes.append(printable(
                f"note: machine {base.name!r}: {len(g.runs)} of {g.read} jobs read every series "
                f"{abs(np.expm1(g.shift)) * 100:.1f}% {'higher' if g.shift > 0 else 'lower'} than the jobs around them "
                f"(the median over its series, before and after each job), and the result files record one host: "
                f"they are kept as machine {name!r}, so that neither host's series carries the other's level "
                "(jobs of a shared runner on hardware of another speed?). To have such hosts named, record each "
                "one's CPU (`asv machine` on the runner) or give each its own asv machine name."))  # fmt: skip
        if not groups and siblings:
            notes.append(printable(
                f"note: machine {base.name!r}: no group of its jobs reads off the others any longer; the jobs kept "
                f"apart as {', '.join(repr(n) for n in sorted(siblings))} are its own again"))  # fmt: skip
    return tuple(notes)
