"""The rendered site: every page present, links resolve, nothing from the network, user text
escaped, incremental re-rendering, argument errors."""

from __future__ import annotations

import math
import multiprocessing
import os
import re
import signal
import time
from dataclasses import replace
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from ci.forking import WorkerLost
from ci.records import Benchmark, Direction, Kind, Result
from ci.site import RenderStats, render_site
from ci.site.data import params_slug, unwrap
from ci.site.model import commit_slug, load_snapshot, series_slug
from ci.site.render import VENDOR
from tests.dashboard.fakes import hostile_store
from tools.fixtures import next_commit, synthetic_store


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.urls: list[tuple[str, str, str]] = []  # (tag, attribute, value)
        self.scripts: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for k, v in attrs:
            if k in ("href", "src", "xlink:href", "action") and v is not None:
                self.urls.append((tag, k, v))
        self._in_script = tag == "script"

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.scripts.append(data)


def _pages(out: Path) -> list[Path]:
    return sorted(out.rglob("*.html"))


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, RenderStats]:
    out = tmp_path_factory.mktemp("site")
    store = synthetic_store(n_commits=30, n_series=8, machines=2)
    return out, render_site(store, out, title="Perf <history>")


def test_every_page_is_written(site: tuple[Path, RenderStats]) -> None:
    out, stats = site
    store = synthetic_store(n_commits=30, n_series=8, machines=2)
    for name in ("index.html", "regressions.html", "correctness.html", "commits.html", "style.css"):
        assert (out / name).is_file(), name
    for c in store.commit_list:
        assert (out / "commit" / f"{commit_slug(c.sha)}.html").is_file()
    for b in store.benchmark_list:
        for m in ("runner-0", "runner-1"):
            assert (out / "series" / f"{series_slug(b.key, m)}.html").is_file()
    for s in load_snapshot(store).series:
        key, payload = unwrap((out / "data" / "series" / f"{s.slug}.js").read_text())
        assert key == s.slug and len(payload["x"]) == len(s.points)
        assert (out / "data" / "params" / f"{params_slug(s.benchmark.name, s.machine)}.js").is_file()
    for name in ("chart.js", *VENDOR):
        assert (out / name).is_file(), name
    n_params = len({(b.name, m) for b in store.benchmark_list for m in ("runner-0", "runner-1")})
    # pages + assets + commit pages + per series a page and its data + commits.js + one list per benchmark
    assert stats.pages_written == 5 + 1 + len(VENDOR) + 30 + 2 * 16 + 1 + n_params
    assert stats.pages_unchanged == 0
    assert stats.series == 16 and stats.commits == 30
    assert "Perf &lt;history&gt;" in (out / "index.html").read_text()


def test_links_resolve_and_nothing_comes_from_the_network(site: tuple[Path, RenderStats]) -> None:
    out, _ = site
    checked = 0
    for page in _pages(out):
        parser = _Links()
        parser.feed(page.read_text(encoding="utf-8"))
        for tag, attr, url in parser.urls:
            assert not re.match(r"^[a-z][a-z0-9+.-]*:", url, re.I), f"{page.name}: external {tag}[{attr}]={url}"
            assert not url.startswith("//"), url
            target = (page.parent / url.split("#", 1)[0]).resolve()
            assert target.is_file(), f"{page.relative_to(out)} links to missing {url}"
            checked += 1
        for code in parser.scripts:
            assert "http" not in code and "fetch(" not in code and "import(" not in code
    assert checked > 1000  # every table row links somewhere
    for script in ("chart.js", "vendor/uPlot.iife.min.js"):  # the scripts the pages load: no requests of their own
        code = (out / script).read_text()
        assert not re.search(r"fetch\(|XMLHttpRequest|import\(|WebSocket|sendBeacon", code), script
        assert re.findall(r"https?://[^\s\"')]*", code) in ([], ["https://github.com/leeoniya/uPlot"]), script


def test_overview_flags_open_regressions_and_sparklines(site: tuple[Path, RenderStats]) -> None:
    out, _ = site
    html = (out / "index.html").read_text()
    banner = html[html.index('id="open-regressions"'):html.index("</section>")]
    store = synthetic_store(n_commits=30, n_series=8, machines=2)
    assert store.commit_list[15].sha[:10] in banner  # the open regression (series 2, commit n/2)
    assert store.commit_list[27].sha[:10] in banner  # the failed correctness gate
    gate_row = next(r for r in banner.split("<tr") if store.commit_list[27].sha[:10] in r)
    assert '<td class="num worse">—</td>' in gate_row  # a gate has no A/B change to show (its ratio is worst/limit)
    assert store.commit_list[10].sha[:10] not in banner.split("verdict")[0] or "acknowledged" not in banner
    assert html.count('<svg class="spark') == 16
    assert html.count('class="flagged"') >= 2
    # For a screen reader: a page heading, and each sparkline link named (it holds only a drawing).
    assert html.count("<h1") == 1
    spark_links = re.findall(r'<a href="[^"]*"( aria-label="[^"]*")?><svg class="spark', html)
    assert len(spark_links) == 16 and all(label.startswith(' aria-label="history of ') for label in spark_links)


