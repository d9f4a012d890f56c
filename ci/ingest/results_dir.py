"""Ingest an asv results directory into the store.

Per file: read and parse inside one boundary (`ci.ingest.reading`): whatever goes wrong with a file (a
malformed or truncated one, an irregular file, a value out of range, an error nobody foresaw)
becomes that file's one-line "FILE: reason" outcome, and every other file still goes in. A long
history is read and parsed by forked parsers while this process writes (`ci.ingest.reading.read_all`); what is
decided across files (a second copy of a run, bytes stored before) is decided here, in path
order, so the outcome and the store are those of one process (tests/ci/test_ingest_forked.py). Parsed
files are written in batches (`BATCH_FILES`), one transaction per batch and one savepoint per file
(`Store.ingest_runs`): a file is stored whole or not at all, a crash, an interrupt or a kill loses
at most the uncommitted batch (the batches committed before it stay, the next ingest writes the
rest), and ingesting the same directory again changes nothing. Two files that hold the same run
(machine, commit and environment: e.g. a copied machine folder) with different contents are never
both written: the first in path order is, the others are errors, the same on every ingest. A file
holding a different run than the one stored from another file (another results folder) is refused,
naming both, unless `replace` (`ci ingest --replace`); asv rewriting the stored run's own file
replaces it. Commit
metadata (parents, branch, time, subject) comes from `git log` when a checkout is given, otherwise
the commit is known by its sha and asv's date only (`ci.ingest.git`). A commit of which git's
record cannot be read, or not all of it, is named in a warning and stored with what could be read
(asv's date for a time git cannot give); every other commit gets its metadata, its position in
git's history included (history order is git's topology, `ci.records.Commit.position`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy.exc import InterfaceError, OperationalError, SQLAlchemyError

from ci.ingest.asv_files import (
    SIDECAR_MACHINE_KEYS,
    AsvFormatError,
    BenchmarkInfo,
    iter_result_files,
    load_benchmarks_json,
    load_machine_json,
)
from ci.ingest.git import CommitLog, branch_log, commit_order_warning, commit_warning, git_commits
from ci.ingest.reading import Known, read_all
from ci.ingest.report import FileOutcome, IngestProgress, IngestReport, file_outcome
from ci.ingest.speed import split_off_speed_jobs
from ci.records import Commit, Machine, ParsedRun
from ci.store import (
    REPLACED_FROM_ANOTHER_SOURCE,
    ReadAgain,
    Replaced,
    ReplacementRefused,
    SeriesRedefined,
    Store,
    StoreLimitError,
    error_line,
)
from ci.store.hosts import describe, host_differences, host_fingerprint, same_host
from ci.store.limits import storable
from ci.store.reads import paused_gc
from ci.text import printable, quote_path

BATCH_FILES = 50  # result files per transaction (each in its own savepoint): `Store.ingest_runs`


# The message of a result file skipped because its machine.json could not be read (the first file of
# that machine carries the machine.json's own message): "FILE: skipped, same machine.json error as FIRST".
SAME_MACHINE_ERROR = "skipped, same machine.json error as"

def readable_now(name: str, version: str | None, benchmarks: dict[str, BenchmarkInfo]) -> bool:
    """Whether a benchmark a stored file's parse skipped (`name`, the file's `version` of it) would be read
    with these `benchmarks` (benchmarks.json): it is there, of the file's version (or either has none)."""
    info = benchmarks.get(name)
    return info is not None and (info.version is None or version is None or info.version == version)


def _commit(run: ParsedRun, git_info: CommitLog) -> Commit:
    """The run's commit: git's record of it, with asv's date where git gave none (or no date)."""
    commit = git_info.commits.get(run.commit_hash)
    if commit is None:
        return Commit(sha=run.commit_hash, time=run.commit_time)
    return commit if commit.time is not None else replace(commit, time=run.commit_time)


