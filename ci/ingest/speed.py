"""After an ingest: the jobs of each machine that ran on a host of another speed that the result files
do not record, kept as their own machine (`ci.verdicts.speed` says how they are found, and why).

A machine here is what the store keys series by (`ci.records.Machine`: asv machine name, environment,
recorded host). Its jobs that every series reads alike off the jobs around them, many and alike
enough to be a host (`ci.verdicts.speed.find_off_speed`), are given to a sibling machine, named
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

from ci.records import SHIFT_KEY, SPEED_KEY, Kind, Machine, MachineHistory
from ci.store import Store
from ci.text import printable
from ci.verdicts.speed import SpeedSettings, find_off_speed, job_shifts, off_speed_groups

_LABELS = {1: "slower", -1: "faster"}


def _family_key(m: Machine) -> tuple[str, str, tuple[tuple[str, str], ...]]:
    return m.machine_name, m.env_name, tuple(kv for kv in m.host if kv[0] != SPEED_KEY)


def _sibling(base: Machine, sign: int, shift: float) -> Machine:
    label = _LABELS[sign]
    env = f"{base.env_name}, " if base.env_name else ""
    return replace(
        base,
        name=f"{base.machine_name} [{env}{label} jobs]",
        asv_name=base.machine_name,
        host=tuple(sorted((*base.host, (SPEED_KEY, label)))),
        extra=tuple(sorted({**dict(base.extra), SHIFT_KEY: f"{np.expm1(shift) * 100:+.1f}%"}.items())),
    )


def _levels(store: Store, hists: Sequence[MachineHistory], order: dict[str, int]
            ) -> tuple[list[str], dict[str, str], np.ndarray] | None:
    """(run keys in history order, run key -> the machine holding it, series x runs levels) of a
    family's runs (None when the store changed while it was read): each series' level at a run is
    the median of its finite samples there (NaN where it has none or none above 0); correctness and
    exact series say nothing of a job's speed."""
    where: dict[str, str] = {}
    at: list[tuple[int, int, str]] = []
    offsets: dict[str, int] = {}
    for hist in hists:
        offsets[hist.machine] = len(at)
        shas = store.run_commits(hist.machine)
        if len(shas) != len(hist.runs):
            return None  # another writer added runs between the two reads: the next ingest decides
        for (run_key, _digest), sha in zip(hist.runs, shas, strict=True):
            where[run_key] = hist.machine
            at.append((order.get(sha, len(order)), len(at), run_key))
    ranked = sorted(range(len(at)), key=at.__getitem__)
    column = np.empty(len(at), dtype=np.int64)
    column[ranked] = np.arange(len(at))
    keys = [at[i][2] for i in ranked]
    rows: dict[str, int] = {}
    out_rows: list[np.ndarray] = []
    for hist in hists:
        base = offsets[hist.machine]
        for col in hist.series:
            if col.benchmark.kind in (Kind.CORRECTNESS, Kind.EXACT) or not col.counts:
                continue
            flat = np.frombuffer(col.samples, dtype=np.float64)
            counts = np.asarray(col.counts)
            if counts.min() > 0 and (counts == counts[0]).all() and np.isfinite(flat).all():
                med = np.median(flat.reshape(len(counts), int(counts[0])), axis=1)
            else:
                ends = np.cumsum(counts)
                med = np.array([np.median(p[np.isfinite(p)]) if np.isfinite(p).any() else np.nan
                                for p in (flat[e - c : e] for e, c in zip(ends, counts, strict=True))])
            i = rows.get(col.benchmark.key)
            if i is None:
                i = rows[col.benchmark.key] = len(out_rows)
                out_rows.append(np.full(len(keys), np.nan))
            with np.errstate(invalid="ignore"):
                out_rows[i][column[base + np.asarray(col.runs)]] = np.where(med > 0, med, np.nan)
    levels = np.vstack(out_rows) if out_rows else np.empty((0, len(keys)))
    return keys, where, levels


_SCAN = "speed scan "  # settings key prefix: a machine's job shifts as last read whole (`_unchanged_tail`)


def _scan_key(machine: str) -> str:
    return _SCAN + hashlib.sha256(machine.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _chain(runs: Sequence[tuple[str, str]]) -> str:
    h = hashlib.sha256()
    for run_key, digest in runs:
        h.update(f"{run_key}\0{digest}\n".encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def _save_scan(store: Store, machine: Machine, runs: Sequence[tuple[str, str]], shifts: np.ndarray) -> None:
    """Keep a machine's job shifts with the runs they were read from, for the next ingest's
    `_unchanged_tail` (a cache: a store that cannot keep it reads the machine whole next time)."""
    if len(runs) != shifts.size:
        return
    value = json.dumps({"runs": len(runs), "chain": _chain(runs),
                        "shifts": base64.b64encode(np.asarray(shifts, dtype="<f8").tobytes()).decode()})
    try:
        store.save_setting(_scan_key(machine.name), value)
    except Exception:  # noqa: BLE001 - a cache
        pass


def _unchanged_tail(store: Store, machine: Machine, k: SpeedSettings) -> bool:
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
    hists = store.series_columns(machine=machine.name, runs_after={machine.name: start})
    if len(hists) != 1 or len(hists[0].runs) < covered or _chain(hists[0].runs[:covered]) != chain:
        return False  # runs were added before the kept ones, replaced or moved: read it whole
    read = _levels(store, hists, {})
    if read is None:
        return False
    _keys, _where, levels = read
    tail = job_shifts(levels[:, start:], k)[first_new - start :]  # the runs whose neighbours changed
    shifts = np.concatenate((old[:first_new], tail))
    if off_speed_groups(shifts, k):
        return False
    _save_scan(store, machine, hists[0].runs, shifts)
    return True


def split_off_speed_jobs(store: Store, settings: SpeedSettings | None = None) -> tuple[str, ...]:
    """Give each machine's off-speed jobs to a sibling machine, and jobs no longer off-speed back.

    Args:
        store: a store after an ingest.
        settings: the rule's knobs (`ci.verdicts.speed.SpeedSettings`).

    Returns:
        One note per machine whose jobs moved (empty when none did).
    """
    k = settings or SpeedSettings()
    machines = store.machines()
    families: dict[tuple[str, str, tuple[tuple[str, str], ...]], list[Machine]] = {}
    for m in machines:
        families.setdefault(_family_key(m), []).append(m)
    order: dict[str, int] | None = None
    every: dict[str, MachineHistory] = {}
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
        if len(members) == 1 and _unchanged_tail(store, base, k):
            continue
        whole.append((base, members))
    if len(whole) > 1:  # one scan of the store, not one per machine
        every = {h.machine: h for h in store.series_columns()}
    for base, members in whole:
        if order is None:
            order = {c.sha: i for i, c in enumerate(store.commits())}
        if len(whole) > 1:
            hists = [every[m.name] for m in members if m.name in every]
        else:
            hists = [h for m in members for h in store.series_columns(machine=m.name)]
        read = _levels(store, hists, order)
        if read is None:
            continue
        keys, where, levels = read
        groups = find_off_speed(levels, k) if levels.shape[0] >= k.min_series else []
        if not groups and len(members) == 1:
            _save_scan(store, base, hists[0].runs if hists else (), job_shifts(levels, k))
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
            label = _LABELS[1 if g.shift > 0 else -1]
            name = next((n for n, speed in now.items() if speed == label), _sibling(base, 1, 0).name)
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
