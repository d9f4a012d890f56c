"""Exact series (`ci.records.Kind.EXACT`): values the suite declares the same on every run and machine
(launches per forward, registers and spills, kept tokens, FLOPs). No noise model, no test, no threshold:

- A/B: a series is UNCHANGED when head's value equals base's and CHANGED otherwise, whatever the size
  (`exact_verdicts`);
- history: the change points are exactly the commits where the value differs from the previous measured
  commit's (`exact_steps`);
- gates (FAILED, so the check fails; by unit, as the correctness gates go by theirs):
  - "spilled bytes": a shipping kernel spills on some architecture (head's value above 0);
  - "launches": a forward launches more than its dense sibling (the series whose parameters are the same
    but one, which reads "dense") in the same mode, and more over dense than on base: today every pruned
    forward launches more than dense (each stage adds its decision and its pack), so the gate holds that
    excess where it is; a pruned forward that gets closer to dense, or below it, passes;
  - "tokens": kept tokens changed although no "version" series beside it (same benchmark file and machine,
    its parameters a subset of the tokens series') changed: a pruner's decisions change only with a bump of
    its declared version (`pruners.Pruner.decisions_version`, which the suite measures).

Pure functions over `ci.records.Result`; no store.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from ci.records import (
    FAILED_BOTH,
    FAILED_ON_HEAD,
    MISSING_ON_HEAD,
    NEW_SERIES,
    NO_BASE_SAMPLES,
    Benchmark,
    Kind,
    Outcome,
    Result,
    Verdict,
)

SPILL_UNIT = "spilled bytes"
LAUNCH_UNIT = "launches"
TOKEN_UNIT = "tokens"
VERSION_UNIT = "version"
DENSE = "dense"
# Why a series' samples were not one value: an exact series measured twice must agree with itself.
NOT_EXACT = "not exact: the samples of one side differ"


def is_exact(benchmark: Benchmark) -> bool:
    """Whether the series is compared exactly (its benchmark declared `exact`)."""
    return benchmark.kind == Kind.EXACT


def exact_value(results: Sequence[Result]) -> float | None:
    """The one value of an exact series' results (their finite samples); None when there is none, NaN when
    they disagree."""
    values = {s for r in results for s in r.samples if math.isfinite(s)}
    if not values:
        return None
    return values.pop() if len(values) == 1 else math.nan


def show(value: float) -> str:
    """An exact value as text: an integer without a decimal point, else up to 6 significant digits."""
    if not math.isfinite(value):
        return "n/a"
    return str(int(value)) if value == int(value) and abs(value) < 1e15 else f"{value:.6g}"


def series_label(benchmark: Benchmark) -> str:
    """The series as a reader names it: its parameter values joined by spaces (the benchmark's name where it
    has none)."""
    if benchmark.params:
        return " ".join(str(v).strip("'\"") for _, v in benchmark.params)
    return benchmark.name


def measure(benchmark: Benchmark) -> str:
    """What the series measures: its method name without `track_`, underscores as spaces."""
    method = benchmark.name.rsplit(".", 1)[-1]
    return method.removeprefix("track_").replace("_", " ")


def _ratio(base: float, head: float) -> float:
    if base == head:
        return 1.0
    return head / base if base > 0 and head >= 0 else math.nan


@dataclass
class _Sides:
    """The exact series of a comparison: each one's value on base and on head, and its benchmark."""

    base: dict[tuple[str, str], float | None] = field(default_factory=dict)
    head: dict[tuple[str, str], float | None] = field(default_factory=dict)
    benches: dict[tuple[str, str], Benchmark] = field(default_factory=dict)

    def value(self, side: str, key: tuple[str, str]) -> float | None:
        return (self.base if side == "base" else self.head).get(key)

    def dense_of(self, key: tuple[str, str]) -> tuple[str, str] | None:
        """The "launches" series `key`'s are held against: the same benchmark and machine, its parameters with
        one that is not "dense" set to "dense" (the first such series measured), or None."""
        machine, bench = key[0], self.benches[key]
        for i, (name, value) in enumerate(bench.params):
            if value == DENSE:
                continue
            swapped = (*bench.params[:i], (name, DENSE), *bench.params[i + 1:])
            other = (machine, Benchmark(bench.name, swapped, bench.unit, bench.direction, bench.kind).key)
            if other in self.benches:
                return other
        return None

    def over_dense(self, side: str, key: tuple[str, str]) -> float | None:
        """How many launches `key` has over its dense sibling on one side, or None."""
        dense = self.dense_of(key)
        mine = self.value(side, key)
        theirs = None if dense is None else self.value(side, dense)
        if mine is None or theirs is None or not (math.isfinite(mine) and math.isfinite(theirs)):
            return None
        return mine - theirs

    def claims(self, key: tuple[str, str]) -> list[tuple[str, float | None, float | None]]:
        """The "version" series that can claim a change of `key`: the same benchmark file and machine, their
        parameters a subset of its own; (name, base value, head value)."""
        machine, bench = key[0], self.benches[key]
        mine = set(bench.params)
        return [(b.name.rsplit(".", 1)[-1], self.base.get(k), self.head.get(k)) for k, b in self.benches.items()
                if k[0] == machine and b.unit == VERSION_UNIT and b.suite == bench.suite
                and b.params and set(b.params) <= mine]


