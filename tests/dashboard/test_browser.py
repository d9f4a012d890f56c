"""The rendered site in a real headless Chromium (tools/chromium.py drives it over the
DevTools protocol): the regression and suspicion flags, the chart's hover, click, zoom and
overlay, the layout at 800 and 1600 px, the machine filter, the value formatter's JS port against
ci.format, and nothing loaded from the network."""

from __future__ import annotations

import math
import random
import shutil
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

from ci.format import format_value
from ci.records import Benchmark, Commit, Machine, Result
from ci.site import render_site
from ci.site.model import commit_slug, series_slug
from tests.conftest import requires
from tools.chromium import Chromium
from tools.fixtures import T0, MemoryStore, synthetic_store

pytestmark = pytest.mark.browser

READY = "window.raggedDashboard && raggedDashboard.charts.length > 0"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("browser-site")
    store = synthetic_store(n_commits=40, n_series=8, machines=2)
    last = store.commit_list[-1]
    store.commit_list[-1] = replace(last, subject='speed up <b>pack</b> & "unpack" <script>alert(1)</script>')
    render_site(store, out)
    return out


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Chromium:
    requires(shutil.which("chromium") is not None, "chromium (Debian package `chromium`)")
    with Chromium(tmp_path_factory.mktemp("chromium")) as b:
        yield b


def _hover_point(b: Chromium, index: int) -> tuple[float, float]:
    """Page coordinates of run `index` (negative: from the newest) of the first chart's main series."""
    return tuple(b.evaluate(f"""(() => {{
        const u = raggedDashboard.charts[0].uplot, xs = u.data[0];
        const i = {index} < 0 ? xs.length + ({index}) : {index};
        const r = u.over.getBoundingClientRect();
        return [r.left + u.valToPos(xs[i], 'x'), r.top + u.valToPos(u.data[1][i], 'y')];
    }})()"""))


def _hover(b: Chromium, x: float, y: float) -> str:
    b.mouse("mouseMoved", 1, 1)  # from outside the plot, as a pointer arrives
    b.mouse("mouseMoved", x, y)
    return b.wait_for("(() => { const t = document.querySelector('.chart-tip'); return !t.hidden && t.innerText; })()")


def test_hover_shows_value_spread_commit_and_subject(site: Path, browser: Chromium) -> None:
    store = synthetic_store(n_commits=40, n_series=8, machines=2)
    bench = store.benchmark_list[2]
    browser.resize(1400, 1000)
    browser.open((site / "series" / f"{series_slug(bench.key, 'runner-0')}.html").as_uri(), ready=READY)
    tip = _hover(browser, *_hover_point(browser, -1))
    newest = next(r for r in reversed(store.result_list) if r.benchmark == bench and r.machine == "runner-0")
    lo, hi = newest.spread
    assert format_value(newest.value, "seconds") in tip  # the formatter the tables and the PR comment use
    assert f"IQR {format_value(lo, 'seconds')} – {format_value(hi, 'seconds')}, n = 5" in tip
    assert newest.commit_sha[:10] in tip and "2026-01-02 15:00" in tip
    assert 'speed up <b>pack</b> & "unpack" <script>alert(1)</script>' in tip  # the subject, as text
    assert browser.evaluate("document.querySelectorAll('.chart-tip b, .chart-tip script').length") == 0
    # The run at the step carries its marks (open regression, change point, the confirmed suspicion).
    tip = _hover(browser, *_hover_point(browser, 20))
    assert "open regressed at" in tip and "change point" in tip and "confirmed regression" in tip
    assert not browser.errors


def test_click_opens_the_commit(site: Path, browser: Chromium) -> None:
    store = synthetic_store(n_commits=40, n_series=8, machines=2)
    browser.resize(1400, 1000)
    browser.open((site / "series" / f"{series_slug(store.benchmark_list[2].key, 'runner-1')}.html").as_uri(),
                 ready=READY)
    x, y = _hover_point(browser, 7)
    _hover(browser, x, y)
    since = len(browser.events)
    browser.mouse("mousePressed", x, y, button="left")
    browser.mouse("mouseReleased", x, y, button="left")
    browser.wait_event("Page.loadEventFired", since)
    assert browser.evaluate("location.pathname").endswith(f"/commit/{commit_slug(store.commit_list[7].sha)}.html")


