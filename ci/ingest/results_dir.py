"""Ingest an asv results directory into the store.

Per file: parse (strict, `ci.ingest.parse`), then write it all or nothing: files go in by batches,
one transaction per batch and one savepoint per file inside it (`Store.ingest_runs`). So a
malformed or truncated file is reported and skipped while every other file still goes in, a crash
or a kill leaves no partial run (the batches committed before it stay, the next ingest writes the
rest), and ingesting the same directory again changes nothing.
Commit metadata (parents, branch, time, subject) comes from `git log` when a checkout is given,
otherwise the commit is known by its sha and asv's date only.
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

from ci.ingest.asv_files import (
    SIDECAR_MACHINE_KEYS,
    AsvFormatError,
    iter_result_files,
    load_benchmarks_json,
    load_machine_json,
    read_gpu_sidecar,
    with_sidecar,
)
from ci.ingest.parse import parse_result_file
from ci.records import Commit, Machine
from ci.store import Store, error_line


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

    outcomes: list[FileOutcome] = []
    known = store.run_digests()
    known_shas: list[str] = []
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
                    message = f"{path}: skipped, same machine.json error as {carrier.name}"
                outcomes.append(FileOutcome(str(path), "error", 0, message))
                continue
            try:
                try:
                    # Identical bytes were ingested before: skip the parse (most of a re-ingest's cost).
                    sha = known.get(hashlib.sha256(path.read_bytes()).hexdigest())
                except OSError as exc:
                    raise AsvFormatError(f"{path}: cannot read ({exc})") from None
                if sha is not None:
                    known_shas.append(sha)
                    outcomes.append(FileOutcome(str(path), "unchanged"))
                    continue
                run = parse_result_file(path, benchmarks, info)
                # The sidecar is keyed by the commit, so it is read once the file has parsed.
                sidecar = read_gpu_sidecar(path.parent, run.commit_hash)
                parsed.append((with_sidecar(run, sidecar), info, sidecar))
            except AsvFormatError as exc:
                outcomes.append(FileOutcome(str(path), "error", 0, str(exc)))
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
                message = f"{run.path}: database error: {error_line(status)}"
                outcomes.append(FileOutcome(str(run.path), "error", 0, message))
            else:
                skipped = run.skipped_unknown + run.skipped_stale
                note = ""
                if skipped:
                    note = (
                        f"{run.path}: skipped {len(run.skipped_unknown)} benchmarks missing from benchmarks.json "
                        f"and {len(run.skipped_stale)} of another benchmark version: {', '.join(skipped[:5])}"
                    )
                outcomes.append(FileOutcome(str(run.path), status, len(run.points), note, len(skipped)))
                if status != "unchanged":
                    written += len(run.points)

    if repo is not None and known_shas:
        # Commits of files ingested earlier (perhaps without --repo) get their git metadata too.
        git_info = git_commits(repo, known_shas, branch, branch_log)
        store.upsert_commits([git_info[s] for s in sorted(set(known_shas)) if s in git_info])
    outcomes.sort(key=lambda f: f.path)
    return IngestReport(tuple(outcomes), time.perf_counter() - t0)
