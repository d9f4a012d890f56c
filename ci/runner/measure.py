"""Measuring a job's commits: one asv call per group of commits (a history commit, or a PR's base and
head interleaved), the GPU state recorded, the results ingested after each call; one job per
checkout at a time; a PR job that finished measuring is not measured again."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ci.runner.asv import (
    gpu_state,
    mark_call,
    measured_names,
    result_digests,
    result_files,
    run_asv,
    write_sidecar_if_missing,
)
from ci.runner.config import CommitRun, RunnerConfig, RunnerError, call_marker
from ci.runner.git import resolve_commit
from ci.runner.progress import JobProgress, say

if TYPE_CHECKING:
    from ci.store import Store


@contextlib.contextmanager
def job_lock(cfg: RunnerConfig) -> Iterator[None]:
    """One runner job at a time per lock file: `cfg.lock` (the workflow names one per GPU host, so
    jobs of different checkouts take turns on the GPU), else one per checkout (a maintainer's manual
    run next to a job on the same checkout)."""
    path = cfg.lock or cfg.repo / ".asv" / "runner.lock"
    if cfg.lock is None:
        path.parent.mkdir(parents=True, exist_ok=True)
    # Read-only is enough for flock: the host's lock file may belong to another user (the trusted
    # runner's), readable by the PR runner's user (docs/runner.md).
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CREAT, 0o644)
    except OSError as exc:
        raise RunnerError(f"cannot open the lock file {path}: {exc.strerror}") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            say(f"another runner job holds {path}; waiting for it")
            fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def ingest_results(cfg: RunnerConfig, store: Store) -> str:
    """Ingest the checkout's asv results into the store (files ingested before are skipped unread),
    with the checkout's asv.conf.json as the store's project (`ci.project.record_project`, as `ci
    ingest` keeps it); returns ingest's one-line summary, RunnerError when a file failed."""
    from ci.ingest import ingest_results_dir
    from ci.project import ConfigError, record_project

    if not (cfg.results_dir / "benchmarks.json").exists():
        return "no results yet"
    try:
        note = record_project(store, cfg.results_dir, config=cfg.conf_path)
    except ConfigError as exc:
        raise RunnerError(str(exc)) from None
    if note:
        say(note)
    branch = cfg.branch
    if branch is not None:
        try:
            resolve_commit(cfg.repo, branch)
        except ValueError:
            # e.g. a detached CI checkout without a local `main`: commits go in without a branch.
            say(f"branch {branch!r} is not in {cfg.repo}: commits are stored without a branch")
            branch = None
    report = ingest_results_dir(store, cfg.results_dir, repo=cfg.repo, branch=branch)
    for f in report.errors:
        say(f"ingest error: {f.message}")
    for note in report.notes:  # commits git could not describe, machines added beside others
        say(note)
    if not report.ok:
        raise RunnerError(f"ingest failed for {len(report.errors)} result file(s): {report.summary()}")
    return report.summary()


def _pr_job_marker(cfg: RunnerConfig, shas: Sequence[str]) -> Path:
    """Where a finished PR measurement of `shas` is recorded: beside the runner's lock in the checkout's
    `.asv/` (next to asv's results dir it was `<repo>/ci-jobs/` for asv's default `results`, a folder
    left in the checkout)."""
    return cfg.repo / ".asv" / "ci-jobs" / f"{cfg.machine}-{'-'.join(s[:12] for s in shas)}.json"


def _pr_job_record(cfg: RunnerConfig, shas: Sequence[str]) -> dict[str, Any]:
    """What makes a finished PR measurement reusable: the same subset and asv arguments, and asv's
    result files for both sides unchanged since (their sha256)."""
    import hashlib

    files = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for s in shas for p in result_files(cfg, s)}
    return {"shas": list(shas), "bench": cfg.bench, "asv_args": list(cfg.asv_args), "files": files}