def test_drag_zooms_and_the_range_buttons(site: Path, browser: Chromium) -> None:
    store = synthetic_store(n_commits=40, n_series=8, machines=2)
    browser.resize(1400, 1000)
    browser.open((site / "series" / f"{series_slug(store.benchmark_list[3].key, 'runner-0')}.html").as_uri(),
                 ready=READY)
    scale = "(() => { const s = raggedDashboard.charts[0].uplot.scales.x; return [s.min, s.max]; })()"
    assert browser.evaluate(scale) == [-0.5, 39.5]
    (x1, y), (x2, _) = _hover_point(browser, 10), _hover_point(browser, 20)
    browser.mouse("mouseMoved", x1, y)
    browser.mouse("mousePressed", x1, y, button="left")
    browser.mouse("mouseMoved", (x1 + x2) / 2, y, button="left")
    browser.mouse("mouseMoved", x2, y, button="left")
    browser.mouse("mouseReleased", x2, y, button="left")
    lo, hi = browser.wait_for(f"(() => {{ const v = {scale}; return v[1] - v[0] < 20 && v; }})()")
    assert 9 <= lo <= 11 and 19 <= hi <= 21
    assert browser.evaluate("location.pathname").endswith(".html") and "/series/" in browser.evaluate("location.href")
    browser.evaluate("document.querySelector('button[data-range=\"0\"]').click()")
    assert browser.evaluate(scale) == [-0.5, 39.5]


def test_overlay_of_a_benchmarks_parameter_values(site: Path, browser: Chromium) -> None:
    store = synthetic_store(n_commits=40, n_series=8, machines=2)
    bench = store.benchmark_list[2]  # bench_attention.GPUTime.time_gpu: two parameter points in this history
    sibling = next(b for b in store.benchmark_list if b.name == bench.name and b != bench)
    browser.resize(1400, 1000)
    browser.open((site / "series" / f"{series_slug(bench.key, 'runner-0')}.html").as_uri(), ready=READY)
    browser.evaluate("document.querySelector('details.overlay').open = true")
    browser.wait_for("document.querySelectorAll('.overlay-list input[type=checkbox]').length")
    labels = browser.evaluate("[...document.querySelectorAll('.overlay-list label')].map(l => l.textContent.trim())")
    assert labels == [sibling.params_label]
    swatch = "getComputedStyle(document.querySelector('.overlay-list .swatch')).backgroundColor"
    assert browser.evaluate(swatch) == "rgba(0, 0, 0, 0)"  # nothing drawn yet
    browser.evaluate("document.querySelector('.overlay-list input').click()")
    browser.wait_for("raggedDashboard.charts[0].uplot.series.length === 5")
    # The chart has no legend: the checked value's swatch takes its line's colour.
    drawn = browser.evaluate("(() => { const c = document.createElement('span'); document.body.appendChild(c); "
                             "c.style.color = raggedDashboard.charts[0].uplot.series[4]._stroke; "
                             "return getComputedStyle(c).color; })()")
    assert browser.evaluate(swatch) == drawn != "rgba(0, 0, 0, 0)", (browser.evaluate(swatch), drawn)
    tip = _hover(browser, *_hover_point(browser, -2))
    newest = [r for r in store.result_list if r.benchmark == sibling and r.machine == "runner-0"][-2]
    assert f"{sibling.params_label}: {format_value(newest.value, 'seconds')}" in tip


def _flag_store(steps: list[float]) -> MemoryStore:
    """30 commits of three quiet series (1% between runs), then one commit per entry of `steps`, where
    series 0 is that many times its level (the others stay)."""
    rng = random.Random(5)
    benches = [Benchmark("bench_attention.Kernel.time_gpu", (("preset", f"p{i}"),)) for i in range(3)]
    store = MemoryStore(machine_list=[Machine("h200", gpu="NVIDIA H200")], benchmark_list=benches)
    level = 1.0
    for i in range(30 + len(steps)):
        if i >= 30:
            level *= steps[i - 30]
        c = Commit(f"{i:040x}", (f"{i - 1:040x}",) if i else (), "main", T0 + timedelta(hours=i), f"commit {i}")
        store.commit_list.append(c)
        for k, b in enumerate(benches):
            centre = 1e-5 * (1 + k) * (level if k == 0 else 1.0) * (1 + 0.01 * rng.gauss(0, 1))
            store.result_list.append(Result(b, c.sha, "h200", tuple(centre * (1 + 0.002 * rng.gauss(0, 1))
                                                                      for _ in range(10))))
    return store


def _banner(b: Chromium) -> dict[str, object]:
    return b.evaluate("""(() => {
        const banner = document.getElementById('open-regressions');
        const rows = t => [...document.querySelectorAll(t)].map(r => r.innerText.replace(/\\s+/g, ' '));
        return {title: banner.querySelector('h2').innerText, cls: banner.className,
                suspected: rows('#open-regressions table.suspects tbody tr'),
                resolved: rows('#resolved table.suspects tbody tr')};
    })()""")