def _machine(run: ParsedRun, info: dict[str, str], sidecar: dict[str, str]) -> Machine:
    """The machine a run was measured on: asv's machine name and the run's environment, its host
    as the result file records it (machine.json where the file records nothing), and the GPU
    sidecar's gpu/driver/cuda/torch/triton. The store decides which stored machine that is."""
    own = {**info, **dict(run.host_info)}  # the file's own record of the host wins: it is the run's
    return Machine(
        name=run.machine,
        cpu=own.get("cpu", ""),
        extra=tuple(sorted((k, v) for k, v in own.items() if k not in ("machine", "cpu"))),
        asv_name=run.machine,
        env_name=run.env_name,
        host=host_fingerprint({**own, "gpu": sidecar.get("gpu", "")}),
        **{k: sidecar.get(k, "") for k in SIDECAR_MACHINE_KEYS},
    )


def _store_failure(path: Path, exc: Exception) -> str:
    """Why the store did not take a parsed file: its own rule for what it can hold (the same on
    every database), a database error, or anything else as what it is."""
    if isinstance(exc, StoreLimitError | ReplacementRefused | SeriesRedefined):
        return f"{quote_path(path)}: {exc}"
    if isinstance(exc, SQLAlchemyError):
        return f"{quote_path(path)}: database error: {error_line(exc)}"
    return f"{quote_path(path)}: not stored ({error_line(exc)})"


@dataclass(frozen=True)
class _Unchanged:
    """A result file whose bytes were ingested before."""

    commit_sha: str


@dataclass(frozen=True)
class _Clash:
    """A file whose bytes are the stored run's, after an earlier file (path order) with other contents
    of that run: stale if the earlier file replaced the run, still the stored one if the store refused it."""

    commit_sha: str
    earlier: str  # the earlier file's path
    outcome: FileOutcome  # its outcome if the earlier file was stored


def _placed(
    path: Path,
    item: FileOutcome | Known | tuple[ParsedRun, dict[str, str] | FileOutcome],
    info: dict[str, str],
    claims: dict[str, tuple[Path, str]],
) -> FileOutcome | _Unchanged | _Clash | tuple[ParsedRun, dict[str, str], dict[str, str]]:
    """A read file (`ci.ingest.reading.read_all`) placed among this ingest's files in path order: (run, machine info,
    sidecar) to write, `_Unchanged`, `_Clash` (stored bytes after another file of their run), or its
    outcome (a run another file already holds with other contents is an error, before anything
    about its sidecar)."""
    if isinstance(item, FileOutcome):
        return item
    if isinstance(item, Known):
        clash = _claim(claims, item.run_key, path, item.digest)
        if clash is None:
            return _Unchanged(item.commit_sha)
        return _Clash(item.commit_sha, str(claims[item.run_key][0]), clash)
    run, sidecar = item
    clash = _claim(claims, run.run_key, path, run.digest)
    if clash is not None:
        return clash
    if isinstance(sidecar, FileOutcome):
        return sidecar
    return run, info, sidecar


def _claim(claims: dict[str, tuple[Path, str]], run_key: str, path: Path, digest: str) -> FileOutcome | None:
    """Record that `path` holds `run_key`; an error outcome when an earlier file (path order) holds
    the same run with other contents. An identical copy is no conflict."""
    first = claims.setdefault(run_key, (path, digest))
    if first[1] == digest:
        return None
    return file_outcome(
        path,
        "error",
        message=(
            f"{quote_path(path)}: holds the same run as {quote_path(first[0])} (machine/commit/environment "
            f"{run_key!r}) with other contents; only the first in path order is stored: asv keeps one file "
            "per run, so remove the stale copy (a copied machine folder?)"
        ),
    )


