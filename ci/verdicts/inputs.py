"""What the verdicts see of one commit: its results on one machine, crashes included; and one A/B
comparison of two commits from a store, with the jobs that measured them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ci.records import Result, Verdict
from ci.verdicts.jobs import JobRelation, Jobs, drift_for, job_relation


def results_with_crashes(store: Any, sha: str, machine: str) -> list[Result]:
    """One commit's results on one machine, plus a sample-less Result for every point asv recorded
    as failed (crashed), so that the verdicts see the crash: a correctness gate or a benchmark that
    crashed on head FAILS instead of vanishing. Skipped points (asv's NaN: "not on this machine")
    stay out; `compare` fails a correctness check that ran on base and not on head.

    Args:
        store: a `ci.store.Store` (its `results` and `failures`).
        sha: full commit sha.
        machine: machine name.

    Returns:
        Result records in the store's order, the crashed correctness points last.
    """
    rs = store.results(commit_sha=sha, machine=machine)
    for f in store.failures(commit_sha=sha, machine=machine):
        if f.status == "failed":
            rs.append(Result(f.benchmark, f.commit_sha, f.machine, (), run_id=f.run_id))
    return rs


@dataclass(frozen=True)
class Comparison:
    """One A/B comparison read from a store: what was compared, how it was measured, the verdicts."""

    base: list[Result]
    head: list[Result]
    jobs: Jobs
    verdicts: list[Verdict]
    drift_known: int = 0  # series with a between-job drift estimate (when not measured in one job)


def compare_commits(store: Any, base: str, head: str, machine: str, *, settings: Any = None) -> Comparison:
    """A/B verdicts of `head` against `base` on one machine, as every entry point decides them.

    When the two were not recorded as measured in one job (`ci.verdicts.jobs.job_relation`), each
    series' between-job drift is estimated from the machine's other commits and widens its threshold;
    series without an estimate are withheld.

    Args:
        store: a `ci.store.Store` (or any `StoreReader` with `failures`).
        base: full sha of the base commit.
        head: full sha of the head commit.
        machine: machine name.
        settings: `ci.verdicts.VerdictSettings` (None: the defaults).

    Returns:
        A Comparison (verdicts sorted by series key; not saved).
    """
    from ci.verdicts.ab import compare

    b = results_with_crashes(store, base, machine)
    h = results_with_crashes(store, head, machine)
    if not h:
        raise ValueError(f"no results for head {head[:12]} on {machine}")
    jobs = job_relation([r for r in b if r.samples], [r for r in h if r.samples])
    drift = None
    if not jobs.together:
        drift = drift_for(jobs, store.results(machine=machine), exclude_commits={base, head})
    verdicts = compare(b, h, settings=settings, between_jobs=drift)
    return Comparison(b, h, jobs, verdicts, len(drift or {}))


def measurement_line(comparison: Comparison) -> str:
    """One line of plain text on how base and head were measured and so which rule decided the
    verdicts (`Jobs.rule`): what `python -m ci compare`, `python -m ci continuous` and the runner's
    PR summary print.

    Args:
        comparison: from `compare_commits`.

    Returns:
        "in-job rule: ..." or "warning: cross-job rule: ..." (one line, markers as recorded).
    """
    jobs = comparison.jobs
    if jobs.together:
        return (f"in-job rule: base and head were measured in one job, one asv call ({jobs.head}), rounds "
                "interleaved: in-job statistics apply")
    withheld = sum(v.reason.startswith("withheld:") for v in comparison.verdicts)
    if jobs.relation == JobRelation.DIFFERENT:
        which = f"different asv calls: {jobs.base} and {jobs.head}"
    else:
        which = ("a side has no verified job marker: measured outside the runner, rewritten since the runner "
                 "measured it, or marked before markers were bound to their result files")
    return (f"warning: cross-job rule: base and head were not measured in one job ({which}): thresholds widened by "
            f"the between-job drift of {comparison.drift_known} series, {withheld} series withheld")