def test_flags_suspected_at_once_then_confirmed_or_withdrawn(tmp_path: Path, browser: Chromium) -> None:
    browser.resize(1400, 1000)
    # The two newest commits are 30% slower on one series: suspected at once, the banner counts it.
    store = _flag_store([1.3, 1.0])
    render_site(store, tmp_path / "a")
    browser.open((tmp_path / "a" / "index.html").as_uri())
    got = _banner(browser)
    assert got["title"] == "No confirmed regressions · 1 suspected" and got["cls"] == "banner warn", got
    (row,) = got["suspected"]
    assert "suspected" in row and "+29.8%" in row and ">99.9%" in row and store.commit_list[30].sha[:10] in row
    assert "can judge it after 1 more commit" in row
    # Three more slow commits: the change-point detector confirms it once 4 commits hold the step (a
    # shorter one may still be an excursion); an open regression, listed as confirmed.
    store = _flag_store([1.3, 1.0, 1.0, 1.0])
    render_site(store, tmp_path / "b")
    browser.open((tmp_path / "b" / "index.html").as_uri())
    got = _banner(browser)
    assert got["title"].startswith("1 open regression") and not got["suspected"], got
    assert any("confirmed" in r and store.commit_list[30].sha[:10] in r for r in got["resolved"]), got
    assert store.commit_list[30].sha[:10] in browser.evaluate("document.querySelector('table.regs').innerText")
    # A two-commit excursion: the commits after it are back, the suspicion is withdrawn, visibly.
    store = _flag_store([1.3, 1.0, 1 / 1.3, 1.0])
    render_site(store, tmp_path / "c")
    browser.open((tmp_path / "c" / "index.html").as_uri())
    got = _banner(browser)
    assert got["title"] == "No open regressions" and not got["suspected"], got
    (row,) = got["resolved"]
    assert "withdrawn" in row and f"came back at {store.commit_list[33].sha[:10]}" in row
    browser.open((tmp_path / "c" / "regressions.html").as_uri())
    assert "withdrawn" in browser.evaluate("document.getElementById('resolved').nextElementSibling.innerText")


def _overflow(b: Chromium) -> dict[str, object]:
    return b.evaluate("""(() => ({
        page: document.documentElement.scrollWidth - window.innerWidth,
        tables: [...document.querySelectorAll('.table-box')].filter(t => t.scrollWidth > t.clientWidth + 1)
                  .map(t => t.querySelector('table').className),
        chart: (document.querySelector('.chart-plot canvas') || {clientWidth: 0}).clientWidth,
    }))()""")


@pytest.mark.parametrize("width", [800, 1600], ids=["800px", "1600px"])
def test_layout_holds_at_two_widths(site: Path, browser: Chromium, tmp_path: Path, width: int) -> None:
    store = synthetic_store(n_commits=40, n_series=8, machines=2)
    pages = ["index.html", "regressions.html", "commits.html", "correctness.html",
             f"series/{series_slug(store.benchmark_list[2].key, 'runner-0')}.html",
             f"commit/{commit_slug(store.commit_list[20].sha)}.html"]
    browser.resize(width, 900)
    for rel in pages:
        browser.open((site / rel).as_uri(), ready=READY if rel.startswith("series/") else "true")
        got = _overflow(browser)
        assert got["page"] <= 0 and not got["tables"], (rel, width, got)
        if rel.startswith("series/"):
            assert got["chart"] >= width - 80, (width, got)  # the chart uses the width it has
    browser.screenshot(tmp_path / f"overview-{width}.png")


def test_js_formatter_matches_ci_format(site: Path, browser: Chromium) -> None:
    rng = random.Random(7)
    cases = [(10 ** rng.uniform(-10, 4), "seconds") for _ in range(150)]
    cases += [(2 ** rng.uniform(0, 40), "bytes") for _ in range(60)]
    cases += [(10 ** rng.uniform(-5, 6), unit) for unit in ("images/s", "max abs diff", "") for _ in range(40)]
    cases += [(0.0, "seconds"), (9.996e-4, "seconds"), (999.7 * 1024, "bytes"), (1870.4, "images/s"),
              (-0.0123, "seconds"), (math.nan, "seconds")]
    browser.open((site / "index.html").as_uri())
    browser.evaluate((site / "chart.js").read_text())  # defines raggedDashboard.formatValue on any page
    values = [v if math.isfinite(v) else None for v, _ in cases]
    got = browser.evaluate(f"{values!r}.map((v, i) => raggedDashboard.formatValue(v, {[u for _, u in cases]!r}[i]))"
                           .replace("None", "null"))
    want = [format_value(v, u) for v, u in cases]
    assert [(c, g) for c, g, w in zip(cases, got, want, strict=True) if g != w] == []


