"""Inline SVG charts: bounded sparklines, escaped text, one linked dot per run, gates and marks."""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET

import pytest

from ci.site.model import Point
from ci.site.svg import SPARK_BUCKETS, Mark, history_chart, nice_ticks, sparkline

SVG = "{http://www.w3.org/2000/svg}"


def _points(values: list[float]) -> list[Point]:
    return [Point(i, f"{i:040x}", v, v * 0.98, v * 1.02, 5) for i, v in enumerate(values)]


def _parse(svg: str) -> ET.Element:
    # Inline SVG in HTML has no xmlns; add it so the fragment parses as XML (also proves it is well formed).
    return ET.fromstring(svg.replace("<svg ", '<svg xmlns="http://www.w3.org/2000/svg" ', 1))


@pytest.mark.parametrize("n", [0, 1, 2, 47, 48, 49, 1000, 5000], ids=lambda n: f"n{n}")
def test_sparkline_is_bounded(n: int) -> None:
    values = [1.0 + 0.1 * math.sin(i) for i in range(n)]
    svg = str(sparkline(values))
    root = _parse(svg)
    lines = root.findall(f"{SVG}polyline")
    if n == 0:
        assert not lines
        return
    vertices = lines[0].get("points", "").split()
    assert len(vertices) == min(n, SPARK_BUCKETS)
    assert len(svg) < 700  # 500 of them must fit the overview's 2 MB with room for the table
    for v in vertices:
        x, y = map(float, v.split(","))
        assert 0 <= x <= 100 and 0 <= y <= 24


def test_sparkline_keeps_a_step_visible() -> None:
    values = [1.0] * 500 + [1.3] * 500
    ys = [float(v.split(",")[1]) for v in _parse(str(sparkline(values))).find(f"{SVG}polyline").get("points").split()]
    assert ys[0] - ys[-1] > 15  # the step spans most of the 24 px height (y grows downwards)
    assert 'class="spark bad"' in str(sparkline(values, bad=True))


def test_sparkline_skips_nan() -> None:
    svg = str(sparkline([1.0, math.nan, 2.0, math.inf]))
    assert "nan" not in svg and "inf" not in svg
    assert len(_parse(svg).find(f"{SVG}polyline").get("points").split()) == 2


def test_history_chart_points_links_and_escaping() -> None:
    pts = _points([1.0, 1.1, 0.9, 1.3, 1.2])
    svg = str(history_chart(
        pts, fmt_axis=lambda v: f"{v:.2g}", href=lambda sha: f"../commit/{sha}.html?a=1&b=<2>",
        title=lambda p: f"<script>{p.sha[:4]}</script>",
        marks=[Mark(pts[3].sha, "reg", 'open "<b>"'), Mark(pts[1].sha, "cp", "step"), Mark("missing", "ack", "x")],
        label="a <label>"))
    root = _parse(svg)  # well-formed XML: every title and attribute escaped
    assert "<script>" not in svg and "<b>" not in svg
    circles = root.findall(f"{SVG}a/{SVG}circle")
    assert len(circles) == 5
    hrefs = [a.get("href") for a in root.findall(f"{SVG}a")]
    assert hrefs.count(f"../commit/{pts[3].sha}.html?a=1&b=<2>") == 2  # the dot and the regression mark
    # Higher values are drawn higher (smaller y), points left to right in history order.
    ys = [float(c.get("cy")) for c in circles]
    xs = [float(c.get("cx")) for c in circles]
    assert ys[3] < ys[4] < ys[1] < ys[0] < ys[2]
    assert xs == sorted(xs)
    assert len(root.findall(f"{SVG}line[@class='mark cp']")) == 1
    assert len(root.findall(f"{SVG}a/{SVG}path[@class='mark reg']")) == 1
    assert not root.findall(".//*[@class='mark ack']")  # its commit is not on this chart
    spread = root.find(f"{SVG}path[@class='spread']").get("d")
    assert spread.count("M") == 5


def test_history_chart_gate_and_compact_mode() -> None:
    pts = _points([0.002, 0.0025, 0.006, 0.002])
    svg = str(history_chart(pts, fmt_axis=lambda v: f"{v:g}", href=lambda s: s, title=lambda p: "t",
                            gate=(0.004, True), linked=False))
    root = _parse(svg)
    gate = root.find(f"{SVG}line[@class='gate']")
    assert gate is not None and "gate 0.004" in svg
    fails = root.findall(f"{SVG}a/{SVG}circle")
    assert [c.get("class") for c in fails] == ["pt fail"]  # compact: only the failing run is a dot
    assert float(fails[0].get("cy")) < float(gate.get("y1"))  # above the line


def test_history_chart_degenerate_inputs() -> None:
    for pts in ([], _points([2.0]), _points([3.0, 3.0, 3.0]), _points([math.nan, 1.0])):
        svg = str(history_chart(pts, fmt_axis=str, href=lambda s: s, title=lambda p: "t"))
        root = _parse(svg)
        assert "nan" not in svg.lower()  # no NaN coordinates
        assert len(root.findall(f"{SVG}a/{SVG}circle")) == sum(math.isfinite(p.value) for p in pts)


def test_chart_size_for_a_long_history() -> None:
    pts = _points([1.0 + 0.01 * (i % 7) for i in range(1000)])
    svg = str(history_chart(pts, fmt_axis=str, href=lambda s: f"../commit/{s}.html", title=lambda p: p.sha[:8]))
    assert len(svg) < 200_000
    assert len(re.findall(r"<circle", svg)) == 1000


@pytest.mark.parametrize(("lo", "hi"), [(0.0, 1.0), (2.9e-5, 4.1e-5), (-3.0, 7.0), (0.0025, 0.0062), (1e6, 1e6 + 3)])
def test_nice_ticks_cover_range_with_round_steps(lo: float, hi: float) -> None:
    ticks = nice_ticks(lo, hi)
    assert 2 <= len(ticks) <= 8
    assert all(lo - 1e-12 <= t <= hi + 1e-12 for t in ticks)
    steps = {round(b - a, 12) for a, b in zip(ticks, ticks[1:], strict=False)}
    assert len(steps) == 1
    mantissa = f"{steps.pop():e}".split("e")[0]
    assert float(mantissa) in (1.0, 2.0, 5.0)