def _pr_job_finished(cfg: RunnerConfig, shas: Sequence[str]) -> frozenset[str] | None:
    """The benchmarks a finished PR measurement of `shas` measured (its marker's "measured"), or None
    when there is none to reuse: a resumed job judges what the call it reuses measured, not every
    result the files keep (a marker written before that was recorded is not reused)."""
    marker = _pr_job_marker(cfg, shas)
    try:
        recorded = json.loads(marker.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(recorded, dict):
        return None
    measured = recorded.pop("measured", None)
    if recorded != _pr_job_record(cfg, shas) or not recorded.get("files") or not isinstance(measured, list):
        return None
    return frozenset(str(name) for name in measured)


def _put_back(cfg: RunnerConfig, shas: Sequence[str], kept: dict[Path, bytes]) -> None:
    """The result files of `shas` as they were (`kept`: path -> bytes before the call): rewritten ones
    restored, ones the call created removed; a file that cannot be is named (it holds part of a call)."""
    for p in [p for s in shas for p in result_files(cfg, s)]:
        if p not in kept:
            try:
                p.unlink(missing_ok=True)
            except OSError as exc:
                say(f"warning: {p} holds part of an A/B call cut short and could not be removed ({exc.strerror})")
    for p, data in kept.items():
        try:
            if not p.exists() or p.read_bytes() != data:
                tmp = p.with_name(f".{p.name}.{os.getpid()}.tmp")
                tmp.write_bytes(data)
                os.replace(tmp, p)
        except OSError as exc:
            say(f"warning: {p} holds part of an A/B call cut short and could not be put back ({exc.strerror})")


def measure(cfg: RunnerConfig, store: Store, groups: Sequence[tuple[str, ...]], *, interleave: bool) -> list[CommitRun]:
    """Run asv once per group, record the GPU state and which call wrote each result file, ingest
    after each; returns what ran.

    Args:
        cfg: runner configuration.
        store: a `ci.store.Store`.
        groups: the commits of each asv call (full shas): one for a history commit, base and head for a PR.
        interleave: one interleaved call per group (`--interleave-rounds`: a PR's A/B).

    Returns:
        One CommitRun per group, in order.
    """
    store.require_writable()  # before the first asv call: what it measures is stored after each
    runs: list[CommitRun] = []
    total = len(groups)
    with JobProgress(total, "benchmarking") as bar:
        for shas in groups:
            label = " vs ".join(s[:8] for s in shas)
            reused = _pr_job_finished(cfg, shas) if interleave and cfg.resume else None
            if reused is not None:
                summary = ingest_results(cfg, store)
                runs.append(CommitRun(tuple(shas), 0, 0.0, (), reused))
                bar.step(f"{label} already measured by this job (resumed; --no-resume measures again); {summary}")
                continue
            marker = _pr_job_marker(cfg, shas)
            if interleave:
                marker.unlink(missing_ok=True)
            had_files = all(result_files(cfg, s) for s in shas)
            before = {s: result_digests(cfg, s) for s in shas}
            state = gpu_state(cfg)
            call = call_marker(cfg.job)  # this asv call's own: no other call, in any process, has it
            bar.line(f"[runner] {label}: asv call {call}, gpu={state.get('gpu') or 'none'} "
                     f"sm_clock={state.get('sm_clock_mhz') or '-'} torch={state.get('torch') or '?'}")
            t0 = time.monotonic()
            # asv's started_at (ms, the same clock) of what this call measures is after this: no slack, for
            # the previous call's last benchmark may have started less than a second ago (a clean-clone CI
            # run judged a crash of the call before as this call's with a second's slack, 2026-12-07).
            since_ms = int(time.time() * 1000)
            # An A/B call cut short measured neither side whole (asv saves each round as it ends: a stopped
            # `continuous` left head's file at round 1 over a history job's complete run, and the next
            # history ingest stored it, 2026-12-07): the files go back to what they were before the call.
            kept = {p: p.read_bytes() for s in shas for p in result_files(cfg, s)} if interleave else {}
            try:
                rc = run_asv(cfg, shas, interleave=interleave, echo=bar.line)
                if interleave and rc < 0:  # asv itself killed (the OOM killer, a `kill`): as cut short (below)
                    raise RunnerError(f"asv was killed by signal {-rc} during the A/B call of {label}: both commits' "
                                      "result files are as they were before it; run the same command again")
            except BaseException:
                if interleave:
                    _put_back(cfg, shas, kept)
                raise
            finally:
                # What asv wrote in this call, it measured in this call (not skipped): each file it
                # wrote is marked with the bytes it wrote, even when an interrupt stopped asv after
                # it saved a commit's file. A file it left as it was keeps its own writer's record.
                for s in shas:
                    written = {name: d for name, d in result_digests(cfg, s).items() if before[s].get(name) != d}
                    if written:
                        write_sidecar_if_missing(cfg, s, state)
                        mark_call(cfg, s, call, written)
            seconds = time.monotonic() - t0
            for s in shas:
                if not result_files(cfg, s):
                    raise RunnerError(
                        f"asv exited {rc} and wrote no result file for {s[:12]} (see asv's output above)"
                    )
                write_sidecar_if_missing(cfg, s, state)
            summary = ingest_results(cfg, store)
            measured = frozenset(name for s in shas for name in measured_names(cfg, s, since_ms))
            if interleave:  # measured to the end: a re-run of this job may reuse it, and what it measured
                marker.parent.mkdir(parents=True, exist_ok=True)
                marker.write_text(json.dumps({**_pr_job_record(cfg, shas), "measured": sorted(measured)},
                                             sort_keys=True))
            runs.append(CommitRun(tuple(shas), rc, seconds, tuple(sorted(state.items())), measured))
            note = "" if rc == 0 else f", asv exit {rc}: some benchmarks failed"
            if not interleave and cfg.resume and had_files:
                note += " (resumed: asv skipped what it had measured before)"
            bar.step(f"{label} measured in {seconds:.0f} s{note}; {summary}")
    return runs
