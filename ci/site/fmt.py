"""Text helpers for the dashboard's pages. Values and changes are written by `ci.format`, the
formatter the PR comment uses too; what is here is only the dashboard's own."""

from __future__ import annotations

import math
from datetime import datetime

from ci.format import format_change, format_value

MISSING = "—"


def fmt_value(x: float, unit: str) -> str:
    """A value with its unit, as the PR comment writes it ("—" when not measured)."""
    return format_value(x, unit, missing=MISSING)


def fmt_range(low: float, high: float, unit: str) -> str:
    """An interquartile range, "12.1 µs – 12.4 µs" ("" when either end is missing)."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return ""
    return f"{fmt_value(low, unit)} – {fmt_value(high, unit)}"


def fmt_change(ratio: float) -> str:
    """A ratio new/old as a signed percentage ("+4.1%", "−0.3%")."""
    return format_change(ratio, missing=MISSING)


def fmt_step(ratio: float, before: float, after: float) -> str:
    """A step's change: its ratio as `fmt_change`, or where it has none (a series at or through zero,
    judged by difference) its two levels ("0 → 5")."""
    if math.isfinite(ratio) or not (math.isfinite(before) and math.isfinite(after)) or min(before, after) > 0:
        return fmt_change(ratio)
    return f"{fmt_number(before)} → {fmt_number(after)}"


def fmt_number(x: float, digits: int = 4) -> str:
    """`x` with `digits` significant digits, "—" when it is NaN or infinite."""
    if not math.isfinite(x):
        return MISSING
    return f"{x:.{digits}g}"


def fmt_percent(p: float) -> str:
    """A probability as a percentage that never claims certainty ("97%", "99.9%", ">99.9%")."""
    if not math.isfinite(p):
        return MISSING
    if p > 0.999:
        return ">99.9%"
    return f"{p * 100:.1f}%" if p > 0.99 else f"{p * 100:.0f}%"


def fmt_time(t: datetime | None) -> str:
    """A commit or acknowledgement time to the minute, "" when unknown."""
    return t.strftime("%Y-%m-%d %H:%M") if t is not None else ""


def ratio(new: float, old: float) -> float:
    """new / old, NaN when either is missing or old is zero."""
    if not (math.isfinite(new) and math.isfinite(old)) or old == 0:
        return math.nan
    return new / old
