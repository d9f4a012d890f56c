"""Benchmark script (not a test): the dashboard's render time and size on a large history, this
checkout against a baseline checkout (today's code) in one run.

For each checkout in turn, in its own process with that checkout's code (`tools.fixtures` and
`ci.store` included, so each reads a store its own code wrote): build a synthetic history (default
1,000 commits x 500 series on one machine, 10 samples per result; `tools.fixtures.synthetic_store`,
the same for both), copy it into a real `ci.store.Store` (SQLite; not timed), then time a full
render into an empty folder, a re-render with nothing new, and, after one more commit is ingested
into that same store through the real ingest path (as a push job does), a re-render. Prints a table
with both and their ratio, the machine's load average, and the site's sizes (what a static host
serves; the dashboard's bookkeeping files, dot-named, apart).

    .venv/bin/python -m tools.bench_render [--commits 1000] [--series 500] [--baseline-rev REV | --baseline DIR]

`--baseline-rev` checks REV out into a temporary git worktree (removed afterwards); without a
baseline only this checkout is measured. Run it from the repository root.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Runs inside the checkout being measured (cwd = that checkout, so its site is imported): `ci.site`, or
# `dashboard` in a baseline from before the site moved into the service package.
_CHILD = r"""
import json, os, resource, sys, time
from pathlib import Path
try:
    import ci.site as site
except ModuleNotFoundError as exc:
    if exc.name != "ci.site":
        raise
    import dashboard as site
from ci.store import Store
render_site = site.render_site

def cpu():
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime

def sizes(out):
    files = [p for p in out.rglob("*") if p.is_file()]
    site = [p for p in files if not any(part.startswith(".") for part in p.relative_to(out).parts)]
    return {"files": len(site), "site_bytes": sum(p.stat().st_size for p in site),
            "bookkeeping_bytes": sum(p.stat().st_size for p in files) - sum(p.stat().st_size for p in site),
            "overview_bytes": (out / "index.html").stat().st_size,
            "largest_page": max((p.stat().st_size for p in site if p.suffix == ".html"), default=0)}

def step(name, db, out):
    load = os.getloadavg()[0]
    store = Store(db)
    try:
        c0, t0 = cpu(), time.perf_counter()
        st = render_site(store, out)
        wall, used = time.perf_counter() - t0, cpu() - c0
    finally:
        store.close()
    return {"step": name, "wall": wall, "cpu": used, "load": load, "written": st.pages_written,
            "unchanged": st.pages_unchanged, "bytes_written": st.bytes_written}

from tools.fixtures import ingest_commits, next_commit, synthetic_store, to_sqlite

