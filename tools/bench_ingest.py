"""Benchmark of the store: ingest 1,000 commits x 500 series of asv results, then read and judge them,
today's code against another tree's in one run, on SQLite and on a real PostgreSQL server.

    python -m tools.bench_ingest                                   # this tree, SQLite in a temp dir
    python -m tools.bench_ingest --base /tmp/base                  # ... against the tree at /tmp/base
    python -m tools.bench_ingest --base /tmp/base --postgres postgresql+psycopg://postgres@127.0.0.1:54344/postgres

`--base` is a checkout of another commit (`git worktree add /tmp/base <sha>`); its code runs in a
subprocess with PYTHONPATH pointing at it, so both trees are timed by the same worker on the same
generated files, one after the other. `--postgres` names a server's maintenance database: each
tree gets a fresh database of its own there (created and dropped here).

The worker (`--worker`, this file run as a script: it uses only what both trees' `ci` offer) times,
on a fresh store:

- ingest (points/s), and ingest again (must write nothing);
- reading every series (`Store.results` per series key) and all of it in one call (the dashboard's read);
- `ci.verdicts.detect_all` over the store from scratch, then again after one more commit is ingested
  (this tree keeps the detector's states in the store and examines only the new commit; a tree
  without states recomputes), and this tree's incremental answer against a recomputation;
- A/B verdicts (`ci.verdicts.compare`) for the newest commit against its parent.

With `--base`, the base tree's SQLite history is then opened by this tree (its schema migrated in
place) and read back, which must give the same results. Prints one table with the machine's load
average before and after (docs/performance.md "Ingest and store"). A script, not a test.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

MACHINE = "bench-runner"
ENV = "existing-py_usr_bin_python3.11"
COLUMNS = [
    "result", "params", "version", "started_at", "duration", "stats_ci_99_a", "stats_ci_99_b", "stats_q_25",
    "stats_q_75", "stats_number", "stats_repeat", "samples", "profile",
]  # fmt: skip
POINTS_PER_BENCH = 10  # every benchmark is a 2 x 5 parameter grid
ROOT = Path(__file__).resolve().parents[1]

# (row key, label, target in seconds or None): the targets for 1,000 x 500 x 10 on 2 cores.
ROWS = (
    ("ingest", "ingest, fresh store", 8.0),
    ("ingest_again", "ingest again (no-op)", None),
    ("read_series", "read every series", None),
    ("read_all", "read all, one call", 2.0),
    ("read_columns", "read all as columns", None),
    ("cp_scratch", "change points, from scratch", 5.0),
    ("ingest_one", "ingest one more commit", None),
    ("cp_one", "change points, one new commit", 0.5),
    ("ab", "A/B verdicts, newest pair", None),
    ("total", "ingest + verdicts", 15.0),
)


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
        The result file paths, oldest commit first.
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


# ---- the worker: runs under either tree's `ci` (only the API both have)


def _results_digest(results: list[Any]) -> str:
    """One digest of what a full read returned (series, commit, machine, samples bit for bit)."""
    h = hashlib.sha256()
    for r in sorted(results, key=lambda r: (r.benchmark.key, r.commit_sha, r.machine, r.run_id)):
        h.update(f"{r.benchmark.key}|{r.commit_sha}|{r.machine}|{r.run_id}|{[s.hex() for s in r.samples]}\n".encode())
    return h.hexdigest()


def _cp_set(cps: list[Any]) -> list[list[str]]:
    return sorted([c.benchmark.key, c.machine, c.commit_sha, str(c.outcome)] for c in cps)


def worker(db: str, results_dir: Path, extra: Path, n_commits: int) -> dict[str, Any]:
    """Time every step on a fresh store at `db`; `extra` is one more result file, ingested last."""
    import ci
    from ci.ingest import ingest_results_dir
    from ci.store import Store
    from ci.verdicts import compare, detect_all

    out: dict[str, Any] = {"tree": str(Path(ci.__file__).resolve().parents[1])}
    store = Store(db)
    writing = [0.0]
    real_write = store.ingest_runs

    def timed_write(items: Any, **options: Any) -> Any:  # the store's share of ingest (the rest: reading and parsing)
        t = time.perf_counter()
        try:
            return real_write(items, **options)
        finally:
            writing[0] += time.perf_counter() - t

    store.ingest_runs = timed_write  # type: ignore[method-assign]
    t0 = time.perf_counter()
    report = ingest_results_dir(store, results_dir)
    out["ingest"] = time.perf_counter() - t0
    del store.ingest_runs
    out["points"] = sum(f.points for f in report.files if f.status in ("inserted", "replaced"))
    out["ingest_note"] = (f"{out['points'] / out['ingest']:,.0f} points/s; store writes {writing[0]:.2f} s, "
                          f"reading and parsing files the rest; {len(report.errors)} errors")  # fmt: skip
    counts = store.counts()
    t0 = time.perf_counter()
    again = ingest_results_dir(store, results_dir)
    out["ingest_again"] = time.perf_counter() - t0
    out["ingest_again_note"] = f"{again.count('unchanged')} unchanged; rows same: {store.counts() == counts}"
    t0 = time.perf_counter()
    n = sum(len(store.results(benchmark_key=b.key)) for b in store.benchmarks())
    out["read_series"] = time.perf_counter() - t0
    out["read_series_note"] = f"{n} results"
    t0 = time.perf_counter()
    everything = store.results()
    out["read_all"] = time.perf_counter() - t0
    out["read_all_note"] = f"{len(everything)} results"
    out["digest"] = _results_digest(everything)
    del everything
    if callable(getattr(store, "series_columns", None)):
        t0 = time.perf_counter()
        cols = store.series_columns()
        out["read_columns"] = time.perf_counter() - t0
        out["read_columns_note"] = f"{sum(len(c.commit_shas) for h in cols for c in h.series)} results, " \
                                   "the history detector's read"
        del cols
    t0 = time.perf_counter()
    cps = detect_all(store)
    out["cp_scratch"] = time.perf_counter() - t0
    out["cp_scratch_note"] = f"{len(cps)} change points"
    out["cps"] = _cp_set(cps)
    t0 = time.perf_counter()
    one = ingest_results_dir(store, extra.parent.parent)  # the directory that also holds the extra file
    out["ingest_one"] = time.perf_counter() - t0
    out["ingest_one_note"] = f"{one.count('inserted')} inserted, {one.count('unchanged')} unchanged"
    t0 = time.perf_counter()
    cps_one = detect_all(store)
    out["cp_one"] = time.perf_counter() - t0
    out["cps_one"] = _cp_set(cps_one)
    keeps_states = callable(getattr(store, "change_point_states", None))
    if keeps_states:
        # This tree's incremental answer against a recomputation from scratch (states cleared).
        from sqlalchemy import text

        with store.engine.begin() as conn:
            conn.execute(text("DELETE FROM change_point_states"))
        out["cp_one_note"] = (f"{len(cps_one)} change points; equal to a recomputation: "
                              f"{_cp_set(detect_all(store)) == out['cps_one']}")  # fmt: skip
    else:
        out["cp_one_note"] = f"{len(cps_one)} change points (recomputed: no stored states)"
    head, parent = _sha(n_commits), _sha(n_commits - 1)
    t0 = time.perf_counter()
    verdicts = compare(store.results(commit_sha=parent), store.results(commit_sha=head))
    out["ab"] = time.perf_counter() - t0
    out["ab_note"] = f"{len(verdicts)} verdicts"
    out["total"] = out["ingest"] + out["cp_scratch"] + out["ab"]
    out["counts"] = store.counts()
    out["digest_final"] = _results_digest(store.results())  # what a later reader must find
    from sqlalchemy import text

    with store.engine.connect() as conn:
        if store.engine.dialect.name == "sqlite":
            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
            out["size_mb"] = Path(db).stat().st_size / 1e6
        else:
            out["size_mb"] = conn.execute(text("SELECT pg_database_size(current_database())")).scalar() / 1e6
    store.close()
    return out


def migrate_and_read(db: str) -> dict[str, Any]:
    """Open a store written by another tree with this one (schema migrated in place) and read it all."""
    from ci.store import Store

    t0 = time.perf_counter()
    store = Store(db)
    opened = time.perf_counter() - t0
    digest = _results_digest(store.results())
    store.close()
    return {"migrate": opened, "digest": digest}


# ---- the driver


def _loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


def _run_worker(tree: Path, args: list[str], timeout: float) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), *args], env=env, capture_output=True,
                          text=True, timeout=timeout, check=False)  # fmt: skip
    if proc.returncode != 0:
        raise RuntimeError(f"worker under {tree} failed (exit {proc.returncode}): {proc.stderr.strip()[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _pg_database(admin_url: str, name: str, create: bool) -> str:
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        if create:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return make_url(admin_url).set(database=name).render_as_string(hide_password=False)


def _fmt(x: float | None) -> str:
    return "" if x is None else f"{x:.2f}"


def _ratio(new: float | None, old: float | None) -> str:
    return "" if not new or not old else f"{old / new:.1f}x"


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the table.

    Args:
        argv: command-line arguments (see --help).

    Returns:
        0, or 1 when this tree misses a target (or its reads or answers differ from what they must be).
    """
    parser = argparse.ArgumentParser(prog="python -m tools.bench_ingest", description=__doc__.split("\n\n")[0])
    parser.add_argument("--commits", type=int, default=1000)
    parser.add_argument("--series", type=int, default=500)
    parser.add_argument("--samples", type=int, default=10)
    parser.add_argument("--base", type=Path, help="a checkout of the code to compare with (e.g. a git worktree)")
    parser.add_argument("--postgres", help="a PostgreSQL server's URL: run both trees there too")
    parser.add_argument("--keep", action="store_true", help="keep the generated results and databases")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds allowed per worker")
    parser.add_argument("--worker", nargs=4, metavar=("DB", "RESULTS", "EXTRA", "N"), help=argparse.SUPPRESS)
    parser.add_argument("--migrate", metavar="DB", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        db, res, extra, n = args.worker
        print(json.dumps(worker(db, Path(res), Path(extra), int(n))))
        return 0
    if args.migrate:
        print(json.dumps(migrate_and_read(args.migrate)))
        return 0

    trees = [("new", ROOT)] + ([("base", args.base.resolve())] if args.base else [])
    tmp = Path(tempfile.mkdtemp(prefix="ci-bench-"))
    load_before = _loadavg()
    t_start = time.perf_counter()
    try:
        t0 = time.perf_counter()
        paths = write_results(tmp / "all", args.commits + 1, args.series, args.samples)
        # The first `commits` files are the history ("results"); "all" holds them and one more commit.
        hist = tmp / "results"
        (hist / MACHINE).mkdir(parents=True)
        for name in ("benchmarks.json", f"{MACHINE}/machine.json"):
            shutil.copy(tmp / "all" / name, hist / name)
        for p in paths[:-1]:
            os.link(p, hist / MACHINE / p.name)
        extra = paths[-1]
        mb = sum(p.stat().st_size for p in (hist / MACHINE).iterdir()) / 1e6
        print(f"generated {args.commits} + 1 files ({mb:.0f} MB) in {time.perf_counter() - t0:.1f} s")

        runs: dict[tuple[str, str], dict[str, Any]] = {}
        engines = [("sqlite", None)] + ([("postgresql", args.postgres)] if args.postgres else [])
        for engine, url in engines:
            for name, tree in reversed(trees):  # the base first, so its store is there to migrate
                db = str(tmp / f"{name}.sqlite") if url is None else _pg_database(url, f"bench_ingest_{name}", True)
                print(f"{engine}, {name} tree ({tree}) ...", flush=True)
                runs[(engine, name)] = _run_worker(tree, ["--worker", db, str(hist), str(extra), str(args.commits)],
                                                   args.timeout)  # fmt: skip
                runs[(engine, name)]["db"] = db
        migrated = None
        if args.base:
            migrated = _run_worker(ROOT, ["--migrate", runs[("sqlite", "base")]["db"]], args.timeout)
        load_after = _loadavg()
        return _report(args, runs, engines, trees, migrated, load_before, load_after, time.perf_counter() - t_start)
    finally:
        if args.postgres and not args.keep:
            for name, _ in trees:
                _pg_database(args.postgres, f"bench_ingest_{name}", False)
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def _report(args: argparse.Namespace, runs: dict[tuple[str, str], dict[str, Any]], engines: list[Any],
            trees: list[Any], migrated: dict[str, Any] | None, load_before: str, load_after: str,
            wall: float) -> int:  # fmt: skip
    names = [n for n, _ in trees]
    cols = [(e, n) for e, _ in engines for n in reversed(names)]
    print(f"\n{args.commits} commits x {args.series} series x {args.samples} samples, one run per tree and engine; "
          f"load average {load_before} before, {load_after} after ({wall:.0f} s)")  # fmt: skip
    head = ["step", *(f"{e} {n} s" for e, n in cols)]
    if "base" in names:
        head += [f"{e} new vs base" for e, _ in engines]
    if len(engines) > 1:
        head.append("pg / sqlite (new)")
    head += ["target s", "notes (new, sqlite)"]
    lines = []
    for key, label, target in ROWS:
        row = [label, *(_fmt(runs[c].get(key)) for c in cols)]
        if "base" in names:
            row += [_ratio(runs[(e, "new")].get(key), runs[(e, "base")].get(key)) for e, _ in engines]
        if len(engines) > 1:
            s, p = runs[("sqlite", "new")].get(key), runs[("postgresql", "new")].get(key)
            row.append(f"{p / s:.2f}" if s and p else "")
        row += [_fmt(target), str(runs[("sqlite", "new")].get(f"{key}_note", ""))]
        lines.append(row)
    widths = [max(len(r[i]) for r in [head, *lines]) for i in range(len(head))]
    print("| " + " | ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in lines:
        print("| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |")
    ok = True
    new = runs[("sqlite", "new")]
    for key, label, target in ROWS:
        if target is not None and new[key] > target:
            print(f"miss: {label} {new[key]:.2f} s > {target:.2f} s")
            ok = False
    if "equal to a recomputation: True" not in new["cp_one_note"]:
        print("error: the incremental change points differ from a recomputation")
        ok = False
    for engine, _ in engines:
        if "base" in names:
            same = runs[(engine, "base")]["digest"] == runs[(engine, "new")]["digest"]
            old_cps, new_cps = ({tuple(c) for c in runs[(engine, n)]["cps_one"]} for n in ("base", "new"))
            print(f"{engine}: reads identical to the base tree's: {same}; change points base {len(old_cps)}, "
                  f"new {len(new_cps)}, in both {len(old_cps & new_cps)}")  # fmt: skip
            ok = ok and same
        if len(engines) > 1:
            if engine == "postgresql":
                ratio = runs[("postgresql", "new")]["total"] / runs[("sqlite", "new")]["total"]
                print(f"postgresql / sqlite, ingest + verdicts (new): {ratio:.2f} (target <= 1.5)")
                ok = ok and ratio <= 1.5
    print(f"rows: {runs[('sqlite', 'new')]['counts']}; store size MB: "
          + ", ".join(f"{e} {n} {runs[(e, n)]['size_mb']:.0f}" for e, n in cols))  # fmt: skip
    if migrated is not None:
        same = migrated["digest"] == runs[("sqlite", "base")]["digest_final"]
        print(f"the base tree's SQLite history opened by this tree: migrated in place in {migrated['migrate']:.1f} s, "
              f"reads back identical: {same}")  # fmt: skip
        ok = ok and same
    return 0 if ok else 1


if __name__ == "__main__":
    if __package__ in (None, ""):  # run as a script by the driver: `ci` comes from PYTHONPATH
        sys.path[:] = [p for p in sys.path if Path(p).resolve() != Path(__file__).resolve().parent]
    raise SystemExit(main())
