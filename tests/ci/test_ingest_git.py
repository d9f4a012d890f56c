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
    assert sorted(got) == sorted(shas)  # capitals and abbreviations stored as the commit's full sha
    main_branch = "main" if options else ""
    for name, parent, subject, day, branch in zip(
        shas, [c0, c1, c1], ["change 1", "change 2", "feature work"], [2, 3, 9], [main_branch, main_branch, ""],
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
        # git's subject is the whole first paragraph: 1 MB without a blank line is stored as 200 characters
        (b"long line\n" * 100_000, ("long line " * 20)[:199] + "\u2026"),
        ("é".encode() * 300 + b"\n", "é" * 199 + "\u2026"),
    ],
    ids=["RS-0x1e", "US-0x1f", "both-and-a-body", "RS-alone", "1-MB-paragraph", "two-byte-characters"],
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


def _ordered_samples(name: str, j: int, c: int) -> list[float] | None:
    """Series (fp16, batch=1) 1.5x slower from commit 6 on, (bf16, batch=8) 2x slower at commits 10 and 11
    (the newest two: a suspicion needs two commits to hold a step), a little noise from commit to commit."""
    base = (1e-4 * (j + 1) if "time_" in name else 100.0 + j) * (1 + 0.003 * ((c * 7) % 5))
    if "time_gpu" in name and ((j == 0 and c >= 6) or (j == 3 and c >= 10)):
        base *= 1.5 if j == 0 else 2.0
    return [base * (1 + 0.001 * k) for k in range(8)]


@pytest.mark.parametrize("branch", [["--branch", "main"], []], ids=["branch", "no-branch"])
def test_history_order_is_git_s_topology_not_the_committers_clocks(tmp_path, capsys, branch, store_url):
    """Commit 6 of 12 was made on a machine whose clock ran a year ahead. Ordered by committer time it
    sorted last: its step was blamed on commit 7, and the step at the newest commit was judged
    against it. In git's order the detector blames commit 6, the dashboard lists the commits as git
    does, and the step of the newest commits is the suspicion."""
    from ci.site.data import unwrap
    from ci.site.model import load_snapshot

    repo = _repo(tmp_path)
    line = []
    for k in range(12):
        if k == 6:
            line.append(_raw_commit(repo, b"t <t@x> 1825000000 +0000", b"made a year ahead\n"))
        else:
            line.append(_commit(repo, f"change {k}\n".encode(), day=k + 1))
    root = tmp_path / "results"
    write_results(root, line, samples=_ordered_samples)
    db = store_url
    assert main(["ingest", "--db", db, "--repo", str(repo), *branch, str(root)]) == 0
    assert "warning" not in capsys.readouterr().err
    with Store(db) as store:
        commits = store.commits()
        assert [c.sha for c in commits] == line
        assert [c.position for c in commits] == list(range(12)), "generations: the root commit is 0"
        assert commits[6].time == dt.datetime.fromtimestamp(1825000000, dt.UTC)  # git's time, kept
        slow = "bench_attention.GPUTime.time_gpu(dtype=fp16, batch=1)"
        assert [r.commit_sha for r in store.results(benchmark_key=slow)] == line
        snap = load_snapshot(store)
    steps = [(r.benchmark.key, r.sha) for r in snap.regressions if r.source == "change point"]
    assert steps == [(slow, line[6])], steps
    assert [(x.benchmark.key, x.commit_sha) for x in snap.open_suspects] == [
        ("bench_attention.GPUTime.time_gpu(dtype=bf16, batch=8)", line[10])]
    site = tmp_path / "site"
    assert main(["dashboard", "--db", db, "--out", str(site)]) == 0
    _, data = unwrap((site / "data" / "commits.js").read_text())
    assert data["sha"] == line


def test_a_commit_ingested_without_git_first_gets_its_position_later_and_moves(tmp_path, capsys):
    """Ingested without --repo, commits are ordered by asv's dates; the same results ingested again with
    --repo get git's positions, and the order (the detector's too) becomes git's. Ingest says which order
    the store has whenever it wrote without --repo."""
    repo = _repo(tmp_path)
    first = _commit(repo, b"first\n", day=1)
    second = _commit(repo, b"second\n", day=2)
    root = tmp_path / "results"
    write_results(root, [second, first])  # asv's dates put `second` first
    db = str(tmp_path / "h.sqlite")
    assert main(["ingest", "--db", db, str(root)]) == 0
    assert "no --repo: the commits are in the order of the dates asv recorded" in capsys.readouterr().err
    with Store(db) as store:
        assert [(c.sha, c.position) for c in store.commits()] == [(second, None), (first, None)]
    assert main(["ingest", "--db", db, "--repo", str(repo), str(root)]) == 0
    out = capsys.readouterr()
    assert "2 unchanged" in out.out and "no --repo" not in out.err
    with Store(db) as store:
        assert [(c.sha, c.position) for c in store.commits()] == [(first, 0), (second, 1)]
    # Another machine's files of the same commits, without --repo: their order is git's already, no note.
    write_results(tmp_path / "other", [first, second], machine="m2")
    assert main(["ingest", "--db", db, str(tmp_path / "other")]) == 0
    assert "no --repo" not in capsys.readouterr().err
    # A new commit without --repo has no place in git's history: it sorts before both, and the note says so.
    third = _commit(repo, b"third\n", day=3)
    write_results(tmp_path / "third", [third])
    assert main(["ingest", "--db", db, str(tmp_path / "third")]) == 0
    assert "1 of the store's 3 commits have no place in git's history" in capsys.readouterr().err
    with Store(db) as store:
        assert [c.sha for c in store.commits()] == [third, first, second]