commits, series, machines, samples = (int(a) for a in sys.argv[1:5])
db, out = sys.argv[5], Path(sys.argv[6])
Path(db).unlink(missing_ok=True)
t = time.perf_counter()
mem = synthetic_store(commits, series // machines, machines=machines, samples=samples)
to_sqlite(mem, db).close()
built = time.perf_counter() - t
rows = [step("full", db, out)]
rows[0].update(sizes(out))
rows.append(step("nothing new", db, out))
new = next_commit(mem)
with Store(db) as store:  # the same store gets one more commit, as on a push
    t = time.perf_counter()
    ingest_commits(store, mem, [new.sha])
    ingested = time.perf_counter() - t
rows.append(step("one new commit", db, out))
code = Path(site.__file__).resolve().parents[len(site.__name__.split("."))]  # the checkout holding the site
print(json.dumps({"code": str(code), "rows": rows,
                  "results": len(mem.result_list), "built": built, "ingested": ingested}))
"""


def _measure(tree: Path, args: argparse.Namespace, db: Path, out: Path) -> dict:
    sizes = [str(n) for n in (args.commits, args.series, args.machines, args.samples)]
    proc = subprocess.run([sys.executable, "-c", _CHILD, *sizes, str(db), str(out)], cwd=tree,
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"render in {tree} failed:\n{proc.stderr[-3000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    if Path(result["code"]) != tree.resolve():
        raise SystemExit(f"the child in {tree} imported the dashboard from {result['code']}")
    return result


def _row(label: str, rows: list[dict], key: str, fmt: str = "{:.1f} s") -> list[str]:
    return [label, *(fmt.format(r[key]) if r is not None else "" for r in rows)]


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; returns the process exit code."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--commits", type=int, default=1000)
    ap.add_argument("--series", type=int, default=500)
    ap.add_argument("--machines", type=int, default=1)
    ap.add_argument("--samples", type=int, default=10)
    ap.add_argument("--baseline-rev", help="git revision of today's code, checked out into a temporary worktree")
    ap.add_argument("--baseline", type=Path, help="a checkout of today's code (instead of --baseline-rev)")
    ap.add_argument("--work", type=Path, help="folder for the stores and sites (default: a temporary folder)")
    args = ap.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="bench-render-"))
    work.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()
    baseline, made = args.baseline, None
    if args.baseline_rev:
        made = work / "baseline"
        subprocess.run(["git", "worktree", "add", "--detach", str(made), args.baseline_rev], cwd=ROOT, check=True,
                       capture_output=True)
        baseline = made
    try:
        results = {}
        for name, tree in (("today", baseline), ("this checkout", ROOT)):
            if tree is None:
                continue
            slug = name.replace(" ", "-")
            out = work / f"site-{slug}"
            shutil.rmtree(out, ignore_errors=True)
            print(f"measuring {name} ({tree}) ...", flush=True)
            got = _measure(tree, args, work / f"history-{slug}.sqlite", out)
            print(f"  {got['results']} results; store built in {got['built']:.1f} s, one commit ingested in "
                  f"{got['ingested']:.1f} s (neither timed as render)", flush=True)
            results[name] = got["rows"]
    finally:
        if made is not None:
            subprocess.run(["git", "worktree", "remove", "--force", str(made)], cwd=ROOT, check=False)
    load_after = os.getloadavg()
    names = list(results)
    print(f"\n{args.commits} commits x {args.series} series, SQLite store, {os.cpu_count()} CPUs; load average "
          f"{' '.join(f'{x:.2f}' for x in load_before)} before, {' '.join(f'{x:.2f}' for x in load_after)} after")
    header = ["", *names] + (["ratio"] if len(names) == 2 else [])
    lines = []
    for i, step in enumerate(("full render", "re-render, nothing new", "after one new commit")):
        rows = [results[n][i] for n in names]
        line = [f"{step}: wall", *(f"{r['wall']:.1f} s" for r in rows)]
        if len(rows) == 2:
            line.append(f"{rows[1]['wall'] / rows[0]['wall']:.3f}")
        lines.append(line)
        lines.append([f"{step}: CPU, load average at start",
                      *(f"{r['cpu']:.1f} s, load {r['load']:.1f}" for r in rows)] + ([""] if len(rows) == 2 else []))
        lines.append([f"{step}: files written (MB)", *(f"{r['written']} ({r['bytes_written'] / 1e6:.1f} MB)"
                                                        for r in rows)] + ([""] if len(rows) == 2 else []))
    full = [results[n][0] for n in names]
    for label, key, scale in (("site (served files)", "site_bytes", 1e6), ("overview page", "overview_bytes", 1e6),
                              ("largest page", "largest_page", 1e6), ("bookkeeping (dot-files)", "bookkeeping_bytes",
                                                                       1e6)):
        line = [label, *(f"{r[key] / scale:.2f} MB" for r in full)]
        if len(full) == 2:
            line.append(f"{full[1][key] / full[0][key]:.3f}" if full[0][key] else "")
        lines.append(line)
    lines.append(["files", *(str(r["files"]) for r in full)] + ([""] if len(full) == 2 else []))
    widths = [max(len(str(r[i])) for r in [header, *lines]) for i in range(len(header))]
    for r in [header, *lines]:
        print("| " + " | ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