def test_series_page_chart_data_marks_and_table(site: tuple[Path, RenderStats]) -> None:
    out, _ = site
    store = synthetic_store(n_commits=30, n_series=8, machines=2)
    acked = store.benchmark_list[3]
    slug = series_slug(acked.key, "runner-0")
    html = (out / "series" / f"{slug}.html").read_text()
    assert f'data-series="{slug}"' in html and 'data-root="../"' in html
    assert '<script src="../vendor/uPlot.iife.min.js" defer></script><script src="../chart.js" defer></script>' in html
    runs = html[html.index('<table class="runs series-runs">'):]
    assert runs.count("<tr") == 30 + 1  # header + one row per run
    assert "expected: bigger tile for accuracy" in html[:html.index('<table class="runs series-runs">')]
    _, chart = unwrap((out / "data" / "series" / f"{slug}.js").read_text())
    assert chart["x"] == list(range(30)) and len(chart["v"]) == len(chart["lo"]) == len(chart["hi"]) == 30
    assert chart["unit"] == "seconds" and chart["label"] == "µs" and chart["div"] == 1e-6 and chart["n"] == 5
    assert all(lo <= v <= hi for v, lo, hi in zip(chart["v"], chart["lo"], chart["hi"], strict=True))
    kinds = {kind for _, kind, _ in chart["marks"]}
    assert "ack" in kinds and any("bigger tile for accuracy" in label for _, _, label in chart["marks"])
    _, commits = unwrap((out / "data" / "commits.js").read_text())
    assert commits["sha"] == [c.sha for c in store.commit_list] and commits["page"] == {}
    assert commits["subject"][7] == "commit number 7"


def test_series_page_lists_the_newest_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import ci.site.pages.series as dr

    monkeypatch.setattr(dr, "RUNS_SHOWN", 10)
    store = synthetic_store(n_commits=30, n_series=3)
    render_site(store, tmp_path)
    html = (tmp_path / "series" / f"{series_slug(store.benchmark_list[2].key, 'runner-0')}.html").read_text()
    runs = html[html.index('<table class="runs series-runs">'):]
    assert runs.count("<tr") == 10 + 1 and "the newest 10 of 30" in html
    assert store.commit_list[-1].sha in runs and store.commit_list[19].sha not in runs


def test_correctness_page_shows_gate_and_failure(site: tuple[Path, RenderStats]) -> None:
    out, _ = site
    store = synthetic_store(n_commits=30, n_series=8, machines=2)
    html = (out / "correctness.html").read_text()
    assert html.count('class="gate"') == 4  # 2 correctness series x 2 machines, each with its gate line
    assert "gate 0.004" in html
    assert f"commit/{store.commit_list[27].sha}.html" in html
    assert html.count('<circle class="pt fail"') == 2  # the one failing run, on each machine


def test_commit_page_results_verdicts_environment(site: tuple[Path, RenderStats]) -> None:
    out, _ = site
    store = synthetic_store(n_commits=30, n_series=8, machines=2)
    html = (out / "commit" / f"{store.commit_list[15].sha}.html").read_text()
    # The results table lists the series that moved past their noise: the +30% step on both machines.
    results = html[html.index('id="results-summary"'):html.index("<h2>Environment")]
    assert "16 results at this commit" in results
    stepped = series_slug(store.benchmark_list[2].key, "runner-0")
    rows = re.findall(r"<tr data-machine=[^>]*>.*?</tr>", results)
    assert 2 <= len(rows) <= 4, rows
    assert any(f"../series/{stepped}.html" in r and '<td class="worse">+' in r for r in rows)
    assert "median up 30%" in html and "regressed" in html
    assert "NVIDIA H200" in html and "NVIDIA A100-SXM4-80GB" in html and "560.35" in html
    quiet = (out / "commit" / f"{store.commit_list[9].sha}.html").read_text()
    assert "every other one stayed within it" in quiet or "changed past" in quiet
    # The second commit: every series has a run before it and no noise threshold yet. Not judged, and
    # said so, never "stayed within it" (a young environment's -33% read as nothing, 2026-12-07).
    young = (out / "commit" / f"{store.commit_list[1].sha}.html").read_text()
    young = young[young.index('id="results-summary"'):young.index("</p>", young.index('id="results-summary"'))]
    assert "had no noise threshold yet" in young and "stayed within it" not in young, young


def test_crashed_correctness_check_is_shown(site: tuple[Path, RenderStats]) -> None:
    out, _ = site
    store = synthetic_store(n_commits=30, n_series=8, machines=2)
    sha = store.commit_list[25].sha
    page = (out / "commit" / f"{sha}.html").read_text()
    section = page[page.index("No value (failed or skipped in asv)"):page.index("<h2>Environment")]
    assert "track_top1_agreement" in section and "correctness check did not run" in section
    assert section.count("<tr data-machine=") == 1 and 'data-machine="runner-0"' in section
    corr = (out / "correctness.html").read_text()
    assert f"commit/{sha}.html" in corr[corr.index("produced no value"):]


def test_hostile_text_is_escaped(tmp_path: Path) -> None:
    stats = render_site(hostile_store(), tmp_path)
    assert stats.pages_written > 10
    escaped = "&lt;script&gt;alert("  # then &#34;x&#34; (jinja) or &quot;x&quot; (html.escape)
    seen = 0
    for page in _pages(tmp_path):
        text = page.read_text(encoding="utf-8")
        assert "<script>alert" not in text, page
        assert "<b>bold</b>" not in text, page
        seen += text.count(escaped)
        parser = _Links()
        parser.feed(text)
        assert len(parser.scripts) == 1  # only the dashboard's own filter script
    assert seen > 20
    index = (tmp_path / "index.html").read_text()
    assert 'data-machine="m&lt;script&gt;' in index  # attribute values too


