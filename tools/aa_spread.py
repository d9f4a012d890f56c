"""A/A spread of recorded GPU timings: runs whose measured code is identical, compared pairwise.

Reads an asv results directory (e.g. benchmarks/recorded/h200-2026-11-29) through the store and,
for each series, compares the medians of every pair of runs from the given commits (commits whose
kernel code is the same), printing the largest relative difference per series and the share of
pairs under a threshold.

Usage: python -m tools.aa_spread RESULTS_DIR SHA [SHA ...] [--also RESULTS_DIR ...]
                                   [--bench REGEX] [--threshold 0.03]

`--also` adds further results directories, e.g. a second run of the same commit on the same
machine (asv keeps one result file per commit, so an A/A pair of one commit is two directories).
"""

from __future__ import annotations

import argparse
import itertools
import re
import tempfile
from pathlib import Path

from ci.ingest import ingest_results_dir
from ci.store import Store


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results_dir", type=Path)
    ap.add_argument("shas", nargs="+", help="commits (prefixes) whose measured code is identical")
    ap.add_argument("--also", type=Path, action="append", default=[], help="another results directory")
    ap.add_argument("--bench", default="", help="only series whose name matches this regex (re.search)")
    ap.add_argument("--threshold", type=float, default=0.03)
    args = ap.parse_args(argv)
    runs: dict[str, list] = {}  # series key -> results, one per (results dir, commit)
    names: dict[str, tuple[str, str]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        # One store per directory: a store keeps one run per commit x machine x environment (a
        # re-ingested file replaces the earlier one), and an A/A pair of one commit is two files.
        for i, results_dir in enumerate([args.results_dir, *args.also]):
            store = Store(str(Path(tmp) / f"aa{i}.sqlite"))
            ingest_results_dir(store, results_dir)
            for bench in store.benchmarks():
                if bench.kind.value != "latency" or not re.search(args.bench, bench.name):
                    continue
                names[bench.key] = (bench.name.split(".", 1)[-1], bench.params_label)
                runs.setdefault(bench.key, []).extend(
                    r for r in store.results(benchmark_key=bench.key) if r.commit_sha.startswith(tuple(args.shas))
                )
            store.engine.dispose()
    print(
        f"| series | runs | medians | median spread (max/min - 1) | in-run IQR / median (worst run) "
        f"| pairs < {args.threshold:.0%} |"
    )
    print("|---|---|---|---|---|---|")
    total = under = 0
    for key, rs in runs.items():
        if len(rs) < 2:
            continue
        pairs = [abs(a.value / b.value - 1) for a, b in itertools.combinations(rs, 2)]
        ok = sum(d < args.threshold for d in pairs)
        total += len(pairs)
        under += ok
        vals = [r.value for r in rs]
        iqr = max((r.spread[1] - r.spread[0]) / r.value for r in rs)
        medians = " / ".join(f"{v:.4g}" for v in vals)
        name, label = names[key]
        print(
            f"| {name} {label} | {len(rs)} | {medians} | {max(vals) / min(vals) - 1:.2%} | {iqr:.2%} | "
            f"{ok}/{len(pairs)} |"
        )
    print(f"\n{under}/{total} run pairs ({under / max(total, 1):.0%}) differ by less than {args.threshold:.0%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
