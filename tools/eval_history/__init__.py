"""Quality of the service's history verdicts on real asv results, beside asv's own methods on the
same series (a script, not a test).

Run: `python -m tools.eval_history RESULTS_DIR [RESULTS_DIR ...] [--json FILE]`; one markdown table
per results directory. Every number comes from the service's public functions, the code paths
`ci run` and the dashboard take, so a changed detector is measured by the same command:
`ci.ingest.ingest_results_dir` into a temporary SQLite `ci.store.Store`; `ci.verdicts.change_points`,
`judge_levels`, `SeriesState.extend` + `state_change_points` (a replay, commit by commit) and
`compare_commits`; `ci.site.model.recovery` (whether the dashboard shows a regression open).
asv's column calls asv's own functions: `asv.step_detect.detect_steps` on per-commit values with
`asv._stats.get_weight` weights, then `detect_regressions` with the `regressions_thresholds` of
asv.conf.json, as `asv publish` does; `asv.commands.compare._is_result_better` with factor 1.1, as
`asv compare` does.

Definitions (what the printed numbers mean):

- Series: one benchmark point on one machine key (asv machine x environment x host,
  `ci.records.Machine`), correctness series left out, its current benchmark version only (as
  `detect_all` reads it); its commits are those with a positive level (`commit_levels`), oldest
  first. Series with fewer than `--min-commits` commits are skipped, and so are series with 5 or more
  levels at or below zero (counts at 0, signed deltas: judged by difference, `ci.verdicts.absolute`,
  where a relative step means nothing; `tools.null_series` measures them). A series of unknown direction
  (neither declared nor implied by its unit) is never judged by the service (its steps are
  INCONCLUSIVE); its trials are counted apart.
- Trial: one series and one step size s, on a copy (`--trials N`: N per series and size, each at its
  own seeded k, distinct while the series has N places for one; the first is the same for any N). A
  seeded commit index k, e <= k <= n - e (n: the series' commits; e = 10, or on a series shorter than
  21 commits as far from its ends as it allows, at least 6: `edge_for`), and every sample of commits
  k..n-1 multiplied by a factor: for "+s" (the bad direction) 1 + s on a lower-is-better series and
  1 / (1 + s) on a higher-is-better one; for "-s" (an improvement) the inverse. A series of unknown
  direction takes 1 + s (asv's reading: lower is better). asv's inputs of those commits are scaled
  alike (value, 99 % interval, quartiles).
- Found (the headline step's share with its 95% Wilson interval, which understates the spread
  where one series holds several trials): `change_points` of the whole injected series holds a
  change point of the right outcome (REGRESSED for +, IMPROVED for -; unknown direction:
  INCONCLUSIVE with the ratio's direction) at an index within +-2 of k. asv: `detect_steps` fits a
  segment boundary within +-2 of k whose level moves the way the values were moved (its fitted
  steps: asv has no direction, so on a higher-is-better series it reads a regression as an
  improvement).
- By chance: the same test at the same k on the un-injected series (a change point of that outcome,
  or an asv boundary of that direction, already there): the share of "found" that needs no step.
- In the data (`detectable`): trials whose step is at least `noise_k` (3) robust sigmas of the series
  (the detector's own size guard) and that the real series does not undo: its median level over the
  5 commits from k does not move the other way by half the step or more against the 5 before k (a
  real -10% at k cancels an injected +10%; a real -7% at k + 1 leaves it one commit). The found
  share of these, for the service and asv's fit, is printed beside the share of all trials.
- Measures past the threshold (`measures`, +5% trials): the injected step together with the real
  series' own move measures at least the series' threshold (`Series.floor`) where the detector
  measures it: median of the `span` (32) commits from k against the 32 before. The service reports
  no step under its threshold, as `asv publish` lists none; asv's fitted steps apply none. The found
  share of these is printed for both.
- Still open: of the + trials found whose level stays up (`lasts`: at the newest 5 commits the
  injected series is still at least half the step away from its 5 commits before k; a later real
  improvement of the series can bring it back, and the dashboard then rightly shows the regression
  fixed), those whose change point the dashboard shows as an open regression at the newest commit:
  `recovery(cp.before, later change points, direction, threshold)` is "" with the series' threshold
  for its next commit (`judge_levels`). The found trials whose level came back are counted apart,
  with how many of them are still shown open. asv's
  counterpart: `detect_regressions` lists a jump whose first commit after is within +-2 of k
  (asv lists only regressions not undone since, so this is its "still open").
- Delay: the injected series replayed prefix by prefix, p = k+1 .. min(n, k+30) commits
  (`SeriesState.extend`, `judge_levels(track=...)`); the delay is p - k at the first prefix where
  the service flags it (a change point of the right outcome within +-2 of k, or, for + steps, a
  suspicion raised at commits k .. k+2: suspicions at k-2 and k-1 predate the step), so 1 means
  "flagged when the step's own commit arrived". Not flagged within 30 commits (or by the series'
  end, when fewer than 30 follow k) is ">30". asv: the first prefix whose `detect_steps` fit has a
  boundary as in "found". Median and 90th percentile are nearest-rank.
- Regressions per 1,000 commit-series (the un-injected series): REGRESSED change points of
  `change_points` on each whole series, per 1,000 commits summed over the series. asv: the jumps
  `detect_regressions` lists on each whole series, per 1,000 of the same commits (only those not
  undone since); beside it, its fit's rises past the threshold between adjacent levels, whether a
  later step undid them or not (`asv_worsening`), nearer what the service's count holds.
- ...of them: the share of those change points where asv's fit of the same series has a boundary
  within +-NEAR moving the same way, and the share whose step is at least `BIG_STEP` (5) robust
  sigmas (`ci.verdicts.segments.robust_sigma` of the series' log levels): steps of the data itself,
  not of the detector.
- ...asv's listed regressions that the service flags too: of the jumps `detect_regressions` lists on
  the un-injected series, the share with a REGRESSED change point of the service within +-NEAR
  commits, and (in brackets) the share with only a suspicion there still open at the newest commit.
  Fewer regressions than asv's is a miss where asv's are real: read the two rows together.
- False alarms: each real series with its commits in a seeded random order (`shuffled`: the same
  values, outliers and mix of runner regimes, but no step anywhere), REGRESSED change points of
  `change_points`, and the suspicions `judge_levels` raises on it, per 1,000 commit-series; asv:
  the jumps `detect_regressions` lists on the same shuffled points.
- Suspicions per 1,000 commit-series: `judge_levels` on each whole series, every suspicion raised
  (whatever its state now); share confirmed: CONFIRMED / (CONFIRMED + WITHDRAWN). As the dashboard
  does, a suspicion at a commit where its machine's whole job moved waits for a third commit
  (`hold_at_job_moves`, the moves read over the machine's evaluated series by `machine_job_moves`;
  the dashboard reads every series of the machine judged by ratio, the short ones too), in the
  delay's replay and the banner's as well; the shuffled series have no such commit.
- Banner up: each series replayed commit by commit; at a commit of a machine (one where any
  evaluated series of it has a level), the overview's banner is up when an evaluated series of
  that machine, as of that commit, has an open suspicion (SUSPECTED) or a change-point regression
  the dashboard shows open (as above; no acknowledgements). Share: such commits / all of them,
  over every machine; split into commits with an open regression and those with suspicions only.
  A false warning: a commit whose banner is up for suspicions alone, every one of them withdrawn
  (or expired) by the whole history. The same replay counts the REGRESSED change points some
  prefix showed that the whole history no longer holds (retracted as later commits arrived).
- Adjacent pairs (cross-job A/B): up to `--pairs` seeded pairs of consecutive commits of one
  machine (its commits where it has any result). Service: `compare_commits(store, base, head,
  machine)`, which applies the cross-job rule (between-job drift) unless both sides carry one job
  marker; a pair counts when any verdict is REGRESSED. asv: asv compare's rule per series in both
  (correctness left out): "+" (worse by factor 1.1 and, where the results carry statistics,
  `asv._stats.is_different`); a pair counts when any series is "+". Injected: +10 % (the bad
  direction) into one seeded series of known direction of the pair's head (through a reader that
  scales those samples, so `compare_commits` runs unchanged); found: the service's verdict on it is
  REGRESSED; asv marks it changed in the direction its value moved. False alarms: pairs called
  regressed on a series that the un-injected history does not step at the head (neither the
  service's REGRESSED change points nor asv's listed regressions there): a pair at a real step may
  be right to be called regressed.
- Jobs that moved every series together (`series.job_shifts`): per machine and commit, the median
  over its evaluated series of the series' log level minus the median of its 10 commits each side;
  the 5th and 95th percentiles and the commits past ±5%. Hardware that differs between jobs without
  the files saying so shows a second mode (the detector judges each series alone: the gap is open).
- Targets (`report.targets`, the second table): the service's bars for a real history read off the
  numbers above, each "met", "**not met**" or "cannot say here" (nothing to read it on: no
  suspicion raised, no step of that size asked for): +10% found >= 90% and still open >= 90%,
  delay median <= 2 and p90 <= 5, +5% found >= asv's fitted share, regressions per 1,000 <= asv's,
  suspicions confirmed >= 50%, the banner up for suspicions alone on <= 5% of commits, fewer
  adjacent pairs called regressed than asv's rule (all, and at no step of the history) with the
  injected +10% found at least as often.
  Read on all trials (not on those in the data); this project's verdict quality on its own samples
  is `tools.bench_verdicts`' to show.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

from ci.ingest import AsvFormatError
from ci.project import ConfigError
from tools.eval_history.pairs import (
    InjectedReader,
    MachineReader,
    PairOutcome,
    PairsOutcome,
    asv_mark,
    evaluate_pair,
    evaluate_pairs,
)
from tools.eval_history.report import alert_groups, evaluate_dir, nearest_rank, render, summarize
from tools.eval_history.series import (
    AB_STEP,
    ASV_FACTOR,
    BIG_STEP,
    DEFAULT_STEPS,
    EDGE,
    HEADLINE_STEP,
    MIN_EDGE,
    NEAR,
    REPLAY,
    AsvPoint,
    EvalInputError,
    Series,
    asv_entry_name,
    asv_thresholds,
    injected,
    is_bad,
    make_series,
    pooled_commits,
    read_asv_points,
    read_series,
    scaled_points,
    shuffled,
    step_factor,
)
from tools.eval_history.trials import (
    SeriesOutcome,
    Trial,
    asv_boundary_near,
    asv_fit,
    asv_jumps,
    asv_trial,
    asv_worsening,
    banner_replay,
    detectable,
    evaluate_series,
    fork_map,
    lasts,
    measures,
    open_regressions,
    service_trial,
    trial_k,
)

__all__ = [
    "AB_STEP", "ASV_FACTOR", "BIG_STEP", "DEFAULT_STEPS", "EDGE", "HEADLINE_STEP", "MIN_EDGE", "NEAR", "REPLAY",
    "AsvPoint", "EvalInputError", "InjectedReader", "MachineReader", "PairOutcome", "PairsOutcome", "Series",
    "SeriesOutcome", "Trial",
    "alert_groups", "asv_boundary_near", "asv_entry_name", "asv_fit", "asv_jumps", "asv_mark", "asv_thresholds",
    "asv_trial", "asv_worsening", "banner_replay", "detectable", "evaluate_dir", "evaluate_pair", "evaluate_pairs",
    "evaluate_series", "fork_map",
    "injected", "is_bad", "lasts", "main", "make_series", "measures", "nearest_rank", "open_regressions", "parse_steps",
    "pooled_commits",
    "read_asv_points", "read_series", "render", "scaled_points", "service_trial", "shuffled", "step_factor",
    "summarize", "trial_k",
]


def parse_steps(text: str) -> list[float]:
    """'+5,+10,-10' -> [0.05, 0.10, -0.10]; a size needs its sign."""
    out = []
    for part in text.split(","):
        part = part.strip().rstrip("%")
        if not part or part[0] not in "+-":
            raise argparse.ArgumentTypeError(f"step {part!r}: give a sign (+ the bad direction, - an improvement)")
        value = float(part) / 100
        if value == 0 or not math.isfinite(value) or abs(value) >= 10:
            raise argparse.ArgumentTypeError(f"step {part!r}: a non-zero percentage below 1000")
        out.append(value)
    return out


def main(argv: list[str] | None = None) -> int:
    """Measure every results directory given; print a table each; 0 when all were read, 2 when one
    could not be (its error on stderr; the others are still measured)."""
    p = argparse.ArgumentParser(prog="python -m tools.eval_history", description=__doc__.split("\n\n")[0])
    p.add_argument("results_dirs", nargs="+", type=Path, metavar="RESULTS_DIR", help="asv results directories")
    p.add_argument("--steps", type=parse_steps, default=parse_steps(DEFAULT_STEPS),
                   help=f"step sizes in percent, signed (default {DEFAULT_STEPS}: + the bad direction)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--trials", type=int, default=1,
                   help="trials per series and step size, each at its own seeded commit (default 1)")
    p.add_argument("--min-commits", type=int, default=30, help="skip series with fewer commits with a value")
    p.add_argument("--max-series", type=int, default=None, help="sample this many series per machine (seeded)")
    p.add_argument("--only-steps", action="store_true",
                   help="only the injected-step trials (no real-series rates, banner or A/B pairs)")
    p.add_argument("--no-replay", action="store_true", help="skip the commit-by-commit replays (delays, banner)")
    p.add_argument("--pairs", type=int, default=100, help="adjacent commit pairs for the cross-job A/B")
    p.add_argument("--asv-conf", type=Path, default=None,
                   help="asv.conf.json for asv's regressions_thresholds, which must exist (default: "
                        "RESULTS_DIR/../asv.conf.json, asv's defaults where there is none)")
    p.add_argument("--json", type=Path, default=None, help="write the numbers here")
    args = p.parse_args(argv)
    if args.min_commits < 2 * MIN_EDGE + 1:
        p.error(f"--min-commits must be >= {2 * MIN_EDGE + 1} (a step at least {MIN_EDGE} commits from either end)")
    if args.trials < 1:
        p.error("--trials must be >= 1")
    if args.max_series is not None and args.max_series < 1:
        p.error("--max-series must be >= 1")
    if args.json is not None and not args.json.parent.is_dir():
        p.error(f"--json: {args.json.parent} is not a directory")
    # A file named but absent was read as none: asv's default thresholds, with exit 0 (as `ci ingest
    # --config` and `ci dashboard --config` do, a file named must be there).
    if args.asv_conf is not None and not args.asv_conf.is_file():
        p.error(f"--asv-conf: {args.asv_conf}: no such file")
    reports, unread = [], 0
    for d in args.results_dirs:
        try:
            report = evaluate_dir(d, steps=args.steps, seed=args.seed, trials=args.trials,
                                  min_commits=args.min_commits, max_series=args.max_series,
                                  replay=not args.no_replay, only_steps=args.only_steps, pairs=args.pairs,
                                  asv_conf=args.asv_conf)
        except (AsvFormatError, ConfigError, EvalInputError, OSError) as exc:
            # One unreadable directory must not lose the others' tables: say which, go on, exit 2.
            print(f"python -m tools.eval_history: {d}: not evaluated: {exc}", file=sys.stderr, flush=True)
            unread += 1
            continue
        if not report["series_judged"] and not report["series_unknown_direction"]:
            # Nothing measured is no result: every file refused, or no series long enough.
            sk = report["skipped"]
            apart = [f"{sk[k]} {k}" for k in ("correctness", "at or through zero") if sk.get(k)]
            never = f"; never evaluated: {', '.join(apart)}" if apart else ""
            print(f"python -m tools.eval_history: {d}: not evaluated: no series of {args.min_commits} or more "
                  f"commits (the longest of those it evaluates has {report['longest_series']}; --min-commits takes "
                  f"{2 * MIN_EDGE + 1} or more{never}). Read: {report['ingest']}", file=sys.stderr, flush=True)
            unread += 1
            continue
        print(render(report), end="\n\n", flush=True)
        reports.append(report)
    if args.json is not None:
        args.json.write_text(json.dumps(_plain(reports), indent=1) + "\n")
    return 2 if unread else 0


def _plain(x: Any) -> Any:
    """`x` as strict JSON: a delay not flagged within the replay is the text ">30", NaN (no trials) null."""
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_plain(v) for v in x]
    if isinstance(x, float | np.floating):
        return f">{REPLAY}" if math.isinf(x) else None if math.isnan(x) else float(x)
    if isinstance(x, np.integer):
        return int(x)
    return x
