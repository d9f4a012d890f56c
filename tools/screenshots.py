"""The README's dashboard screenshots, from the recorded H200 history, in a real headless Chromium.

Follows `benchmarks/recorded/README.md`'s own steps (ingest the recorded results into a fresh
SQLite store, render the dashboard; no `ci compare`, so every flag comes from the history alone),
then photographs the overview and one series page with the pointer on its newest run.

    .venv/bin/python -m tools.screenshots [--out docs/img] [--results benchmarks/recorded/h200-2026-12-main]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from ci.records import Benchmark
from ci.site.model import series_slug
from tools.chromium import Chromium

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "recorded" / "h200-2026-12-main"
# The series docs/service.md's caption names: the triton kernel at DeiT-B/384 B 32, flat within 39.0-39.5 µs over the
# 35 commits of main measured on the H200 (2026-12-02).
SERIES = Benchmark("bench_attention.AttentionKernelsPR.time_gpu",
                   (("preset", "deitb384-b32-keep0.5"), ("backend", "triton")))


def main(argv: list[str] | None = None) -> int:
    """Render and photograph; returns the process exit code."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "img")
    ap.add_argument("--results", type=Path, default=RESULTS)
    ap.add_argument("--machine", default="h200")
    ap.add_argument("--width", type=int, default=1400)
    args = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="screenshots-"))
    db, site = work / "h200.sqlite", work / "site"
    ci = [sys.executable, "-m", "ci"]
    # The recorded folder is not asv.conf.json's results_dir: the project's settings are given, so the
    # site is this project's (its name, its thresholds).
    subprocess.run([*ci, "ingest", "--db", str(db), "--repo", str(ROOT), "--branch", "main", "--config",
                    str(ROOT / "asv.conf.json"), str(args.results)], cwd=ROOT, check=True)
    subprocess.run([*ci, "dashboard", "--db", str(db), "--out", str(site)], cwd=ROOT, check=True)
    args.out.mkdir(parents=True, exist_ok=True)
    with Chromium(work, args.width, 900) as b:
        b.open((site / "index.html").as_uri())
        b.screenshot(args.out / "dashboard-h200-overview.png")
        page = site / "series" / f"{series_slug(SERIES.key, args.machine)}.html"
        b.resize(args.width, 1000)
        b.open(page.as_uri(), ready="window.raggedDashboard && raggedDashboard.charts.length > 0")
        x, y = b.evaluate("""(() => { const u = raggedDashboard.charts[0].uplot, i = u.data[0].length - 1;
            const r = u.over.getBoundingClientRect();
            return [r.left + u.valToPos(u.data[0][i], 'x'), r.top + u.valToPos(u.data[1][i], 'y')]; })()""")
        b.mouse("mouseMoved", 1, 1)
        b.mouse("mouseMoved", x, y)
        b.wait_for("!document.querySelector('.chart-tip').hidden")
        b.screenshot(args.out / "dashboard-h200-series.png")
    print(f"screenshots in {args.out} (site {site})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
