"""What the verdicts see of one commit: its results on one machine, crashes included."""

from __future__ import annotations

from typing import Any

from ci.records import Result


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
