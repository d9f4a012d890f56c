"""Ingest an asv results directory into the store.

Per file: read and parse inside one boundary (`_read_run`): whatever goes wrong with a file (a
malformed or truncated one, an irregular file, a value out of range, an error nobody foresaw)
becomes that file's one-line "FILE: reason" outcome, and every other file still goes in. Parsed
files are written in batches (`BATCH_FILES`), one transaction per batch and one savepoint per file
(`Store.ingest_runs`): a file is stored whole or not at all, a crash, an interrupt or a kill loses
at most the uncommitted batch (the batches committed before it stay, the next ingest writes the
rest), and ingesting the same directory again changes nothing. Two files that hold the same run
(machine, commit and environment: e.g. a copied machine folder) with different contents are never
both written: the first in path order is, the others are errors, the same on every ingest. Commit
metadata (parents, branch, time, subject) comes from `git log` when a checkout is given, otherwise
the commit is known by its sha and asv's date only.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy.exc import SQLAlchemyError

from ci.ingest.asv_files import (
    MAX_RESULT_BYTES,
    SIDECAR_MACHINE_KEYS,
    AsvFormatError,
    BenchmarkInfo,
    iter_result_files,
    load_benchmarks_json,
    load_machine_json,
    read_file,
    read_gpu_sidecar,
    with_sidecar,
)
from ci.ingest.parse import parse_result_file
from ci.records import Commit, Machine, ParsedRun
from ci.store import Store, StoreLimitError, error_line
from ci.text import printable, quote_path

BATCH_FILES = 50  # result files per transaction (each in its own savepoint): `Store.ingest_runs`


@dataclass(frozen=True)
class FileOutcome:
    """What happened to one result file."""

    path: str
    status: str  # inserted, replaced, unchanged, error
    points: int = 0  # benchmark points in the file (results plus marked failures)
    message: str = ""
    skipped: int = 0  # benchmarks left out: unknown to benchmarks.json, or of another version (as asv does)


@dataclass(frozen=True)
class IngestReport:
    """The outcome of one ingest call, file by file, and how long it took."""

    files: tuple[FileOutcome, ...]
    seconds: float = 0.0  # wall time of the whole call

    @property
    def points_written(self) -> int:
        """Points of the files inserted or replaced."""
        return sum(f.points for f in self.files if f.status in ("inserted", "replaced"))

    def count(self, status: str) -> int:
        """Files with the given status."""
        return sum(1 for f in self.files if f.status == status)

    @property
    def errors(self) -> tuple[FileOutcome, ...]:
        return tuple(f for f in self.files if f.status == "error")

    @property
    def ok(self) -> bool:
        """True when every file went in (or was already in)."""
        return not self.errors

    def summary(self) -> str:
        """One line for humans."""
        written = self.points_written
        skipped = sum(f.skipped for f in self.files)
        return (
            f"{len(self.files)} result files: {self.count('inserted')} inserted, {self.count('replaced')} replaced, "
            f"{self.count('unchanged')} unchanged, {len(self.errors)} errors; {written} points written"
            f" in {self.seconds:.1f} s ({throughput(written, self.seconds)})"
            + (f"; {skipped} benchmarks skipped (not in benchmarks.json or stale version)" if skipped else "")
        )


def throughput(points: int, seconds: float) -> str:
    """`points` per second as shown in ingest's messages, e.g. "61,250 points/s"."""
    return f"{points / seconds:,.0f} points/s" if seconds > 0 else "- points/s"


@dataclass(frozen=True)
class IngestProgress:
    """Where a running ingest is, after each batch of files (for progress lines on long runs)."""

    files_done: int
    files_total: int
    points_written: int
    seconds: float


_GIT_FORMAT = "%H%x1f%P%x1f%cI%x1f%s%x1e"
BATCH_FILES = 50  # result files per transaction (docs/performance.md "Ingest and store")


