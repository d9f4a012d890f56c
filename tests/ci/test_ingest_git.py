"""`python -m ci ingest --repo R [--branch B]` against real git repositories: every commit gets git's
subject, parents and time however the result files name it and whether or not a branch is given."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
from pathlib import Path

import pytest

from ci.cli import main
from ci.store import Store
from tests.ci.conftest import write_results


def _git(repo: Path, *args: str, day: int = 1, stdin: bytes | None = None) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@x", "GIT_COMMITTER_DATE": f"2026-11-{day:02d}T10:00:00+00:00"}  # fmt: skip
    proc = subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, input=stdin, env=env)
    return proc.stdout.decode().strip()


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    return repo


def _commit(repo: Path, message: bytes, day: int) -> str:
    """A commit through `git commit -F`, as a user makes one; returns its sha."""
    (repo / "f.txt").write_text(str(day))
    (repo.parent / "msg").write_bytes(message)
    _git(repo, "add", "f.txt")
    _git(repo, "commit", "-q", "-F", str(repo.parent / "msg"), day=day)
    return _git(repo, "rev-parse", "HEAD")


def _ingest(tmp_path: Path, repo: Path, names: list[str], *options: str, capsys) -> tuple[int, str, Store]:
    """Results for `names` (as the result files name the commits), ingested through the CLI."""
    root = tmp_path / "results"
    write_results(root, names)
    db = str(tmp_path / "h.sqlite")
    code = main(["ingest", "--db", db, "--repo", str(repo), *options, str(root)])
    return code, capsys.readouterr().err, Store(db)


def _day(day: int) -> dt.datetime:
    return dt.datetime(2026, 11, day, 10, tzinfo=dt.UTC)


@pytest.mark.parametrize("case", ["no-branch", "branch-and-a-commit-off-it", "capitals-branch",
                                  "abbreviated-no-branch", "ingested-before-no-branch"])  # fmt: skip
def test_every_commit_gets_subject_parents_and_time_however_it_is_named(tmp_path, capsys, case):
    """Without --branch no commit got its metadata (git cat-file's `<sha> commit <size>` was read as
    if it ended in "commit"); with it, only commits of the branch named by their full sha did."""
    repo = _repo(tmp_path)
    c0, c1, c2 = (_commit(repo, f"change {i}\n".encode(), day=i + 1) for i in range(3))
    _git(repo, "checkout", "-q", "-b", "feature", c1)
    f1 = _commit(repo, b"feature work\n", day=9)
    _git(repo, "checkout", "-q", "main")
    shas = [c1, c2, f1]
    names = [s.upper() for s in shas] if case.startswith("capitals") else [s[:12] for s in shas] if (
        case.startswith("abbreviated")) else shas
    options = [] if "no-branch" in case else ["--branch", "main"]
    if case.startswith("ingested-before"):  # first without --repo: sha and asv's date only
        write_results(tmp_path / "results", names)
        assert main(["ingest", "--db", str(tmp_path / "h.sqlite"), str(tmp_path / "results")]) == 0
    code, err, store = _ingest(tmp_path, repo, names, *options, capsys=capsys)
    assert code == 0 and "warning" not in err, err
    with store:
        got = {c.sha: c for c in store.commits()}
    assert sorted(got) == sorted(names)
    main_branch = "main" if options else ""
    for name, parent, subject, day, branch in zip(
        names, [c0, c1, c1], ["change 1", "change 2", "feature work"], [2, 3, 9], [main_branch, main_branch, ""],
        strict=True,
    ):
        assert (got[name].subject, got[name].parents, got[name].time, got[name].branch) == (
            subject, (parent,), _day(day), branch), name
