"""Benchmark script (not a test): render time and overview size of a large history.

Builds a synthetic history (default 1,000 commits x 500 series on one machine; the generator
is `tools.fixtures.synthetic_store`; run this from the repository root), renders the whole
site into a fresh folder, appends one commit and renders again (the incremental case), and
prints the numbers recorded in docs/performance.md "Dashboard render".

    .venv/bin/python -m tools.bench_render [--commits 1000] [--series 500] [--sqlite PATH]

With --sqlite the history is first copied into a real `ci.store.Store` (SQLite file) and the
site is rendered from that, so the store's read time is included.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import resource
import tempfile
import time
from pathlib import Path

from dashboard import render_site
from tools.fixtures import ingest_commits, next_commit, synthetic_store, to_sqlite


def _cpu() -> float:
    """CPU seconds of this process and its finished children (the change-point workers)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; returns the process exit code."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--commits", type=int, default=1000)
    ap.add_argument("--series", type=int, default=500)
    ap.add_argument("--machines", type=int, default=1)
    ap.add_argument("--samples", type=int, default=10)
    ap.add_argument("--sqlite", help="copy the history into this SQLite file and render from ci.store.Store")
    ap.add_argument("--out", help="output folder (default: a temporary folder)")
    ap.add_argument("--profile", action="store_true", help="print the top functions of the full render")
    args = ap.parse_args(argv)
    t = time.perf_counter()
    mem = synthetic_store(args.commits, args.series // args.machines, machines=args.machines, samples=args.samples)
    print(f"history: {len(mem.commit_list)} commits x {len(mem.benchmark_list)} benchmarks x "
          f"{len(mem.machine_list)} machines = {len(mem.result_list)} results "
          f"({time.perf_counter() - t:.1f} s to build)")
    store = mem
    if args.sqlite:
        t = time.perf_counter()
        Path(args.sqlite).unlink(missing_ok=True)
        store = to_sqlite(mem, args.sqlite)
        print(f"copied into SQLite {args.sqlite} in {time.perf_counter() - t:.1f} s")
        t = time.perf_counter()
        n = len(store.results())
        print(f"store.results() alone: {n} results in {time.perf_counter() - t:.2f} s")

    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="dashboard-bench-"))
    prof = cProfile.Profile() if args.profile else None
    if prof:
        prof.enable()
    cpu = _cpu()
    full = render_site(store, out)
    full_cpu = _cpu() - cpu
    if prof:
        prof.disable()
        pstats.Stats(prof).sort_stats("cumulative").print_stats(25)
    size = (out / "index.html").stat().st_size
    total = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    print(f"full render: {full.seconds:.1f} s wall ({full_cpu:.1f} s CPU, load average {os.getloadavg()[0]:.1f}), "
          f"{full.pages_written} pages, "
          f"site {total / 1e6:.1f} MB, overview {size / 1e6:.2f} MB")
    cpu = _cpu()
    again = render_site(store, out)
    print(f"re-render, nothing new: {again.seconds:.1f} s wall ({_cpu() - cpu:.1f} s CPU), "
          f"{again.pages_written} written, {again.pages_unchanged} unchanged")

    new = next_commit(mem)
    if args.sqlite:
        ingest_commits(store, mem, [new.sha])  # through the real ingest path
    cpu = _cpu()
    inc = render_site(store, out)
    print(f"incremental render after one new commit: {inc.seconds:.1f} s wall ({_cpu() - cpu:.1f} s CPU), "
          f"{inc.pages_written} written, {inc.pages_unchanged} unchanged, {inc.bytes_written / 1e6:.1f} MB written")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
