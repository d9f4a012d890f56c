"""Write a synthetic asv results directory: a quiet, wide history with known steps.

The three real histories under evaluation are noisy and narrow (59-223 commits, 113-252 series). A
project on a dedicated runner is quieter and often wider; this writes such a history in asv's own
format (result format 2, a benchmarks.json, a machine.json and an asv.conf.json beside `results/`), so
that every command that takes an asv results directory can be run on it: `python -m ci ingest`,
`ci dashboard`, `ci compare`, `tools.eval_history`.

Each series' value at each commit is its base value times exp(N(0, noise)); `--step-share` of the
benchmarks (all parameter combinations of a chosen one) step up by `--step` at the middle commit, so
`ci compare` of the two commits around it and the dashboard have known regressions to find. With
`--slow-share`, that share of the jobs (one commit in one environment) lands on a slower host, as
shared runners of mixed hardware do: every series of the job is `--slow` slower, and the file records
that host's `cpu`, as asv records the runner's (`--hide-host`: it records the same `cpu` for both, as
when the hardware differs in ways asv does not record). Seeded: the same arguments write the same bytes.

Usage: python -m tools.synthetic_history OUT [--benchmarks 80] [--grids 6] [--commits 150]
                                           [--envs 2] [--noise 0.02] [--step 0.2] [--step-share 0.01]
                                           [--slow-share 0] [--slow 0.15] [--hide-host]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
from pathlib import Path

import numpy as np

GRID = (["'a'", "'b'", "'c'", "'d'", "'e'"], ["1", "10", "100", "1000"])  # 20 combinations
COLUMNS = ["result", "params", "version", "started_at", "duration", "stats_ci_99_a", "stats_ci_99_b",
           "stats_q_25", "stats_q_75", "stats_number", "stats_repeat"]  # fmt: skip
START_MS = 1_600_000_000_000  # 2020-09-13
HOUR_MS = 3_600_000


def commit_sha(i: int) -> str:
    """The i-th commit's name (40 hex digits)."""
    return hashlib.sha1(f"synthetic commit {i}".encode()).hexdigest()