def test_nothing_comes_from_the_network(site: Path, browser: Chromium) -> None:
    store = synthetic_store(n_commits=40, n_series=8, machines=2)
    browser.requests.clear()
    browser.resize(1400, 1000)
    browser.open((site / "series" / f"{series_slug(store.benchmark_list[4].key, 'runner-1')}.html").as_uri(),
                 ready=READY)
    browser.open((site / "index.html").as_uri())
    assert browser.requests and all(u.startswith("file://") for u in browser.requests), browser.requests
    assert any(u.endswith("/data/commits.js") for u in browser.requests)


def test_tables_render_without_javascript(site: Path, browser: Chromium) -> None:
    store = synthetic_store(n_commits=40, n_series=8, machines=2)
    page = site / "series" / f"{series_slug(store.benchmark_list[2].key, 'runner-0')}.html"
    browser.send("Emulation.setScriptExecutionDisabled", {"value": True}, session=browser.session)
    try:
        browser.open(page.as_uri())
        got = browser.evaluate("""[document.querySelectorAll('table.series-runs tbody tr').length,
            document.querySelectorAll('canvas').length, document.querySelector('.chart-tools').hidden,
            document.querySelector('noscript') !== null]""")
    finally:
        browser.send("Emulation.setScriptExecutionDisabled", {"value": False}, session=browser.session)
    assert got == [40, 0, True, True]


def test_machine_filter_runs(site: Path, browser: Chromium) -> None:
    browser.resize(1400, 1000)
    browser.open((site / "index.html").as_uri() + "#filter=m:runner-1")
    hidden = browser.evaluate("""[...document.querySelectorAll('table.series tr[data-machine]')]
        .map(r => [r.getAttribute('data-machine'), r.hidden])""")
    assert len(hidden) == 16
    assert sorted(m for m, h in hidden if h) == ["runner-0"] * 8


def test_screenshot_shows_charts_and_banner(site: Path, browser: Chromium, tmp_path: Path) -> None:
    from PIL import Image

    browser.resize(1400, 1000)
    browser.open((site / "index.html").as_uri())
    shot = browser.screenshot(tmp_path / "dashboard.png")
    img = Image.open(shot).convert("RGB")
    assert img.size == (1400, 1000)
    colors = img.getcolors(maxcolors=1 << 24)  # [(count, (r, g, b)), ...]

    def count_near(want: tuple[int, int, int]) -> int:
        return sum(n for n, rgb in colors if sum(abs(a - b) for a, b in zip(rgb, want, strict=True)) < 60)

    assert count_near((0xCF, 0x22, 0x2E)) > 2000  # banner border, badges, regressed sparklines
    assert count_near((0x09, 0x69, 0xDA)) > 500  # links and sparklines


def test_the_y_axis_labels_are_short_and_tell_ticks_apart(site: Path, browser: Chromium) -> None:
    """The y axis' tick labels (drawn on the canvas, so read from the formatter the chart calls): a
    memory count in a unit of its own printed "3300000000" over the axis title, and a one-run series'
    five ticks all read "20.01"."""
    store = synthetic_store(n_commits=40, n_series=8, machines=2)
    browser.open((site / "series" / f"{series_slug(store.benchmark_list[2].key, 'runner-0')}.html").as_uri(),
                 ready=READY)
    labels = browser.evaluate("raggedDashboard.tickLabels([3.2e9, 3.3e9, 3.4e9, 12000, 2.5, 0.000123])")
    assert labels == ["3.2G", "3.3G", "3.4G", "12k", "2.5", "0.000123"], labels
    close = browser.evaluate("raggedDashboard.tickLabels([20.0061, 20.0062, 20.0063, 20.0064])")
    assert len(set(close)) == 4 and close[0] == "20.0061", close
    assert not browser.errors


def test_a_long_unbroken_parameter_does_not_widen_a_phone_sized_page(tmp_path: Path, browser: Chromium) -> None:
    """uxarray's grid file paths (one token of ~120 characters) made its series pages scroll sideways
    to 708 px at a 390 px wide window; the page heading and parameters now wrap anywhere."""
    store = synthetic_store(n_commits=12, n_series=2)
    path = "PosixPath('/home/runner/work/uxarray/uxarray/test/meshfiles/mpas/QU/oQU480.231010.nc')_" * 2
    long = {b: replace(b, params=(("grid_path", path),)) for b in store.benchmark_list}
    store = replace(store, benchmark_list=[long[b] for b in store.benchmark_list],
                    result_list=[replace(r, benchmark=long[r.benchmark]) for r in store.result_list])
    render_site(store, tmp_path / "site")
    browser.resize(390, 800)
    bench = store.benchmark_list[0]
    browser.open((tmp_path / "site" / "series" / f"{series_slug(bench.key, 'runner-0')}.html").as_uri(), ready=READY)
    got = _overflow(browser)
    assert got["page"] <= 0, got