def test_control_characters_are_shown_as_escapes(tmp_path: Path) -> None:
    """A bidirectional override reorders what a reader sees (a commit subject or a benchmark name that
    reads as another), a terminal escape is noise: in the pages and the chart data they are escapes."""
    store = synthetic_store(n_commits=6, n_series=4)
    store.commit_list[-1] = replace(store.commit_list[-1], subject="fix \u202egnp.evil\x1b[31m red")
    bench = Benchmark("bench_ctl.Ctl.time_x", (("p", "a\u202eb"),), unit="seconds")
    store.benchmark_list.append(bench)
    for c in store.commit_list:
        store.result_list.append(Result(benchmark=bench, commit_sha=c.sha, machine="runner-0", samples=(1e-5, 2e-5)))
    order = {c.sha: i for i, c in enumerate(store.commit_list)}
    store.result_list.sort(key=lambda r: order[r.commit_sha])
    render_site(store, tmp_path)
    texts = {f: f.read_text(encoding="utf-8") for f in tmp_path.rglob("*") if f.suffix in (".html", ".js")}
    assert not [f for f, t in texts.items() if "\u202e" in t or "\x1b" in t]  # no raw control anywhere
    html_escape, json_escape = r"fix \u202egnp.evil\x1b[31m red", r"fix \\u202egnp.evil\\x1b[31m red"
    pages = [f for f, t in texts.items() if f.suffix == ".html" and html_escape in t]
    data = [f for f, t in texts.items() if f.suffix == ".js" and json_escape in t]
    assert pages and data, (pages, data)
    assert any(r"a\u202eb" in t for f, t in texts.items() if f.suffix == ".html")


def test_rerender_is_incremental(tmp_path: Path) -> None:
    store = synthetic_store(n_commits=20, n_series=6)
    first = render_site(store, tmp_path)
    os.utime(tmp_path / "index.html", ns=(1, 1))  # any rewrite would change this
    second = render_site(store, tmp_path)
    assert (second.pages_written, second.pages_unchanged) == (0, first.pages_written)
    assert (tmp_path / "index.html").stat().st_mtime_ns == 1

    def site(p: Path) -> bool:  # a served file, not the bookkeeping (dot-named files and folders)
        return p.is_file() and not any(part.startswith(".") for part in p.relative_to(tmp_path).parts)

    files = [p for p in tmp_path.rglob("*") if site(p)]
    for p in files:
        os.utime(p, ns=(1, 1))
    old_head = store.commit_list[-1].sha
    new = next_commit(store)
    third = render_site(store, tmp_path)
    changed = {str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if site(p) and p.stat().st_mtime_ns != 1}
    # A change point's "after" median moves with every new run, so pages showing one change too.
    steps = {r.sha for r in load_snapshot(store).regressions if r.source == "change point"}
    expected = {"index.html", "commits.html", "correctness.html", f"commit/{new.sha}.html",
                f"commit/{old_head}.html", "data/commits.js"}  # the old head gains a "newer" link
    for b in store.benchmark_list:  # every series has a new run: its page (newest runs) and its data
        slug = series_slug(b.key, "runner-0")
        expected |= {f"series/{slug}.html", f"data/series/{slug}.js"}
    may_change = {"regressions.html"} | {f"commit/{sha}.html" for sha in steps}  # when 4 digits differ
    assert expected <= changed <= expected | may_change, changed - expected
    assert third.pages_written == len(changed)
    assert third.pages_unchanged == len(files) + 1 - len(changed)  # + the new commit's page
    # Unchanged: every other commit page, the benchmark lists, style.css, chart.js and the chart library.
    assert {"style.css", "chart.js", "vendor/uPlot.iife.min.js"}.isdisjoint(changed)
    assert f"{new.sha}.html" in (tmp_path / "commit" / f"{old_head}.html").read_text()


def test_removed_pages_and_foreign_files(tmp_path: Path) -> None:
    store = synthetic_store(n_commits=10, n_series=4)
    render_site(store, tmp_path)
    (tmp_path / "CNAME").write_text("perf.example.org")  # not ours: must survive
    gone = store.commit_list.pop()
    store.result_list = [r for r in store.result_list if r.commit_sha != gone.sha]
    stats = render_site(store, tmp_path)
    assert stats.pages_removed == 1
    assert not (tmp_path / "commit" / f"{gone.sha}.html").exists()
    assert (tmp_path / "CNAME").read_text() == "perf.example.org"


def test_only_files_inside_the_output_folder_are_ever_removed(tmp_path: Path) -> None:
    """The manifest lives in the output folder, so whoever can write there can list any path in it:
    an absolute path, `..`, a symlinked folder leading out, a symlink, a folder. None of them is
    removed, whatever the manifest says; a stale page of our own still is."""
    import json

    from ci.site.writer import MANIFEST

    out, outside = tmp_path / "site", tmp_path / "outside"
    outside.mkdir()
    victims = {name: outside / name for name in ("abs.txt", "dotdot.txt", "via-link.txt", "target.txt")}
    for victim in victims.values():
        victim.write_text("keep me")
    store = synthetic_store(n_commits=6, n_series=3)
    render_site(store, out)
    (out / "escape").symlink_to(outside, target_is_directory=True)
    (out / "a-link.html").symlink_to(victims["target.txt"])
    (out / "a-folder").mkdir()
    (out / "stale.html").write_text("an old page of ours")
    manifest = json.loads((out / MANIFEST).read_text())
    entry = {"input": "x", "output": "y", "size": 1}
    for rel in (str(victims["abs.txt"]), "../outside/dotdot.txt", "commit/../../outside/dotdot.txt",
                "escape/via-link.txt", "a-link.html", "a-folder", "stale.html", "", "./stale.html"):
        manifest["pages"][rel] = entry
    manifest["pages"]["not-a-dict.html"] = 5  # a damaged entry is ignored, not a crash
    (out / MANIFEST).write_text(json.dumps(manifest))
    stats = render_site(store, out)
    assert all(v.read_text() == "keep me" for v in victims.values())
    assert (out / "a-link.html").is_symlink() and (out / "a-folder").is_dir()
    assert not (out / "stale.html").exists() and stats.pages_removed == 1
    assert set(json.loads((out / MANIFEST).read_text())["pages"]) == {
        str(p.relative_to(out)) for p in out.rglob("*") if p.is_file() and not p.is_symlink()
        and not any(part.startswith(".") for part in p.relative_to(out).parts)}  # the pages, not the bookkeeping


