"""The runner's two jobs: a branch's history (`run_history`) and a pull request's A/B (`run_pr`),
each measure -> ingest -> decide -> publish under the job lock, and the summary they print."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ci.exit_codes import EXIT_ERROR, EXIT_OK, EXIT_REGRESSION
from ci.records import MISSING_ON_HEAD, Alert, Benchmark, Outcome, Verdict
from ci.runner.asv import ensure_machine
from ci.runner.config import RunnerConfig, RunnerError, RunOutcome, nothing_selected
from ci.runner.measure import ingest_results, job_lock, measure
from ci.runner.progress import say
from ci.runner.publish import CommentNotPosted, render_dashboard, write_comment
from ci.text import printable

if TYPE_CHECKING:
    from ci.store import Store, StoreReads
    from ci.verdicts import Comparison


def ab_comparison(cfg: RunnerConfig, store: Store, base: str, head: str,
                  measured: frozenset[str] | None = None) -> Comparison:
    """A/B verdicts of head against base on the job's machine, from the store (`compare_commits`,
    the path every entry point decides through, with the checkout's thresholds); saved back to it.

    Args:
        cfg: runner configuration (machine, thresholds).
        store: a `ci.store.Store`.
        base: full sha of the base commit.
        head: full sha of the head commit.
        measured: the asv benchmarks the job's call measured (`CommitRun.measured`): only those are
            compared (the commits' files keep earlier calls' results of the others); None: all.

    Returns:
        A `ci.verdicts.Comparison` (verdicts sorted by series key).
    """
    from ci.verdicts import compare_commits, pick_machines

    try:
        machines = pick_machines(store, base, head, cfg.machine)
        comparison = compare_commits(store, base, head, machines, settings=cfg.settings)
    except ValueError as exc:  # no results for head
        raise RunnerError(f"{exc}: nothing to compare") from None
    if measured is not None:
        # Not measured by this call: neither judged nor saved. Nothing measured is then no measured
        # point on a side (`Comparison.problem`: exit 2), never a verdict on old results.
        comparison = replace(comparison, base=[r for r in comparison.base if r.benchmark.name in measured],
                             head=[r for r in comparison.head if r.benchmark.name in measured],
                             verdicts=[v for v in comparison.verdicts if v.benchmark.name in measured])
    store.save_verdicts(comparison.verdicts)
    if measured:
        # asv measures head's suite on both sides: a benchmark that head's suite no longer defines is
        # measured on neither, and a PR that deleted one (and made its function 40x slower) passed
        # without a word of it (a toy project, 2026-12-07). Listed as missing on head, not stored.
        gone = [Verdict(benchmark=Benchmark(name), outcome=Outcome.INCONCLUSIVE, base_value=math.nan,
                        head_value=math.nan, ratio=math.nan, base_sha=base, head_sha=head, reason=MISSING_ON_HEAD,
                        machine=cfg.machine)
                for name in removed_on_head(cfg, base)]
        if gone:
            comparison = replace(comparison, verdicts=sorted([*comparison.verdicts, *gone],
                                                             key=lambda v: (v.benchmark.key, v.machine)))
    return comparison


def removed_on_head(cfg: RunnerConfig, base: str) -> list[str]:
    """The benchmarks of base's asv result files (earlier calls' results included) that head's suite, the
    benchmarks.json the job's asv call wrote, no longer defines, within the job's `--bench` selection;
    [] where either cannot be read."""
    import json
    import re

    from ci.ingest.asv_files import load_benchmarks_json
    from ci.runner.asv import result_files

    try:
        suite = load_benchmarks_json(cfg.results_dir)
        names: set[object] = set()
        for path in result_files(cfg, base):
            results = json.loads(path.read_text(encoding="utf-8")).get("results")
            names.update(results if isinstance(results, dict) else ())
    except Exception:  # noqa: BLE001 - what cannot be read calls nothing removed
        return []
    pattern = re.compile(cfg.bench) if cfg.bench else None
    return sorted(n for n in names if isinstance(n, str) and n not in suite
                  and (pattern is None or pattern.search(n) is not None))


def _gates_for(store: StoreReads, sha: str, machine: str) -> list[Verdict]:
    """The correctness gates of commit `sha` on every environment of asv machine `machine`."""
    from ci.verdicts import correctness_gates, machine_keys, results_with_crashes

    return correctness_gates([r for m in machine_keys(store, machine) for r in results_with_crashes(store, sha, m)])


def history_branch(cfg: RunnerConfig, store: Store) -> str | None:
    """The commits a history job judges and shows: `--dashboard-branch`, else the job's `--branch` where
    the store holds commits of it, else every commit. A PR job (`continuous`, `run --pr`) stores its
    head, which is on no branch, in the same results folder and, by default, the same store: judged
    with the branch's commits, a main commit was compared with a PR commit beside it and suspected of a
    +124% step that main never took (a toy project, 2026-12-07)."""
    if cfg.dashboard_branch is not None or cfg.branch is None:
        return cfg.dashboard_branch
    return cfg.branch if store.commits(cfg.branch) else None


def run_history(cfg: RunnerConfig, commits: Sequence[str]) -> RunOutcome:
    """Benchmark commits one asv call each (oldest first), then decide on the history.

    Every regression change point and failed correctness gate of the machine's history is kept in the
    store as an alert (`ci.runner.alerts`); the job reports every alert no job has reported yet,
    whichever job's commits produced it, and exits 1 when there is one (or a gate of its own commits
    fails). A step shows once a few commits after it are measured, so it may sit at an earlier
    commit; a job stopped after ingesting (cancelled, timed out) leaves its alerts to the next job.

    Args:
        cfg: runner configuration.
        commits: full shas, oldest first.

    Returns:
        A RunOutcome.
    """
    from ci.records import AlertState
    from ci.runner.alerts import history_alerts
    from ci.store import Store

    commits = list(commits)
    ensure_machine(cfg)
    with job_lock(cfg), Store(cfg.db) as store:
        runs = measure(cfg, store, [(c,) for c in commits], interleave=False) if commits else []
        ingest = ingest_results(cfg, store)
        cfg = replace(cfg, dashboard_branch=history_branch(cfg, store))
        gates = [v for c in commits for v in _gates_for(store, c, cfg.machine)]
        # A commit of this job at which not one point was measured is an error, not a quiet pass.
        empty = [why for c in commits if (why := _not_measured(store, c, cfg.machine)) is not None]
        # Every environment and host of the job's asv machine, each its own series (`ci.records.Machine`);
        # kept before anything else can stop the job, and reported until a job has exited 1 with them.
        store.record_alerts(history_alerts(store, cfg.machine, cfg.dashboard_branch, cfg.project_settings.floor_for))
        pending = store.alerts(state=AlertState.DETECTED)
        notes = _failure_notes(store, commits, cfg.machine)
        dash = render_dashboard(cfg, store)
        told = {a.key for a in pending}
        failed = [v for v in gates if v.outcome == Outcome.FAILED]
        # Many series stepping at one commit are one alert; where the runs' recorded environment
        # changed there, the environment moved them, not the commit: reported, not the job's failure.
        report = alert_report(store, cfg.machine, pending)
        blamed = any(fails for _, fails in report)
        for line, _ in report:
            say(line)
        for v in failed:  # a gate of this job's commits fails it, reported before or not
            if ("gate", v.benchmark.key, v.machine, v.head_sha) not in told:
                say(printable(f"correctness FAILED at {v.head_sha[:8]}: {v.benchmark.key} ({v.reason})"))
        for why in empty:
            say(f"error: {why}")
        code = EXIT_ERROR if empty else EXIT_REGRESSION if failed or blamed else EXIT_OK
        if code != EXIT_ERROR and pending:  # reported: this job exits 1 with them (an environment change: 0)
            store.mark_alerts_reported(pending)
    return RunOutcome("history", tuple(commits), tuple(runs), ingest, tuple(gates), tuple(pending), code, dash,
                      notes=notes + tuple(f"error: {why}" for why in empty))  # fmt: skip


def run_pr(cfg: RunnerConfig, base: str, head: str) -> RunOutcome:
    """A/B of a pull request: base and head in one interleaved asv call, verdicts, comment, dashboard.

    Args:
        cfg: runner configuration.
        base: full sha of the base (merge base or target branch tip).
        head: full sha of the PR head.

    Returns:
        A RunOutcome whose exit code is 1 on a regression or failed gate.
    """
    from ci.store import Store
    from ci.verdicts import exit_code

    if base == head:
        raise ValueError(f"base and head are the same commit ({base[:12]}): nothing to compare")
    ensure_machine(cfg)
    with job_lock(cfg), Store(cfg.db) as store:
        runs = measure(cfg, store, [(base, head)], interleave=True)
        ingest = ingest_results(cfg, store)
        with store.snapshot():  # the verdicts and the comment from one state of the history
            comparison = ab_comparison(cfg, store, base, head, runs[0].measured)
            verdicts = comparison.verdicts
            code = exit_code(verdicts)
            problem = comparison.problem
            if runs[0].measured is not None and not runs[0].measured:  # asv ran nothing: say why
                problem = nothing_selected(cfg.bench)
            if problem:  # nothing measured on a side: an error, whatever the verdicts say
                say(f"error: {problem}")
                code = EXIT_ERROR
            try:
                comment, url = write_comment(cfg, store, comparison, base, head)
                posting: tuple[str, ...] = ()
            except CommentNotPosted as exc:
                comment, url = cfg.comment_path, None
                posting = (f"error: the PR comment was written to {comment} but not posted: {exc}",)
                code = code or EXIT_ERROR  # a regression (1) stays visible; otherwise the job failed (2)
        notes = posting + _failure_notes(store, [base, head], cfg.machine)
        dash = render_dashboard(cfg, store)
    return RunOutcome("pr", (base, head), tuple(runs), ingest, tuple(verdicts), (), code, dash,
                      comment, url, notes, comparison)  # fmt: skip


def alert_report(store: StoreReads, machine: str, alerts: Sequence[Alert]) -> list[tuple[str, bool]]:
    """What a history job says of the alerts it reports, line by line, and whether each line's alert
    fails the job. Many series stepping at one commit are one alert: a line names the crowd, its
    members follow indented; a crowd where the runs' recorded environment changed is that change's
    doing, not the commit's (`ci.verdicts.group_changes`): said, and no failure of the job.

    Args:
        store: the store (the machine's runs and their environments).
        machine: the job's asv machine name.
        alerts: the alerts to report (`ci.records.Alert`).

    Returns:
        (line, fails the job) pairs, in the order to say them.
    """
    from ci.records import AlertKind, Outcome
    from ci.runner.alerts import alert_line
    from ci.verdicts import ChangePoint, group_changes, machine_keys
    from ci.verdicts.groups import MIN_GROUP

    steps = [a for a in alerts if a.kind == AlertKind.REGRESSION]
    out: list[tuple[str, bool]] = []
    if steps:
        history = [r for m in machine_keys(store, machine) for r in store.results(machine=m)]
        as_cp = [ChangePoint(a.benchmark, a.commit_sha, math.nan, math.nan, a.ratio, Outcome.REGRESSED,
                             previous_sha=a.previous_sha, p_value=a.p_value, machine=a.machine) for a in steps]
        alert_of = {id(cp): a for cp, a in zip(as_cp, steps, strict=True)}
        for g in group_changes(as_cp, *history_runs(history)):
            blamed = not g.environment_change
            if g.crowd:
                out.append((("alert: " if blamed else "environment change: ") + g.headline(), False))
            out += [(("  " if g.crowd else "") + alert_line(alert_of[id(cp)]), blamed) for cp in g.members]
    # Benchmarks that stopped running at one commit of a machine (a commit that broke the suite: 53 of
    # uxarray's at once): one headline, its members below, as a crowd of steps is (`MIN_GROUP` or more).
    crashes: dict[tuple[str, str], list[Alert]] = {}
    for a in alerts:
        if a.kind == AlertKind.CRASH:
            crashes.setdefault((a.machine, a.commit_sha), []).append(a)
    for (where, sha), members in crashes.items():
        crowd = len(members) >= MIN_GROUP
        if crowd:
            out.append((printable(f"alert: {len(members)} benchmarks failed to run at {sha[:8]} on {where}, "
                                  f"where the commit before measured them"), False))
        out += [(("  " if crowd else "") + alert_line(a), True) for a in members]
    return out + [(alert_line(a), True) for a in alerts if a.kind not in (AlertKind.REGRESSION, AlertKind.CRASH)]



def history_runs(history: Sequence[Any]) -> tuple[dict[str, list[str]], dict[tuple[str, str], dict[str, str]]]:
    """Each machine's commits in a history (results in history order) and the environment its run
    recorded at each: what `ci.verdicts.group_changes` reads a crowd against."""
    order: dict[str, list[str]] = {}
    envs: dict[tuple[str, str], dict[str, str]] = {}
    for r in history:
        if (r.machine, r.commit_sha) not in envs:
            order.setdefault(r.machine, []).append(r.commit_sha)
            envs[(r.machine, r.commit_sha)] = dict(r.environment)
    return order, envs


def _not_measured(store: StoreReads, sha: str, machine: str) -> str | None:
    """Why commit `sha` measured nothing on asv machine `machine` (every environment), or None."""
    from ci.verdicts import machine_keys, not_measured, results_with_crashes

    results = [r for m in machine_keys(store, machine) for r in results_with_crashes(store, sha, m)]
    return not_measured(results, "commit", sha)


def _failure_notes(store: StoreReads, commits: Sequence[str], machine: str) -> tuple[str, ...]:
    """One line per benchmark point asv recorded as failed (not skipped) on the job's commits."""
    from ci.verdicts import machine_keys

    notes = []
    for sha in commits:
        for f in (f for m in machine_keys(store, machine) for f in store.failures(commit_sha=sha, machine=m)):
            if f.status == "failed":
                notes.append(f"benchmark failed at {sha[:8]}: {f.benchmark.key} (see asv's output above)")
    return tuple(notes)


def print_outcome(out: RunOutcome, max_threshold: float | None = None) -> None:
    """The job's summary: counts per outcome, where the artefacts are, the exit code; `max_threshold`
    (the verdicts' settings' cap): the cross-job line counts the thresholds past it."""
    from ci.verdicts import measurement_line, summarize

    counts = summarize(out.verdicts)
    told = ", ".join(f"{n} {o.value}" for o, n in counts.items() if n)
    say(f"{out.mode}: {len(out.commits)} commit(s) measured; verdicts: {told or 'none'}")
    for v in out.verdicts:
        if v.outcome in (Outcome.REGRESSED, Outcome.FAILED):
            say(f"  {v.outcome.value}: {v.benchmark.key} ratio {v.ratio:.3f} {v.reason}")
    if out.comparison is not None:  # PR mode: which rule (in-job or cross-job) the verdicts used
        say(printable(measurement_line(out.comparison, max_threshold)))
    for note in out.notes:
        say(note)
    if out.dashboard:
        say(f"dashboard: {out.dashboard / 'index.html'}")
    if out.comment:
        say(f"PR comment: {out.comment}")
    if out.comment_url:
        say(f"posted: {out.comment_url}")
    say(f"exit {out.exit_code}")
