"""`python -m ci ingest --repo R [--branch B]` against real git repositories: every commit gets git's
subject, parents and time however the result files name it and whether or not a branch is given;
a subject may hold any byte git allows (0x1e, 0x1f, bytes that are not UTF-8); a commit whose
record git prints but that cannot be read is one warning naming it, never a failed ingest."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
from pathlib import Path

import pytest

from ci.cli import main
from ci.ingest.git import parse_log
from ci.store import Store
from tests.ci.conftest import write_results

ASV_DATE = dt.datetime(2023, 11, 14, 22, 13, 20, tzinfo=dt.UTC)  # write_results' date of its first commit


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


def _raw_commit(repo: Path, committer: bytes, message: bytes) -> str:
    """A commit object written as it is on top of main (git accepts what `git commit` would not make);
    main moves to it; returns its sha."""
    head = _git(repo, "rev-parse", "HEAD")
    body = (f"tree {_git(repo, 'rev-parse', 'HEAD^{tree}')}\nparent {head}\nauthor t <t@x> 1790000000 +0000\n"
            .encode() + b"committer " + committer + b"\n\n" + message)  # fmt: skip
    sha = _git(repo, "hash-object", "-t", "commit", "--literally", "-w", "--stdin", stdin=body)
    _git(repo, "update-ref", "refs/heads/main", sha)
    return sha


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


@pytest.mark.parametrize("branch", [["--branch", "main"], []], ids=["branch", "no-branch"])
@pytest.mark.parametrize(
    ("message", "subject"),
    [
        (b"split\x1eme\n", "split\x1eme"),
        (b"a\x1fb\x1fc\n", "a\x1fb\x1fc"),
        (b"both\x1f\x1e\tand a tab\n\nbody \x1e\x1f\n", "both\x1f\x1e\tand a tab"),
        (b"\x1e\n", "\x1e"),
    ],
    ids=["RS-0x1e", "US-0x1f", "both-and-a-body", "RS-alone"],
)
def test_subjects_holding_git_data_separators_ingest_every_time(tmp_path, capsys, message, subject, branch):
    """A subject holding 0x1e or 0x1f (the separators of the old `git log` format) made every later
    `ingest --repo . --branch main` fail ("not enough values to unpack")."""
    repo = _repo(tmp_path)
    before = _commit(repo, b"plain\n", day=1)
    odd = _commit(repo, message, day=2)
    after = _commit(repo, b"after it\n", day=3)
    for _ in range(2):  # the first ingest, and a later one with every file known (its commits enriched again)
        code, err, store = _ingest(tmp_path, repo, [before, odd, after], *branch, capsys=capsys)
        assert code == 0 and "warning" not in err, err
        with store:
            got = {c.sha: c for c in store.commits()}
        assert [got[s].subject for s in (before, odd, after)] == ["plain", subject, "after it"]
        assert got[after].parents == (odd,) and got[odd].parents == (before,) and got[odd].time == _day(2)


@pytest.mark.parametrize("branch", [["--branch", "main"], []], ids=["branch", "no-branch"])
def test_a_subject_that_is_not_utf8_is_stored_with_replacement_characters(tmp_path, capsys, branch):
    """git prints a subject's bytes as they are; read as UTF-8 text they failed the whole ingest."""
    repo = _repo(tmp_path)
    before = _commit(repo, b"plain\n", day=1)
    odd = _raw_commit(repo, b"t <t@x> 1795000000 +0000", b"caf\xe9 \xff\xfe\n")
    code, err, store = _ingest(tmp_path, repo, [before, odd], *branch, capsys=capsys)
    assert code == 0 and "warning" not in err, err
    with store:
        got = {c.sha: c for c in store.commits()}
    assert got[odd].subject == "caf\ufffd \ufffd\ufffd" and got[odd].parents == (before,)
    assert got[before].subject == "plain"


@pytest.mark.parametrize("branch", [["--branch", "main"], []], ids=["branch", "no-branch"])
@pytest.mark.parametrize(
    ("committer", "shown"),
    [(b"garbage", "'%cI'"), (b"t <t@x> 99999999999999 +0000", "'3170843-11-07T09:46:39+00:00'")],
    ids=["committer-unreadable", "after-year-9999"],
)
def test_a_commit_whose_time_git_cannot_give_is_one_warning(tmp_path, capsys, committer, shown, branch):
    """git prints `%cI` as it is for a committer line it cannot read, and a year past 9999 for a huge
    timestamp (`git hash-object` accepts both): the ingest failed as a whole on either. Now that
    commit alone is named in a warning and keeps asv's date; every commit keeps its subject and parents."""
    repo = _repo(tmp_path)
    before = _commit(repo, b"plain\n", day=1)
    odd = _raw_commit(repo, committer, b"odd time\n")
    after = _commit(repo, b"after it\n", day=3)
    code, err, store = _ingest(tmp_path, repo, [before, odd, after], *branch, capsys=capsys)
    assert code == 0, err
    warnings = [line for line in err.splitlines() if line.startswith("warning")]
    assert warnings == [f"warning: commit {odd}: git's commit time {shown} is not a date: it is stored with asv's "
                        "date"], err
    with store:
        got = {c.sha: c for c in store.commits()}
    assert [got[s].subject for s in (before, odd, after)] == ["plain", "odd time", "after it"]
    assert got[odd].parents == (before,) and got[after].parents == (odd,)
    assert got[odd].time == ASV_DATE + dt.timedelta(hours=1), "asv's date of the second result file"
    assert (got[before].time, got[after].time) == (_day(1), _day(3))


def test_a_record_that_cannot_be_read_is_that_commits_alone():
    """Each record ends with its own sha, so one that cannot be read leaves the records after it whole
    (git itself never prints such a record; what its reader does with one is shown here)."""
    a, b, c = ("a" * 40, "b" * 40, "c" * 40)
    out = (f"{a}\0\0" "2026-11-01T10:00:00+00:00\0first\0" f"{a}\n"
           f"{b}\0not-a-sha\0" "2026-11-02T10:00:00+00:00\0second\0" f"{b}\n"
           f"{c}\0{b}\0" "2026-11-03T10:00:00+00:00\0third, with\x1e\x1f odd bytes\0" f"{c}\n").encode()
    log = parse_log(out, "main")
    assert sorted(log.commits) == [a, c] and list(log.problems) == [b]
    assert "parents 'not-a-sha' are not commit ids" in log.problems[b]
    assert log.commits[c].subject == "third, with\x1e\x1f odd bytes" and log.commits[c].parents == (b,)
    assert parse_log(b"gpg: not a record\n" + out, "main").commits == {}, "no sha where a record starts: stop"