def test_damaged_page_is_rewritten(tmp_path: Path) -> None:
    store = synthetic_store(n_commits=6, n_series=3)
    render_site(store, tmp_path)
    (tmp_path / "regressions.html").write_text("truncated")
    stats = render_site(store, tmp_path)
    assert stats.pages_written == 1
    assert "Regressions" in (tmp_path / "regressions.html").read_text()


def test_baseline_and_base_url(tmp_path: Path) -> None:
    store = synthetic_store(n_commits=20, n_series=4)
    base = store.commit_list[12].sha  # after series 3's +30% step at commit 6
    render_site(store, tmp_path, baseline_sha=base[:9], base_url="https://perf.example.org/vit/")
    html = (tmp_path / "index.html").read_text()
    assert f"Baseline: {base[:10]}" in html
    assert 'href="https://perf.example.org/vit/series/' in html
    rows = re.findall(r"<tr data-machine[^>]*>(.*?)</tr>", html, re.S)
    step_row = next(r for r in rows if store.benchmark_list[3].params_label in r)
    base_cell = re.findall(r'<td class="num[^"]*"[^>]*>([^<]*)</td>', step_row)[2]  # latest, prev, base
    assert abs(float(base_cell.replace("−", "-").rstrip("%"))) < 10  # vs commit 12, not vs the pre-step first run


def test_branch_filter(tmp_path: Path) -> None:
    store = synthetic_store(n_commits=8, n_series=3)
    from dataclasses import replace

    store.commit_list[-1] = replace(store.commit_list[-1], branch="pr-7")
    stats = render_site(store, tmp_path, branch="main")
    assert stats.commits == 7
    assert not (tmp_path / "commit" / f"{store.commit_list[-1].sha}.html").exists()


def test_bad_arguments(tmp_path: Path) -> None:
    store = synthetic_store(n_commits=3, n_series=3)
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="not a folder"):
        render_site(store, tmp_path / "file")
    with pytest.raises(TypeError, match="out_dir"):
        render_site(store, 42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="title"):
        render_site(store, tmp_path / "o", title=b"perf")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="project"):
        render_site(store, tmp_path / "o", project="uxarray")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="base_url"):
        render_site(store, tmp_path / "o", base_url="javascript:alert(1)")
    with pytest.raises(ValueError, match="baseline"):
        render_site(store, tmp_path / "o", baseline_sha="zzzz")


def test_empty_store(tmp_path: Path) -> None:
    """A store with nothing measured says so, never the green "No open regressions" (a check that did
    not run is not a pass): a new user's ingest of an empty folder lands here."""
    from tools.fixtures import MemoryStore

    stats = render_site(MemoryStore(), tmp_path)
    assert stats.series == 0 and stats.commits == 0
    page = (tmp_path / "index.html").read_text()
    assert "Nothing measured yet" in page and "No open regressions" not in page
    assert '<section class="banner warn" id="open-regressions">' in page


def test_a_history_too_short_to_judge_is_not_called_clean(tmp_path: Path) -> None:
    """Three commits: no series has a noise threshold yet, so nothing can be called a regression, and
    the overview says so instead of the green "No open regressions" (a real 3-commit history read as
    clean, 2026-12-07); a longer history is judged and its banner is green again."""
    from ci.cli import main
    from tests.ci.conftest import sha_for, write_results

    def overview(commits: int) -> str:
        root = tmp_path / f"c{commits}"
        write_results(root / "results", [sha_for(i) for i in range(commits)])
        db = str(root / "h.sqlite")
        assert main(["ingest", "--db", db, str(root / "results")]) == 0
        assert main(["dashboard", "--db", db, "--out", str(root / "site")]) == 0
        return " ".join((root / "site" / "index.html").read_text().split())

    short = overview(3)
    assert "Too little history to judge yet" in short and "No open regressions" not in short
    assert '<section class="banner warn" id="open-regressions">' in short
    long = overview(10)
    assert "Too little history to judge yet" not in long and "too short a history" not in long
    assert "No open regressions" in long and "were judged" not in long


def test_a_series_far_worse_than_its_first_run_with_nothing_open_is_named(tmp_path: Path) -> None:
    """A step at a series' second commit can never be judged (three commits each side): stingray's x165
    read "No open regressions" in green beside a red +15,840%. A series past 3x worse than its first run
    with no regression open is named under the banner, which is no longer green; 2x is not."""
    from ci.cli import main
    from tests.ci.conftest import sha_for, write_results

    def overview(factor: float) -> str:
        root = tmp_path / f"x{factor:g}"
        step = lambda bench, j, c: [(1e-4 * (j + 1)) * (factor if c >= 1 and "time_gpu" in bench and j == 0 else 1)
                                    * (1 + 0.01 * k) for k in range(6)]  # noqa: E731
        write_results(root / "results", [sha_for(i) for i in range(10)], samples=step)
        db = str(root / "h.sqlite")
        assert main(["ingest", "--db", db, str(root / "results")]) == 0
        assert main(["dashboard", "--db", db, "--out", str(root / "site")]) == 0
        return " ".join((root / "site" / "index.html").read_text().split())

    far = overview(10.0)
    assert "No open regressions judged" in far and "1 series is past x3 worse than its first run" in far, far
    assert '<section class="banner warn" id="open-regressions">' in far and "+900.0%" in far
    near = overview(2.0)
    assert "past x3" not in near and '<section class="banner ok" id="open-regressions">' in near


