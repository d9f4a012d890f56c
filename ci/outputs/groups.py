"""Timing verdicts by what the reader should do about them (`group_verdicts`: regressed, unconfirmed
slowdowns, withheld, faster, ...) and the one-line verdict of a comparison (`headline`): what the PR
comment and the terminal table (`ci.outputs.table`) both say.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from ci.records import (
    FAILED_BOTH,
    MISSING_MACHINE,
    MISSING_ON_HEAD,
    NEW_SERIES,
    NOT_ON_BASE,
    UNCONFIRMED_SLOWDOWN,
    UNKNOWN_DIRECTION,
    WITHHELD_OTHER_JOB,
    Outcome,
    Verdict,
    is_worse,
)
from ci.verdicts import VerdictSettings
from ci.verdicts.decide import ASV_RULE, SIZE_ONLY, TOO_FEW

_CORRECTION_NAMES = {"bh": "Benjamini-Hochberg", "holm": "Holm", "bonferroni": "Bonferroni"}


def _sort_key(v: Verdict) -> tuple[float, str]:
    # Biggest change first within a section.
    size = abs(math.log(v.ratio)) if math.isfinite(v.ratio) and v.ratio > 0 else -1.0
    return (-size, v.benchmark.key)


def _past_threshold(v: Verdict) -> bool:
    """Inconclusive, but the ratio moved past the series' threshold (asv's "~")."""
    return (v.outcome == Outcome.INCONCLUSIVE and math.isfinite(v.ratio) and v.ratio > 0
            and abs(v.ratio - 1) > (v.threshold if math.isfinite(v.threshold) else 0))


def _unconfirmed(v: Verdict) -> bool:
    """An unconfirmed slowdown past the threshold (of the median, or of the tail the verdict names):
    worth a look. An unconfirmed speed-up is not an alarm (it is listed, folded, with the other
    inconclusive series)."""
    return v.reason.startswith(UNCONFIRMED_SLOWDOWN) or (
        _past_threshold(v) and is_worse(v.benchmark.direction, v.ratio) is True)


def _reaches_regression(v: Verdict) -> bool:
    """The ratio's interval reaches past the series' threshold on the slow side (a regression is not
    ruled out, whatever the median ratio says)."""
    if not (math.isfinite(v.ci_low) and math.isfinite(v.ci_high) and math.isfinite(v.threshold)):
        return False
    if is_worse(v.benchmark.direction, 2.0):  # lower is better: a ratio above 1 is slower
        return v.ci_high > 1 + v.threshold
    return v.ci_low < 1 / (1 + v.threshold)


def _faster(v: Verdict) -> bool:
    """An inconclusive speed-up: the ratio moved the good way (a series of unknown direction has
    none) and the interval does not reach a regression. Listed, folded; never an alarm."""
    return (math.isfinite(v.ratio) and v.ratio > 0 and v.ratio != 1
            and is_worse(v.benchmark.direction, v.ratio) is False and not _reaches_regression(v))


def unknown_direction(v: Verdict) -> bool:
    """A change the verdict could not call better or worse because the benchmark declares no
    direction: the verdict's reason says so, at its start or after the change it describes (a
    change judged by its size: "... (unknown direction: ...)")."""
    return UNKNOWN_DIRECTION in v.reason


def group_counts(groups: Mapping[str, Sequence[Verdict]], gates_failed: int) -> dict[str, int]:
    """What `headline` reads: the series per group (`group_verdicts`), "gates_failed", and "failed_both"
    (the failed ones that crashed on base too)."""
    n = {k: len(rows) for k, rows in groups.items()}
    n["gates_failed"] = gates_failed
    n["failed_both"] = sum(v.reason == FAILED_BOTH for v in groups.get("failed", ()))
    return n


def headline(n: Mapping[str, int]) -> tuple[str, str]:
    """The one-line verdict of a comparison: (status, detail), from the series counted per group
    (`group_counts`, plus the structure counts). A speed-up never makes the status an alarm."""
    failed = "benchmark(s) failed to run on head"
    both = n.get("failed_both", 0)
    if both:
        # Series that crashed on base too fail the check as well (it did not run on head), but the reader
        # is told this change did not break them: 174 of 174 "failed to run on head" on a real history
        # read as a pull request that broke them all (2026-12-07).
        failed += f" ({'all' if both == n.get('failed') else both} of them failed on base too)"
    parts = [
        f"{n.get(key, 0)} {label}" for key, label in (
            ("gates_failed", "correctness failure(s)"), ("failed", failed),
            ("regressed", "regression(s)"), ("missing", "not measured on head"),
            ("not_run", "not compared (failed to run on base)"),
            ("unconfirmed", "unconfirmed slowdown(s)"), ("withheld", "withheld (not measured in one job)"),
            ("unknown", "of unknown direction"), ("improved", "improvement(s)"),
            ("faster", "unconfirmed speed-up(s)"),
            ("inconclusive", "inconclusive"), ("new", "new"), ("unchanged", "unchanged"),
            ("exact_failed", "structural gate(s) failed"), ("exact_changed", "structural change(s)"),
        ) if n.get(key, 0)
    ]
    if not parts and n.get("exact"):
        parts = [f"{n['exact']} exact series unchanged"]
    detail = ", ".join(parts) if parts else "no benchmarks were compared"
    if n.get("gates_failed") or n.get("failed") or n.get("regressed") or n.get("exact_failed"):
        return "❌ Performance check failed", detail
    if n.get("missing") or n.get("not_run") or n.get("unconfirmed") or n.get("withheld") or n.get("unknown"):
        return "🟡 No regression confirmed; look at the series below", detail
    if n.get("inconclusive"):
        return "🟡 No regression found; some series could not be judged (each says why)", detail
    return "✅ No significant performance change", detail


GROUPS = ("failed", "regressed", "missing", "not_run", "unconfirmed", "withheld", "unknown", "improved", "faster",
          "inconclusive", "new", "unchanged")


def group_verdicts(perf: Sequence[Verdict]) -> dict[str, list[Verdict]]:
    """Timing verdicts by what the reader should do about them (keys `GROUPS`), biggest change
    first in each group: an inconclusive speed-up is "faster" (listed, never an alarm), an
    inconclusive slowdown past the threshold "unconfirmed"."""
    groups: dict[str, list[Verdict]] = {k: [] for k in GROUPS}
    for v in perf:
        if v.outcome == Outcome.INCONCLUSIVE:
            if v.reason.startswith(NOT_ON_BASE):
                key = "not_run"
            elif v.reason.startswith((MISSING_ON_HEAD, MISSING_MACHINE)):
                key = "missing"
            elif v.reason == WITHHELD_OTHER_JOB:
                key = "withheld"
            elif unknown_direction(v):
                key = "unknown"
            elif _unconfirmed(v):
                key = "unconfirmed"
            elif _faster(v):
                key = "faster"
            else:
                key = "inconclusive"
        elif v.outcome == Outcome.UNCHANGED and v.reason == NEW_SERIES:
            key = "new"
        else:
            key = v.outcome.value
        groups[key].append(v)
    for rows in groups.values():
        rows.sort(key=_sort_key)
    return groups


def rule_counts(perf: Sequence[Verdict]) -> dict[str, int]:
    """How many of a comparison's rows each rule decided: "tested" (a p: the tests on raw samples),
    "asv" (asv compare's rule: one value a side with asv's statistics), "size" (one value a side and
    no statistics, across jobs: its size against the history's allowance alone), "few" (too few
    samples for any test). Rows no rule decided (withheld, new, missing, failed) are in none."""
    out = {"tested": 0, "asv": 0, "size": 0, "few": 0}
    for v in perf:
        if math.isfinite(v.p_value):
            out["tested"] += 1
        elif not math.isfinite(v.ratio):
            continue  # no ratio: not comparable, failed, or judged by difference (its reason says which)
        elif ASV_RULE in v.reason:
            out["asv"] += 1
        elif SIZE_ONLY in v.reason:
            out["size"] += 1
        elif TOO_FEW in v.reason:
            out["few"] += 1
    return out


def rule_clauses(settings: VerdictSettings, counts: Mapping[str, int]) -> list[str]:
    """The legend's clauses for the rules that decided rows (`rule_counts`): what the interval and p
    columns hold under each, "every series" where one rule decided them all. A comment whose every
    row was asv compare's said "90% bootstrap" and "corrected over the 0 series tested"; one whose rows
    were all judged by size against the history said it too, and one whose every row was withheld, failed
    or missing (no rule decided any) still named the tests (real histories, 2026-12-07)."""
    used = {k: n for k, n in counts.items() if n}
    def who(key: str) -> str:
        return "every series" if len(used) == 1 else f"{used[key]} series"
    out = []
    if not used:
        return ["no row was decided by a rule (each row's reason says why: withheld, failed, missing or new); "
                "no interval, no p"]
    if counts.get("tested"):
        correction = _CORRECTION_NAMES.get(settings.correction)
        corrected = (f", {correction}-corrected over the {counts.get('tested', 0)} series tested" if correction
                     else ", uncorrected")
        out.append(f"interval = {settings.confidence * 100:g}% bootstrap confidence interval of the ratio; "
                   f"p = Mann-Whitney U{corrected}")
    if used.get("asv"):
        out.append(f"{who('asv')} with one value a side (asv without --record-samples): {ASV_RULE}, its 99% "
                   "intervals of the medians must not overlap; no p; interval = the ratio of those intervals")
    if used.get("size"):
        out.append(f"{who('size')} with one value a side and no statistics of asv's, measured in different jobs: "
                   "judged by its size against the history's allowance alone; no p, no interval")
    if used.get("few"):
        out.append(f"{who('few')} with {TOO_FEW}: unchanged within the floor, else measure more samples")
    return out
