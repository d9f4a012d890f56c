"""Correctness gates: a pruned model that disagrees with its reference fails, whatever the timing says.

The asv suite reports correctness as `track_*` results of kind `Kind.CORRECTNESS`:

- unit "max abs diff": max |logit difference| against the fp32 dense reference; fails at >= 0.004
  (the project's correctness tolerance, the same as the end-to-end checks' in docs/performance.md);
- unit "top-1 agreement": fraction of images whose top-1 class matches the reference; any
  disagreement (< 1.0) fails.

Gates look at the worst sample, not the median: one bad repeat is a real disagreement.

The one home of a gate's rules (the PR verdict here, the dashboard's charts and pages): which series
has which gate (`gate_of`), the value it judges (`gate_value`) and whether that value passes
(`passes_gate`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple, TypeVar, overload

import numpy as np

from ci.records import Benchmark, Kind, Outcome, Result, Verdict

MAX_ABS_DIFF_LIMIT = 0.004
TOP1_AGREEMENT_LIMIT = 1.0


class Gate(NamedTuple):
    """A correctness gate: its limit, and True when the value must stay strictly below it (else at
    or above it)."""

    limit: float
    below: bool


# unit -> its gate
GATES: dict[str, Gate] = {
    "max abs diff": Gate(MAX_ABS_DIFF_LIMIT, True),
    "top-1 agreement": Gate(TOP1_AGREEMENT_LIMIT, False),
}
# unit -> human description of a pass
_PASSES = {"max abs diff": "max |logit diff| < {lim:g}", "top-1 agreement": "top-1 agreement = {lim:g}"}

_T = TypeVar("_T")


def gate_of(benchmark: Benchmark) -> Gate | None:
    """The gate of a series: its unit's, for a correctness series; None for any other (or a unit
    without one)."""
    return GATES.get(benchmark.unit) if benchmark.kind == Kind.CORRECTNESS else None


def gate_value(gate: tuple[float, bool], smallest: _T, largest: _T) -> _T:
    """The value a gate judges, given the smallest and the largest sample (each a number, or a column
    of them per run): the worst one, the largest where the value must stay below the limit."""
    return largest if gate[1] else smallest


@overload
def passes_gate(value: float, gate: tuple[float, bool]) -> bool: ...
@overload
def passes_gate(value: np.ndarray, gate: tuple[float, bool]) -> np.ndarray: ...
def passes_gate(value: float | np.ndarray, gate: tuple[float, bool]) -> bool | np.ndarray:
    """Whether `value` (or each of a column of values) passes `gate` (limit, strictly-below). A value
    that is not finite does not pass; whether it fails is the caller's to say."""
    limit, below = gate
    return value < limit if below else value >= limit


def correctness_gates(results: Sequence[Result]) -> list[Verdict]:
    """Judge every correctness result; other kinds are ignored, so all results may be passed.

    Args:
        results: results of one commit (usually the PR head); only `Kind.CORRECTNESS` ones are read.

    Returns:
        One Verdict per correctness series, commit and machine (its results pooled), sorted by
        series key then machine:
        FAILED (limit crossed, or a result without a finite sample: a correctness check that did
        not run is not a pass) or UNCHANGED. `head_value` is the worst sample, `threshold` the
        limit, `ratio` worst/limit, `reason` says why.

    Raises:
        TypeError: `results` is not a sequence of Result.
        ValueError: a correctness result has a unit with no gate.
    """
    if isinstance(results, (str, bytes)) or not isinstance(results, Sequence):
        raise TypeError(f"results must be a sequence of Result, got {type(results).__name__}")
    # One verdict per (series, commit, machine): the store keeps one per key, so several results
    # of a series on one machine (reruns, several asv files, a crashed point) are judged together,
    # while each machine sharing the history gets its own verdict.
    groups: dict[tuple[str, str, str], list[Result]] = {}
    for r in results:
        if not isinstance(r, Result):
            raise TypeError(f"results must contain only Result records, got {type(r).__name__}")
        if r.benchmark.kind != Kind.CORRECTNESS:
            continue
        if r.benchmark.unit not in GATES:
            raise ValueError(
                f"correctness series {r.benchmark.key!r} has unit {r.benchmark.unit!r}; "
                f"gates exist for {sorted(GATES)}"
            )
        groups.setdefault((r.benchmark.key, r.commit_sha, r.machine), []).append(r)
    verdicts: list[Verdict] = []
    for (_key, sha, machine), rs in groups.items():
        bench = rs[0].benchmark
        gate = GATES[bench.unit]
        limit, passes = gate.limit, _PASSES[bench.unit]
        finite = [s for r in rs for s in r.samples if math.isfinite(s)]
        n_empty = sum(not any(math.isfinite(s) for s in r.samples) for r in rs)
        if not finite:
            outcome, worst = Outcome.FAILED, math.nan
            reason = "no finite sample: the correctness check failed to run or produced NaN"
        else:
            worst = float(gate_value(gate, min(finite), max(finite)))
            bad = not passes_gate(worst, gate)
            outcome = Outcome.FAILED if bad or n_empty else Outcome.UNCHANGED
            verb = "fails" if bad else "passes"
            reason = f"{bench.unit} = {worst:.6g} ({verb}: needs {passes.format(lim=limit)})"
            if bad and len(finite) > 1:
                n_bad = sum(not passes_gate(s, gate) for s in finite)
                reason += f"; {n_bad} of {len(finite)} samples fail"
            if n_empty:
                reason += f"; {n_empty} of {len(rs)} runs had no finite sample (failed to run or produced NaN)"
        verdicts.append(
            Verdict(
                benchmark=bench, outcome=outcome, base_value=math.nan, head_value=worst,
                ratio=worst / limit if math.isfinite(worst) else math.nan,
                threshold=limit, head_sha=sha, reason=reason, machine=machine,
            )
        )
    return sorted(verdicts, key=lambda v: (v.benchmark.key, v.machine))