def test_a_history_of_series_without_a_direction_is_not_called_clean(tmp_path: Path) -> None:
    """Every series a track_ benchmark in a unit the service does not know: none can regress, and the
    overview says so instead of "No open regressions" (mujoco-warp's real history read as clean,
    2026-12-07); beside a judged series the count of them is said under the green banner."""
    from ci.cli import main
    from tests.ci.conftest import BENCHMARKS, sha_for, write_results

    unknown = {"name": "bench_u.U.track_metric", "type": "track", "unit": "widgets", "params": [],
               "param_names": [], "version": "v1"}

    def overview(name: str, benchmarks: list) -> str:
        root = tmp_path / name
        write_results(root / "results", [sha_for(i) for i in range(10)], benchmarks=benchmarks,
                      samples=lambda bench, j, c: [3.0 + 0.01 * k for k in range(5)])
        db = str(root / "h.sqlite")
        assert main(["ingest", "--db", db, str(root / "results")]) == 0
        assert main(["dashboard", "--db", db, "--out", str(root / "site")]) == 0
        return " ".join((root / "site" / "index.html").read_text().split())

    alone = overview("alone", [unknown])
    assert "Nothing here can be called a regression" in alone and "No open regressions" not in alone
    timed = next(b for b in BENCHMARKS if b["name"].split(".")[-1].startswith("time_"))
    mixed = overview("mixed", [timed, unknown])
    assert "No open regressions" in mixed and "1 declare no direction" in mixed


def test_a_newest_value_a_ratio_cannot_judge_is_not_called_clean(tmp_path: Path) -> None:
    """A timing series whose newest value is 0 (no ratio, no threshold there) is neither judged, too
    short nor undirected: alone, the overview says nothing was judged at that commit instead of "No
    open regressions"; beside a judged series the green banner counts it. (A track_ benchmark in
    seconds: ingest refuses a time_ benchmark's 0 since 2026-12-07.)"""
    from ci.cli import main
    from tests.ci.conftest import BENCHMARKS, sha_for, write_results

    timed = [{**b, "name": b["name"].replace(".time_gpu", ".track_seconds"), "type": "track"}
             for b in BENCHMARKS if b["name"].endswith(".time_gpu")]

    def overview(name: str, benchmarks: list, zero: set[int]) -> str:
        root = tmp_path / name
        write_results(root / "results", [sha_for(i) for i in range(10)], benchmarks=benchmarks,
                      samples=lambda bench, j, c: [0.0 if c == 9 and j in zero else 1e-3 * (1 + 0.01 * k)
                                                   for k in range(5)])
        db = str(root / "h.sqlite")
        assert main(["ingest", "--db", db, str(root / "results")]) == 0
        assert main(["dashboard", "--db", db, "--out", str(root / "site")]) == 0
        return " ".join((root / "site" / "index.html").read_text().split())

    alone = overview("alone", timed[:1], set(range(100)))  # every point of its grid 0 at the newest commit
    assert "Nothing judged at the newest commit" in alone and "No open regressions" not in alone
    mixed = overview("mixed", timed[:1], {0})  # one point of four
    assert "No open regressions" in mixed and "1 have no noise threshold at their newest value" in mixed


def test_dashboard_never_imports_torch(tmp_path: Path) -> None:
    """ci/ (the site, ci/site/, included) runs on machines without torch (conftest imports it, so check
    in a fresh process)."""
    import subprocess
    import sys

    code = ("import sys; from tools.fixtures import synthetic_store; from ci.site import render_site; "
            f"render_site(synthetic_store(10, 4), {str(tmp_path)!r}); "
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'triton', 'timm')); "
            "assert not bad, bad")
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (tmp_path / "index.html").is_file()


def test_verdict_flags_only_its_machines_series(tmp_path: Path) -> None:
    # Several runners share one history: a regression judged on runner-1 is not one on runner-0.
    from ci.records import Outcome, Verdict

    store = synthetic_store(n_commits=8, n_series=4, machines=2)
    bench, head, base = store.benchmark_list[2], store.commit_list[6].sha, store.commit_list[5].sha
    store.verdict_list = [Verdict(benchmark=bench, outcome=Outcome.REGRESSED, base_value=1.0, head_value=1.3,
                                  ratio=1.3, base_sha=base, head_sha=head,
                                  reason="judged on runner-1", machine="runner-1")]
    snap = load_snapshot(store)
    (reg,) = [r for r in snap.regressions if r.source == "verdict"]  # change points are found too
    assert reg.machines == ("runner-1",)
    render_site(store, tmp_path)

    def series_text(machine: str) -> str:
        return (tmp_path / "series" / f"{series_slug(bench.key, machine)}.html").read_text()

    # The reason shows in the regressions table, the outcome in the history table's verdict column.
    assert "judged on runner-1" in series_text("runner-1") and "<td>regressed</td>" in series_text("runner-1")
    assert "judged on runner-1" not in series_text("runner-0") and "<td>regressed</td>" not in series_text("runner-0")
    commit_page = (tmp_path / "commit" / f"{commit_slug(head)}.html").read_text()
    assert "runner-1" in commit_page.split("<h2>Verdicts</h2>", 1)[1].split("</table>", 1)[0]
    # A verdict without a machine (stored before verdicts had one) keeps flagging every machine.
    store.verdict_list = [Verdict(**{**store.verdict_list[0].__dict__, "machine": ""})]
    (reg,) = [r for r in load_snapshot(store).regressions if r.source == "verdict"]
    assert reg.machines == ("runner-0", "runner-1")
    out = tmp_path / "old"
    render_site(store, out)
    for m in ("runner-0", "runner-1"):
        assert "judged on runner-1" in (out / "series" / f"{series_slug(bench.key, m)}.html").read_text()