def _write_batch(
    store: Store,
    parsed: list[tuple[ParsedRun, dict[str, str], dict[str, str]]],
    outcomes: list[FileOutcome],
    repo: str | os.PathLike[str] | None,
    branch: str | None,
    on_branch: CommitLog,
    problems: dict[str, str],
    replace: bool,
) -> tuple[int, list[str]]:
    """One transaction of parsed files (`Store.ingest_runs`), each file's outcome appended to
    `outcomes` and what git's records of their commits lacked to `problems`; returns the points
    written and a note per run replaced from another source (`replace`)."""
    git_info = git_commits(repo, [r.commit_hash for r, _, _ in parsed], branch, on_branch) if repo else CommitLog()
    problems.update(git_info.problems)
    items = []
    left_out: list[tuple[str, ...]] = []  # per item, what `storable` took out of its run
    abbreviated: set[str] = set()
    for run, info, sidecar in parsed:
        commit = _commit(run, git_info)
        if commit.sha != run.commit_hash:  # an abbreviated name: the run is stored under the full sha git gave
            run = dataclasses.replace(run, commit_hash=commit.sha, run_key=f"{run.machine}/{commit.sha}/{run.env_name}")
        elif repo is None and len(run.commit_hash) not in (40, 64):
            abbreviated.add(run.commit_hash)
        # What the store cannot hold of one benchmark costs that benchmark, not the file (`storable`).
        run, why = storable(run)
        run, redefined = store.leave_out_redefined(run)
        left_out.append(why + redefined)
        items.append((run, _machine(run, info, sidecar), commit))
    try:
        statuses: list[str | Exception] = store.ingest_runs(items, replace=replace)
    except (OperationalError, InterfaceError):
        # The database itself failed (read-only, full, locked, gone): no file of this batch or the next
        # is at fault, and each was blamed for it (344 lines of "attempt to write a readonly database",
        # 2026-12-07). One error naming the database; the batches committed before it stay stored.
        raise
    except Exception as exc:  # the batch's transaction failed as a whole: nothing of it is stored
        statuses = [exc] * len(items)
    written = 0
    notes = [printable(f"warning: commit {name}: named by an abbreviation (asv writes the full sha), so it is stored "
                       "under it and is not the commit a file naming it in full holds; ingest with --repo CHECKOUT "
                       "to store it under its full sha") for name in sorted(abbreviated)]
    for (run, _, _), status, why in zip(items, statuses, left_out, strict=True):
        if isinstance(status, Exception):
            outcomes.append(file_outcome(run.path, "error", message=_store_failure(run.path, status)))
            continue
        dropped = status.dropped if isinstance(status, Replaced) else ()
        if dropped:  # asv drops a benchmark's results when it leaves the suite or changes version
            shown = ", ".join(repr(name) for name in dropped[:5]) + (f" and {len(dropped) - 5} more" if len(dropped) > 5
                                                                    else "")
            notes.append(printable(f"warning: {quote_path(run.path)}: rewritten without {len(dropped)} benchmark(s) "
                                   f"the stored run held ({shown}): their points at this commit were removed with it "
                                   "(recorded in the store's run replacements)"))
        if status == REPLACED_FROM_ANOTHER_SOURCE:
            status = "replaced"
            notes.append(printable(f"note: {quote_path(run.path)}: replaced the stored run of {run.run_key!r} "
                                   "ingested from another file (--replace; recorded in the store)"))
        skipped = run.skipped_unknown + run.skipped_stale
        notes_here = []
        if skipped:
            notes_here.append(
                f"skipped {len(run.skipped_unknown)} benchmarks missing from "
                f"benchmarks.json and {len(run.skipped_stale)} of another benchmark version: "
                + ", ".join(repr(name) for name in skipped[:5])
            )
        notes_here.extend(why)
        points = run.n_points
        if isinstance(status, ReadAgain):
            points = status.points
            notes_here.insert(0, f"read again: {points} points of benchmarks it held that benchmarks.json now "
                                 "knows went in beside the stored ones")
        note = f"{quote_path(run.path)}: " + "; ".join(notes_here) if notes_here else ""
        outcomes.append(file_outcome(run.path, str(status), points, note, len(skipped) + len(run.skipped_unstorable)))
        if status != "unchanged":
            written += points
    return written, notes


