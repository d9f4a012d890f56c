"""Which job measured a result, and how far a series drifts between jobs.

An A/B verdict trusts its samples only when base and head were measured together: in one asv call
with rounds interleaved, drift over the job hits both sides alike. Two asv jobs of the *same*
commit on the H200, ~7 minutes apart (`benchmarks/recorded/h200-2026-11-29-aa-old-timer/partA` and `partA2`),
read up to +24.8% apart at p = 3.6e-11 with tight in-job intervals: between-job drift is not in
any job's samples, so no in-job test can see it.

Job identity comes from the runner: each asv call gets a marker of its own (`JOB_KEY` in a run's
environment, e.g. `gha-8123456789.1-pull-request/3f9a0c5d2e71`: a GitHub Actions run, attempt and
job, and a random id of the asv call within it), which the runner records in the commit's GPU
sidecar beside the sha256 of every result file that call wrote. Ingest sets the marker on a run only
while its file still has that digest. Results without a marker have an unknown job: ingested from asv
files written outside the runner, rewritten since the runner wrote them (a plain `asv run` or
`asv continuous` of the commit), or marked before markers were bound to their files (a per-commit
marker, which any later run of the commit inherited). Nothing says those were measured together, so
they are treated as measured apart.

The two rules: base and head of one asv call (`Jobs.together`) are judged on their samples (the
in-job rule); any others by the cross-job rule, each series' threshold at least the allowance of its
noise model learned from the machine's history (`ci.verdicts.noise`: other commits, one job each),
and a series without one withheld (`ci.verdicts.ab.compare`'s `between_jobs`). Pure functions over
`ci.records.Result`.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from ci.records import JOB_KEY, MachineHistory, Result
from ci.verdicts.noise import NoiseSettings, SeriesNoise, series_noise


class JobRelation(StrEnum):
    """How a comparison's base and head were measured."""

    SAME = "same"  # one asv call, rounds interleaved (both sides carry the same verified job marker)
    DIFFERENT = "different"  # different job markers
    UNKNOWN = "unknown"  # a side has no job marker


@dataclass(frozen=True)
class Jobs:
    """The job relation of a comparison, with the markers it was read from ("" when absent)."""

    relation: JobRelation
    base: str = ""
    head: str = ""

    @property
    def together(self) -> bool:
        """True only when both sides were recorded as measured in one job."""
        return self.relation == JobRelation.SAME

    @property
    def rule(self) -> str:
        """The rule the verdicts use, as said to a reader: "in-job" (base and head of one asv call:
        their samples are the evidence) or "cross-job" (thresholds widened by between-job drift)."""
        return "in-job" if self.together else "cross-job"


def job_of(result: Result) -> str:
    """The job marker of one result ("" when the run has none)."""
    return dict(result.environment).get(JOB_KEY, "")


def job_relation(base: Sequence[Result], head: Sequence[Result]) -> Jobs:
    """Whether base and head were measured in one job, from the runs' job markers.

    Args:
        base: the base commit's results.
        head: the head commit's results.

    Returns:
        SAME when every result of both sides carries one and the same marker; DIFFERENT when both
        sides are marked and the markers differ; UNKNOWN when any result lacks a marker.
    """
    b = {job_of(r) for r in base}
    h = {job_of(r) for r in head}
    shown_b, shown_h = ", ".join(sorted(b - {""})), ", ".join(sorted(h - {""}))
    if not b or not h or "" in b or "" in h:
        return Jobs(JobRelation.UNKNOWN, shown_b, shown_h)
    if len(b) == 1 and b == h:
        return Jobs(JobRelation.SAME, shown_b, shown_h)
    return Jobs(JobRelation.DIFFERENT, shown_b, shown_h)


def between_job_drift(
    history: Sequence[Result], *, exclude_commits: Collection[str] = (), min_jobs: int = 5
) -> dict[str, float]:
    """Per series, the relative sigma of the difference between two jobs' medians: the core of its
    noise model (`ci.verdicts.noise.series_noise`, whose allowance is what the verdicts use).

    Each run (one asv result file) counts as one job's measurement, in history order; runs of
    `exclude_commits` (the comparison's own base and head) are left out, so a change under test
    never counts as drift. The estimate is 1.4826 x the median absolute successive log-median
    difference: robust to the few real steps a history holds, and already the spread of a
    *difference* of two jobs (no sqrt(2) to undo).

    Args:
        history: results of one machine, oldest first (`StoreReader.results(machine=...)`).
        exclude_commits: commit shas whose runs are not used.
        min_jobs: series measured in fewer runs have no estimate (absent from the result).

    Returns:
        series key -> relative sigma (0.02 = 2 %) for every series with at least `min_jobs` runs.
    """
    found = series_noise(history, exclude_commits=exclude_commits, settings=NoiseSettings(min_jobs=min_jobs))
    return {key: noise.sigma for key, noise in found.items()}


def drift_for(jobs: Jobs, history: Sequence[Result] | MachineHistory, *, exclude_commits: Collection[str],
              settings: NoiseSettings | None = None, family: int = 1) -> Mapping[str, SeriesNoise] | None:
    """What `ci.verdicts.compare` takes as `between_jobs`: None when base and head were measured in
    one job (the in-job statistics hold), else each series' noise model learned from `history`
    (`ci.verdicts.noise.series_noise`: results or series as columns, `ci.verdicts.inputs.noise_history`;
    a series without one is withheld), its allowance set for a comparison of `family` series."""
    if jobs.together:
        return None
    return series_noise(history, exclude_commits=exclude_commits, settings=settings, family=family)