def test_commits_the_checkout_lacks_are_warned_of(tmp_path, capsys):
    """Results of commits a stale checkout has not fetched have no place in its history and sort before
    every commit that has one: the newest commits' slowdown then sat at the start of the history, without a
    word (2026-12-07). Ingest names them, and says so again until the checkout has them."""
    repo = _repo(tmp_path)
    known = [_commit(repo, f"c{d}\n".encode(), day=d) for d in (1, 2)]
    unfetched = "f" * 40
    code, err, store = _ingest(tmp_path, repo, [*known, unfetched], capsys=capsys)
    assert code == 0
    (line,) = [ln for ln in err.splitlines() if "no place in the history of" in ln]
    assert line.startswith(f"warning: 1 of the store's 3 commits have no place in the history of {repo} "
                           "(e.g. ffffffffffff)")
    with store:
        assert [c.sha for c in store.commits()] == [unfetched, *known]
    assert main(["ingest", "--db", str(tmp_path / "h.sqlite"), "--repo", str(repo), str(tmp_path / "results")]) == 0
    assert "no place in the history of" in capsys.readouterr().err, "said again, though nothing new was written"
    other = tmp_path / "other"
    other.mkdir()
    _git(other, "init", "-q", "-b", "main")
    _commit(other, b"unrelated\n", day=3)
    assert main(["ingest", "--db", str(tmp_path / "h2.sqlite"), "--repo", str(other), str(tmp_path / "results")]) == 0
    assert f"none of the store's 3 commits is in the history of {other}" in capsys.readouterr().err


def test_merged_branches_keep_first_parent_order_and_every_commit_its_ancestors_first(tmp_path, capsys):
    """Main's first-parent line stays in order, and a merged branch's commits come after their
    ancestors and before the merge, whatever their clocks say; the same with or without --branch."""
    repo = _repo(tmp_path)
    m0 = _commit(repo, b"m0\n", day=1)
    _git(repo, "checkout", "-q", "-b", "feature")
    _git(repo, "commit", "-q", "--allow-empty", "-m", "f1", day=20)  # clocks ahead of main's
    f1 = _git(repo, "rev-parse", "HEAD")
    _git(repo, "commit", "-q", "--allow-empty", "-m", "f2", day=21)
    f2 = _git(repo, "rev-parse", "HEAD")
    _git(repo, "checkout", "-q", "main")
    m1 = _commit(repo, b"m1\n", day=2)
    _git(repo, "merge", "-q", "--no-ff", "-m", "merge", "feature", day=3)
    m2 = _git(repo, "rev-parse", "HEAD")
    m3 = _commit(repo, b"m3\n", day=4)
    for options in (["--branch", "main"], []):
        root = tmp_path / f"results{len(options)}"
        write_results(root, [m0, m1, f1, f2, m2, m3])
        db = str(tmp_path / f"h{len(options)}.sqlite")
        assert main(["ingest", "--db", db, "--repo", str(repo), *options, str(root)]) == 0
        with Store(db) as store:
            order = [c.sha for c in store.commits()]
            positions = {c.sha: c.position for c in store.commits()}
        assert positions == {m0: 0, m1: 1, f1: 1, f2: 2, m2: 3, m3: 4}
        assert order.index(m0) < order.index(m1) < order.index(m2) < order.index(m3)
        assert order.index(m0) < order.index(f1) < order.index(f2) < order.index(m2)


def test_a_shallow_clone_orders_by_time_and_says_so(tmp_path, capsys):
    """A shallow clone knows only part of git's graph: its generations would not be those of the full
    history, so its commits get no position (ordered by time) and ingest warns."""
    repo = _repo(tmp_path)
    shas = [_commit(repo, f"c{k}\n".encode(), day=k + 1) for k in range(4)]
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", "--depth", "2", f"file://{repo}", str(clone)], check=True)
    root = tmp_path / "results"
    write_results(root, shas[2:])
    db = str(tmp_path / "h.sqlite")
    assert main(["ingest", "--db", db, "--repo", str(clone), "--branch", "main", str(root)]) == 0
    assert "is a shallow clone" in capsys.readouterr().err
    with Store(db) as store:
        got = [(c.sha, c.position, c.subject) for c in store.commits()]
    assert got == [(shas[2], None, "c2"), (shas[3], None, "c3")]


