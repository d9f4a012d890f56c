"""Benchmark script (not a test): the dashboard's render time and size on a large history, this
checkout against a baseline checkout (today's code) in one run.

Builds a synthetic history (default 1,000 commits x 500 series on one machine, 10 samples per
result; the generator is `tools.fixtures.synthetic_store`), copies it into a real `ci.store.Store`
(SQLite) and a second store holding one commit more (through the real ingest path). Then, for each
checkout in turn, in its own process with that checkout's code: a full render into an empty
folder, a re-render with nothing new, and a re-render from the store with one new commit. Prints a
table with both and their ratio, the machine's load average, and the site's sizes (what a static
host serves; the dashboard's bookkeeping files, dot-named, apart).

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
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Runs inside the checkout being measured (cwd = that checkout, so its `dashboard` is imported).
_CHILD = r"""
import json, os, resource, sys, time
from pathlib import Path
import dashboard
from ci.store import Store
from dashboard import render_site

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

db, db_next, out = sys.argv[1], sys.argv[2], Path(sys.argv[3])
rows = [step("full", db, out)]
rows[0].update(sizes(out))
rows.append(step("nothing new", db, out))
rows.append(step("one new commit", db_next, out))
print(json.dumps({"code": str(Path(dashboard.__file__).resolve().parents[1]), "rows": rows}))
"""


def _measure(tree: Path, db: Path, db_next: Path, out: Path) -> dict:
    proc = subprocess.run([sys.executable, "-c", _CHILD, str(db), str(db_next), str(out)], cwd=tree,
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
    from tools.fixtures import ingest_commits, next_commit, synthetic_store, to_sqlite

    work = args.work or Path(tempfile.mkdtemp(prefix="bench-render-"))
    work.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    mem = synthetic_store(args.commits, args.series // args.machines, machines=args.machines, samples=args.samples)
    print(f"history: {len(mem.commit_list)} commits x {len(mem.benchmark_list)} benchmarks x "
          f"{len(mem.machine_list)} machines = {len(mem.result_list)} results ({time.perf_counter() - t:.1f} s)")
    db, db_next = work / "history.sqlite", work / "history-next.sqlite"
    for p in (db, db_next):
        p.unlink(missing_ok=True)
    t = time.perf_counter()
    to_sqlite(mem, str(db)).close()
    shutil.copyfile(db, db_next)
    from ci.store import Store

    new = next_commit(mem)
    with Store(str(db_next)) as nxt:
        ingest_commits(nxt, mem, [new.sha])
    print(f"stores: {db} and {db_next} (+1 commit) in {time.perf_counter() - t:.1f} s")

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
            out = work / f"site-{name.replace(' ', '-')}"
            shutil.rmtree(out, ignore_errors=True)
            print(f"measuring {name} ({tree}) ...", flush=True)
            results[name] = _measure(tree, db, db_next, out)["rows"]
    finally:
        if made is not None:
            subprocess.run(["git", "worktree", "remove", "--force", str(made)], cwd=ROOT, check=False)
    # What a render after one new commit cannot skip today: the store's read of every result and
    # the change points of every series (both being made faster and incremental in ci.store and
    # ci.verdicts.history; the dashboard calls them as they are).
    from ci.records import Kind
    from ci.verdicts import change_points

    with Store(str(db_next)) as nxt:
        load, t = os.getloadavg()[0], time.perf_counter()
        everything = nxt.results()
        read = time.perf_counter() - t
    by_series: dict[tuple[str, str], list] = {}
    for r in everything:
        if r.benchmark.kind != Kind.CORRECTNESS:
            by_series.setdefault((r.benchmark.key, r.machine), []).append(r)
    t = time.perf_counter()
    for rs in by_series.values():
        change_points(rs)
    cps = time.perf_counter() - t
    names = list(results)
    print(f"\n{args.commits} commits x {args.series} series, SQLite store, {os.cpu_count()} CPUs")
    print(f"inside every render that reads the store: store.results() {read:.1f} s (load {load:.1f}); "
          f"change points of {len(by_series)} series {cps:.1f} s on one CPU (this checkout runs them on all)")
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