def _git(repo: Path, *args: str, stdin: str | None = None) -> str:
    proc = subprocess.run(["git", "-C", str(repo), *args], input=stdin, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise ValueError(f"git {' '.join(args[:2])} failed in {repo}: {proc.stderr.strip()}")
    return proc.stdout


def _parse_log(out: str, branch: str) -> dict[str, Commit]:
    commits: dict[str, Commit] = {}
    for record in out.split("\x1e"):
        record = record.strip("\n")
        if not record:
            continue
        sha, parents, when, subject = record.split("\x1f", 3)
        commits[sha] = Commit(
            sha=sha,
            parents=tuple(parents.split()),
            branch=branch,
            time=datetime.fromisoformat(when).astimezone(UTC),
            subject=subject,
        )
    return commits


def _branch_log(repo: str | os.PathLike[str], branch: str) -> dict[str, Commit]:
    """Every commit reachable from `branch`: one `git log` (cheap even for 10^4 commits)
    instead of one process per sha."""
    root = Path(repo)
    if not root.is_dir():
        raise ValueError(f"--repo {repo}: no such directory")
    return _parse_log(_git(root, "log", f"--format={_GIT_FORMAT}", branch, "--"), branch)


def git_commits(
    repo: str | os.PathLike[str],
    shas: Iterable[str],
    branch: str | None = None,
    branch_log: dict[str, Commit] | None = None,
) -> dict[str, Commit]:
    """Commit metadata from a git checkout.

    Args:
        repo: a git checkout.
        shas: full commit hashes to describe.
        branch: a branch name; commits reachable from it get `branch` set, others get "".
        branch_log: the branch's log when the caller already has it (`_branch_log`).

    Returns:
        sha -> Commit for every sha git knows (unknown shas are left out).
    """
    root = Path(repo)
    if not root.is_dir():
        raise ValueError(f"--repo {repo}: no such directory")
    wanted = sorted(set(shas))
    found: dict[str, Commit] = {}
    if branch:
        on_branch = branch_log if branch_log is not None else _branch_log(root, branch)
        found.update({s: on_branch[s] for s in wanted if s in on_branch})
    rest = [s for s in wanted if s not in found]
    if rest:
        check = _git(root, "cat-file", "--batch-check", stdin="".join(f"{s}\n" for s in rest))
        known = [line.split()[0] for line in check.splitlines() if line.endswith(" commit")]
        if known:
            out = _git(
                root, "log", "--no-walk=unsorted", "--stdin", f"--format={_GIT_FORMAT}", stdin="\n".join(known) + "\n"
            )
            found.update(_parse_log(out, ""))
    return found


def _machine(name: str, info: dict[str, str], sidecar: dict[str, str]) -> Machine:
    """The Machine row: asv's machine.json plus the GPU sidecar's gpu/driver/cuda/torch/triton."""
    return Machine(
        name=name,
        cpu=info.get("cpu", ""),
        extra=tuple(sorted((k, v) for k, v in info.items() if k not in ("machine", "cpu"))),
        **{k: sidecar.get(k, "") for k in SIDECAR_MACHINE_KEYS},
    )


def _outcome(path: Path, status: str, points: int = 0, message: str = "", skipped: int = 0) -> FileOutcome:
    """A file's outcome; its message is one printable line whatever the file's name or content held."""
    return FileOutcome(str(path), status, points, printable(message), skipped)


def _store_failure(path: Path, exc: Exception) -> str:
    """Why the store did not take a parsed file: its own rule for what it can hold (the same on
    every database), a database error, or anything else as what it is."""
    if isinstance(exc, StoreLimitError):
        return f"{quote_path(path)}: {exc}"
    if isinstance(exc, SQLAlchemyError):
        return f"{quote_path(path)}: database error: {error_line(exc)}"
    return f"{quote_path(path)}: not stored ({error_line(exc)})"


@dataclass(frozen=True)
class _Unchanged:
    """A result file whose bytes were ingested before."""

    commit_sha: str


def _read_run(
    path: Path,
    benchmarks: dict[str, BenchmarkInfo],
    info: dict[str, str],
    known: dict[str, tuple[str, str]],
    claims: dict[str, tuple[Path, str]],
) -> FileOutcome | _Unchanged | tuple[ParsedRun, dict[str, str], dict[str, str]]:
    """One result file read, parsed and checked inside one boundary: (run, machine info, sidecar)
    to write, `_Unchanged`, or the file's error outcome: any exception but an interrupt becomes
    one, naming the file."""
    try:
        raw = read_file(path, MAX_RESULT_BYTES)
        digest = hashlib.sha256(raw).hexdigest()
        if digest in known:  # identical bytes were ingested before: skip the parse (most of a re-ingest)
            sha, run_key = known[digest]
            clash = _claim(claims, run_key, path, digest)
            return clash or _Unchanged(sha)
        run = parse_result_file(path, benchmarks, info, raw=raw, digest=digest)
        clash = _claim(claims, run.run_key, path, digest)
        if clash is not None:
            return clash
        # The sidecar is keyed by the commit, so it is read once the file has parsed.
        sidecar = read_gpu_sidecar(path.parent, run.commit_hash)
        return with_sidecar(run, sidecar), info, sidecar
    except AsvFormatError as exc:
        return _outcome(path, "error", message=str(exc))
    except Exception as exc:  # noqa: BLE001 - the boundary: one bad file never stops the others
        return _outcome(path, "error", message=f"{quote_path(path)}: cannot be ingested ({error_line(exc)})")


def _claim(claims: dict[str, tuple[Path, str]], run_key: str, path: Path, digest: str) -> FileOutcome | None:
    """Record that `path` holds `run_key`; an error outcome when an earlier file (path order) holds
    the same run with other contents. An identical copy is no conflict."""
    first = claims.setdefault(run_key, (path, digest))
    if first[1] == digest:
        return None
    return _outcome(path, "error", message=(
        f"{quote_path(path)}: holds the same run as {quote_path(first[0])} (machine/commit/environment "
        f"{run_key!r}) with other contents; only the first in path order is stored: asv keeps one file "
        "per run, so remove the stale copy (a copied machine folder?)"))


def ingest_results_dir(
    store: Store,
    results_dir: str | os.PathLike[str],
    *,
    repo: str | os.PathLike[str] | None = None,
    branch: str | None = None,
    batch_size: int = BATCH_FILES,
    progress: Callable[[IngestProgress], None] | None = None,
) -> IngestReport:
    """Ingest every result file of an asv results directory; each file is all or nothing.

    Args:
        store: the destination store.
        results_dir: an asv results directory (with benchmarks.json and one folder per machine).
        repo: optional git checkout to read commit parents, branch, time and subject from.
        branch: optional branch name recorded on commits reachable from it (needs `repo`).
        batch_size: files per transaction (each file in its own savepoint inside it).
        progress: called after each batch of files with an `IngestProgress`.

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
    known = store.run_index()  # one query: a file another runner adds meanwhile is simply not known yet
    known_shas: list[str] = []
    # run key -> (first file in path order holding it, its digest): a second file with the same run
    # and other contents is an error, so two copies of one run never replace each other.
    claims: dict[str, tuple[Path, str]] = {}
    branch_log = _branch_log(repo, branch) if repo is not None and branch else {}
    # Files go in batch by batch (parsed runs of one batch in memory, one transaction per batch,
    # one savepoint per file), so memory stays flat however long the history is.
    written = 0
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
                    message = f"{quote_path(path)}: skipped, same machine.json error as {quote_path(carrier.name)}"
                outcomes.append(_outcome(path, "error", message=message))
                continue
            item = _read_run(path, benchmarks, info, known, claims)
            if isinstance(item, _Unchanged):
                known_shas.append(item.commit_sha)
                outcomes.append(_outcome(path, "unchanged"))
            elif isinstance(item, FileOutcome):
                outcomes.append(item)
            else:
                parsed.append(item)
        if not parsed:
            continue
        git_info = git_commits(repo, [r.commit_hash for r, _, _ in parsed], branch, branch_log) if repo else {}
        items = [
            (run, _machine(run.machine, info, sidecar), git_info.get(run.commit_hash)
             or Commit(sha=run.commit_hash, time=run.commit_time))
            for run, info, sidecar in parsed
        ]  # fmt: skip
        try:
            statuses: list[str | Exception] = store.ingest_runs(items)
        except Exception as exc:  # the batch's transaction failed as a whole: nothing of it is stored
            statuses = [exc] * len(items)
        for (run, _, _), status in zip(items, statuses, strict=True):
            if isinstance(status, Exception):
                outcomes.append(_outcome(run.path, "error", message=_store_failure(run.path, status)))
            else:
                skipped = run.skipped_unknown + run.skipped_stale
                note = ""
                if skipped:
                    note = (
                        f"{quote_path(run.path)}: skipped {len(run.skipped_unknown)} benchmarks missing from "
                        f"benchmarks.json and {len(run.skipped_stale)} of another benchmark version: "
                        + ", ".join(repr(name) for name in skipped[:5])
                    )
                outcomes.append(_outcome(run.path, status, run.n_points, note, len(skipped)))
                if status != "unchanged":
                    written += run.n_points

    if repo is not None and known_shas:
        # Commits of files ingested earlier (perhaps without --repo) get their git metadata too.
        git_info = git_commits(repo, known_shas, branch, branch_log)
        store.upsert_commits([git_info[s] for s in sorted(set(known_shas)) if s in git_info])
    outcomes.sort(key=lambda f: f.path)
    return IngestReport(tuple(outcomes), time.perf_counter() - t0)
