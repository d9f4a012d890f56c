"""Ingest an asv results directory into the store.

Per file: parse (strict, `ci.asv_results`), then one transaction (`Store.ingest_run`). So a
malformed or truncated file is reported and skipped while every other file still goes in, a
crash mid-file leaves no partial run, and ingesting the same directory again changes nothing.
Commit metadata (parents, branch, time, subject) comes from `git log` when a checkout is given,
otherwise the commit is known by its sha and asv's date only.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from ci.asv_results import (
    SIDECAR_MACHINE_KEYS,
    AsvFormatError,
    iter_result_files,
    load_benchmarks_json,
    load_machine_json,
    parse_result_file,
    read_gpu_sidecar,
    with_sidecar,
)
from ci.records import Commit, Machine
from ci.store import Store


@dataclass(frozen=True)
class FileOutcome:
    """What happened to one result file."""

    path: str
    status: str  # inserted, replaced, unchanged, error
    points: int = 0  # benchmark points in the file (results plus marked failures)
    message: str = ""


@dataclass(frozen=True)
class IngestReport:
    """The outcome of one ingest call, file by file."""

    files: tuple[FileOutcome, ...]

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
        written = sum(f.points for f in self.files if f.status in ("inserted", "replaced"))
        return (
            f"{len(self.files)} result files: {self.count('inserted')} inserted, {self.count('replaced')} replaced, "
            f"{self.count('unchanged')} unchanged, {len(self.errors)} errors; {written} points written"
        )


_GIT_FORMAT = "%H%x1f%P%x1f%cI%x1f%s%x1e"


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


def git_commits(repo: str | os.PathLike[str], shas: Iterable[str], branch: str | None = None) -> dict[str, Commit]:
    """Commit metadata from a git checkout.

    Args:
        repo: a git checkout.
        shas: full commit hashes to describe.
        branch: a branch name; commits reachable from it get `branch` set, others get "".

    Returns:
        sha -> Commit for every sha git knows (unknown shas are left out).
    """
    root = Path(repo)
    if not root.exists():
        raise ValueError(f"--repo {repo}: no such directory")
    wanted = sorted(set(shas))
    found: dict[str, Commit] = {}
    if branch:
        # One `git log` of the branch (cheap even for 10^4 commits) instead of one process per sha.
        on_branch = _parse_log(_git(root, "log", f"--format={_GIT_FORMAT}", branch, "--"), branch)
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


def ingest_results_dir(
    store: Store,
    results_dir: str | os.PathLike[str],
    *,
    repo: str | os.PathLike[str] | None = None,
    branch: str | None = None,
) -> IngestReport:
    """Ingest every result file of an asv results directory, one transaction per file.

    Args:
        store: the destination store.
        results_dir: an asv results directory (with benchmarks.json and one folder per machine).
        repo: optional git checkout to read commit parents, branch, time and subject from.
        branch: optional branch name recorded on commits reachable from it (needs `repo`).

    Returns:
        An IngestReport; a file that cannot be read is an "error" outcome, never a partial run.
        A missing results directory or benchmarks.json raises AsvFormatError (nothing to ingest).
    """
    if not isinstance(store, Store):
        raise TypeError(f"store must be a ci.store.Store, got {type(store).__name__}")
    root = Path(results_dir)
    if not root.is_dir():
        raise AsvFormatError(f"{root}: not a directory (expected an asv results directory)")
    if branch and repo is None:
        raise ValueError("--branch needs --repo (the branch is read from git)")
    benchmarks = load_benchmarks_json(root)

    paths = list(iter_result_files(root))
    machine_infos: dict[Path, dict[str, str] | AsvFormatError] = {}
    for path in paths:
        if path.parent not in machine_infos:
            try:
                machine_infos[path.parent] = load_machine_json(path.parent)
            except AsvFormatError as exc:
                machine_infos[path.parent] = exc

    outcomes: list[FileOutcome] = []
    parsed = []
    known = store.run_digests()
    known_shas: list[str] = []
    for path in paths:
        info = machine_infos[path.parent]
        try:
            if isinstance(info, AsvFormatError):
                raise info
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
            run = with_sidecar(run, sidecar)
            parsed.append((run, info, sidecar))
        except AsvFormatError as exc:
            outcomes.append(FileOutcome(str(path), "error", 0, str(exc)))

    git_info: dict[str, Commit] = {}
    if repo is not None:
        git_info = git_commits(repo, [run.commit_hash for run, _, _ in parsed] + known_shas, branch)
        # Commits of files ingested earlier (perhaps without --repo) get their git metadata too.
        store.upsert_commits([git_info[s] for s in sorted(set(known_shas)) if s in git_info])

    for run, info, sidecar in parsed:
        machine = Machine(
            name=run.machine,
            cpu=info.get("cpu", ""),
            extra=tuple(sorted((k, v) for k, v in info.items() if k not in ("machine", "cpu"))),
            **{k: sidecar.get(k, "") for k in SIDECAR_MACHINE_KEYS},
        )
        commit = git_info.get(run.commit_hash) or Commit(sha=run.commit_hash, time=run.commit_time)
        try:
            status = store.ingest_run(run, machine, commit)
        except Exception as exc:  # a database error on one file must not lose the others
            outcomes.append(FileOutcome(str(run.path), "error", 0, f"{run.path}: database error: {exc}"))
            continue
        outcomes.append(FileOutcome(str(run.path), status, len(run.points)))
    outcomes.sort(key=lambda f: f.path)
    return IngestReport(tuple(outcomes))