def test_a_series_of_unknown_direction_is_listed_but_never_coloured(tmp_path: Path) -> None:
    """The same 30% step in a declared-higher and an undeclared series: the first is coloured worse on
    the commit page, the second listed there uncoloured (moved, neither better nor worse)."""
    store = synthetic_store(n_commits=30, n_series=2)
    step_sha = store.commit_list[20].sha
    for name, direction, kind in (("declared", Direction.HIGHER, Kind.THROUGHPUT),
                                  ("undeclared", Direction.UNKNOWN, Kind.OTHER)):
        bench = Benchmark(f"bench_io.Copy.track_{name}", unit="GB/s", direction=direction, kind=kind)
        store.benchmark_list.append(bench)
        for i, c in enumerate(store.commit_list):
            level = (100.0 if i < 20 else 70.0) * (1 + 0.003 * math.sin(i))  # a little commit-to-commit noise
            store.result_list.append(Result(bench, c.sha, "runner-0", (level, level * 1.001, level * 0.999)))
    order = {c.sha: i for i, c in enumerate(store.commit_list)}
    store.result_list.sort(key=lambda r: order[r.commit_sha])
    render_site(store, tmp_path)
    page = (tmp_path / "commit" / f"{commit_slug(step_sha)}.html").read_text(encoding="utf-8")
    results = page[page.index("<h2>Results</h2>"):]
    rows = {name: next(r for r in results.split("<tr") if f"track_{name}" in r) for name in ("declared", "undeclared")}
    assert 'class="worse"' in rows["declared"]
    assert 'class="worse"' not in rows["undeclared"] and 'class="better"' not in rows["undeclared"]
    assert 'class="moved"' in rows["undeclared"] and "−29.8%" in rows["undeclared"]
    series = {name: (tmp_path / "series" / f"{series_slug(f'bench_io.Copy.track_{name}', 'runner-0')}.html")
              .read_text(encoding="utf-8") for name in ("declared", "undeclared")}
    assert "higher is better" in series["declared"]
    assert "unknown is better" not in series["undeclared"] and "direction not declared" in series["undeclared"]


def test_runs_at_or_below_zero_are_judged_by_difference(tmp_path: Path) -> None:
    """A count that goes 0 -> 5 (warnings), one that is zero throughout, and a timing with three
    stray zeros: the detector reads ratios, so zero runs carry no level; from 5 of them on a series'
    steps are judged by difference (the warnings' step is a regression on the page), and fewer are
    left out as failed runs. The page says which. A positive series says nothing of the kind."""
    store = synthetic_store(n_commits=30, n_series=1)
    for name in ("warnings", "errors", "stray", "fresh"):
        bench = Benchmark(f"bench_io.Lint.track_{name}", unit="count", direction=Direction.LOWER, kind=Kind.OTHER)
        store.benchmark_list.append(bench)
        for i, c in enumerate(store.commit_list):
            level = {"warnings": 0.0 if i < 20 else 5.0, "errors": 0.0, "stray": 0.0 if i in (3, 9, 15) else 2.0,
                     "fresh": 0.0 if i < 28 else 2.0}[name]
            store.result_list.append(Result(bench, c.sha, "runner-0", (level,)))
    order = {c.sha: i for i, c in enumerate(store.commit_list)}
    store.result_list.sort(key=lambda r: order[r.commit_sha])
    render_site(store, tmp_path)

    def meta(key: str) -> str:
        page = (tmp_path / "series" / f"{series_slug(key, 'runner-0')}.html").read_text(encoding="utf-8")
        return page[page.index('<p class="meta">'):page.index("</p>", page.index('<p class="meta">'))]

    assert "<b>20 of 30 runs at or below zero: change points by difference</b>" in meta("bench_io.Lint.track_warnings")
    assert "<b>every run at or below zero: change points by difference</b>" in meta("bench_io.Lint.track_errors")
    assert "<b>3 of 30 runs at or below zero: not analysed</b>" in meta("bench_io.Lint.track_stray")
    positive = next(b.key for b in store.benchmark_list if not b.name.startswith("bench_io.Lint"))
    assert "at or below zero" not in meta(positive)
    regressions = (tmp_path / "regressions.html").read_text(encoding="utf-8")
    row = regressions[regressions.index("bench_io.Lint.track_warnings"):][:3000]
    assert store.commit_list[20].sha[:10] in row and "0 → 5" in row
    # Suspicions and thresholds by difference too: a count that stayed put has a threshold of 0, its
    # step was suspected and confirmed, and the count that moved at the newest two commits is suspected.
    assert re.search(r"noise threshold now ±[0-9.]+ by difference", meta("bench_io.Lint.track_warnings"))
    warnings = (tmp_path / "series" / f"{series_slug('bench_io.Lint.track_warnings', 'runner-0')}.html"
                ).read_text(encoding="utf-8")
    suspicion = next(r for r in warnings.split("<tr") if "confirmed" in r)
    assert store.commit_list[20].sha[:10] in suspicion and "0 → 5" in suspicion and "±0 by difference" in suspicion
    run = next(r for r in warnings.split("<tr") if store.commit_list[20].sha[:7] in r and 'class="worse"' in r)
    assert 'title="noise threshold ±0 by difference"' in run and "0 → 5" in run
    overview = (tmp_path / "index.html").read_text(encoding="utf-8")
    banner = overview[overview.index("track_fresh"):][:2000]
    assert "0 → 2" in banner and "±0 by difference" in banner


