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

import functools
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ci.records import (
    FAILED_BOTH,
    FAILED_ON_HEAD,
    MISSING_ON_HEAD,
    NEW_SERIES,
    NO_BASE_SAMPLES,
    UNCONFIRMED_SLOWDOWN,
    UNKNOWN_DIRECTION,
    WITHHELD_OTHER_JOB,
    Benchmark,
    Direction,
    Kind,
    Outcome,
    Project,
    Result,
    Verdict,
    is_worse,
)
from ci.verdicts.exact import exact_verdicts, is_exact
from ci.verdicts.gates import correctness_gates
from ci.verdicts.noise import SeriesNoise
from ci.verdicts.stats import (
    CORRECTIONS,
    Spread,
    adjust_pvalues,
    bootstrap_ci,
    finite,
    mwu_pvalue,
    relative_sigma,
    slow_tail,
    spread_of,
    spread_pvalue,
)

# A head whose spread is wider than its base's at this Brown-Forsythe p (asv's own significance level)
# does not pool into its threshold (`_noise_sigma`).
SAME_SPREAD_P = 0.002
# asv's regression threshold for a series that `regressions_thresholds` does not match (asv's
# `_GraphDataFilter._get_threshold`; its documentation: "the default threshold is 0.05").
ASV_DEFAULT_THRESHOLD = 0.05
# asv compare's statistics of one side, as `_is_result_better` takes them: (stats dict, raw samples or None).
AsvSide = tuple[dict[str, float], list[float] | None]


