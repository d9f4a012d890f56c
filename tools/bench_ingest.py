"""Benchmark of the store: ingest 1,000 commits x 500 series of asv results, then read and judge them.

    python -m tools.bench_ingest                      # 1000 commits x 500 series, 10 samples, SQLite in a temp dir
    python -m tools.bench_ingest --commits 100 --db postgresql+psycopg://postgres@127.0.0.1:54329/bench

Generates a real asv results directory (format version 2, `asv.results.Results.load` reads it
back: checked on the first file), then times, on a fresh store:

- ingest (one transaction per file), and ingest again (must write nothing);
- reading every series back (`Store.results` per series key, as the dashboard does);
- the verdict code over it, where it exists: `ci.verdicts.detect_all` (change points of every
  series) and `ci.verdicts.compare` for the newest commit against its parent.

Prints a table; the target is <= 60 s on the 2-core CI box (docs/performance.md "Ingest and store").
A script, not a test: it takes tens of seconds.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

MACHINE = "bench-runner"
ENV = "existing-py_usr_bin_python3.11"
COLUMNS = [
    "result", "params", "version", "started_at", "duration", "stats_ci_99_a", "stats_ci_99_b", "stats_q_25",
    "stats_q_75", "stats_number", "stats_repeat", "samples", "profile",
]  # fmt: skip
POINTS_PER_BENCH = 10  # every benchmark is a 2 x 5 parameter grid


def _sha(i: int) -> str:
    return f"{i:08x}{'c0ffee' * 5}{i:02x}"[:40]


def _benchmarks(n_series: int) -> dict[str, dict]:
    n_bench = max(1, n_series // POINTS_PER_BENCH)
    out = {}
    for b in range(n_bench):
        kind = b % 5
        name, btype, unit = {
            0: (f"bench_attention.Kernel{b}.time_fwd", "time", "seconds"),
            1: (f"bench_pipeline.Pipe{b}.time_forward", "time", "seconds"),
            2: (f"bench_model.Model{b}.track_images_per_s", "track", "images/s"),
            3: (f"bench_memory.Mem{b}.track_peak_bytes", "track", "bytes"),
            4: (f"bench_correctness.Check{b}.track_max_abs_diff", "track", "max abs diff"),
        }[kind]
        out[name] = {
            "name": name, "type": btype, "unit": unit, "version": f"v{b}",
            "params": [["'fp16'", "'bf16'"], ["1", "8", "32", "64", "128"]], "param_names": ["dtype", "batch"],
        }  # fmt: skip
    return out


def write_results(root: Path, n_commits: int, n_series: int, n_samples: int, seed: int = 0) -> list[Path]:
    """Write an asv results directory of `n_commits` files with `n_series` points each.

    Args:
        root: the directory (created).
        n_commits: result files, one per commit.
        n_series: series per file (rounded down to whole 10-point benchmarks).
        n_samples: raw samples per point.
        seed: RNG seed.

    Returns:
        The result file paths.
    """
    rng = np.random.default_rng(seed)
    benches = _benchmarks(n_series)
    (root / MACHINE).mkdir(parents=True, exist_ok=True)
    (root / "benchmarks.json").write_text(json.dumps({**benches, "version": 2}))
    machine = {"machine": MACHINE, "os": "Linux", "arch": "x86_64", "cpu": "bench", "num_cpu": "2", "ram": "8G"}
    (root / MACHINE / "machine.json").write_text(json.dumps({**machine, "version": 1}))
    names = list(benches)
    base = rng.uniform(1e-5, 1e-3, size=(len(names), POINTS_PER_BENCH))
    # A 10 % step in every 7th benchmark at 60 % of the history, so the detectors have work to do.
    step_at = int(n_commits * 0.6)
    paths = []
    for c in range(n_commits):
        results = {}
        for b, name in enumerate(names):
            level = base[b] * (1.10 if (b % 7 == 0 and c >= step_at) else 1.0)
            if name.endswith("max_abs_diff"):
                level = np.full(POINTS_PER_BENCH, 1e-3)
            samples = level[:, None] * rng.lognormal(0.0, 0.01, size=(POINTS_PER_BENCH, n_samples))
            med = np.median(samples, axis=1)
            q25, q75 = np.percentile(samples, [25, 75], axis=1)
            results[name] = [
                med.tolist(), benches[name]["params"], f"v{b}", 1_767_225_600_000 + c * 60_000, 1.0,
                samples.min(axis=1).tolist(), samples.max(axis=1).tolist(), q25.tolist(), q75.tolist(),
                [1] * POINTS_PER_BENCH, [n_samples] * POINTS_PER_BENCH, samples.tolist(),
            ]  # fmt: skip
        sha = _sha(c)
        data = {
            "commit_hash": sha, "env_name": ENV, "date": 1_767_225_600_000 + c * 60_000, "params": machine,
            "python": "3.11", "requirements": {}, "env_vars": {}, "result_columns": COLUMNS, "results": results,
            "durations": {}, "version": 2,
        }  # fmt: skip
        path = root / MACHINE / f"{sha[:8]}-{ENV}.json"
        path.write_text(json.dumps(data))
        paths.append(path)
    return paths


def _timed(label: str, rows: list[tuple[str, float, str]], fn, *args, **kwargs):
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    rows.append((label, time.perf_counter() - t0, ""))
    return out


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the timing table.

    Args:
        argv: command-line arguments (see --help).

    Returns:
        0, or 1 when the total exceeds --budget seconds.
    """
    parser = argparse.ArgumentParser(prog="python -m tools.bench_ingest", description=__doc__.split("\n\n")[0])
    parser.add_argument("--commits", type=int, default=1000)
    parser.add_argument("--series", type=int, default=500)
    parser.add_argument("--samples", type=int, default=10)
    parser.add_argument("--db", help="store path or URL (default: a fresh SQLite file in a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the generated results and database")
    parser.add_argument("--budget", type=float, default=60.0, help="seconds allowed for ingest + verdicts")
    args = parser.parse_args(argv)

    from ci.ingest import ingest_results_dir
    from ci.store import Store

    tmp = Path(tempfile.mkdtemp(prefix="ci-bench-"))
    try:
        t0 = time.perf_counter()
        paths = write_results(tmp / "results", args.commits, args.series, args.samples)
        gen = time.perf_counter() - t0
        try:
            from asv.results import Results

            loaded = Results.load(str(paths[0]), machine_name=MACHINE)
            assert len(loaded.get_all_result_keys()) == len(_benchmarks(args.series))
        except ImportError:
            print("asv not installed: generated files not cross-checked", file=sys.stderr)
        mb = sum(p.stat().st_size for p in paths) / 1e6
        print(f"generated {len(paths)} files ({mb:.0f} MB) in {gen:.1f} s")

        rows: list[tuple[str, float, str]] = []
        store = Store(args.db or tmp / "history.sqlite")
        report = _timed("ingest (fresh store)", rows, ingest_results_dir, store, tmp / "results")
        counts = store.counts()
        rows[-1] = (*rows[-1][:2], f"{report.summary()}")
        again = _timed("ingest again (no-op)", rows, ingest_results_dir, store, tmp / "results")
        rows[-1] = (*rows[-1][:2], f"{again.count('unchanged')} unchanged; rows {store.counts() == counts}")
        judge_start = len(rows)
        t0 = time.perf_counter()
        n = 0
        for bench in store.benchmarks():
            n += len(store.results(benchmark_key=bench.key))
        rows.append(("read every series", time.perf_counter() - t0, f"{n} results"))
        all_results = _timed("read all, one call", rows, store.results)
        rows[-1] = (*rows[-1][:2], f"{len(all_results)} results (the dashboard's read)")
        del all_results
        try:
            from ci.verdicts import detect_all

            cps = _timed("change points, all series", rows, detect_all, store)
            rows[-1] = (*rows[-1][:2], f"{len(cps)} change points")
        except ImportError:
            rows.append(("change points, all series", float("nan"), "not available yet: ci.verdicts.detect_all"))
        try:
            from ci.verdicts import compare

            head, parent = _sha(args.commits - 1), _sha(args.commits - 2)
            verdicts = _timed(
                "A/B verdicts, newest pair", rows, lambda: compare(store.results(commit_sha=parent),
                                                                   store.results(commit_sha=head))
            )  # fmt: skip
            rows[-1] = (*rows[-1][:2], f"{len(verdicts)} verdicts")
        except ImportError:
            rows.append(("A/B verdicts, newest pair", float("nan"), "not available yet: ci.verdicts.compare"))
        store.close()

        # The budget covers ingest plus the verdict code; the two reads are shown for scale only
        # (detect_all does the per-series reads itself).
        total = rows[0][1] + sum(r[1] for r in rows[judge_start + 2 :] if r[1] == r[1])
        print(f"\n{args.commits} commits x {args.series} series x {args.samples} samples, {store.url.split(':')[0]}")
        print(f"{'step':<28} {'seconds':>8}  notes")
        for label, secs, note in rows:
            print(f"{label:<28} {secs:>8.2f}  {note}")
        print(f"{'ingest + verdicts':<28} {total:>8.2f}  budget {args.budget:.0f} s")
        print(f"rows: {counts}")
        return 0 if total <= args.budget else 1
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