def write_history(out: Path, *, benchmarks: int, grids: int, commits: int, envs: int, noise: float,
                  step: float, step_share: float, seed: int, slow_share: float = 0.0, slow: float = 0.15,
                  hide_host: bool = False) -> dict[str, int]:
    """Write the history under `out` (made; must not hold a results directory yet) and return its
    counts: series per environment, stepped series per environment, result files."""
    if benchmarks < 0 or grids < 0 or benchmarks + grids == 0:
        raise ValueError("need at least one benchmark")
    if commits < 2 or envs < 1 or not noise >= 0 or not 0 <= step_share <= 1 or not step > -1:
        raise ValueError("need commits >= 2, envs >= 1, noise >= 0, 0 <= step share <= 1, step > -100%")
    if not 0 <= slow_share <= 1 or not slow > -1:
        raise ValueError("need 0 <= slow share <= 1 and slow > -100%")
    results = out / "results"
    if results.exists():
        raise FileExistsError(f"{results} exists: choose an empty output folder")
    rng = np.random.default_rng(seed)
    names = [(f"plain_{i % 50}.Suite{i % 7}.time_plain_{i}", None) for i in range(benchmarks)]
    names += [(f"grid_{i % 40}.Grid{i % 5}.time_grid_{i}", GRID) for i in range(grids)]
    stepped = {n for n, _ in names if rng.random() < step_share}
    base = {n: np.exp(rng.uniform(math.log(1e-5), math.log(1e-1), 1 if p is None else 20)) for n, p in names}
    (results / "runner").mkdir(parents=True)
    (out / "asv.conf.json").write_text(json.dumps({
        "version": 1, "project": "synthetic", "project_url": "https://example.invalid/", "repo": ".",
        "branches": ["main"], "environment_type": "virtualenv", "regressions_thresholds": {".*": 0.05}}))
    bench_json: dict[str, object] = {"version": 2}
    for n, p in names:
        bench_json[n] = {"name": n, "type": "time", "unit": "seconds", "version": "1",
                         "params": list(p or []), "param_names": ["kind", "size"] if p else []}
    (results / "benchmarks.json").write_text(json.dumps(bench_json))
    (results / "runner" / "machine.json").write_text(json.dumps({
        "machine": "runner", "arch": "x86_64", "cpu": "synthetic", "num_cpu": "2", "os": "Linux",
        "ram": "1", "version": 1}))
    files = slow_jobs = 0
    for c in range(commits):
        sha, date = commit_sha(c), START_MS + c * HOUR_MS
        for e in range(envs):
            env = f"virtualenv-py3.{11 + e}"
            host_slow = slow_share > 0 and bool(rng.random() < slow_share)  # no draw: the default's bytes kept
            slow_jobs += host_slow
            cpu = "synthetic-slow" if host_slow and not hide_host else "synthetic"
            res = {}
            for n, p in names:
                factor = 1.0 + step if n in stepped and c >= commits // 2 else 1.0
                factor *= 1.0 + slow if host_slow else 1.0
                vals = base[n] * factor * np.exp(noise * rng.standard_normal(base[n].size))
                v = vals.tolist()
                res[n] = [v, [list(g) for g in p] if p else [], "1", date, 1.0, [x * 0.98 for x in v],
                          [x * 1.02 for x in v], [x * 0.99 for x in v], [x * 1.01 for x in v], [1] * len(v),
                          [10] * len(v)]
            run = {"commit_hash": sha, "env_name": env, "date": date,
                   "params": {"machine": "runner", "python": f"3.{11 + e}", "arch": "x86_64", "cpu": cpu,
                              "num_cpu": "2", "os": "Linux", "ram": "1"},
                   "python": f"3.{11 + e}", "requirements": {}, "env_vars": {}, "result_columns": COLUMNS,
                   "results": res, "durations": {}, "version": 2}
            (results / "runner" / f"{sha[:8]}-{env}.json").write_text(json.dumps(run))
            files += 1
    per_env = benchmarks + 20 * grids
    steps = sum(1 if p is None else 20 for n, p in names if n in stepped)
    return {"series per environment": per_env, "stepped series per environment": steps, "result files": files,
            "jobs on the slower host": slow_jobs}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path, help="folder to write (asv.conf.json and results/ inside it)")
    ap.add_argument("--benchmarks", type=int, default=80, help="benchmarks without parameters")
    ap.add_argument("--grids", type=int, default=6, help="benchmarks with a 5 x 4 parameter grid (20 series each)")
    ap.add_argument("--commits", type=int, default=150)
    ap.add_argument("--envs", type=int, default=2, help="environments on the one machine")
    ap.add_argument("--noise", type=float, default=0.02, help="commit-to-commit noise, sigma on the log scale")
    ap.add_argument("--step", type=float, default=0.2, help="the known step, relative (0.2: +20%%)")
    ap.add_argument("--step-share", type=float, default=0.01, help="share of benchmarks that step")
    ap.add_argument("--slow-share", type=float, default=0.0, help="share of jobs on a slower host")
    ap.add_argument("--slow", type=float, default=0.15, help="how much slower that host is (0.15: +15%%)")
    ap.add_argument("--hide-host", action="store_true", help="the slower host records the same cpu")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    try:
        counts = write_history(args.out, benchmarks=args.benchmarks, grids=args.grids, commits=args.commits,
                               envs=args.envs, noise=args.noise, step=args.step, step_share=args.step_share,
                               seed=args.seed, slow_share=args.slow_share, slow=args.slow,
                               hide_host=args.hide_host)
    except (ValueError, FileExistsError) as exc:
        ap.error(str(exc))
    print(f"{args.out / 'results'}: " + ", ".join(f"{v} {k}" for k, v in counts.items())
          + f"; the steps are at commit {commit_sha(args.commits // 2)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