def ingest_results_dir(
    store: Store,
    results_dir: str | os.PathLike[str],
    *,
    repo: str | os.PathLike[str] | None = None,
    branch: str | None = None,
    batch_size: int = BATCH_FILES,
    progress: Callable[[IngestProgress], None] | None = None,
    replace: bool = False,
    redefine: Sequence[str] = (),
) -> IngestReport:
    """Ingest every result file of an asv results directory; each file is all or nothing.

    Args:
        store: the destination store.
        results_dir: an asv results directory (with benchmarks.json and one folder per machine).
        repo: optional git checkout to read commit parents, branch, time and subject from.
        branch: optional branch name recorded on commits reachable from it (needs `repo`).
        batch_size: files per transaction (each file in its own savepoint inside it).
        progress: called after each batch of files with an `IngestProgress`.
        replace: a file holding a different run of a stored (machine, environment, commit) than the
            one stored from another file replaces it (recorded, and noted in the report); without
            it, that file is an error naming both files.
        redefine: benchmark names whose definition in benchmarks.json (unit, declared direction)
            replaces the stored one (`redefine_benchmarks`, before any file is read; every name is
            checked first, so a wrong one changes nothing).

    Returns:
        An IngestReport; a file that cannot be read is an "error" outcome, never a partial run.
        An unreadable machine.json makes every file of its machine an error: the first file
        (in path order) carries the machine.json message, the others name that first file.
        A missing results directory or benchmarks.json raises AsvFormatError (nothing to ingest).
    """
    if not isinstance(store, Store):
        raise TypeError(f"store must be a ci.store.Store, got {type(store).__name__}")
    t0 = time.perf_counter()
    root = Path(results_dir)
    if not root.is_dir():
        raise AsvFormatError(f"{root}: not a directory (expected an asv results directory)")
    if branch and repo is None:
        raise ValueError("--branch needs --repo (the branch is read from git)")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    benchmarks = load_benchmarks_json(root)
    redefined = redefine_benchmarks(store, root, redefine, infos=benchmarks)

    paths = list(iter_result_files(root))
    machine_infos: dict[Path, dict[str, str] | AsvFormatError] = {}
    # A machine.json that cannot be read fails every result file of its machine; its message goes
    # with the first of them only, the others point to that file (one message, no file unaccounted for).
    first_failed: dict[Path, Path] = {}
    for path in paths:
        if path.parent not in machine_infos:
            try:
                machine_infos[path.parent] = load_machine_json(path.parent)
            except AsvFormatError as exc:
                machine_infos[path.parent] = exc
            except Exception as exc:  # noqa: BLE001 - as for result files: one folder never stops the others
                where = quote_path(path.parent / "machine.json")
                machine_infos[path.parent] = AsvFormatError(f"{where}: cannot be read ({error_line(exc)})")

    outcomes: list[FileOutcome] = []
    machines_before = store.machines()
    known = store.run_index()  # one query: a file another runner adds meanwhile is simply not known yet
    # A stored file whose parse skipped a benchmark benchmarks.json now knows is read again (its points go in
    # beside the stored ones); one stored before skips were recorded, once.
    for digest, skips in store.run_skips().items():
        if skips is None or any(readable_now(name, version, benchmarks) for name, version in skips):
            known.pop(digest, None)
    known_shas: list[str] = []
    # run key -> (first file in path order holding it, its digest): a second file with the same run
    # and other contents is an error, so two copies of one run never replace each other.
    claims: dict[str, tuple[Path, str]] = {}
    # The branch's log is read once; what it lacks (a commit off the branch, or none given) is asked
    # of git per batch. A commit whose record cannot be read is warned of once, whichever batches name it.
    on_branch = branch_log(repo, branch) if repo is not None and branch else CommitLog()
    problems: dict[str, str] = {}
    dates: dict[str, dict[datetime, Path | str]] = {}  # without --repo: per commit, each date a file gave
    replaced: list[str] = []  # notes on runs replaced from another source
    clashes: list[tuple[Path, _Clash]] = []  # stored bytes after another file of their run: decided at the end
    # Files go in batch by batch (parsed runs of one batch in memory, one transaction per batch,
    # one savepoint per file), so memory stays flat however long the history is.
    written = 0
    readable = [p for p in paths if not isinstance(machine_infos[p.parent], AsvFormatError)]
    readable_infos = {d: info for d, info in machine_infos.items() if not isinstance(info, AsvFormatError)}
    # Parsing allocates millions of short-lived objects and none in cycles: the collector's passes
    # over them were ~1 s of 1,000 files' ingest, and more in a forked parser's returns (2026-12-02).
    with contextlib.closing(read_all(readable, benchmarks, readable_infos, known)) as reads, paused_gc():
        for first in range(0, len(paths), batch_size):
            if progress is not None and first:
                progress(IngestProgress(first, len(paths), written, time.perf_counter() - t0))
            parsed = []
            for path in paths[first : first + batch_size]:
                info = machine_infos[path.parent]
                if isinstance(info, AsvFormatError):
                    carrier = first_failed.setdefault(path.parent, path)
                    message = str(info)
                    if carrier != path:
                        message = f"{quote_path(path)}: {SAME_MACHINE_ERROR} {quote_path(carrier.name)}"
                    outcomes.append(file_outcome(path, "error", message=message))
                    continue
                item = _placed(path, next(reads), info, claims)
                if isinstance(item, _Unchanged):
                    known_shas.append(item.commit_sha)
                    outcomes.append(file_outcome(path, "unchanged"))
                elif isinstance(item, _Clash):
                    clashes.append((path, item))
                elif isinstance(item, FileOutcome):
                    outcomes.append(item)
                else:
                    parsed.append(item)
            if not parsed:
                continue
            if repo is None:  # asv's dates order the commits: what each file says, to warn where files disagree
                for run, _, _ in parsed:
                    if run.commit_time is not None:
                        dates.setdefault(run.commit_hash, {}).setdefault(_aware(run.commit_time), run.path)
            points, batch_notes = _write_batch(store, parsed, outcomes, repo, branch, on_branch, problems, replace)
            written += points
            replaced.extend(batch_notes)
    # A file whose bytes the store holds came after another file of its run: that file replaced the
    # run (this one is a stale copy, an error), or was refused (this one is still the stored run).
    refused = {f.path for f in outcomes if f.status == "error"}
    for path, clash in clashes:
        if clash.earlier in refused:
            known_shas.append(clash.commit_sha)
            outcomes.append(file_outcome(path, "unchanged"))
        else:
            outcomes.append(clash.outcome)

    if repo is not None and known_shas:
        # Commits of files ingested earlier (perhaps without --repo) get their git metadata too.
        git_info = git_commits(repo, known_shas, branch, on_branch)
        problems.update(git_info.problems)
        # A time git could not give stays what is stored (asv's): empty fields never erase known ones.
        # (Under the name they are stored by: an abbreviation stored before stays one commit.)
        store.upsert_commits([dataclasses.replace(git_info.commits[s], sha=s) for s in sorted(set(known_shas))
                              if s in git_info.commits])
    left: list[str] = []
    times = [c.time for c in on_branch.commits.values() if c.time is not None]
    if repo is not None and branch and times and not on_branch.graph.shallow:
        # A branch force-pushed or reset: the commits it dropped are no longer its (a shallow clone's log
        # stops short of the branch's history, so it cannot say which are; a stale clone's misses the
        # commits newer than its branch, which `leave_branch` leaves alone).
        left = store.leave_branch(branch, set(on_branch.commits) | set(on_branch.problems), max(times))
    outcomes.sort(key=lambda f: f.path)
    notes = tuple(redefined) + tuple(commit_warning(sha, problem) for sha, problem in sorted(problems.items())) + \
        tuple(replaced)
    if left:
        notes += (printable(f"note: {len(left)} stored commit(s) of {branch!r} are no longer on it (the branch was "
                            f"rewritten: force-pushed or reset), e.g. {left[0][:12]}: they are kept with their "
                            "results, on no branch, and no longer shown or judged as the branch's"),)
    if repo is not None and (shallow := commit_order_warning(repo, on_branch)) is not None:
        notes += (shallow,)
    elif repo is not None:
        notes += unplaced_notes(store.commits(), repo)
    if repo is None and written:
        commits = store.commits()
        notes += no_repo_notes(commits) + date_conflicts(dates, commits)
    if written:
        # Jobs of a host the files do not tell apart first, so that the machines listed are the final ones.
        try:
            speed_notes = split_off_speed_jobs(store)
        except Exception as exc:  # noqa: BLE001 - the files are stored; what failed is said, not hidden
            speed_notes = (printable(f"warning: the results are stored, but the check for jobs of a host the files "
                                     f"do not record failed ({error_line(exc)}): the next ingest that stores a "
                                     "result reads it again"),)
        notes += machine_notes(machines_before, store.machines()) + speed_notes
    return IngestReport(tuple(outcomes), time.perf_counter() - t0, notes)