def _series(results: Sequence[Result]) -> dict[tuple[str, str], list[Result]]:
    out: dict[tuple[str, str], list[Result]] = {}
    for r in results:
        if is_exact(r.benchmark):
            out.setdefault((r.machine, r.benchmark.key), []).append(r)
    return out


def exact_verdicts(base: Sequence[Result], head: Sequence[Result]) -> list[Verdict]:
    """One verdict per exact series of `base` and `head` (other series are ignored), gates applied.

    Args:
        base: results of the base commit (any machines; a series pairs within its machine).
        head: results of the head commit; a sample-less result is a crash (`results_with_crashes`).

    Returns:
        Verdicts sorted by series key then machine: UNCHANGED, CHANGED (reason "before -> after unit"),
        FAILED (a gate, or a crash on head), or, for a series on one side only, as the A/B verdicts say it
        (new on head: UNCHANGED "new series"; missing on head: INCONCLUSIVE).
    """
    b, h = _series(base), _series(head)
    sides = _Sides({k: exact_value(rs) for k, rs in b.items()}, {k: exact_value(rs) for k, rs in h.items()},
                   {k: rs[0].benchmark for k, rs in (*b.items(), *h.items())})
    out = []
    for key in sorted(b.keys() | h.keys(), key=lambda k: (k[1], k[0])):
        machine = key[0]
        b_rs, h_rs = b.get(key, []), h.get(key, [])
        bench = (h_rs or b_rs)[0].benchmark
        base_sha = b_rs[0].commit_sha if b_rs else ""
        head_sha = h_rs[0].commit_sha if h_rs else ""
        vb, vh = sides.base.get(key), sides.head.get(key)
        fb = math.nan if vb is None else vb

        def verdict(outcome: Outcome, reason: str, base_value: float = fb, head_value: float | None = vh,
                    bench: Benchmark = bench, base_sha: str = base_sha, head_sha: str = head_sha,
                    machine: str = machine) -> Verdict:
            hv = math.nan if head_value is None else head_value
            ratio = _ratio(base_value, hv) if math.isfinite(base_value) and math.isfinite(hv) else math.nan
            return Verdict(benchmark=bench, outcome=outcome, base_value=base_value, head_value=hv, ratio=ratio,
                           threshold=0.0, base_sha=base_sha, head_sha=head_sha, reason=reason, machine=machine)

        if not h_rs:
            out.append(verdict(Outcome.INCONCLUSIVE, MISSING_ON_HEAD))
        elif vh is None:  # crashed on head (a sample-less result)
            if b_rs and vb is None:
                out.append(verdict(Outcome.FAILED, FAILED_BOTH))
            else:
                out.append(verdict(Outcome.FAILED, FAILED_ON_HEAD))
        elif (gate := _gate(sides, key)) is not None:
            out.append(verdict(Outcome.FAILED, gate))
        elif not b_rs:
            out.append(verdict(Outcome.UNCHANGED, NEW_SERIES))
        elif vb is None:
            out.append(verdict(Outcome.INCONCLUSIVE, NO_BASE_SAMPLES))
        elif math.isnan(vb) or math.isnan(vh):
            out.append(verdict(Outcome.INCONCLUSIVE, NOT_EXACT))
        else:
            note = _note(sides, key)
            if _version_changed(b_rs, h_rs):
                note = f" (the benchmark's version changed){note}"
            if vb == vh:
                out.append(verdict(Outcome.UNCHANGED, f"{show(vh)} {bench.unit}{note}"))
            else:
                out.append(verdict(Outcome.CHANGED, moved_text(vb, vh, bench.unit) + note))
    return out


