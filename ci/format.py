"""How the service writes a measured value: one formatter for the PR comment and the dashboard.

A value reads the same everywhere ("723 µs" in the comment, in a dashboard table and in a chart's
hover text): seconds are scaled to s/ms/µs/ns and bytes to GiB/MiB/KiB/B with 3 significant digits,
any other unit keeps its name with 4 significant digits (thousands grouped from 1,000 up). The
dashboard's chart script carries a JavaScript port of `format_value`, tested against this one in a
real browser (tests/dashboard/test_browser.py).
"""

from __future__ import annotations

import math

# (divisor, label), largest first.
TIME_SCALES: tuple[tuple[float, str], ...] = ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns"))
BYTE_SCALES: tuple[tuple[float, str], ...] = ((2.0**30, "GiB"), (2.0**20, "MiB"), (2.0**10, "KiB"), (1.0, "B"))
MISSING = "n/a"


def _scales(unit: str) -> tuple[tuple[float, str], ...] | None:
    return TIME_SCALES if unit == "seconds" else BYTE_SCALES if unit == "bytes" else None


def format_value(value: float | None, unit: str, *, missing: str = MISSING) -> str:
    """A measurement with a readable unit.

    Args:
        value: the number in `unit` (None or NaN: not measured).
        unit: the benchmark's unit ("seconds", "bytes", "images/s", ...).
        missing: the text for a value that is None, NaN or infinite.

    Returns:
        Text such as "12.3 µs", "1.5 GiB", "1,870 images/s", "0.9991 top-1 agreement".
    """
    if value is None or not math.isfinite(value):
        return missing
    scales = _scales(unit)
    if scales is not None:
        # The largest scale the value reaches; a value that rounds up to 1000 of one scale
        # (999.7 µs) is written in the next one ("1 ms", not "1e+03 µs").
        i = next((k for k, (div, _) in enumerate(scales) if abs(value) >= div), len(scales) - 1)
        text = f"{value / scales[i][0]:.3g}"
        if i > 0 and abs(float(text)) >= 1000:
            i -= 1
            text = f"{value / scales[i][0]:.3g}"
        return f"{text} {scales[i][1]}"
    if abs(value) >= 1000:
        return f"{value:,.0f} {unit}".rstrip()
    return f"{value:.4g} {unit}".rstrip()


def display_scale(unit: str, typical: float) -> tuple[float, str]:
    """The divisor and label of a chart axis for values of `unit` around `typical` (one scale
    per axis, so its ticks never mix µs and ms).

    Args:
        unit: the benchmark's unit.
        typical: a representative value (the series median); NaN picks the unit itself.

    Returns:
        (divisor, label): axis value = value / divisor.
    """
    scales = _scales(unit)
    if scales is None:
        return 1.0, unit
    if not math.isfinite(typical) or typical == 0:
        return scales[0] if unit == "seconds" else scales[-1]
    return next(((div, label) for div, label in scales if abs(typical) >= div), scales[-1])


def format_change(ratio: float, *, missing: str = "—") -> str:
    """A ratio new/old as a signed percentage ("+4.1%", "−0.3%", "±0.0%").

    Args:
        ratio: new / old.
        missing: the text for a ratio that is NaN or infinite.
    """
    if not math.isfinite(ratio):
        return missing
    pct = (ratio - 1.0) * 100.0
    if abs(pct) < 0.05:
        return "±0.0%"
    return f"{pct:+.1f}%".replace("-", "−")