def test_the_site_is_the_projects_and_shows_only_the_pages_its_data_fill(tmp_path: Path) -> None:
    """The title and the commits' links come from the project (asv.conf.json, as the store keeps it);
    a suite without correctness benchmarks gets no correctness page nor tab, and a page that a render
    wrote before is removed once its data are gone."""
    from dataclasses import replace

    from ci.records import Project

    store = synthetic_store(n_commits=6, n_series=5)
    render_site(store, tmp_path)
    index = (tmp_path / "index.html").read_text()
    assert "<title>Benchmarks</title>" in index and 'href="correctness.html"' in index  # unnamed: no one's name
    assert (tmp_path / "correctness.html").is_file()
    timing = {b.key for b in store.benchmark_list if b.kind != Kind.CORRECTNESS}
    foreign = replace(store, result_list=[r for r in store.result_list if r.benchmark.key in timing],
                      benchmark_list=[b for b in store.benchmark_list if b.key in timing],
                      verdict_list=[v for v in store.verdict_list if v.benchmark.key in timing],
                      failure_list=[f for f in store.failure_list if f.benchmark.key in timing],
                      project_conf=Project("tinygrid", commit_url="https://example.org/tinygrid/commit/"))
    render_site(foreign, tmp_path)
    assert not (tmp_path / "correctness.html").exists()
    pages = {p: p.read_text() for p in tmp_path.rglob("*.html")}
    assert all("correctness.html" not in text and ">Correctness<" not in text for text in pages.values())
    assert all("<title>" in text and "tinygrid benchmarks" in text for text in pages.values())
    sha = store.commit_list[-1].sha
    page = pages[tmp_path / "commit" / f"{commit_slug(sha)}.html"]
    assert f'href="https://example.org/tinygrid/commit/{sha}"' in page
    # An explicit project (`--config`) and title win over the store's.
    render_site(foreign, tmp_path, project=Project("other"))
    assert "<title>other benchmarks</title>" in (tmp_path / "index.html").read_text()
    assert "commit-link" not in (tmp_path / "commit" / f"{commit_slug(sha)}.html").read_text()
    render_site(foreign, tmp_path, title="Perf")
    assert "<title>Perf</title>" in (tmp_path / "index.html").read_text()


def test_a_series_of_2100_commits_renders(tmp_path: Path) -> None:
    """The change-point merge's exact test overflowed once the segments around a step held ~1,030
    commits, and the render stopped (exit 2); a 2,100-commit history renders with its steps marked."""
    store = synthetic_store(n_commits=2100, n_series=3, samples=3)
    stats = render_site(store, tmp_path / "site")
    assert stats.commits == 2100 and stats.series == 3
    snap = load_snapshot(store)
    stepped = next(s for s in snap.series if s.benchmark == store.benchmark_list[2])
    assert [c.sha for c in stepped.changes] == [store.commit_list[1050].sha]


def _force_fork(monkeypatch: pytest.MonkeyPatch) -> None:
    import ci.site.judge as dm
    import ci.site.render as render

    if "fork" not in multiprocessing.get_all_start_methods():
        pytest.skip("no fork: the pages are always rendered in one process")
    monkeypatch.setattr(render, "PARALLEL_MIN_PAGES", 1)
    monkeypatch.setattr(render, "fork_workers", lambda items, least: 2 if items >= least else 1)
    monkeypatch.setattr(dm, "fork_workers", lambda items, least: 1)  # the judging: in this process here


