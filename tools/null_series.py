"""False steps and found steps on seeded synthetic series of several noise kinds: the service's history
detector beside asv's own `step_detect` on the same values (a script, not a test).

Run: `python -m tools.null_series [--series 80] [--seed 7] [--threshold 0.05] [--step 0.10]`.

Each kind is a noise model with no step in it (`KINDS`): Gaussian, heavy-tailed, autocorrelated,
drifting, bimodal commits, regime runs (a shared runner that sits at a slower level for stretches of
3-commit blocks and comes back), outliers, and coarse timers (values that repeat, flipping between two
levels at single commits or in runs). Per kind, `--series` series of 40-400 commits, one
value a commit (seeded by kind and series number, so every run and every tree reads the same values).

- **False steps per 1,000 commit-series**: the service, `ci.verdicts.change_points` with the threshold
  as the series' floor (what `ci run` and the dashboard report); asv, `asv.step_detect.detect_steps`
  on the same values, every boundary of its fit whose levels differ by at least the threshold (the
  steps its graph draws; `detect_regressions` lists the upward ones among them).
- **Suspicions per 1,000 commit-series**: `ci.verdicts.judge_levels` on the same series (what puts
  the overview's "suspected" banner up); every one is false here.
- **+step found**: the same series with every commit from a seeded k (10 <= k <= n - 10) raised by
  `--step`: the service reports a REGRESSED change point within +-2 commits of k; asv's fit has a
  boundary within +-2 of k whose level goes up.

A second table does the same for series at or through zero (`ZERO_KINDS`: counters and signed
values, which the service judges by difference, `ci.verdicts.absolute`), with a step added rather
than multiplied (`ZERO_STEP`: 4 sigmas of the noise, or 5 on a counter) and asv's false steps as every
boundary of its fit (no relative threshold applies at zero); its suspicions (`find_suspects`, by
difference there) on the series without a step, and on the stepped series cut two commits after the
step, whether one is open at the step (the steps by difference need 5 commits: the blind zone they cover).
"""

from __future__ import annotations

import argparse
import itertools
import time
from collections.abc import Callable, Iterator

import numpy as np
from asv import step_detect

from ci.records import Benchmark, Outcome, Result
from ci.verdicts.history import change_points
from ci.verdicts.suspects import SuspectState, find_suspects, judge_levels
from tools.eval_history.series import NEAR
from tools.eval_history.trials import asv_boundary_near

BENCH = Benchmark("null_series.Synthetic.time_value")


def _ar1(r: np.random.Generator, n: int) -> np.ndarray:
    return np.array(list(itertools.accumulate(r.normal(0, 0.015, n), lambda a, b: 0.7 * a + b)))