@dataclass(frozen=True)
class VerdictSettings:
    """Knobs of the A/B decision; defaults calibrated with `python -m tools.bench_verdicts` (numbers in
    docs/performance.md "Verdict quality", "Tried and refuted": floor 2 % gave 32 % of 200-series PRs a
    false alarm at n=10).

    Attributes:
        alpha: significance level applied to the corrected p-values.
        correction: multiple-comparison correction over the series of one `compare` call:
            "bh" (Benjamini-Hochberg, false discovery rate), "holm", "bonferroni" or "none".
        floor: smallest relative change ever reported (0.02 = 2 %).
        noise_k: the threshold is `noise_k` robust sigmas of the series' relative noise.
        max_threshold: cap on the noise-adapted part of the threshold, so a very noisy series
            still reports a large change (a floor from `overrides` is never capped: it is a
            deliberate per-series choice).
        confidence: confidence level of the ratio's bootstrap interval. 0.90 makes "interval inside
            the band" a two-one-sided-tests equivalence check at 5 %; a 99 % interval of a median
            from 10 samples spans nearly the whole sample and left 18 % of A/A series inconclusive
            (measured 2026-11-29, synthetic 1 % lognormal noise, n=10).
        n_resamples: bootstrap resamples.
        min_samples: fewer finite samples than this on either side: no test, the verdict is
            UNCHANGED if the ratio is within the floor, else INCONCLUSIVE.
        seed: seed of the bootstrap generator (mixed with the series key), for reproducibility.
        overrides: (regex, floor) pairs; the largest floor whose regex matches the start of the
            series key (`re.match`, as asv matches `regressions_thresholds` against
            `name(params)`) replaces `floor` for that series. None built in: a project sets its
            own in its asv.conf.json (`from_thresholds`, through `ci.project.project_settings`).
        drift_k: base and head measured in different jobs and a series' between-job drift given as
            a plain sigma (`between_jobs` of `compare`): the threshold is at least `drift_k` of it. A
            noise model (`ci.verdicts.noise.SeriesNoise`) brings its own allowance.
        allow_cross_machine: compare results from different machines (meaningless for timing:
            off by default, so a mixed-up CI job fails loudly).
    """

    alpha: float = 0.05
    correction: str = "bh"
    floor: float = 0.025
    noise_k: float = 1.5
    max_threshold: float = 0.25
    confidence: float = 0.90
    n_resamples: int = 1000
    min_samples: int = 5
    seed: int = 0
    overrides: tuple[tuple[str, float], ...] = ()
    allow_cross_machine: bool = False
    drift_k: float = 3.0

    def __post_init__(self) -> None:
        if not 0.0 < self.alpha < 1.0:
            raise ValueError(f"alpha must be in (0, 1), got {self.alpha!r}")
        if self.correction not in CORRECTIONS:
            raise ValueError(f"correction must be one of {CORRECTIONS}, got {self.correction!r}")
        if not 0.0 <= self.floor < 1.0:
            raise ValueError(f"floor must be in [0, 1), got {self.floor!r}")
        if self.noise_k < 0:
            raise ValueError(f"noise_k must be >= 0, got {self.noise_k!r}")
        if not self.floor <= self.max_threshold:
            raise ValueError(f"max_threshold ({self.max_threshold!r}) must be >= floor ({self.floor!r})")
        if not 0.5 <= self.confidence < 1.0:
            raise ValueError(f"confidence must be in [0.5, 1), got {self.confidence!r}")
        if self.n_resamples < 100:
            raise ValueError(f"n_resamples must be >= 100, got {self.n_resamples!r}")
        if self.min_samples < 2:
            raise ValueError(f"min_samples must be >= 2, got {self.min_samples!r}")
        if self.drift_k < 0:
            raise ValueError(f"drift_k must be >= 0, got {self.drift_k!r}")
        for item in self.overrides:
            if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str)):
                raise TypeError(f"overrides must be (regex, floor) pairs, got {item!r}")
            try:
                re.compile(item[0])
            except re.error as exc:
                raise ValueError(f"overrides: bad regex {item[0]!r}: {exc}") from None
            # A per-series floor may exceed 100 %: 1.0 calls only a halving or a doubling.
            if isinstance(item[1], bool) or not isinstance(item[1], int | float) or not 0.0 <= item[1] < 100.0:
                raise ValueError(f"overrides: floor for {item[0]!r} must be a number in [0, 100), got {item[1]!r}")

    def floor_for(self, key: str) -> float:
        """The threshold floor for series `key` (largest override whose regex matches the key's
        start, else `floor`)."""
        override = self.override_for(key)
        return override[1] if override is not None else self.floor

    def override_for(self, key: str) -> tuple[str, float] | None:
        """The override that sets series `key`'s floor: the (regex, floor) pair of the largest floor
        whose regex matches the key's start (the first of equal ones); None where `floor` applies."""
        matched = [(pattern, f) for pattern, f in self.overrides if re.match(pattern, key)]
        return max(matched, key=lambda pair: pair[1]) if matched else None

    @classmethod
    def for_project(cls, project: Project) -> VerdictSettings:
        """The settings of a project (`ci.records.Project`): its `regressions_thresholds` as floors
        (`from_thresholds`). A series that no entry of a project's asv.conf.json matches (every series,
        where it sets none) takes asv's own default, 5% (`ASV_DEFAULT_THRESHOLD`), as `asv publish`
        reads the same file; the built-in `floor` applies only where no asv.conf.json is known
        (`Project()`, no `source`)."""
        thresholds = dict(project.thresholds)
        if project.source and ".*" not in thresholds:
            return cls.from_thresholds(thresholds, floor=ASV_DEFAULT_THRESHOLD)
        return cls.from_thresholds(thresholds)

    @classmethod
    def from_thresholds(cls, thresholds: Mapping[str, float], **kwargs: object) -> VerdictSettings:
        """Settings whose floors are asv.conf.json's `regressions_thresholds` (the one threshold table
        that `asv publish` and the service both read): `".*"` is the floor, every other entry an override.

        A series' floor is the one `asv publish` takes: the largest of the entries whose regex matches
        it, `".*"` included (so no entry lowers a series below `".*"`); where none matches, the
        built-in `floor` (asv's own default is 5 %). A `".*"` past the noise cap raises the cap to it,
        and one of 100 % or more stays an override (`floor` is a fraction below 1).

        Args:
            thresholds: regex -> relative change (0.025 = 2.5 %).
            **kwargs: other VerdictSettings fields.

        Returns:
            VerdictSettings; an empty mapping keeps the default floors.
        """
        if not isinstance(thresholds, Mapping):
            raise TypeError(f"regressions_thresholds must be an object of regex -> number, got {thresholds!r}")
        if not thresholds:
            return cls(**kwargs)  # type: ignore[arg-type]
        values = {}
        for pattern, value in thresholds.items():
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"regressions_thresholds: {pattern!r} must map to a number, got {value!r}")
            values[str(pattern)] = float(value)
        every = values.pop(".*", None)
        if every is None:
            return cls(overrides=tuple(values.items()), **kwargs)  # type: ignore[arg-type]
        overrides = tuple((p, max(v, every)) for p, v in values.items())
        if not 0.0 <= every < 1.0:
            return cls(overrides=((".*", every), *overrides), **kwargs)  # type: ignore[arg-type]
        kwargs.setdefault("max_threshold", max(cls.max_threshold, every))
        return cls(floor=every, overrides=overrides, **kwargs)  # type: ignore[arg-type]

    def as_thresholds(self) -> dict[str, float]:
        """The inverse of `from_thresholds`: the floors as asv.conf.json writes them."""
        return {".*": self.floor, **dict(self.overrides)}


