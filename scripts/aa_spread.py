"""A/A spread of recorded GPU timings: runs whose measured code is identical, compared pairwise.

Reads an asv results directory (e.g. benchmarks/recorded/h200-2026-11-29) through the store and,
for each series, compares the medians of every pair of runs from the given commits (commits whose
kernel code is the same), printing the largest relative difference per series and the share of
pairs under a threshold.

Usage: python scripts/aa_spread.py RESULTS_DIR SHA [SHA ...] [--threshold 0.03]
"""

from __future__ import annotations

import argparse
import itertools
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ci.ingest import ingest_results_dir  # noqa: E402
from ci.store import Store  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("results_dir", type=Path)
    ap.add_argument("shas", nargs="+", help="commits (prefixes) whose measured code is identical")
    ap.add_argument("--threshold", type=float, default=0.03)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(str(Path(tmp) / "aa.sqlite"))
        ingest_results_dir(store, args.results_dir)
        print(f"| series | runs | median spread (max/min - 1) | worst pair | pairs < {args.threshold:.0%} |")
        print("|---|---|---|---|---|")
        total = under = 0
        for bench in store.benchmarks():
            if bench.kind.value != "latency":
                continue
            rs = [r for r in store.results(benchmark_key=bench.key) if r.commit_sha.startswith(tuple(args.shas))]
            if len(rs) < 2:
                continue
            pairs = [(abs(a.value / b.value - 1), a, b) for a, b in itertools.combinations(rs, 2)]
            ok = sum(d < args.threshold for d, _, _ in pairs)
            total += len(pairs)
            under += ok
            worst = max(pairs, key=lambda t: t[0])
            vals = [r.value for r in rs]
            print(f"| {bench.params_label} | {len(rs)} | {max(vals) / min(vals) - 1:.2%} | "
                  f"{worst[1].commit_sha[:8]} vs {worst[2].commit_sha[:8]} ({worst[0]:.2%}) | {ok}/{len(pairs)} |")
        print(f"\n{under}/{total} run pairs ({under / max(total, 1):.0%}) differ by less than {args.threshold:.0%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