def moved_text(before: float, after: float, unit: str) -> str:
    """"before -> after unit", as a CHANGED verdict's reason starts."""
    return f"{show(before)} -> {show(after)} {unit}"


def _versions(rs: Sequence[Result]) -> set[str]:
    return {r.benchmark_version for r in rs if r.benchmark_version is not None}


def _version_changed(b_rs: Sequence[Result], h_rs: Sequence[Result]) -> bool:
    vb, vh = _versions(b_rs), _versions(h_rs)
    return bool(vb and vh and vb != vh)


def _gate(sides: _Sides, key: tuple[str, str]) -> str | None:
    """Why head's value of an exact series fails its gate, or None."""
    bench = sides.benches[key]
    vb, vh = sides.base.get(key), sides.head.get(key)
    if vh is None or not math.isfinite(vh):
        return None
    if bench.unit == SPILL_UNIT and vh > 0:
        return f"gate: spills {show(vh)} bytes (no shipping kernel may spill on any architecture)"
    if bench.unit == LAUNCH_UNIT:
        over = sides.over_dense("head", key)
        if over is not None and over > 0:
            before = sides.over_dense("base", key)
            if before is None:
                return f"gate: {show(over)} more than dense in the same mode (a new forward may not launch more)"
            if over > before:
                return (f"gate: {show(over)} more than dense in the same mode, {show(before)} on base (a forward may "
                        "not launch more over dense than before)")
    if bench.unit == TOKEN_UNIT and vb is not None and math.isfinite(vb) and vb != vh:
        if not any(b != a for _, b, a in sides.claims(key)):
            return ("gate: kept tokens changed but the pruner's code did not claim it (bump its `decisions_version` "
                    "in the change that means to change its decisions)")
    return None


def _note(sides: _Sides, key: tuple[str, str]) -> str:
    """What a passing gate says about the series (its launches over dense; a claimed token change)."""
    bench = sides.benches[key]
    if bench.unit == LAUNCH_UNIT:
        over = sides.over_dense("head", key)
        if over is not None and over > 0:
            before = sides.over_dense("base", key)
            was = f", {show(before)} on base" if before is not None else ""
            return f" ({show(over)} more than dense{was})"
    if bench.unit == TOKEN_UNIT:
        for name, b, a in sides.claims(key):
            if b != a:
                shown_b, shown_a = (show(math.nan if x is None else x) for x in (b, a))
                return f" (claimed: {name} {shown_b} -> {shown_a})"
    return ""


def exact_steps(shas: Sequence[str], values: Sequence[float]) -> list[tuple[int, float, float]]:
    """Where an exact series moved: (index, value before, value after) for every commit whose value differs
    from the previous commit that has one (NaN values: not measured there, skipped).

    Args:
        shas: commits in history order (only their count and order matter here).
        values: one value per commit.

    Returns:
        Steps oldest first.
    """
    out = []
    last = None
    for i, v in enumerate(values[: len(shas)]):
        if not math.isfinite(v):
            continue
        if last is not None and v != last:
            out.append((i, last, float(v)))
        last = float(v)
    return out