@dataclass(frozen=True)
class _Pending:
    """A series measured on both sides, before the PR-wide p-value correction."""

    benchmark: Benchmark
    base: np.ndarray
    head: np.ndarray
    base_sha: str
    head_sha: str
    ratio: float
    ci: tuple[float, float]
    p_raw: float
    threshold: float
    machine: str
    cross_job: bool = False
    basis: str = ""  # where the threshold came from, when not the floor or the base's own noise


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


def worse(benchmark: Benchmark, ratio: float) -> bool:
    """True when `ratio` (head / base) moves the benchmark in its bad direction; False for a better
    move and for a benchmark of unknown direction (never judged worse)."""
    return is_worse(benchmark.direction, ratio) is True


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
        sides = [spread_of(finite(s for r in g.get(key, []) for s in r.samples)) for g in (b, h)]
        out[key] = (sides[0], sides[1])
    return out


def spread_for(sides: Mapping[Any, tuple[Spread | None, Spread | None]], v: Verdict
               ) -> tuple[Spread | None, Spread | None]:
    """A verdict's (base, head) Spread in `spreads`' result (or a map by series key alone)."""
    return sides.get((v.machine, v.benchmark.key)) or sides.get(v.benchmark.key) or (None, None)


def _machine_of(rs: list[Result]) -> str:
    """The machine a verdict is about: its results' machine (several, comma-joined, only when a
    caller pooled machines on purpose)."""
    return ",".join(sorted({r.machine for r in rs}))


def _only_one_side(benchmark: Benchmark, rs: list[Result], side_present: str) -> Verdict:
    samples = finite(s for r in rs for s in r.samples)
    value = float(np.median(samples)) if samples.size else math.nan
    if side_present == "head":
        if not samples.size:  # a new benchmark that crashed (a sample-less result: `results_with_crashes`)
            return Verdict(benchmark, Outcome.FAILED, math.nan, math.nan, math.nan, head_sha=rs[0].commit_sha,
                           reason=FAILED_ON_HEAD, machine=_machine_of(rs))
        return Verdict(
            benchmark, Outcome.UNCHANGED, math.nan, value, math.nan, head_sha=rs[0].commit_sha,
            reason=NEW_SERIES, machine=_machine_of(rs),
        )
    if benchmark.kind == Kind.CORRECTNESS:  # a check that did not run is not a pass
        return Verdict(
            benchmark, Outcome.FAILED, value, math.nan, math.nan, base_sha=rs[0].commit_sha,
            reason=f"correctness check {MISSING_ON_HEAD}: a check that did not run is not a pass",
            machine=_machine_of(rs),
        )
    return Verdict(
        benchmark, Outcome.INCONCLUSIVE, value, math.nan, math.nan, base_sha=rs[0].commit_sha,
        reason=MISSING_ON_HEAD, machine=_machine_of(rs),
    )


