"""Number formatting for the dashboard: one display scale per series, so a column or an axis
never mixes µs and ms."""

from __future__ import annotations

import math
from datetime import datetime

_TIME_SCALES = ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns"))
_BYTE_SCALES = ((2.0**30, "GiB"), (2.0**20, "MiB"), (2.0**10, "KiB"), (1.0, "B"))


def display_scale(unit: str, typical: float) -> tuple[float, str]:
    """The divisor and the label to show values of `unit` around `typical` in.

    Args:
        unit: the benchmark's unit ("seconds", "bytes", anything else is shown as is).
        typical: a representative value (the series median); NaN picks the unit itself.

    Returns:
        (divisor, label): display value = value / divisor.
    """
    scales = _TIME_SCALES if unit == "seconds" else _BYTE_SCALES if unit == "bytes" else None
    if scales is None:
        return 1.0, unit
    if not math.isfinite(typical) or typical == 0:
        return scales[0] if unit == "seconds" else scales[-1]
    for div, label in scales:
        if abs(typical) >= div:
            return div, label
    return scales[-1]


def fmt_number(x: float, digits: int = 4) -> str:
    """`x` with `digits` significant digits, "—" when it is NaN or infinite."""
    if not math.isfinite(x):
        return "—"
    return f"{x:.{digits}g}"


def fmt_value(x: float, scale: tuple[float, str]) -> str:
    """A value in its series' display scale, with the unit label."""
    if not math.isfinite(x):
        return "—"
    div, label = scale
    return f"{x / div:.4g} {label}".rstrip()


def fmt_change(ratio: float) -> str:
    """A ratio new/old as a signed percentage ("+4.1%", "−0.3%")."""
    if not math.isfinite(ratio):
        return "—"
    pct = (ratio - 1.0) * 100.0
    if abs(pct) < 0.05:
        return "±0.0%"
    return f"{pct:+.1f}%".replace("-", "−")


def fmt_time(t: datetime | None) -> str:
    """A commit or acknowledgement time to the minute, "" when unknown."""
    return t.strftime("%Y-%m-%d %H:%M") if t is not None else ""


def ratio(new: float, old: float) -> float:
    """new / old, NaN when either is missing or old is zero."""
    if not (math.isfinite(new) and math.isfinite(old)) or old == 0:
        return math.nan
    return new / old