# What an ingest without a checkout says: asv's `date` is the commit's author date (`git rev-list --format=%at`,
# asv 0.6.6), and `asv publish` orders by git (`rev-list --all --date-order`). On MetPy's Jenkins history
# (read 2026-12-05), a commit dated 2025-02-14 showed, in its one run, the steps its date's neighbours show only
# from a commit dated 2025-04-29 on: it reached the branch later than its date says, and 11 series "regressed"
# at it together in date order.
NO_REPO_NOTE = ("note: no --repo: the commits are in the order of the dates asv recorded (each commit's author "
                "date), not git's history as `asv publish` reads it; a commit merged long after it was written "
                "stands where it was written, and a step it brought is shown there. Ingest these files again with "
                "--repo CHECKOUT (a full clone) to order their commits by git.")


def no_repo_notes(commits: Sequence[Commit]) -> tuple[str, ...]:
    """What an ingest without a checkout says of the store's order (`HISTORY_ORDER`): nothing when every
    commit has its place in git's history (ingested with --repo before); `NO_REPO_NOTE` when none has;
    otherwise how many commits without one sort before all those with one."""
    loose = [c for c in commits if c.position is None]
    if not loose:
        return ()
    out = [NO_REPO_NOTE if len(loose) == len(commits) else (
        f"note: no --repo: {len(loose)} of the store's {len(commits)} commits have no place in git's history "
        "(ingested without --repo) and sort before every commit that has one, in the order of the dates asv "
        "recorded (author dates); ingest their files again with --repo CHECKOUT to order them by git.")]
    undated = sorted(c.sha for c in loose if c.time is None)
    if undated:
        out.append(printable(
            f"warning: {len(undated)} commits have no date in their result files (asv's `date`) and no place in "
            f"git's history (e.g. {undated[0][:12]}): the history has no order for them (they sort by sha), so "
            "its steps and suspicions there mean nothing; ingest with --repo CHECKOUT to order them by git."))
    times = Counter(_aware(c.time) for c in loose if c.time is not None)
    tied = sorted(c.sha for c in loose if c.time is not None and times[_aware(c.time)] > 1)
    if tied:
        out.append(printable(
            f"warning: {len(tied)} commits share their date with another (e.g. {tied[0][:12]}): asv's dates cannot "
            "order them, so they stand in the order their files were read, and a step among them may be read as "
            "flips; ingest with --repo CHECKOUT to order them by git."))
    latest = datetime.now(UTC) + timedelta(days=1)
    odd = sorted((c for c in loose if c.time is not None and not EARLIEST_DATE <= _aware(c.time) <= latest),
                 key=lambda c: c.sha)
    if odd:
        first = odd[0].time
        assert first is not None
        out.append(printable(
            f"warning: {len(odd)} commits are dated before {EARLIEST_DATE:%Y} or after today (e.g. {odd[0].sha[:12]} "
            f"at {_aware(first):%Y-%m-%d}): asv records milliseconds since the epoch, so a date of 0, or one in "
            "seconds, puts a commit at the start of the history, where its steps are shown; ingest with --repo "
            "CHECKOUT to order them by git."))
    return tuple(out)