def compare(
    base: Sequence[Result],
    head: Sequence[Result],
    *,
    settings: VerdictSettings | None = None,
    between_jobs: Mapping[str, float | SeriesNoise] | Mapping[tuple[str, str], float | SeriesNoise] | None = None,
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
    pending: list[_Pending] = []
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
                final.append(_only_one_side(bench, b_rs, "base"))  # type: ignore[arg-type]
            continue
        if not b_rs or not h_rs:
            final.append(_only_one_side(bench, (h_rs or b_rs), "head" if h_rs else "base"))  # type: ignore[arg-type]
            continue
        b, base_sha, _ = _pooled(b_rs, "base")
        h, head_sha, head_machine = _pooled(h_rs, "head")
        # The head's machine: with allow_cross_machine the base may differ, but the verdict is
        # about the head's series (the one the dashboard flags).
        drift: float | SeriesNoise | None = 0.0
        if between_jobs is not None:
            drift = between_jobs.get((machine, key), between_jobs.get(key))  # type: ignore[call-overload]
        verdict_or_pending = _measure(bench, b, h, base_sha, head_sha, b_rs[0].benchmark, settings, head_machine,
                                      _version_change(b_rs, h_rs), drift, between_jobs is not None, (b_rs, h_rs))
        if isinstance(verdict_or_pending, Verdict):
            final.append(verdict_or_pending)
        else:
            pending.append(verdict_or_pending)

    adjusted = adjust_pvalues([p.p_raw for p in pending], settings.correction)
    final.extend(_decide(p, p_adj, settings) for p, p_adj in zip(pending, adjusted, strict=True))
    final.extend(correctness_gates(gate_results))
    final.extend(exact_verdicts(exact_base, exact_head))
    return sorted(final, key=lambda v: (v.benchmark.key, v.machine))


def _version_change(base: Sequence[Result], head: Sequence[Result]) -> str | None:
    """Why base and head of a series cannot be compared because asv's benchmark `version` differs
    (the benchmark code measures something else now); None when they match or are unknown."""
    b = {r.benchmark_version for r in base if r.benchmark_version is not None}
    h = {r.benchmark_version for r in head if r.benchmark_version is not None}
    if not b or not h or b == h:
        return None
    return f"the benchmark's version changed ({', '.join(sorted(b))} -> {', '.join(sorted(h))})"


def _asv_side(rs: Sequence[Result]) -> AsvSide | None:
    """asv compare's statistics of one side of a series: its one result's recorded statistics (the
    store reads them for a point of one value) and its raw samples (None for a point of one value).
    None when the side pools several results (their statistics do not pool) or asv recorded no 99 %
    interval for it: a side of a few raw samples keeps the rule below (too few for a test)."""
    if len(rs) != 1:
        return None
    st = rs[0].asv_stats()
    if st is None:
        return None
    raw = [x for x in rs[0].samples if math.isfinite(x)]
    return st, (raw if len(raw) > 1 else None)


@functools.cache
def _asv_is_result_better() -> Callable[..., bool]:
    """asv compare's rule, imported on first use (asv's package import loads its plugins: ~0.3 s)."""
    from asv.commands.compare import _is_result_better

    return _is_result_better


def _noise_sigma(b: np.ndarray, h: np.ndarray, side: AsvSide | None) -> float:
    """The relative noise behind a series' in-job threshold: the base side's (`_base_sigma`), pooled
    with the head's only where the two spreads are one noise (the head not significantly wider:
    Brown-Forsythe p >= SAME_SPREAD_P). A head significantly wider than its base (a bimodal head, a
    new slow mode) never raises its own bar; pooling two sides of one spread halves the estimate's
    variance, and a base-only estimate cost a head that was noisier by chance an "inconclusive":
    synthetic A/A 1.24 -> ~2.0 % inconclusive at n = 20 (tools.bench_verdicts, 2026-12-05)."""
    sb = _base_sigma(b, side)
    if b.size < 3 or h.size < 3:
        return sb
    sh = relative_sigma(h)
    if sh > sb and spread_pvalue(b, h) < SAME_SPREAD_P:
        return sb
    return _rms(sb, sh)


def _base_sigma(b: np.ndarray, side: AsvSide | None) -> float:
    """The base side's robust relative noise: from its samples, else from asv's recorded quartiles
    (IQR / 1.349 / median), else 0."""
    if b.size >= 2:
        return relative_sigma(b)
    if side is not None and {"q_25", "q_75"} <= side[0].keys() and b.size:
        med = float(np.median(b))
        if med > 0:
            return max(0.0, (side[0]["q_75"] - side[0]["q_25"]) / 1.349 / med)
    return 0.0


def _allowance(drift: float | SeriesNoise, settings: VerdictSettings) -> tuple[float, str]:
    """The least threshold between jobs and the words for where it came from ("" in-job)."""
    if isinstance(drift, SeriesNoise):
        return drift.allowance, drift.describe
    if drift:
        return settings.drift_k * drift, f"between-job drift {drift * 100:.2f}% x {settings.drift_k:g}"
    return 0.0, ""


def _measure(
    bench: Benchmark,
    b: np.ndarray,
    h: np.ndarray,
    base_sha: str,
    head_sha: str,
    base_bench: Benchmark,
    settings: VerdictSettings,
    machine: str,
    version_change: str | None = None,
    drift: float | SeriesNoise | None = 0.0,
    cross_job: bool = False,
    results: tuple[Sequence[Result], Sequence[Result]] = ((), ()),
) -> Verdict | _Pending:
    """Everything per series that does not depend on the other series; a Verdict when no test applies.
    `results`: the (base, head) results pooled into `b` and `h`, for asv's statistics of each side."""

    def early(outcome: Outcome, ratio: float, reason: str, threshold: float = math.nan,
              ci: tuple[float, float] = (math.nan, math.nan)) -> Verdict:
        bv = float(np.median(b)) if b.size else math.nan
        hv = float(np.median(h)) if h.size else math.nan
        return Verdict(bench, outcome, bv, hv, ratio, ci[0], ci[1], threshold=threshold, base_sha=base_sha,
                       head_sha=head_sha, reason=reason, machine=machine)

    if version_change is not None:
        return early(Outcome.INCONCLUSIVE, math.nan, f"not comparable: {version_change}")
    if base_bench.unit != bench.unit or base_bench.direction != bench.direction:
        return early(Outcome.INCONCLUSIVE, math.nan,
                     f"not comparable: unit/direction changed from {base_bench.unit}/{base_bench.direction} "
                     f"to {bench.unit}/{bench.direction}")
    if h.size == 0 and b.size == 0:
        return early(Outcome.INCONCLUSIVE, math.nan, FAILED_BOTH)
    if h.size == 0:  # it ran on base: the head broke it
        return early(Outcome.FAILED, math.nan, FAILED_ON_HEAD)
    if b.size == 0:
        return early(Outcome.INCONCLUSIVE, math.nan, NO_BASE_SAMPLES)
    bm, hm = float(np.median(b)), float(np.median(h))
    if bm <= 0 or hm <= 0 or b.min() <= 0 or h.min() <= 0:
        return early(Outcome.INCONCLUSIVE, math.nan, "ratio undefined: non-positive values")
    ratio = hm / bm
    if not math.isfinite(ratio) or ratio == 0.0:  # medians many orders of magnitude apart
        return early(Outcome.INCONCLUSIVE, math.nan, f"ratio undefined: medians {bm!r} and {hm!r} too far apart")
    floor = settings.floor_for(bench.key)
    # The allowance comes from the base side (and, across jobs, the history): a regression that adds
    # noise must not raise its own bar (`_noise_sigma`). In one job, the spread stands in for the
    # run-to-run drift its samples cannot show.
    sig = _noise_sigma(b, h, _asv_side(results[0]) if b.size < 2 else None)
    threshold = max(floor, min(settings.max_threshold, settings.noise_k * sig))
    if drift is None:
        return early(Outcome.INCONCLUSIVE, ratio, WITHHELD_OTHER_JOB, threshold)
    # Measured in different jobs: their difference carries the series' between-job drift too. A
    # noise model of the history measured that drift itself, so it replaces the stand-in.
    allowance, basis = _allowance(drift, settings)
    if isinstance(drift, SeriesNoise):
        threshold = floor
    basis = basis if allowance > threshold else ""
    threshold = max(threshold, allowance)
    if min(b.size, h.size) >= settings.min_samples:
        ci = bootstrap_ci(b, h, key=bench.key, seed=settings.seed, n_resamples=settings.n_resamples,
                          confidence=settings.confidence)
        return _Pending(bench, b, h, base_sha, head_sha, ratio, ci, mwu_pvalue(b, h), threshold, machine,
                        cross_job, basis)
    where = f"threshold {threshold * 100:.1f}%" + (f" ({basis})" if basis else "")
    sides = (_asv_side(results[0]), _asv_side(results[1]))
    if sides[0] is not None and sides[1] is not None:
        outcome, how, ci = _asv_rule(bench, bm, hm, sides[0], sides[1], threshold)
        return early(outcome, ratio, f"{(ratio - 1) * 100:+.1f}% {how}: {where}", threshold, ci)
    if cross_job:
        # One value a side and no statistics of asv's: the history's allowance is the only evidence.
        outcome, how = _size_outcome(bench, ratio, threshold, "beyond the history's allowance")
        return early(outcome, ratio, f"{(ratio - 1) * 100:+.1f}% {how} (no in-job statistics recorded): {where}",
                     threshold)
    within = abs(math.log(ratio)) <= math.log1p(floor)
    return early(
        Outcome.UNCHANGED if within else Outcome.INCONCLUSIVE, ratio,
        f"too few samples for a test ({b.size} base, {h.size} head; need {settings.min_samples}): "
        + ("ratio within the floor" if within else "measure more samples"),
        threshold,
    )


def _size_outcome(bench: Benchmark, ratio: float, threshold: float, beyond_words: str,
                  up: bool | None = None, down: bool | None = None) -> tuple[Outcome, str]:
    """The outcome of a change judged by its size (`up`/`down`: the change past the threshold upward /
    downward is significant; None: its size is the evidence), with its words."""
    up = ratio > 1.0 + threshold if up is None else up
    down = ratio < 1.0 / (1.0 + threshold) if down is None else down
    beyond = ratio > 1.0 + threshold or ratio < 1.0 / (1.0 + threshold)
    if (up or down) and bench.direction == Direction.UNKNOWN:
        return Outcome.INCONCLUSIVE, f"{beyond_words} ({UNKNOWN_DIRECTION})"
    if up or down:
        return (Outcome.REGRESSED if worse(bench, ratio) else Outcome.IMPROVED), beyond_words
    if beyond:
        return Outcome.INCONCLUSIVE, "beyond the threshold but asv's 99% intervals overlap; measure more samples"
    return Outcome.UNCHANGED, "within the threshold"


def _asv_rule(bench: Benchmark, bm: float, hm: float, base: AsvSide, head: AsvSide, threshold: float
              ) -> tuple[Outcome, str, tuple[float, float]]:
    """asv compare's decision with the factor `1 + threshold` (`_is_result_better`: the factor, and the
    samples' Mann-Whitney test or, without enough samples, non-overlapping 99 % intervals; the factor
    alone where a side's `repeat` is 1), as (outcome, words, the ratio's interval from asv's intervals)."""
    better = _asv_is_result_better()
    factor = 1.0 + threshold
    up = better(bm, hm, base, head, factor)  # base lower than head / factor: the value rose
    down = better(hm, bm, head, base, factor)
    bs, hs = base[0], head[0]
    ci = (hs["ci_99_a"] / bs["ci_99_b"], hs["ci_99_b"] / bs["ci_99_a"]) if bs["ci_99_a"] > 0 else (math.nan, math.nan)
    outcome, how = _size_outcome(bench, hm / bm, threshold, "beyond the threshold and significant by asv's rule",
                                 up, down)
    return outcome, how, ci


def _tail_verdict(p: _Pending, p_adj: float, settings: VerdictSettings, stat: str) -> tuple[Outcome, str] | None:
    """A slower tail where the median stays within the threshold (`ci.verdicts.stats.slow_tail`):
    the samples significantly different (the Mann-Whitney test) and the slow side's quartile or the
    mean wholly past the threshold on the bad side (its bootstrap interval). REGRESSED in one job;
    across jobs an unconfirmed slowdown (INCONCLUSIVE: the history's allowance is of medians). None
    when no such shift.

    The interval, not the point estimate: a mean or a 90th percentile moves with one outlier, and
    with the drift between two sides of one job making the test significant, point estimates put 55
    of 9,500 synthetic A/A series (n = 20) past the threshold (`tools.bench_verdicts`, 2026-12-05)."""
    if not p_adj < settings.alpha:
        return None
    higher = p.benchmark.direction == Direction.HIGHER
    band = 1.0 / (1.0 + p.threshold) if higher else 1.0 + p.threshold
    for name, r, fn in slow_tail(p.base, p.head, higher_is_better=higher):
        if not (r < band if higher else r > band):
            continue
        lo, hi = bootstrap_ci(p.base, p.head, key=f"{p.benchmark.key}\0{name}", seed=settings.seed,
                              n_resamples=settings.n_resamples, confidence=settings.confidence, statistic=fn)
        if not (hi < band if higher else lo > band):
            continue
        what = (f"{(p.ratio - 1) * 100:+.1f}% median, but the {name} {(r - 1) * 100:+.1f}% "
                f"[{(lo - 1) * 100:+.1f}%, {(hi - 1) * 100:+.1f}%]")
        if not p.cross_job:
            return Outcome.REGRESSED, f"{what} beyond the threshold and significant: a slower tail: {stat}"
        return (Outcome.INCONCLUSIVE, f"{UNCONFIRMED_SLOWDOWN}: {what} beyond the threshold, across jobs, where "
                f"the history's allowance is of medians: {stat}; measure both in one job")
    return None


def _rms(a: float, b: float) -> float:
    """sqrt((a^2 + b^2) / 2) of two relative sigmas, as always computed; through `math.hypot` for a
    sigma whose square is no float (past ~1e154: an IQR of 1e100 around a median of 1e-60, values
    an ingest accepts), where `a ** 2` raised OverflowError."""
    if max(a, b) < 1e150:
        return math.sqrt((a**2 + b**2) / 2)
    return math.hypot(a, b) / math.sqrt(2)


def _decide(p: _Pending, p_adj: float, settings: VerdictSettings) -> Verdict:
    hi_band, lo_band = 1.0 + p.threshold, 1.0 / (1.0 + p.threshold)
    ci_low, ci_high = p.ci
    beyond = p.ratio > hi_band or p.ratio < lo_band
    significant = p_adj < settings.alpha
    pct = f"{(p.ratio - 1) * 100:+.1f}%"
    stat = f"p={p_adj:.2g} (raw {p.p_raw:.2g}), threshold {p.threshold * 100:.1f}%" + (
        f" ({p.basis})" if p.basis else "")
    if p.benchmark.direction == Direction.UNKNOWN:
        # Neither better nor worse can be said: the change is reported with its size, never judged.
        # Only an interval inside the band on both sides is "unchanged", whichever way is better.
        if significant and beyond:
            outcome, how = Outcome.INCONCLUSIVE, "beyond the threshold and significant"
        elif beyond:
            outcome, how = Outcome.INCONCLUSIVE, "beyond the threshold but not significant"
        elif ci_high > hi_band or ci_low < lo_band:
            outcome, how = Outcome.INCONCLUSIVE, "within the threshold but the interval reaches beyond it"
        else:
            outcome, how = Outcome.UNCHANGED, "interval within the threshold on both sides"
        reason = f"{pct} {how}: {stat}"
        if outcome == Outcome.INCONCLUSIVE:
            reason = f"{UNKNOWN_DIRECTION}; {reason}"
    elif significant and beyond:
        outcome = Outcome.REGRESSED if worse(p.benchmark, p.ratio) else Outcome.IMPROVED
        reason = f"{pct} beyond the threshold and significant: {stat}"
    elif (tail := _tail_verdict(p, p_adj, settings, stat)) is not None:
        outcome, reason = tail
    elif beyond:
        outcome = Outcome.INCONCLUSIVE
        reason = f"{pct} beyond the threshold but not significant: {stat}; measure more samples"
    elif (ci_high > hi_band) if p.benchmark.direction == Direction.LOWER else (ci_low < lo_band):
        # Only the regression side asks for a re-run: an unconfirmed improvement costs nothing.
        outcome = Outcome.INCONCLUSIVE
        reason = f"{pct} within the threshold but the interval reaches a regression: {stat}; measure more samples"
    else:
        outcome = Outcome.UNCHANGED
        reason = f"{pct}: interval rules out a regression beyond {p.threshold * 100:.1f}%: {stat}"
    return Verdict(
        p.benchmark, outcome, float(np.median(p.base)), float(np.median(p.head)), p.ratio, ci_low, ci_high, p_adj,
        p.threshold, p.base_sha, p.head_sha, reason, p.machine,
    )
