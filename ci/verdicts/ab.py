"""A/B verdicts for a pull request: base and head compared per series.

Pure functions over `ci.records.Result`; no store, no torch.

Per series the decision combines three things, as asv, Pinpoint and nvbench-compare-robust do:

1. **Significance**: a two-sided Mann-Whitney U test on the raw samples (asv's test; exact when
   there are no ties), with its p-values corrected for multiple comparisons over the whole PR
   (Benjamini-Hochberg by default: hundreds of series per PR would otherwise raise a false alarm
   on most PRs).
2. **Practical size**: |ratio - 1| must exceed a threshold, `max(floor, k * robust relative sigma)`,
   where sigma is the relative IQR / 1.349 of the base side, pooled with the head's only where the
   head is not significantly wider (Brown-Forsythe, p < 0.002): a head that adds noise must not
   raise its own bar (pooling always made a bimodal +45 % head and a +17 % median at p = 0.0008
   read "inconclusive", 2026-12-05). In-job samples underestimate run-to-run drift, which is what
   this guards against.
3. **Confidence interval** of the ratio of medians (percentile bootstrap, `scipy.stats.bootstrap`,
   seeded so a verdict is reproducible). A change past the threshold that is not significant, or
   an interval that straddles the regression-side threshold, is "inconclusive": the honest answer
   is "measure more samples", as Pinpoint's UNKNOWN and nvbench's AMBG say. An interval that
   stays below the regression edge is "unchanged" (an unconfirmed improvement needs no re-run).

A slower tail is a slowdown too: where the samples differ significantly and the median stays within
the threshold but the slow side's quartile or the mean lies wholly past it on the bad side (its
bootstrap interval), the series is REGRESSED in one job and INCONCLUSIVE as an unconfirmed slowdown
across jobs; never "unchanged".

A change only one process shows is not confirmed: asv runs a benchmark's rounds in separate processes
and appends their samples in order, so where one side's halves differ significantly (a burst of load
in one process), a change must hold between every half of base and every half of head
(`ci.verdicts.decide._halves_disagree`); else it is INCONCLUSIVE, "measure again".

Results without raw samples (one value per point, as most CI histories record: asv without
`--record-samples`) are decided with what asv recorded, as asv compare does: its rule
(`asv.commands.compare._is_result_better`: the factor, and asv's 99 % intervals of the medians must not
overlap, `asv._stats.is_different`) with the factor `1 + threshold`.

All of this assumes base and head were measured in one job (one asv call, rounds interleaved).
When they were not (`ci.verdicts.jobs`), drift between jobs is in neither side's samples: the
caller passes each series' noise model learned from the machine's history (`between_jobs`,
`ci.verdicts.noise`), whose allowance is the least threshold, and a series without one is withheld.
A series measured as one value a side without asv's statistics is then judged on that allowance alone.

Correctness series (`Kind.CORRECTNESS`) are not compared statistically: their head results go
through `ci.verdicts.gates.correctness_gates`, whose FAILED verdicts make `exit_code` return 1. Nor are
exact series (`Kind.EXACT`): `ci.verdicts.exact` calls them unchanged or changed, and applies their gates.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from ci.records import (
    FAILED_ON_HEAD,
    MISSING_MACHINE,
    MISSING_ON_HEAD,
    NEW_SERIES,
    STAT_NAMES,
    UNCONFIRMED_SLOWDOWN,
    Benchmark,
    Kind,
    Outcome,
    Result,
    Verdict,
    is_worse,
)
from ci.verdicts.decide import Pending, band_text, decide, measure
from ci.verdicts.exact import exact_verdicts, is_exact
from ci.verdicts.gates import correctness_gates
from ci.verdicts.noise import SeriesNoise
from ci.verdicts.settings import ASV_DEFAULT_THRESHOLD, VerdictSettings
from ci.verdicts.stats import Spread, adjust_pvalues, finite, spread_of

# Where they were first defined: `from ci.verdicts.ab import VerdictSettings` keeps working.
__all__ = ["ASV_DEFAULT_THRESHOLD", "VerdictSettings", "compare", "spread_for", "spreads"]


def _group(results: Sequence[Result], side: str, pool_machines: bool = False) -> dict[tuple[str, str], list[Result]]:
    """Results by series: (machine, series key), or ("", series key) when `pool_machines`."""
    if isinstance(results, (str, bytes)) or not isinstance(results, Sequence):
        raise TypeError(f"{side} must be a sequence of Result, got {type(results).__name__}")
    groups: dict[tuple[str, str], list[Result]] = {}
    for r in results:
        if not isinstance(r, Result):
            raise TypeError(f"{side} must contain only Result records, got {type(r).__name__}")
        groups.setdefault(("" if pool_machines else r.machine, r.benchmark.key), []).append(r)
    return groups


def _pooled(rs: list[Result], side: str) -> tuple[np.ndarray, str, str]:
    """Samples of all results of one series on one side (e.g. several asv rounds/files)."""
    machines = {r.machine for r in rs}
    shas = {r.commit_sha for r in rs}
    if len(shas) > 1:
        raise ValueError(f"{side}: series {rs[0].benchmark.key!r} has results from several commits {sorted(shas)}")
    return finite(s for r in rs for s in r.samples), rs[0].commit_sha, ",".join(sorted(machines))


def spreads(base: Sequence[Result], head: Sequence[Result]
            ) -> dict[tuple[str, str], tuple[Spread | None, Spread | None]]:
    """Per series, the (base, head) Spread of the samples `compare` pools (None for a side
    without finite samples).

    Args:
        base: results of the base commit.
        head: results of the head commit.

    Returns:
        (machine, series key) -> (base Spread or None, head Spread or None); `spread_for` looks a
        verdict's up.
    """
    b, h = _group(base, "base"), _group(head, "head")
    out = {}
    for key in b.keys() | h.keys():
        sides = [side_spread(g.get(key, [])) for g in (b, h)]
        out[key] = (sides[0], sides[1])
    return out


def side_spread(rs: Sequence[Result]) -> Spread | None:
    """One side's Spread: of its raw samples; of asv's recorded quartiles and `repeat` where the side
    is one point that asv recorded without raw samples (asv without `--record-samples`, as most CI
    histories are). Its value alone read "n=1" with no spread beside asv's own 5 repeats and their
    quartiles on a real history (PyLops', 2026-12-07). None without a finite sample."""
    samples = finite(s for r in rs for s in r.samples)
    if samples.size == 1:
        recorded = [r for r in rs if r.stats is not None and finite(r.samples).size]
        if len(recorded) == 1 and len(stats := recorded[0].stats or ()) == len(STAT_NAMES):
            st = dict(zip(STAT_NAMES, stats, strict=True))
            value, q25, q75, repeat = float(samples[0]), st["q_25"], st["q_75"], st["repeat"]
            if math.isfinite(q25) and math.isfinite(q75) and math.isfinite(repeat) and repeat >= 2 \
                    and q25 <= value <= q75:
                return Spread(value, float(q25), float(q75), int(repeat))
    return spread_of(samples)


def spread_for(sides: Mapping[Any, tuple[Spread | None, Spread | None]], v: Verdict
               ) -> tuple[Spread | None, Spread | None]:
    """A verdict's (base, head) Spread in `spreads`' result (or a map by series key alone)."""
    return sides.get((v.machine, v.benchmark.key)) or sides.get(v.benchmark.key) or (None, None)


def _machine_of(rs: list[Result]) -> str:
    """The machine a verdict is about: its results' machine (several, comma-joined, only when a
    caller pooled machines on purpose)."""
    return ",".join(sorted({r.machine for r in rs}))


def _only_one_side(benchmark: Benchmark, rs: list[Result], side_present: str, machine_ran: bool = True) -> Verdict:
    samples = finite(s for r in rs for s in r.samples)
    value = float(np.median(samples)) if samples.size else math.nan
    sha, machine = rs[0].commit_sha, _machine_of(rs)
    if side_present == "head":
        if not samples.size:  # a new benchmark that crashed (a sample-less result: `results_with_crashes`)
            return Verdict(benchmark=benchmark, outcome=Outcome.FAILED, base_value=math.nan, head_value=math.nan,
                           ratio=math.nan, head_sha=sha, reason=FAILED_ON_HEAD, machine=machine)
        return Verdict(benchmark=benchmark, outcome=Outcome.UNCHANGED, base_value=math.nan, head_value=value,
                       ratio=math.nan, head_sha=sha, reason=NEW_SERIES, machine=machine)
    if benchmark.kind == Kind.CORRECTNESS:  # a check that did not run is not a pass
        return Verdict(
            benchmark=benchmark, outcome=Outcome.FAILED, base_value=value, head_value=math.nan, ratio=math.nan,
            base_sha=sha, reason=f"correctness check {MISSING_ON_HEAD if machine_ran else MISSING_MACHINE}: a check "
                                 "that did not run is not a pass",
            machine=machine,
        )
    return Verdict(benchmark=benchmark, outcome=Outcome.INCONCLUSIVE, base_value=value, head_value=math.nan,
                   ratio=math.nan, base_sha=sha, reason=MISSING_ON_HEAD if machine_ran else MISSING_MACHINE,
                   machine=machine)


def compare(
    base: Sequence[Result],
    head: Sequence[Result],
    *,
    settings: VerdictSettings | None = None,
    between_jobs: Mapping[str, float | SeriesNoise] | Mapping[tuple[str, str], float | SeriesNoise] | None = None,
    ran_at_head: Collection[str] | None = None,
) -> list[Verdict]:
    """A/B verdicts between the base and head results of one job.

    Results pair by series: machine (asv machine x environment x host, `ci.records.Machine`) and
    `benchmark.key`, so that two environments measured by one job are never pooled; several
    results of one series on one side (asv rounds, or `--append-samples` runs) pool their samples.
    A series on only one side is reported: new on head is UNCHANGED ("new series"), missing on
    head is INCONCLUSIVE. A series whose head results hold no finite sample (a crash:
    `ci.verdicts.inputs.results_with_crashes` adds sample-less results for them) is FAILED.
    Correctness series are judged by `ci.verdicts.gates.correctness_gates` on the head results
    (FAILED or UNCHANGED); one missing on head is FAILED.

    Args:
        base: results of the base commit (one machine, or several: each series pairs within its own).
        head: results of the head commit (the same machines).
        settings: decision settings; `VerdictSettings()` when None.
        between_jobs: None when base and head were measured in one job (`ci.verdicts.jobs`).
            Otherwise each series' noise model learned from its machine's history
            (`ci.verdicts.noise.SeriesNoise`, `ci.verdicts.jobs.drift_for`): its threshold becomes at
            least the model's allowance (a plain float is a between-job sigma: `settings.drift_k` of
            it), and a timing series missing from the mapping is withheld (INCONCLUSIVE,
            `WITHHELD_OTHER_JOB`): in-job samples cannot judge it. Keyed by (machine, series key),
            or by series key alone for a comparison on one machine.
        ran_at_head: the machines that ran at head (a run whose every point was skipped holds no result);
            None: those with a result there. A series of a machine that did not run is `MISSING_MACHINE`.

    Returns:
        One Verdict per series, sorted by series key then machine. `ratio` is head/base of the medians;
        `ci_low`/`ci_high` its bootstrap interval; `p_value` the corrected Mann-Whitney p;
        `threshold` the relative change the series needed; `machine` the head results' machine.

    Raises:
        TypeError: inputs are not sequences of Result.
        ValueError: base and head share no machine (unless allowed), or one side
            mixes several commits for a series.
    """
    settings = settings or VerdictSettings()
    if not isinstance(settings, VerdictSettings):
        raise TypeError(f"settings must be a VerdictSettings, got {type(settings).__name__}")
    pool = settings.allow_cross_machine
    base_groups = _group(base, "base", pool)
    head_groups = _group(head, "head", pool)
    # The machines (environment x host) that ran at head: a series missing there is missing, not its machine.
    ran = set(ran_at_head) if ran_at_head is not None and not pool else {m for m, _ in head_groups}
    if not pool:
        base_machines = {r.machine for r in base}
        head_machines = {r.machine for r in head}
        if base_machines and head_machines and not base_machines & head_machines:
            raise ValueError(
                f"base ran on {sorted(base_machines)} but head on {sorted(head_machines)}: an A/B verdict needs "
                "both measured on the same machine (one asv machine, environment and host) in the same job "
                "(set allow_cross_machine to override)"
            )

    final: list[Verdict] = []
    pending: list[Pending] = []
    jumpy: dict[tuple[str, str], SeriesNoise] = {}  # series whose allowance covers jumps of their history
    gate_results: list[Result] = []
    exact_base: list[Result] = []
    exact_head: list[Result] = []
    for series in sorted(base_groups.keys() | head_groups.keys(), key=lambda s: (s[1], s[0])):
        b_rs, h_rs = base_groups.get(series), head_groups.get(series)
        machine, key = series
        bench = (h_rs or b_rs)[0].benchmark  # type: ignore[index]
        if is_exact(bench):  # exact series: no statistics (ci.verdicts.exact, after the loop)
            exact_base.extend(b_rs or ())
            exact_head.extend(h_rs or ())
            continue
        if bench.kind == Kind.CORRECTNESS:
            if h_rs:
                gate_results.extend(h_rs)
            else:
                final.append(_only_one_side(bench, b_rs, "base", machine in ran))  # type: ignore[arg-type]
            continue
        if not b_rs or not h_rs:
            final.append(_only_one_side(bench, (h_rs or b_rs), "head" if h_rs else "base",  # type: ignore[arg-type]
                                        machine in ran))
            continue
        b, base_sha, _ = _pooled(b_rs, "base")
        h, head_sha, head_machine = _pooled(h_rs, "head")
        # The head's machine: with allow_cross_machine the base may differ, but the verdict is
        # about the head's series (the one the dashboard flags).
        drift: float | SeriesNoise | None = 0.0
        if between_jobs is not None:
            drift = between_jobs.get((machine, key), between_jobs.get(key))  # type: ignore[call-overload]
            if isinstance(drift, SeriesNoise) and (drift.jump > 0 or drift.allowance > settings.max_threshold):
                jumpy[(key, head_machine)] = drift
        verdict_or_pending = measure(bench, b, h, base_sha, head_sha, b_rs[0].benchmark, settings, head_machine,
                                      _version_change(b_rs, h_rs), drift, between_jobs is not None, (b_rs, h_rs))
        if isinstance(verdict_or_pending, Verdict):
            final.append(verdict_or_pending)
        else:
            pending.append(verdict_or_pending)

    adjusted = adjust_pvalues([p.p_raw for p in pending], settings.correction)
    final.extend(decide(p, p_adj, settings) for p, p_adj in zip(pending, adjusted, strict=True))
    final = [_within_jumps(v, jumpy[(v.benchmark.key, v.machine)], settings.floor_for(v.benchmark.key),
                           settings.max_threshold)
             if (v.benchmark.key, v.machine) in jumpy else v for v in final]
    final.extend(correctness_gates(gate_results))
    final.extend(exact_verdicts(exact_base, exact_head))
    return sorted(final, key=lambda v: (v.benchmark.key, v.machine))


def _within_jumps(v: Verdict, noise: SeriesNoise, floor: float, max_threshold: float = math.inf) -> Verdict:
    """An "unchanged" across jobs whose change is past its series' usual job-to-job noise on the bad side,
    within only the jumps its history takes and takes back: an unconfirmed slowdown, not unchanged.
    Two one-commit spikes in a real 34-job history (jaxion's, 2026-12-07) raised a series' allowance
    to 18.4 %, and a +10.6 % rise that asv compare flags (its 99 % intervals apart) read "unchanged".
    Likewise within an allowance wider than `max_threshold` (a short or wild history's: stingray's 12 jobs
    allowed +31.3 %, and a +23 % step asv lists read "unchanged"): past the floor on the bad side, it is
    an unconfirmed slowdown that only one job can tell from the drift."""
    if v.outcome != Outcome.UNCHANGED or not math.isfinite(v.ratio) or v.ratio <= 0:
        return v
    if noise.jump <= 0:  # a wide allowance alone
        if not (noise.allowance > max_threshold and abs(math.log(v.ratio)) > math.log1p(floor)
                and is_worse(v.benchmark.direction, v.ratio) is True):
            return v
        return replace(v, outcome=Outcome.INCONCLUSIVE, reason=(
            f"{UNCONFIRMED_SLOWDOWN}: {(v.ratio - 1) * 100:+.1f}% past the series' floor ({band_text(floor)}), within "
            f"its between-job allowance ({band_text(noise.allowance)}, {noise.jobs} jobs), wider than the "
            f"{band_text(max_threshold)} a comparison tells from drift: measure both in one job"))
    core = max(floor, math.expm1(noise.multiplier * noise.sigma))
    if not abs(math.log(v.ratio)) > math.log1p(core) or is_worse(v.benchmark.direction, v.ratio) is not True:
        return v
    reason = (f"{UNCONFIRMED_SLOWDOWN}: {(v.ratio - 1) * 100:+.1f}% past the series' usual noise between jobs "
              f"({band_text(core)}), within only the jumps its history takes and takes back "
              f"({band_text(noise.allowance)}, {noise.jobs} jobs): measure both in one job")
    return replace(v, outcome=Outcome.INCONCLUSIVE, reason=reason)


def _version_change(base: Sequence[Result], head: Sequence[Result]) -> str | None:
    """Why base and head of a series cannot be compared because asv's benchmark `version` differs
    (the benchmark code measures something else now); None when they match or are unknown."""
    b = {r.benchmark_version for r in base if r.benchmark_version is not None}
    h = {r.benchmark_version for r in head if r.benchmark_version is not None}
    if not b or not h or b == h:
        return None
    return f"the benchmark's version changed ({', '.join(sorted(b))} -> {', '.join(sorted(h))})"
