"""`python -m ci demo` end to end on the toy repository of test_runner (real git clone, real asv).

The demo of this repository itself takes minutes (torch per benchmark process); here the same
code runs on the toy suite: clone, pick the commits that carry the suite, history + interleaved
PR A/B, store, dashboard, comment; then a second demo resumes to nothing.
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

import pytest

from ci.cli import main
from ci.demo import prepare_clone, run_demo, suite_commits
from ci.runner.config import RunnerError
from ci.store import Store
from tests.ci.test_runner import _git, template, toy  # noqa: F401  (fixtures)


def test_demo_measures_stores_renders_and_resumes(toy, tmp_path, capsys):  # noqa: F811
    repo, shas = toy
    out = tmp_path / "demo"
    assert run_demo(out, source=repo, commits=3, gpu=False, machine="cibox") == 0
    printed = capsys.readouterr().out
    assert f"dashboard:  {out / 'dashboard' / 'index.html'}" in printed
    assert f"PR comment: {out / 'pr-comment.md'}" in printed
    assert "verdict exit code for HEAD: 1" in printed, "C is 4x slower than its parent B"
    summary = printed.split(f"HEAD {shas['C'][:8]}: the exact tier")[1].split("Demo done")[0]
    assert "(CPU: Triton's interpreter" in summary
    assert re.search(r"timing \(median\)\s+bench_toy\.Toy\.time_work\s+\d+\s+\S+ seconds", summary), summary
    assert (out / "dashboard" / "index.html").is_file()
    body = (out / "pr-comment.md").read_text()
    assert shas["B"][:12] in body and shas["C"][:12] in body and "bench_toy.Toy.time_work" in body
    assert not (repo / ".asv").exists(), "the demo works in its clone, never in the source checkout"
    with Store(str(out / "history.sqlite")) as store:
        runs = sorted(store.run_digests().items())
        assert {r.commit_sha for r in store.results()} == set(shas.values())
        assert [c.sha for c in store.commits("main")] == [shas["A"], shas["B"], shas["C"]]

    # Again: the clone is refreshed, every commit is already measured, nothing is added or replaced.
    assert run_demo(out, source=repo, commits=3, gpu=False, machine="cibox") == 0
    with Store(str(out / "history.sqlite")) as store:
        assert sorted(store.run_digests().items()) == runs


def test_the_printed_b_regex_pastes_back_into_a_shell(toy, tmp_path, capsys):  # noqa: F811
    r"""The demo printed its subset as `-b '^bench_toy\\.'` (a Python repr): pasted after `asv run`,
    the doubled backslash selects nothing. Now its `shlex.split` is the suite's CPU_REGEX."""
    repo, _ = toy
    out = tmp_path / "demo"
    assert main(["demo", "--repo", str(repo), "--out", str(out), "--commits", "2", "--cpu", "--machine", "cibox"]) == 0
    (line,) = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("[runner] demo: ")]
    assert line.endswith("no GPU: CPU subset -b '^bench_toy\\.'"), line
    assert shlex.split(line.split(" -b ", 1)[1]) == [r"^bench_toy\."], "the toy suite's CPU_REGEX"


def test_the_demo_finds_a_checkout_whose_path_is_not_utf8(toy, tmp_path, monkeypatch, capsys):  # noqa: F811
    """`git rev-parse --show-toplevel` prints the path's bytes as they are: read as UTF-8 text, a
    checkout under a folder named in Latin-1 failed the demo before it began. Its path now comes back
    as the file system has it (and a name ending in a space keeps the space)."""
    repo, _ = toy
    odd = tmp_path / os.fsdecode(b"caf\xe9 ")
    repo.rename(odd)
    sub = odd / "benchmarks"
    from ci.demo import default_source

    assert default_source(sub) == odd
    monkeypatch.chdir(sub)
    assert main(["demo", "--commits", "1"]) == 2  # found the checkout, then refused the count
    err = capsys.readouterr().err
    assert "at least 2" in err and "codec" not in err, err


def test_suite_commits_stop_where_the_suite_is_absent(tmp_path):
    repo = tmp_path / "r"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    (repo / "x").write_text("1")
    _git(repo, "add", "x")
    _git(repo, "commit", "-q", "-m", "before the suite")
    (repo / "benchmarks").mkdir()
    (repo / "benchmarks" / "__init__.py").write_text("")
    (repo / "asv.conf.json").write_text("{}")
    shas = []
    for i in range(3):
        (repo / "x").write_text(str(i))
        _git(repo, "add", "-A")
        _git(repo, "commit", "-q", "-m", f"suite {i}")
        shas.append(_git(repo, "rev-parse", "HEAD"))
    assert suite_commits(repo, 2) == shas[1:]
    assert suite_commits(repo, 10) == shas, "the commit before the suite is never picked"
    with pytest.raises(ValueError, match="at least 2"):
        suite_commits(repo, 1)
    first = _git(repo, "rev-list", "--max-parents=0", "HEAD")
    _git(repo, "checkout", "-q", first)
    with pytest.raises(RunnerError, match="fewer than 2"):
        suite_commits(repo, 3)


def test_prepare_clone_refuses_a_foreign_folder_and_follows_the_source(toy, tmp_path):  # noqa: F811
    repo, shas = toy
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "keep.txt").write_text("mine")
    with pytest.raises(ValueError, match="not a git clone"):
        prepare_clone(repo, foreign)
    clone = prepare_clone(repo, tmp_path / "clone")
    assert _git(clone, "rev-parse", "HEAD") == shas["C"]
    (repo / "new").write_text("n")
    _git(repo, "add", "new")
    _git(repo, "commit", "-q", "-m", "D")
    assert _git(prepare_clone(repo, clone), "rev-parse", "HEAD") == _git(repo, "rev-parse", "HEAD")


def test_demo_cli_rejects_db_and_bad_commit_count(capsys):
    assert main(["demo", "--db", "/tmp/x.sqlite"]) == 2
    err = capsys.readouterr().err  # demo has no --db (its store is in --out): its own usage says so
    assert "usage: python -m ci demo" in err and "unrecognized arguments: --db" in err
    assert main(["demo", "--commits", "1", "--out", str(Path("/nonexistent-demo-dir"))]) == 2
    assert "at least 2" in capsys.readouterr().err
    assert not Path("/nonexistent-demo-dir").exists(), "arguments are checked before anything is cloned"


def test_the_demo_clones_the_checkout_it_is_run_in(toy, tmp_path):  # noqa: F811
    """An installed `ragged-ci demo` has no checkout of its own: it measures the clone around the
    current directory (`--repo` names another one)."""
    from ci.demo import REPO_ROOT, default_source

    repo, _ = toy
    (repo / "benchmarks" / "sub").mkdir()
    assert default_source(repo / "benchmarks" / "sub") == repo
    assert default_source(tmp_path) == REPO_ROOT, "outside any clone: this package's own checkout (editable)"
