"""Inline SVG charts drawn on the server, so a page needs no script and nothing from the network:
the overview's sparklines and the correctness page's gate charts (series pages draw theirs in the
browser, `chart.js`).

Every text that reaches the SVG (titles, labels) goes through `html.escape`; the return
values are `Markup` so jinja2's autoescaping inserts them as they are.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from markupsafe import Markup

from ci.site.model import Point
from ci.text import printable
from ci.verdicts import passes_gate

# Sparklines are downsampled to this many buckets: 500 of them must fit the overview's 2 MB
# budget (each costs ~7 bytes per vertex) and 48 still shows a step at a glance.
SPARK_BUCKETS = 48


@dataclass(frozen=True)
class Mark:
    """Something to point out on a chart at one commit."""

    sha: str
    kind: str  # CSS class: "reg" (open regression), "ack" (acknowledged), "cp" (change point), "fail"
    label: str


def _esc(text: str) -> str:
    # html.escape: several times cheaper than markupsafe.escape for the ~1,000 titles of a chart. Text as
    # every page shows it (`printable`: credentials hidden, controls escaped): the correctness charts'
    # labels and marks showed a benchmark key's and an acknowledgement's token verbatim (2026-12-07).
    return html.escape(printable(text), quote=True)


def _f(x: float) -> str:
    # One decimal is sub-pixel at these sizes and keeps a 1,000-point chart small.
    return f"{x:.1f}"


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round tick values inside [lo, hi] (steps of 1, 2 or 5 times a power of ten).

    Args:
        lo, hi: the axis range.
        count: about how many ticks.

    Returns:
        Ascending tick values; [lo] for an empty or non-finite range.
    """
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return [lo] if math.isfinite(lo) else []
    raw = (hi - lo) / max(count - 1, 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step) * step
    ticks = []
    t = first
    while t <= hi + step * 1e-9:
        ticks.append(round(t, 12))
        t += step
    return ticks


def _bounds(values: Sequence[float], extra: Sequence[float] = ()) -> tuple[float, float]:
    finite = [v for v in values if math.isfinite(v)] + [v for v in extra if math.isfinite(v)]
    if not finite:
        return 0.0, 1.0
    lo, hi = min(finite), max(finite)
    if hi == lo:
        pad = abs(lo) * 0.05 or 1.0
        return lo - pad, hi + pad
    pad = (hi - lo) * 0.06
    return lo - pad, hi + pad


def sparkline(values: Sequence[float], *, bad: bool = False, width: int = 100, height: int = 24) -> Markup:
    """A compact trend line of a whole history (bucket means when longer than SPARK_BUCKETS).

    Args:
        values: the series' values, oldest first (NaN entries are skipped).
        bad: draw it in the regression colour.
        width, height: size in CSS pixels.

    Returns:
        An `<svg class="spark">` element, empty of lines when nothing is finite.
    """
    vals = [v for v in values if math.isfinite(v)]
    if len(vals) > SPARK_BUCKETS:
        n = len(vals)
        edges = [round(i * n / SPARK_BUCKETS) for i in range(SPARK_BUCKETS + 1)]
        vals = [sum(vals[a:b]) / (b - a) for a, b in zip(edges, edges[1:], strict=False) if b > a]
    cls = "spark bad" if bad else "spark"
    head = f'<svg class="{cls}" viewBox="0 0 {width} {height}" width="{width}" height="{height}" aria-hidden="true">'
    if not vals:
        return Markup(head + "</svg>")
    lo, hi = min(vals), max(vals)
    span = (hi - lo) or 1.0
    step = (width - 4) / max(len(vals) - 1, 1)
    pts = " ".join(f"{_f(2 + i * step)},{_f(height - 2 - (v - lo) / span * (height - 4))}" for i, v in enumerate(vals))
    last = pts.rsplit(" ", 1)[-1].split(",")
    return Markup(f'{head}<polyline points="{pts}"/><circle cx="{last[0]}" cy="{last[1]}" r="1.8"/></svg>')


