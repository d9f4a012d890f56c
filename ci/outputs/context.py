"""What the PR comment says around its tables (`CommentContext`), and where it comes from: the store
and the comparison (`comment_context`), the job's environment (`comment_environment`) and the
GitHub Actions job's links (`github_urls`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ci.records import Commit, Kind, Project, Result, StoreReader, machine_labels
from ci.verdicts import (
    Comparison,
    Jobs,
    Spread,
    VerdictSettings,
    environment_changes,
    spreads,
)


@dataclass(frozen=True)
class CommentContext:
    """What the comment says around its tables: the commits, how they were measured, where the log is.

    Attributes:
        base_commit: the base commit's record (its subject is shown), None when unknown.
        head_commit: the head commit's record.
        commit_url: prefix of a commit's web page (e.g. `https://github.com/o/r/commit/`); None: no links.
        job_url: the job log's web page (GitHub Actions: the workflow run), None when there is none.
        jobs: whether base and head were measured in one job (`ci.verdicts.job_relation`); None: unknown.
        drift_known: series whose between-job drift the history gave (when not measured in one job).
        spreads: (machine, series key) -> (base, head) Spread of the samples (`ci.verdicts.spreads`).
        cpu_only: no GPU ran the job: where it timed the suite's CPU subset (`cpu_subset`), the
            comment says, first, that its timings prove nothing about kernel speed.
        settings: the verdicts' settings (the interval's level, the correction, the CPU floor).
        project: the project (its name heads the comment).
        correctness_expected: the suite has correctness benchmarks, so a comparison without
            correctness results says so.
        problem: why the comparison decides nothing (`ci.verdicts.Comparison.problem`: a side with
            not one measured point); it replaces the headline's verdict.
        environment_changes: what the runs' recorded environments of base and head differ in
            (`ci.verdicts.environment_changes`): every change below may be the environment's.
        machine_labels: machine key -> what a reader is shown (`ci.records.machine_labels`): where
            the verdicts span several machines (environments of one asv machine), each row names its own.
    """

    base_commit: Commit | None = None
    head_commit: Commit | None = None
    commit_url: str | None = None
    job_url: str | None = None
    jobs: Jobs | None = None
    drift_known: int = 0
    spreads: Mapping[Any, tuple[Spread | None, Spread | None]] = field(default_factory=dict)
    cpu_only: bool = False
    settings: VerdictSettings = field(default_factory=VerdictSettings)
    project: Project = field(default_factory=Project)
    correctness_expected: bool = False
    machine_labels: Mapping[str, str] = field(default_factory=dict)
    problem: str = ""
    environment_changes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name in ("commit_url", "job_url"):
            url = getattr(self, name)
            if url is not None and not (isinstance(url, str) and url.startswith(("http://", "https://"))):
                raise ValueError(f"{name} must be an http(s) URL, got {url!r}")


def github_urls(environ: Mapping[str, str]) -> tuple[str | None, str | None]:
    """The commit-link prefix and the job-log link a GitHub Actions job provides, from its
    environment (GITHUB_SERVER_URL, GITHUB_REPOSITORY, GITHUB_RUN_ID, GITHUB_RUN_ATTEMPT).

    Args:
        environ: the process environment (or any mapping of its variables).

    Returns:
        (e.g. "https://github.com/o/r/commit/" or None, "https://github.com/o/r/actions/runs/1/attempts/2"
        or None); values that are not what GitHub sets give None.
    """
    server = environ.get("GITHUB_SERVER_URL", "https://github.com").rstrip("/")
    repo = environ.get("GITHUB_REPOSITORY", "")
    if not re.fullmatch(r"https?://[A-Za-z0-9.-]+(:[0-9]+)?", server) or not re.fullmatch(
        r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+", repo
    ):
        return None, None
    commit_url = f"{server}/{repo}/commit/"
    run_id, attempt = environ.get("GITHUB_RUN_ID", ""), environ.get("GITHUB_RUN_ATTEMPT", "")
    if not re.fullmatch(r"[0-9]{1,20}", run_id):
        return commit_url, None
    job_url = f"{server}/{repo}/actions/runs/{run_id}"
    if re.fullmatch(r"[0-9]{1,6}", attempt):
        job_url += f"/attempts/{attempt}"
    return commit_url, job_url


def comment_context(
    store: StoreReader,
    comparison: Comparison,
    environment: Mapping[str, str],
    *,
    commit_url: str | None = None,
    job_url: str | None = None,
    settings: VerdictSettings | None = None,
    project: Project | None = None,
) -> CommentContext:
    """The CommentContext of one comparison read from a store (`ci.verdicts.compare_commits`).

    Args:
        store: the store (commit subjects, whether the suite has correctness benchmarks).
        comparison: what was compared and how it was measured.
        environment: the environment table (`comment_environment`); no "gpu" in it means CPU only.
        commit_url: prefix of a commit's web page (the GitHub job's, or given), or None: the
            project's `show_commit_url`, if any.
        job_url: the job log's web page, or None.
        settings: the verdicts' settings (None: the defaults).
        project: the project (`ci.project.project_settings`; None: unnamed).

    Returns:
        A CommentContext.
    """
    shas = {r.commit_sha for r in (*comparison.base[:1], *comparison.head[:1])}
    commits = {c.sha: c for c in store.commits() if c.sha in shas}
    base_sha = comparison.base[0].commit_sha if comparison.base else ""
    head_sha = comparison.head[0].commit_sha if comparison.head else ""
    project = project or Project()
    return CommentContext(
        base_commit=commits.get(base_sha), head_commit=commits.get(head_sha),
        commit_url=commit_url or project.commit_url or None, job_url=job_url, jobs=comparison.jobs,
        drift_known=comparison.drift_known, spreads=spreads(comparison.base, comparison.head),
        cpu_only=not environment.get("gpu"), settings=settings or VerdictSettings(), project=project,
        correctness_expected=any(b.kind == Kind.CORRECTNESS for b in store.benchmarks()),
        machine_labels=machine_labels(store.machines()), problem=comparison.problem or "",
        environment_changes=_environment_changes(comparison),
    )  # fmt: skip


def _environment_changes(comparison: Comparison) -> tuple[str, ...]:
    """What base's and head's runs recorded differently, per machine compared (its name first
    where several were)."""
    out: list[str] = []
    machines = sorted({r.machine for r in comparison.head})
    for m in machines:
        b = next((dict(r.environment) for r in comparison.base if r.machine == m and r.environment), None)
        h = next((dict(r.environment) for r in comparison.head if r.machine == m and r.environment), None)
        if b is not None and h is not None:
            prefix = f"{m}: " if len(machines) > 1 else ""
            out += [prefix + c for c in environment_changes(b, h)]
    return tuple(out)


def comment_environment(store: StoreReader, machine: str | Sequence[str], head_results: Sequence[Result]
                        ) -> dict[str, str]:
    """What the PR comment's environment table shows: the machine's GPU stack, then the head run's clocks,
    temperature, Python and asv environment (each environment's name where several were compared)."""
    keys = [machine] if isinstance(machine, str) else list(machine)
    rows = {m.name: m for m in store.machines()}
    first = rows.get(keys[0]) if keys else None
    env = {"machine": first.machine_name if first is not None else ", ".join(keys)}
    if first is not None:
        env.update({k: getattr(first, k) for k in ("gpu", "driver", "cuda", "torch", "triton") if getattr(first, k)})
    if len(keys) > 1:
        env["environments"] = ", ".join(rows[k].env_name if k in rows and rows[k].env_name else k for k in keys)
    if head_results:
        keep = ("sm_clock_mhz", "mem_clock_mhz", "temperature_c") if len(keys) > 1 else (
            "sm_clock_mhz", "mem_clock_mhz", "temperature_c", "python", "env_name")
        env.update({k: v for k, v in head_results[0].environment if k in keep and v})
    return env