def _runs(r: np.random.Generator, n: int) -> np.ndarray:
    return r.normal(0, 0.015, n) + 0.10 * np.repeat(r.random(n // 3 + 1) < 0.3, 3)[:n]


# Log levels of n commits of a series with no step.
KINDS: dict[str, Callable[[np.random.Generator, int], np.ndarray]] = {
    "Gaussian 2%": lambda r, n: r.normal(0, 0.02, n),
    "Gaussian 3%": lambda r, n: r.normal(0, 0.03, n),
    "Student t(3), 2%": lambda r, n: 0.02 * r.standard_t(3, n),
    "Student t(2), 1.5%": lambda r, n: 0.015 * r.standard_t(2, n),
    "Cauchy 1%, clipped at e^2": lambda r, n: np.clip(0.01 * r.standard_cauchy(n), -2, 2),
    "AR(1) 0.7, 1.5%": _ar1,
    "random walk 0.4% + 2%": lambda r, n: np.cumsum(r.normal(0, 0.004, n)) + r.normal(0, 0.02, n),
    "bimodal commits (25% at +8%)": lambda r, n: r.normal(0, 0.015, n) + 0.08 * (r.random(n) < 0.25),
    "regime runs (3-commit blocks, 30% at +10%)": _runs,
    "5% outliers at +30%": lambda r, n: r.normal(0, 0.02, n) + 0.3 * (r.random(n) < 0.05),
    # Values that repeat (coarse timers): most successive differences 0, so `robust_sigma` falls back.
    "coarse timer (10% of commits at +5%)": lambda r, n: 0.05 * (r.random(n) < 0.1),
    "coarse timer (30% of commits at +5%)": lambda r, n: 0.05 * (r.random(n) < 0.3),
    "coarse timer in runs (4-commit blocks, 30% at +5%)":
        lambda r, n: 0.05 * np.repeat(r.random(n // 4 + 1) < 0.3, 4)[:n],
}


# Values of n commits of a series at or through zero with no step, and the step added for the found columns.
ZERO_KINDS: dict[str, Callable[[np.random.Generator, int], np.ndarray]] = {
    "counter at 0": lambda r, n: np.zeros(n),
    "flaky counter (1 on 10% of commits)": lambda r, n: (r.random(n) < 0.1).astype(float),
    "Gaussian around 0": lambda r, n: r.normal(0, 1, n),
    "Student t(3) around 0": lambda r, n: r.standard_t(3, n),
    "AR(1) 0.7 around 0": lambda r, n: _ar1(r, n) / 0.015,
}
ZERO_STEP = {"counter at 0": 5.0, "flaky counter (1 on 10% of commits)": 5.0}  # others: 4 (sigmas)


def _results(levels: np.ndarray) -> list[Result]:
    return [Result(BENCH, f"c{i:05d}", "synthetic", (float(v),)) for i, v in enumerate(levels)]


def _asv_fit(levels: np.ndarray) -> list[tuple[int, int, float, float, float]]:
    """asv's `detect_steps` on one value a commit (its segments: first, end, level, ...)."""
    return step_detect.detect_steps([float(v) for v in levels])


def _draws(kind: str, gen: Callable[[np.random.Generator, int], np.ndarray], series: int, seed: int
           ) -> Iterator[tuple[int, np.ndarray, int]]:
    """(n, values, k) per series of a kind: its length (40-400), its values and the commit a step starts at."""
    for i in range(series):
        r = np.random.default_rng([seed, i, *kind.encode()])
        n = int(r.integers(40, 401))
        y = gen(r, n)
        yield n, y, int(r.integers(10, n - 9))


def _found(raised: np.ndarray, k: int, floor: float = 0.0) -> tuple[bool, bool]:
    """Whether the service (a REGRESSED change point) and asv's fit (a boundary going up) find a step at
    k within +-NEAR commits."""
    cps = change_points(_results(raised), floor=floor)
    return (any(cp.outcome == Outcome.REGRESSED and abs(cp.index - k) <= NEAR for cp in cps),
            asv_boundary_near(_asv_fit(raised), k, True))


def measure(kind: str, *, series: int, seed: int, threshold: float, step: float) -> dict[str, float]:
    least = float(np.log1p(threshold))
    out = dict.fromkeys(("commits", "service_false", "asv_false", "suspicions", "service_found", "asv_found"), 0.0)
    for n, y, k in _draws(kind, KINDS[kind], series, seed):
        out["commits"] += n
        levels = np.exp(y)
        results = _results(levels)
        found = change_points(results, floor=threshold)
        out["service_false"] += len(found)
        shas = [r.commit_sha for r in results]
        out["suspicions"] += len(judge_levels(BENCH, "synthetic", shas, levels, found, floor=threshold)[0])
        fit = _asv_fit(levels)
        out["asv_false"] += sum(abs(np.log(b[2] / a[2])) >= least for a, b in zip(fit, fit[1:], strict=False))
        service, asv = _found(levels * np.where(np.arange(n) >= k, 1.0 + step, 1.0), k, threshold)
        out["service_found"] += service
        out["asv_found"] += asv
    return out


def measure_zero(kind: str, *, series: int, seed: int) -> dict[str, float]:
    """`measure` for a series at or through zero: false steps and suspicions, an added step found, and
    whether a suspicion flags it once two commits hold it (`early`: the steps by difference need 5)."""
    step = ZERO_STEP.get(kind, 4.0)
    out = dict.fromkeys(("commits", "service_false", "asv_false", "suspicions", "service_found", "asv_found",
                         "early"), 0.0)
    for n, values, k in _draws(kind, ZERO_KINDS[kind], series, seed):
        out["commits"] += n
        results = _results(values)
        found = change_points(results)
        out["service_false"] += len(found)
        out["suspicions"] += len(find_suspects(results, found=found))
        out["asv_false"] += max(0, len(_asv_fit(values)) - 1)
        raised = values + np.where(np.arange(n) >= k, step, 0.0)
        service, asv = _found(raised, k)
        out["service_found"] += service
        out["asv_found"] += asv
        out["early"] += any(abs(x.index - k) <= NEAR and x.state == SuspectState.SUSPECTED
                            for x in find_suspects(_results(raised[:k + 2])))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.null_series", description=__doc__.split("\n\n")[0])
    p.add_argument("--series", type=int, default=80, help="series per kind")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--threshold", type=float, default=0.05, help="smallest step counted (asv's default 5%%)")
    p.add_argument("--step", type=float, default=0.10, help="the step injected for the found columns")
    p.add_argument("--kinds", nargs="*", choices=sorted(KINDS), help="only these kinds (default: all)")
    args = p.parse_args(argv)
    if args.series < 1 or not 0 < args.threshold < 1 or args.step <= 0:
        p.error("--series must be >= 1, --threshold in (0, 1), --step > 0")
    start = time.perf_counter()
    print(f"Steps of at least {args.threshold:.0%}, {args.series} series of 40-400 commits per kind, "
          f"seed {args.seed}.\n")
    print("| noise (no step) | false steps per 1,000 commit-series: service | asv | suspicions per 1,000 "
          f"| +{args.step:.0%} found: service | asv |")
    print("|---|---|---|---|---|---|")
    for kind in args.kinds or KINDS:
        m = measure(kind, series=args.series, seed=args.seed, threshold=args.threshold, step=args.step)
        per = 1000.0 / m["commits"]
        print(f"| {kind} | {m['service_false'] * per:.2f} | {m['asv_false'] * per:.2f} | {m['suspicions'] * per:.2f} "
              f"| {m['service_found'] / args.series:.0%} | {m['asv_found'] / args.series:.0%} |", flush=True)
    if not args.kinds:
        print("\nAt or through zero (judged by difference), a step added: 4 sigmas of the noise, 5 on a counter.\n")
        print("| values (no step) | false steps per 1,000 commit-series: service | asv (every boundary of its fit) "
              "| suspicions per 1,000 | step found: service | asv | suspected two commits in |")
        print("|---|---|---|---|---|---|---|")
        for kind in ZERO_KINDS:
            m = measure_zero(kind, series=args.series, seed=args.seed)
            per = 1000.0 / m["commits"]
            print(f"| {kind} | {m['service_false'] * per:.2f} | {m['asv_false'] * per:.2f} "
                  f"| {m['suspicions'] * per:.2f} | {m['service_found'] / args.series:.0%} "
                  f"| {m['asv_found'] / args.series:.0%} | {m['early'] / args.series:.0%} |", flush=True)
    print(f"\nWall time {time.perf_counter() - start:.0f} s.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