def unplaced_notes(commits: Sequence[Commit], repo: str | os.PathLike[str]) -> tuple[str, ...]:
    """What an ingest with a checkout says of the store's commits that have no place in its history:
    the checkout lacks them (not fetched yet, a stale or partial clone, or another repository), so
    they sort before every commit that has a place, by date. The newest three commits of a folder
    whose checkout lacked them stood at the start of the history without a word, and the dashboard
    lost the slowdown they held (2026-12-07).

    Args:
        commits: the store's commits after the ingest (`Store.commits`).
        repo: the checkout, for the message.

    Returns:
        () or one printable warning line naming an example.
    """
    loose = sorted(c.sha for c in commits if c.position is None)
    if not loose:
        return ()
    if len(loose) == len(commits):
        return (printable(
            f"warning: none of the store's {len(loose)} commits is in the history of {repo} (e.g. {loose[0][:12]}): "
            "is it this project's checkout? They are ordered by the dates asv recorded."),)
    return (printable(
        f"warning: {len(loose)} of the store's {len(commits)} commits have no place in the history of {repo} (e.g. "
        f"{loose[0][:12]}): not fetched there, or not this project's; they sort before every commit that has one, "
        "by date, and a step they hold is shown there. Fetch them (a full clone) and ingest again."),)