@pytest.mark.timeout(60)  # multiprocessing.Pool waited for the dead worker's pages forever
def test_a_worker_killed_mid_render_is_an_error_naming_what_it_did_not_render(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The OOM killer's SIGKILL of one forked page worker fails the render within seconds, naming
    the series pages that never came back, and leaves no worker behind (`ci run` renders inside the
    host's GPU lock: a hang held every other GPU job until the workflow's timeout)."""
    import ci.site.render as render

    _force_fork(monkeypatch)
    store = synthetic_store(n_commits=8, n_series=6)
    victim = store.benchmark_list[3].key
    parent = os.getpid()
    real = render._Site.series_page

    def dies(self: Any, s: Any) -> None:
        if s.benchmark.key == victim and os.getpid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)
        real(self, s)

    monkeypatch.setattr(render._Site, "series_page", dies)
    t0 = time.perf_counter()
    said = r"stopped \(killed\? out of memory\?\); \d+ series pages not rendered: "
    with pytest.raises(WorkerLost, match=said) as got:
        render_site(store, tmp_path / "site")
    assert time.perf_counter() - t0 < 10
    assert f"{victim} on runner-0" in str(got.value) or " more" in str(got.value)
    assert multiprocessing.active_children() == []
    monkeypatch.setattr(render._Site, "series_page", real)
    assert render_site(store, tmp_path / "site").series == 6  # the same render again completes


def test_the_code_salt_covers_the_site_and_what_its_pages_are_computed_with(tmp_path: Path, monkeypatch) -> None:
    """A change in any module of the site (ci/site/, its pages included), in a template, or in the
    verdicts, records or formatter it computes with re-renders every page: the salt hashes them all,
    from where they are (a path that names nothing would drop its files from the salt silently)."""
    import shutil

    import ci.site.render as render

    root = Path(__file__).resolve().parents[2]
    assert render._PKG_DIR == root / "ci" / "site" and render._ROOT == root
    assert all((root / rel).exists() for rel in render._CODE), render._CODE
    copy = tmp_path / "tree"
    for rel in ("ci/site", *render._CODE):
        src, dst = root / rel, copy / rel
        if src.is_dir():
            shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(src, dst)
    monkeypatch.setattr(render, "_PKG_DIR", copy / "ci" / "site")
    monkeypatch.setattr(render, "_ROOT", copy)
    for rel in ("ci/site/pages/steps.py", "ci/site/model.py", "ci/site/templates/base.html",
                "ci/site/templates/vendor/uPlot.min.css", "ci/verdicts/gates.py", "ci/format.py",
                "ci/records/series.py"):
        before = render._code_salt()
        path = copy / rel
        path.write_bytes(path.read_bytes() + b"\n")
        assert render._code_salt() != before, f"a change in {rel} did not change the salt"


def test_every_row_the_machine_filter_hides_names_one_of_its_choices(tmp_path: Path) -> None:
    """The filter hides what carries another machine's name: every `data-machine` of every page is
    one of the filter's choices. A failed point's row carried the raw machine key, which no choice
    named where a machine ran two environments, so choosing either hid every failed row (uxarray's
    6,977 on its commit pages, 2026-12-07)."""
    from ci.ingest import ingest_results_dir
    from ci.store import Store
    from tests.ci.conftest import sha_for, write_results

    def some_fail(name: str, j: int, c: int) -> list[float] | None:
        return None if "time_gpu" in name and j == 1 else [1e-3 * (j + 1) * (1 + 0.01 * k) for k in range(5)]

    root = tmp_path / "results"
    for env in ("conda-py3.11-a", "conda-py3.11-b"):
        write_results(root, [sha_for(i) for i in range(4)], samples=some_fail, env_name=env)
    with Store(str(tmp_path / "h.sqlite")) as store:
        assert ingest_results_dir(store, root).ok
        render_site(store, tmp_path / "site")
    choices: set[str] = set()
    tagged: dict[str, set[str]] = {}
    for page in (tmp_path / "site").rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        choices |= {v[2:] for v in re.findall(r'<option value="(m:[^"]*)"', text)}
        tagged[page.name] = set(re.findall(r'data-machine="([^"]*)"', text))
    assert len(choices) == 2, choices  # one machine name, two environments: two choices
    commit_pages = [p for p in tagged if p != "index.html"]
    assert any(tagged[p] for p in commit_pages)
    for page, machines in tagged.items():
        assert machines <= choices, (page, machines - choices)
    failed_rows = re.findall(r'<tr data-machine="([^"]*)"[^>]*><td class="bench">.*?</td><td>[^<]*</td><td>failed</td>',
                             (tmp_path / "site" / "commit" / f"{commit_slug(sha_for(1))}.html").read_text())
    assert len(failed_rows) == 2 and set(failed_rows) == choices  # one failed point per environment


def test_a_commit_whose_every_point_failed_says_so_not_that_its_results_stayed_within(tmp_path: Path) -> None:
    """A commit at which every point failed to run read "0 results at this commit; 0 changed ..., every
    other one stayed within it" and "No environment recorded" (conda's history, 2026-12-07)."""
    from ci.ingest import ingest_results_dir
    from ci.site import render_site
    from ci.store import Store
    from tests.ci.conftest import sha_for, write_results

    root = tmp_path / "results"
    write_results(root, [sha_for(i) for i in range(8)],
                  samples=lambda name, j, c: None if c == 5 else [1e-4 * (j + 1) * (1 + 0.01 * k) for k in range(6)])
    with Store(tmp_path / "h.sqlite") as store:
        ingest_results_dir(store, root)
        render_site(store, tmp_path / "site")
    page = (tmp_path / "site" / "commit" / f"{sha_for(5)}.html").read_text(encoding="utf-8")
    summary = page[page.index('id="results-summary"'):page.index("</p>", page.index('id="results-summary"'))]
    assert "No result was measured at this commit: every point recorded here failed to run" in summary, summary
    assert "stayed within" not in summary


def test_a_series_acknowledged_as_known_broken_leaves_the_failing_banner(tmp_path: Path) -> None:
    """After `ci ack` of a benchmark failing at every commit, compare listed it as not compared but the
    overview still read "1 series failing" (conda's history, 2026-12-07): it is listed apart, with who
    acknowledged it and why, and raises no banner."""
    from ci.ingest import ingest_results_dir
    from ci.site import render_site
    from ci.store import Store
    from tests.ci.conftest import sha_for, write_results

    root = tmp_path / "results"
    write_results(root, [sha_for(i) for i in range(8)],
                  samples=lambda name, j, c: None if ("time_gpu" in name and j == 0)
                  else [1e-4 * (j + 1) * (1 + 0.01 * k) for k in range(6)])
    with Store(tmp_path / "h.sqlite") as store:
        ingest_results_dir(store, root)
        render_site(store, tmp_path / "before")
        key = next(f.benchmark.key for f in store.failures())
        store.acknowledge(key, sha_for(0), "ana", "needs a GPU the runner lacks")
        render_site(store, tmp_path / "after")
    before = (tmp_path / "before" / "index.html").read_text(encoding="utf-8")
    after = (tmp_path / "after" / "index.html").read_text(encoding="utf-8")
    assert 'id="failing"' in before and 'id="known-broken"' not in before
    assert 'id="failing"' not in after and "1 series acknowledged as known broken" in after
    assert "acknowledged by ana: needs a GPU the runner lacks" in after


@pytest.mark.parametrize(("factor", "shown"), [(5.0, True), (2.0, False)])
def test_a_series_past_3x_worse_at_the_newest_commit_is_named_before_the_next_one(tmp_path: Path, factor: float,
                                                                                  shown: bool) -> None:
    """One commit cannot be a suspicion (two commits hold a step) nor a change point: conda's x6.7 at its
    newest commit showed only in the PR comment (2026-12-07). Past 3x worse than the run before it (more
    than any job-to-job move seen without a code change), at the machine's newest commit, it is named
    under the banner; a 2x move waits for the next commit as any step does."""
    from ci.ingest import ingest_results_dir
    from ci.site import render_site
    from ci.store import Store
    from tests.ci.conftest import sha_for, write_results

    def samples(name: str, j: int, c: int) -> list[float]:
        level = 1e-4 * (j + 1) * (factor if ("time_gpu" in name and j == 0 and c == 9) else 1.0)
        return [level * (1 + 0.002 * k) for k in range(6)]

    root = tmp_path / "results"
    write_results(root, [sha_for(i) for i in range(10)], samples=samples)
    with Store(tmp_path / "h.sqlite") as store:
        ingest_results_dir(store, root)
        render_site(store, tmp_path / "site")
    page = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    assert ("1 series moved past x3 worse at its newest run" in page) is shown
