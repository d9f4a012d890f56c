"""The PR comment's verdicts as a terminal table: what `python -m ci continuous` prints.

Same groups, order, numbers and headline as the comment (`ci.outputs.comment`), in asv's
`continuous` style: a mark per row (`+` slower, `-` faster, `~` past the threshold but not
confirmed, `!` failed on head, `x` not judged: withheld, of unknown direction or not comparable,
`?` inconclusive), each side's median ± half its IQR and sample count, the ratio, its interval, p
and the threshold.
Contributor-controlled text (names, parameters, units) has its control characters replaced, so a
benchmark name cannot move the cursor or recolour the terminal.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ci.outputs.comment import side_text
from ci.outputs.groups import GROUPS, group_counts, group_verdicts, headline, rule_clauses, rule_counts
from ci.outputs.structure import change_text, moved, structure_counts
from ci.records import Kind, Outcome, Verdict
from ci.verdicts import Spread, VerdictSettings, series_label, spread_for

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_MARK = {"failed": "!", "regressed": "+", "unconfirmed": "~", "withheld": "x", "unknown": "x", "missing": "x",
         "not_run": "x",
         "improved": "-", "faster": "~", "inconclusive": "?", "new": " ", "unchanged": " "}
_HEADER = ("", "base", "head", "ratio", "interval", "p", "threshold", "benchmark")


def _plain(text: object) -> str:
    return _CONTROL.sub("?", str(text))


def _row(group: str, v: Verdict, sides: tuple[Spread | None, Spread | None]) -> tuple[str, ...]:
    b = v.benchmark
    ratio = f"{v.ratio:.3f}" if math.isfinite(v.ratio) else "-"
    interval = f"[{v.ci_low:.3f}, {v.ci_high:.3f}]" if math.isfinite(v.ci_low) and math.isfinite(v.ci_high) else "-"
    return (
        _MARK[group], _plain(side_text(v.base_value, sides[0], b.unit)),
        _plain(side_text(v.head_value, sides[1], b.unit)), ratio, interval,
        f"{v.p_value:.2g}" if math.isfinite(v.p_value) else "-",
        f"±{v.threshold * 100:.1f}%" if math.isfinite(v.threshold) else "-", _plain(b.key),
    )


def render_table(
    verdicts: Sequence[Verdict],
    *,
    spreads: Mapping[Any, tuple[Spread | None, Spread | None]] | None = None,
    settings: VerdictSettings | None = None,
    only_changed: bool = True,
    problem: str = "",
) -> str:
    """The verdicts as lines for a terminal, the headline last.

    Args:
        verdicts: A/B verdicts and correctness gates (`ci.verdicts.compare`).
        spreads: (machine, series key) -> (base, head) Spread (`ci.verdicts.spreads`).
        settings: the verdicts' settings (the interval's level in the legend).
        only_changed: leave out unchanged and new series (as `asv continuous` does), counting them.
        problem: why the comparison decides nothing (`ci.verdicts.Comparison.problem`), shown as the headline.

    Returns:
        Text ending in a newline.
    """
    settings = settings or VerdictSettings()
    sides = spreads or {}
    gates = [v for v in verdicts if v.benchmark.kind == Kind.CORRECTNESS]
    gates_failed = [v for v in gates if v.outcome != Outcome.UNCHANGED]
    perf = [v for v in verdicts if v.benchmark.kind not in (Kind.CORRECTNESS, Kind.EXACT)]
    groups = group_verdicts(perf)
    exact = structure_counts(verdicts)
    rows = []
    for name in GROUPS:
        if only_changed and name in ("unchanged", "new"):
            continue
        rows += [_row(name, v, spread_for(sides, v)) for v in groups[name]]
    lines = []
    # The exact tier first, as the comment's Structure section: what moved, then what its gates failed.
    for v in moved(verdicts):
        mark = "!" if v.outcome == Outcome.FAILED else "*"
        why = f"  ({_plain(v.reason)})" if v.outcome == Outcome.FAILED else ""
        lines.append(f"{mark} {_plain(series_label(v.benchmark))}: {_plain(change_text(v))}{why}")
    if exact["exact"]:
        lines.append(f"{exact['exact_changed']} of {exact['exact']} exact series changed, {exact['exact_failed']} "
                     "failed a gate (exact: no noise, any change is a change).")
        lines.append("")
    if rows:
        widths = [max(len(r[i]) for r in (_HEADER, *rows)) for i in range(len(_HEADER) - 1)]
        for r in (_HEADER, *rows):
            lines.append("  ".join(c.ljust(w) for c, w in zip(r[:-1], widths, strict=True)) + "  " + r[-1])
        lines.append("")
    for v in gates_failed:
        lines.append(f"! correctness FAILED: {_plain(v.benchmark.key)}: {_plain(v.reason)}")
    hidden = len(groups["unchanged"]) + len(groups["new"]) if only_changed else 0
    if hidden:
        lines.append(f"{hidden} series unchanged or new, not listed (--all lists them).")
    lines.append(f"{len(gates) - len(gates_failed)} of {len(gates)} correctness gates passed." if gates
                 else "No correctness results.")
    lines.append("; ".join(["Base and head: median ± half the IQR, n samples (asv's repeats and quartiles where it "
                            "recorded one value a point)", *rule_clauses(settings, rule_counts(perf))]) + ".")
    n = group_counts(groups, len(gates_failed))
    n.update(exact)
    status, detail = headline(n)
    if problem:
        status, detail = "❌ Nothing was compared", _plain(problem)
    lines.append(f"{status}: {detail}.")
    return "\n".join(lines) + "\n"