def date_conflicts(dates: dict[str, dict[datetime, Path | str]], commits: Sequence[Commit]) -> tuple[str, ...]:
    """A warning when result files ingested without a checkout date one commit differently (asv's
    `date`, which orders the commits without git): the store keeps the first date it was given, so
    the commit stands where that one puts it, and a forged or rewritten file's date changed nothing
    without a word (2026-12-06).

    Args:
        dates: per commit sha, each date the files of this ingest gave it, with the first file giving it.
        commits: the store's commits after the ingest (`Store.commits`).

    Returns:
        () or one printable warning line naming an example.
    """
    stored = {c.sha: _aware(c.time) for c in commits if c.position is None and c.time is not None}
    split = sorted(sha for sha, seen in dates.items() if sha in stored and set(seen) - {stored[sha]})
    if not split:
        return ()
    sha = split[0]
    other = min(set(dates[sha]) - {stored[sha]})
    return (printable(
        f"warning: {len(split)} commits are dated differently by their result files (e.g. {sha[:12]}: "
        f"{other:%Y-%m-%d %H:%M} in {quote_path(dates[sha][other])}, stored as {stored[sha]:%Y-%m-%d %H:%M}): "
        "a commit is ordered by the first date the store was given; ingest with --repo CHECKOUT to order "
        "them by git."),)


# asv began in 2013: a commit date before 2000 is a 0 or a date in seconds read as milliseconds.
EARLIEST_DATE = datetime(2000, 1, 1, tzinfo=UTC)