def test_a_branch_name_that_a_tag_shares_is_refused_not_read_as_the_tag(tmp_path, capsys):
    """`git log main` reads a tag named `main` (with a warning nobody saw): the commits of the branch
    were stored as the tag's history. The ingest names the clash and the full ref that settles it."""
    repo = _repo(tmp_path)
    first = _commit(repo, b"first\n", day=1)
    second = _commit(repo, b"second\n", day=2)
    _git(repo, "tag", "main", first)
    code, err, store = _ingest(tmp_path, repo, [first, second], "--branch", "main", capsys=capsys)
    store.close()
    assert code == 2 and "names more than one ref" in err and "refs/heads/main, refs/tags/main" in err, err
    assert "git tag -d" in err  # renaming the tag keeps the branch's label one name


def test_commits_a_force_push_dropped_leave_the_branch(tmp_path, capsys):
    """main reset to an older commit and committed on again: the dropped commits kept the label `main`
    for good, the dashboard's newest commit among them and two histories interleaved in the series. The
    next ingest with --branch takes them off main (kept, on no branch) and says so."""
    repo = _repo(tmp_path)
    a = _commit(repo, b"A\n", day=1)
    b = _commit(repo, b"B\n", day=2)
    c = _commit(repo, b"C\n", day=3)
    code, err, store = _ingest(tmp_path, repo, [a, b, c], "--branch", "main", capsys=capsys)
    with store:
        assert code == 0 and [x.sha for x in store.commits("main")] == [a, b, c]
    _git(repo, "reset", "-q", "--hard", a)
    d = _commit(repo, b"D rewritten\n", day=4)
    code, err, store = _ingest(tmp_path, repo, [a, b, c, d], "--branch", "main", capsys=capsys)
    with store:
        assert code == 0, err
        assert [x.sha for x in store.commits("main")] == [a, d]
        assert {x.sha for x in store.commits()} == {a, b, c, d}, "nothing is lost"
    assert "2 stored commit(s) of 'main' are no longer on it" in err, err
    # A stale clone (its main behind the store's) reaches none of the newer commits: they keep the label.
    stale = tmp_path / "stale"
    _git(tmp_path, "clone", "-q", str(repo), str(stale))
    e = _commit(repo, b"E newer than the stale clone\n", day=5)
    code, err, store = _ingest(tmp_path, repo, [a, d, e], "--branch", "main", capsys=capsys)
    store.close()
    code = main(["ingest", "--db", str(tmp_path / "h.sqlite"), "--repo", str(stale), "--branch", "main",
                 str(tmp_path / "results")])
    err = capsys.readouterr().err
    with Store(str(tmp_path / "h.sqlite")) as store:
        assert code == 0 and [x.sha for x in store.commits("main")] == [a, d, e], err
    assert "no longer on it" not in err, err


def test_a_branch_that_only_moved_on_or_a_stale_clone_takes_no_commit_off_it(tmp_path, capsys):
    """Commits stored under an abbreviation (a result file named them so) keep the branch's label, and a
    clone behind the store takes no merged pull request's commit off the branch although its own time is
    older than the clone's tip: only a branch whose newest stored commit is gone was rewritten."""
    from tests.ci.conftest import write_results

    repo = _repo(tmp_path)
    a = _commit(repo, b"A\n", day=1)
    _git(repo, "checkout", "-q", "-b", "feat")
    f = _commit(repo, b"F\n", day=2)
    _git(repo, "checkout", "-q", "main")
    (repo / "g.txt").write_text("b")
    _git(repo, "add", "g.txt")
    _git(repo, "commit", "-q", "-m", "B", day=3)
    b = _git(repo, "rev-parse", "HEAD")
    stale = tmp_path / "stale"
    _git(tmp_path, "clone", "-q", "--no-single-branch", str(repo), str(stale))
    _git(stale, "fetch", "-q", "origin", "feat:feat")
    _git(repo, "merge", "-q", "--no-ff", "-m", "M", "feat", day=4)
    m = _git(repo, "rev-parse", "HEAD")
    code, err, store = _ingest(tmp_path, repo, [a, f, b, m], "--branch", "main", capsys=capsys)
    with store:
        assert code == 0 and {x.sha for x in store.commits("main")} == {a, f, b, m}
    db = str(tmp_path / "h.sqlite")
    assert main(["ingest", "--db", db, "--repo", str(stale), "--branch", "main", str(tmp_path / "results")]) == 0
    assert "no longer on it" not in capsys.readouterr().err
    with Store(db) as store:
        assert {x.sha for x in store.commits("main")} == {a, f, b, m}
    short = tmp_path / "short"
    write_results(short / "results", [a[:8], b[:8]])
    db = str(short / "h.sqlite")
    assert main(["ingest", "--db", db, str(short / "results")]) == 0
    assert main(["ingest", "--db", db, "--repo", str(repo), "--branch", "main", str(short / "results")]) == 0
    assert "no longer on it" not in capsys.readouterr().err
    with Store(db) as store:
        assert [x.sha for x in store.commits("main")] == [a[:8], b[:8]]
