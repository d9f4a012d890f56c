"""Benchmark of the verdict engine's quality and speed (a script, not a test).

Quality, per sample count n (samples per side):
- A/A: base and head drawn from the same distribution; any REGRESSED/IMPROVED is a false alarm.
- A/B: a few series per simulated PR slowed by `--slowdown` (samples x 1.05; / 1.05 for
  higher-is-better series); REGRESSED is a detection, INCONCLUSIVE a "measure more" answer.
Each simulated PR compares `--series` series in one `compare` call, so the multiple-comparison
correction sees a realistic suite size, and the per-PR false-alarm rate is reported too.

Sample sources (the printed table says which one produced the numbers):
- `--results DIR`: asv result files (with `--record-samples`); each benchmark point of each run is
  one real sample set. A/A pairs are its two random halves (without replacement when the set has
  >= 2n samples, else bootstrap resamples of 2n); only within-run noise is captured that way.
- `--samples-json FILE`: {"series key": [samples] or [[run 1 samples], [run 2 samples], ...]}.
- `--synthetic` (default when no data is given): a GPU-timing noise model, lognormal per-sample
  noise with series-specific sigma (60 % quiet 0.5-1.5 %, 30 % medium 1.5-3 %, 10 % noisy 3-6 %),
  3 % slow outliers (x 1 + Exp(mean 0.2): preemption, clock dips), and a per-run drift shared by
  all samples of one side (lognormal, sigma `--drift`, 0.3 % default: clocks/thermal between runs).
  `--round-drift SIGMA` adds a drift per half of each side (lognormal): asv measures a benchmark's
  rounds in separate processes and appends their samples in order, so on a loaded or shared runner a
  burst that hits one process moves a whole half of a side (two rounds, asv's default).

Speed: `ci.verdicts.detect_all` over `--history-series` x `--history-commits` synthetic series with
injected steps (target <= 60 s on the 2-core CI box), plus the time of one `compare` per PR.

Run: `.venv/bin/python -m tools.bench_verdicts [--synthetic | --results DIR | --samples-json F]`.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ci.records import Benchmark, Direction, Outcome, Result
from ci.verdicts import HistorySettings, VerdictSettings, compare, detect_all

TIERS = (("quiet", 0.6, 0.005, 0.015), ("medium", 0.3, 0.015, 0.03), ("noisy", 0.1, 0.03, 0.06))


@dataclass(frozen=True)
class SampleSet:
    """Real samples of one series from one run (or a synthetic series' noise parameters)."""

    key: str
    samples: np.ndarray
    direction: Direction = Direction.LOWER
    tier: str = "real"


def load_asv_results(results_dir: str | Path) -> list[SampleSet]:
    """Sample sets (one per benchmark point per run) from an asv results directory.

    Args:
        results_dir: asv's results_dir (benchmarks.json plus <machine>/<commit>-<env>.json files).

    Returns:
        Sample sets with raw samples (points recorded without --record-samples are skipped).
    """
    from ci.ingest.asv_files import iter_result_files, load_benchmarks_json, load_machine_json
    from ci.ingest.parse import parse_result_file
    from ci.records import Kind

    benchmarks = load_benchmarks_json(results_dir)
    sets: list[SampleSet] = []
    for path in iter_result_files(results_dir):
        run = parse_result_file(path, benchmarks, load_machine_json(Path(path).parent))
        for pt in run.all_points():
            if pt.status == "ok" and pt.has_raw_samples and pt.benchmark.kind != Kind.CORRECTNESS:
                s = np.array([x for x in pt.samples if math.isfinite(x)], dtype=float)
                if s.size >= 4 and s.min() > 0:
                    sets.append(SampleSet(f"{run.machine}:{pt.benchmark.key}", s, pt.benchmark.direction))
    return sets


def load_samples_json(path: str | Path) -> list[SampleSet]:
    """Sample sets from {"key": [samples] | [[samples], [samples], ...]} (lower-is-better)."""
    data = json.loads(Path(path).read_text())
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected an object mapping series keys to sample lists")
    sets = []
    for key, value in data.items():
        runs = value if value and isinstance(value[0], list) else [value]
        for run in runs:
            s = np.asarray(run, dtype=float)
            s = s[np.isfinite(s)]
            if s.size >= 4 and s.min() > 0:
                sets.append(SampleSet(str(key), s))
    return sets


def _synthetic_side(rng: np.random.Generator, sigma: float, n: int, drift: float,
                    round_drift: float = 0.0) -> np.ndarray:
    x = rng.lognormal(0.0, sigma, n) * rng.lognormal(0.0, drift)
    if round_drift:
        x[: n // 2] *= rng.lognormal(0.0, round_drift)
        x[n // 2:] *= rng.lognormal(0.0, round_drift)
    outlier = rng.random(n) < 0.03
    x[outlier] *= 1.0 + rng.exponential(0.2, outlier.sum())
    return x


def _tier(rng: np.random.Generator) -> tuple[str, float]:
    u, acc = rng.random(), 0.0
    for name, share, lo, hi in TIERS:
        acc += share
        if u <= acc:
            return name, float(rng.uniform(lo, hi))
    return TIERS[-1][0], TIERS[-1][3]


def _real_halves(rng: np.random.Generator, s: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray, str]:
    if s.size >= 2 * n:
        perm = rng.permutation(s)
        return perm[:n], perm[n:2 * n], "split"
    both = rng.choice(s, size=2 * n, replace=True)
    return both[:n], both[n:], "bootstrap"


def run_quality(
    mode: str,
    sets: Sequence[SampleSet],
    n: int,
    *,
    prs: int,
    series: int,
    slowed: int,
    slowdown: float,
    drift: float,
    seed: int,
    settings: VerdictSettings,
    round_drift: float = 0.0,
) -> dict[str, float | str | int]:
    """Simulate `prs` PRs of `series` series each (`slowed` of them slowed) and score the verdicts."""
    rng = np.random.default_rng(seed)
    null_alarm = null_inconc = null_total = pr_alarm = 0
    det = flag = slow_total = 0
    tier_det: dict[str, list[int]] = {}
    split_kinds: set[str] = set()
    compare_s = 0.0
    for pr in range(prs):
        base: list[Result] = []
        head: list[Result] = []
        tiers: dict[str, str] = {}
        slow_keys: set[str] = set()
        for i in range(series):
            if mode == "synthetic":
                tier, sigma = _tier(rng)
                level = float(np.exp(rng.uniform(np.log(5e-6), np.log(5e-3))))
                b = level * _synthetic_side(rng, sigma, n, drift, round_drift)
                h = level * _synthetic_side(rng, sigma, n, drift, round_drift)
                direction = Direction.LOWER
            else:
                ss = sets[int(rng.integers(len(sets)))]
                b, h, kind = _real_halves(rng, ss.samples, n)
                split_kinds.add(kind)
                tier, direction = ss.tier, ss.direction
            key = f"pr{pr}.s{i}"
            bench = Benchmark(key, direction=direction)
            if i < slowed:
                h = h * slowdown if direction == Direction.LOWER else h / slowdown
                slow_keys.add(key)
            tiers[key] = tier
            base.append(Result(bench, "base", "sim", tuple(b.tolist())))
            head.append(Result(bench, "head", "sim", tuple(h.tolist())))
        t0 = time.perf_counter()
        verdicts = compare(base, head, settings=settings)
        compare_s += time.perf_counter() - t0
        any_alarm = False
        for v in verdicts:
            key = v.benchmark.key
            if key in slow_keys:
                slow_total += 1
                hit = v.outcome == Outcome.REGRESSED
                det += hit
                flag += v.outcome in (Outcome.REGRESSED, Outcome.INCONCLUSIVE)
                tier_det.setdefault(tiers[key], [0, 0])
                tier_det[tiers[key]][0] += hit
                tier_det[tiers[key]][1] += 1
            else:
                null_total += 1
                alarm = v.outcome in (Outcome.REGRESSED, Outcome.IMPROVED)
                null_alarm += alarm
                any_alarm |= alarm
                null_inconc += v.outcome == Outcome.INCONCLUSIVE
        pr_alarm += any_alarm
    source = mode if mode == "synthetic" else f"{mode} ({'/'.join(sorted(split_kinds))} halves)"
    return {
        "source": source,
        "n": n,
        "aa_series": null_total,
        "false_alarm": null_alarm / max(1, null_total),
        "pr_false_alarm": pr_alarm / prs,
        "aa_inconclusive": null_inconc / max(1, null_total),
        "slowed_series": slow_total,
        "detected": det / max(1, slow_total),
        "flagged": flag / max(1, slow_total),
        "by_tier": " ".join(f"{t}:{d / m:.0%}" for t, (d, m) in sorted(tier_det.items())),
        "compare_ms_per_pr": 1e3 * compare_s / prs,
    }


def run_history_timing(n_series: int, n_commits: int, samples: int, seed: int) -> dict[str, float]:
    """Time `detect_all` on synthetic history with injected steps; also score where steps were found."""
    rng = np.random.default_rng(seed)
    results: list[Result] = []
    injected: set[tuple[str, int]] = set()
    for s in range(n_series):
        bench = Benchmark(f"hist.S.time_{s:04d}")
        sigma = float(rng.uniform(0.005, 0.03))
        levels = np.ones(n_commits)
        for _ in range(int(rng.integers(0, 3))):
            at = int(rng.integers(20, n_commits - 20))
            levels[at:] *= float(rng.choice([-1, 1]) * rng.uniform(0.04, 0.10) + 1)
            injected.add((bench.key, at))
        drift = rng.lognormal(0, 0.003, n_commits)
        for c in range(n_commits):
            x = levels[c] * drift[c] * rng.lognormal(0, sigma, samples)
            results.append(Result(bench, f"c{c:05d}", "sim", tuple(x.tolist())))
    t0 = time.perf_counter()
    found = detect_all(results, settings=HistorySettings())
    elapsed = time.perf_counter() - t0
    hits = {(cp.benchmark.key, cp.index) for cp in found}
    exact = sum(1 for k in injected if k in hits)
    near = sum(1 for key, at in injected if any((key, at + d) in hits for d in range(-2, 3)))
    near_hits = {(key, i) for key, i in hits if any((key, i + d) in injected for d in range(-2, 3))}
    return {
        "series": n_series, "commits": n_commits, "seconds": elapsed, "injected": len(injected),
        "found": len(found), "exact": exact, "within2": near, "spurious": len(hits - near_hits),
    }


def _print_quality(rows: list[dict]) -> None:
    head = (f"{'source':<28} {'n':>3} {'A/A series':>10} {'false alarm':>11} {'per-PR FA':>9} {'A/A inconcl':>11} "
            f"{'slowed':>6} {'detected':>8} {'flagged':>7} {'ms/PR':>6}  detected by noise tier")
    print(head)
    print("-" * len(head))
    for r in rows:
        print(f"{r['source']:<28} {r['n']:>3} {r['aa_series']:>10} {r['false_alarm']:>11.3%} "
              f"{r['pr_false_alarm']:>9.1%} {r['aa_inconclusive']:>11.2%} {r['slowed_series']:>6} "
              f"{r['detected']:>8.1%} {r['flagged']:>7.1%} "
              f"{r['compare_ms_per_pr']:>6.0f}  {r['by_tier']}")


def main(argv: list[str] | None = None) -> int:
    """Run the quality table and/or the history timing; exit 1 if a target is missed."""
    p = argparse.ArgumentParser(prog="python -m tools.bench_verdicts", description=__doc__.split("\n\n")[0])
    src = p.add_mutually_exclusive_group()
    src.add_argument("--synthetic", action="store_true", help="GPU-timing noise model (default without data)")
    src.add_argument("--results", type=Path, help="asv results directory with recorded samples")
    src.add_argument("--samples-json", type=Path, help='{"key": [samples] | [[samples], ...]}')
    p.add_argument("--n", default="6,10,20", help="samples per side, comma-separated (suite: 6-20 host, 20-50 GPU)")
    p.add_argument("--prs", type=int, default=100, help="simulated PRs per n")
    p.add_argument("--series", type=int, default=200, help="series per PR")
    p.add_argument("--slowed", type=int, default=10, help="series slowed per PR")
    p.add_argument("--slowdown", type=float, default=1.05)
    p.add_argument("--drift", type=float, default=0.003, help="synthetic per-run drift sigma")
    p.add_argument("--round-drift", type=float, default=0.0,
                   help="synthetic drift sigma per half of a side (asv's rounds: separate processes)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--history-series", type=int, default=500)
    p.add_argument("--history-commits", type=int, default=1000)
    p.add_argument("--history-samples", type=int, default=5, help="samples per commit in the timing run")
    p.add_argument("--alpha", type=float, default=None, help="override VerdictSettings.alpha")
    p.add_argument("--noise-k", type=float, default=None, help="override VerdictSettings.noise_k")
    p.add_argument("--floor", type=float, default=None, help="override VerdictSettings.floor")
    p.add_argument("--correction", default=None, help="override VerdictSettings.correction")
    p.add_argument("--target-n", type=int, default=20,
                   help="n at which the targets (A/A false alarms <= 1 %%, 5 %% detection >= 90 %%) must hold: "
                   "the GPU suite records rounds=2 x repeat>=10 = 20+ samples a side")
    p.add_argument("--skip-quality", action="store_true")
    p.add_argument("--skip-history", action="store_true")
    args = p.parse_args(argv)
    if not 0 <= args.slowed <= args.series:
        p.error("--slowed must be between 0 and --series")

    ok = True
    if not args.skip_quality:
        if args.results:
            mode, sets = "asv-results", load_asv_results(args.results)
        elif args.samples_json:
            mode, sets = "samples-json", load_samples_json(args.samples_json)
        else:
            mode, sets = "synthetic", []
        if mode != "synthetic" and not sets:
            print(f"error: no usable sample sets (>= 4 raw samples) in {args.results or args.samples_json}",
                  file=sys.stderr)
            return 2
        overrides = {k: getattr(args, k) for k in ("alpha", "noise_k", "floor", "correction")
                     if getattr(args, k) is not None}
        settings = VerdictSettings(**overrides)
        print(f"verdict quality: mode={mode}, {len(sets) or 'generated'} sample sets, {args.prs} PRs x {args.series} "
              f"series ({args.slowed} slowed x{args.slowdown}), drift {args.drift:g}, "
              f"per-half drift {args.round_drift:g}, settings={settings}")
        rows = []
        for n in (int(x) for x in args.n.split(",")):
            rows.append(run_quality(mode, sets, n, prs=args.prs, series=args.series, slowed=args.slowed,
                                    slowdown=args.slowdown, drift=args.drift, seed=args.seed + n, settings=settings,
                                    round_drift=args.round_drift))
        _print_quality(rows)
        for r in rows:
            if r["n"] == args.target_n:
                ok &= r["false_alarm"] <= 0.01 and r["detected"] >= 0.90
    if not args.skip_history:
        h = run_history_timing(args.history_series, args.history_commits, args.history_samples, args.seed)
        print(f"\nhistory: detect_all on {h['series']} series x {h['commits']} commits: {h['seconds']:.1f} s "
              f"(target <= 60 s); injected steps {h['injected']}, change points {h['found']}, "
              f"at the exact commit {h['exact']}, within +-2 commits {h['within2']}, spurious {h['spurious']}")
        ok &= h["seconds"] <= 60
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