def _aware(when: datetime) -> datetime:
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def machine_notes(before: Sequence[Machine], after: Sequence[Machine]) -> tuple[str, ...]:
    """What an ingest says of the machines it added beside others of the same asv machine name.

    Args:
        before: the store's machines before the ingest.
        after: its machines after.

    Returns:
        One line per added machine: a new environment is its own series ("note"); a second host
        under one name is kept apart ("warning", naming both hosts and the fix).
    """
    known = {m.name for m in before}
    by_name: dict[str, list[Machine]] = {}
    for m in after:
        by_name.setdefault(m.machine_name, []).append(m)
    out = []
    for m in after:
        if m.name in known or m.speed:
            continue  # a machine of jobs of another speed is told of by `split_off_speed_jobs`
        first = by_name[m.machine_name][0]
        if first.name == m.name:
            continue
        if not same_host(first.host, m.host):
            out.append(printable(
                f"warning: machine {m.machine_name!r}: results from another host ({describe(m.host)}) than the "
                f"first one of that name ({describe(first.host)}: {', '.join(host_differences(first.host, m.host))}) "
                f"are kept apart as machine {m.name!r}, never one series with it; to name the hosts yourself, give "
                "each its own asv machine name (`asv machine --machine NAME` on each host, or a BENCH_MACHINE per "
                "runner in the workflow)"))  # fmt: skip
        else:
            out.append(printable(
                f"note: machine {m.machine_name!r} measured in another environment, {m.env_name!r}: its results "
                f"are their own series, machine {m.name!r} (environment {first.env_name!r} is {first.name!r})"))
    return tuple(out)


# The longest benchmark name `--redefine` takes: its old series' name adds " [UNIT, higher is better,
# until DATE] #N" (a unit is at most 64 characters) within the store's 512.
RETIRED_NAME_ROOM = 512 - 120


def redefine_benchmarks(store: Store, results_dir: str | os.PathLike[str], names: Sequence[str],
                        when: datetime | None = None, infos: dict[str, BenchmarkInfo] | None = None) -> list[str]:
    """Let the named benchmarks take the definition `results_dir`'s benchmarks.json gives them (`ci
    ingest --redefine`): where the store holds a benchmark's series in another unit or declared
    direction, they are kept under "NAME [UNIT until DATE]" and the files' results start new series
    under the name (`ci.store.Store.retire_benchmark`). Without it such a benchmark is left out of
    every file, with a warning naming both definitions.

    Args:
        store: the destination store.
        results_dir: the results directory about to be ingested (its benchmarks.json is read).
        names: benchmark names as benchmarks.json spells them.
        when: the date the old name carries (default now).
        infos: benchmarks.json as read already (None: read here).

    Returns:
        One line per name for the user: what was renamed, or that nothing needed to be.

    Raises:
        AsvFormatError: benchmarks.json is missing or malformed.
        ValueError: a name benchmarks.json does not hold (the names it holds that come closest are given).
    """
    import difflib

    from ci.records import Benchmark

    if not names:
        return []
    if infos is None:
        infos = load_benchmarks_json(Path(results_dir))
    day = (when or datetime.now(UTC)).strftime("%Y-%m-%d")
    for name in names:  # every name checked before any series is renamed
        if len(name) > RETIRED_NAME_ROOM:
            raise ValueError(f"--redefine {name[:80]!r}...: a name of {len(name)} characters leaves no room in the "
                             f"store for its old series' name (at most {RETIRED_NAME_ROOM}); nothing was renamed")
        if name not in infos:
            close = difflib.get_close_matches(name, list(infos), n=3)
            hint = f" (closest: {', '.join(repr(c) for c in close)})" if close else ""
            raise ValueError(f"--redefine {name[:200]!r}: no such benchmark in {results_dir}'s benchmarks.json{hint}; "
                             "nothing was renamed")
    lines = []
    for name in dict.fromkeys(names):
        info = infos[name]
        wanted = Benchmark(info.name, (), info.unit, info.direction, info.kind)
        stored = store.retire_benchmark(wanted, day)
        kept = " and ".join(repr(n) for n in stored)
        lines.append(printable(
            f"note: benchmark {name!r}: its stored series were not of this definition ({info.unit!r}, "
            f"{info.direction} is better); they keep their history as {kept}, and this suite's results start "
            "new series under the name" if stored else
            f"note: benchmark {name!r}: --redefine changed nothing (no stored series of another definition)"))
    return lines