def history_chart(
    points: Sequence[Point],
    *,
    fmt_axis: Callable[[float], str],
    href: Callable[[str], str],
    title: Callable[[Point], str],
    marks: Sequence[Mark] = (),
    gate: tuple[float, bool] | None = None,
    label: str = "",
    x_label: Callable[[Point], str] = lambda p: p.sha[:7],
    y_label: str = "",
    linked: bool = True,
    width: int = 960,
    height: int = 300,
) -> Markup:
    """The history of one series: median line, interquartile bars, a linked dot per run, marks.

    Args:
        points: the runs, oldest first; drawn at equal spacing (one slot per run).
        fmt_axis: formats a y tick value (in the series' display scale).
        href: link target for a commit sha.
        title: hover text of a point.
        marks: regressions, acknowledgements and change points, at their commit.
        gate: a correctness gate (limit, strictly-below) drawn as a dashed line; points failing
            it get the "fail" class.
        label: accessible name of the chart.
        x_label: text under the x axis at a few evenly spaced runs.
        y_label: the y axis' unit, written along it.
        linked: one `<a>` per point (series pages); False draws only failing points as links,
            for the compact charts on the correctness page.
        width, height: viewBox size.

    Returns:
        An `<svg class="chart">` element.
    """
    left, right, top, bottom = 78, 14, 14, 34
    pw, ph = width - left - right, height - top - bottom
    extra = [p.low for p in points] + [p.high for p in points]
    if gate is not None:
        extra.append(gate[0])
    lo, hi = _bounds([p.value for p in points], extra)
    span = hi - lo
    n = len(points)
    step = pw / (n - 1) if n > 1 else 0.0

    def x_at(i: int) -> float:
        return left + (i * step if n > 1 else pw / 2)

    def y_at(v: float) -> float:
        return top + (hi - v) / span * ph

    out = [f'<svg class="chart" viewBox="0 0 {width} {height}" role="img" aria-label="{_esc(label)}">']
    if y_label:
        mid = _f(top + ph / 2)
        out.append(f'<text class="axis-label" x="12" y="{mid}" transform="rotate(-90 12 {mid})" '
                   f'text-anchor="middle">{_esc(y_label)}</text>')
    for t in nice_ticks(lo, hi):
        y = _f(y_at(t))
        out.append(f'<line class="grid" x1="{left}" x2="{width - right}" y1="{y}" y2="{y}"/>'
                   f'<text class="tick" x="{left - 6}" y="{y}" dy="3" text-anchor="end">{_esc(fmt_axis(t))}</text>')
    if n:
        for i in sorted({round(k * (n - 1) / 5) for k in range(6)} if n > 1 else {0}):
            # The end labels hang inwards so they are not clipped at the chart's edges.
            anchor = "start" if i == 0 and n > 1 else "end" if i == n - 1 and n > 1 else "middle"
            out.append(f'<text class="tick" x="{_f(x_at(i))}" y="{height - 12}" text-anchor="{anchor}">'
                       f"{_esc(x_label(points[i]))}</text>")
    if gate is not None:
        y = _f(y_at(gate[0]))
        out.append(f'<line class="gate" x1="{left}" x2="{width - right}" y1="{y}" y2="{y}"/>'
                   f'<text class="gate-label" x="{width - right - 4}" y="{y}" dy="-4" text-anchor="end">'
                   f"gate {_esc(fmt_axis(gate[0]))}</text>")

    spread = [f"M{_f(x_at(i))} {_f(y_at(p.high))}V{_f(y_at(p.low))}" for i, p in enumerate(points)
              if math.isfinite(p.low) and math.isfinite(p.high) and p.high > p.low]
    if spread:
        out.append(f'<path class="spread" d="{"".join(spread)}"/>')
    line = " ".join(f"{_f(x_at(i))},{_f(y_at(p.value))}" for i, p in enumerate(points) if math.isfinite(p.value))
    if line:
        out.append(f'<polyline class="line" points="{line}"/>')

    first_x: dict[str, float] = {}
    for i, p in enumerate(points):
        first_x.setdefault(p.sha, x_at(i))
    for m in marks:
        x = first_x.get(m.sha)
        if x is None:
            continue
        tip = f"<title>{_esc(m.label)}</title>"
        if m.kind == "cp":
            out.append(f'<line class="mark cp" x1="{_f(x)}" x2="{_f(x)}" y1="{top}" y2="{top + ph}">{tip}</line>')
        else:
            out.append(f'<a href="{_esc(href(m.sha))}"><path class="mark {m.kind}" '
                       f'd="M{_f(x)} {top + 1}l-6 -0.5 6 11 6 -11z">{tip}</path></a>')

    for i, p in enumerate(points):
        if not math.isfinite(p.value):
            continue
        failing = gate is not None and not passes_gate(p.value, gate)
        if not linked and not failing:
            continue
        cls = "pt fail" if failing else "pt"
        out.append(f'<a href="{_esc(href(p.sha))}"><circle class="{cls}" cx="{_f(x_at(i))}" '
                   f'cy="{_f(y_at(p.value))}" r="{3.5 if failing else 2.4}"><title>{_esc(title(p))}</title>'
                   "</circle></a>")
    out.append("</svg>")
    return Markup("".join(out))
