"""`python -m ci run` on a tiny temporary git repository through the real asv CLI.

The repository holds a toy library (pure Python, no torch), a toy asv suite with a timing and a
correctness benchmark, this project's real `benchmarks/_asv_install.py` (the per-commit .pth
install) and `benchmarks/gpu_env.py` (the GPU-state sidecar). Commits: A, B (no change),
C (the timed function does 4x the work: a deliberate slowdown). asv's environment is shared by
the tests of this module (created once); each test gets its own copy of the repository, results
and store.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from ci.cli import main
from ci.records import JOB_KEY, Commit, Outcome
from ci.runner.config import RunnerConfig, RunnerError, suite_regex
from ci.runner.git import commits_in_range, new_branch_commits, resolve_commit
from ci.runner.jobs import history_branch, print_outcome, removed_on_head, run_history, run_pr
from ci.store import Store

ROOT = Path(__file__).resolve().parents[2]
PY = f"python{sys.version_info.major}.{sys.version_info.minor}"

LIB = '''
WORK = 20_000


def work():
    s = 0
    for i in range(WORK):
        s += i * i
    return s


def error():
    return 1e-4
'''

SUITE = '''
import toylib


class Toy:
    rounds = 2
    repeat = (6, 6, 10.0)
    number = 5
    warmup_time = 0.0

    def time_work(self):
        toylib.work()


class ToyCheck:
    unit = "max abs diff"

    def track_max_abs_diff(self):
        return toylib.error()


ToyCheck.track_max_abs_diff.unit = "max abs diff"


class ToyBroken:
    def time_breaks_at_c(self):
        if toylib.WORK > 50_000:
            raise RuntimeError("broken at C")
'''


def _git(repo: Path, *args: str, when: int | None = None) -> str:
    env = None
    if when is not None:  # distinct commit times, as real history has (the store orders by time)
        stamp = f"{1_700_000_000 + 3600 * when} +0000"
        env = {**os.environ, "GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp}
    return subprocess.run(
        ["git", "-c", "user.email=t@example.com", "-c", "user.name=t", *args],
        cwd=repo, check=True, capture_output=True, text=True, env=env,
    ).stdout.strip()  # fmt: skip


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A git repository with commits A, B, C; returns (repo, {"A": sha, ...})."""
    tmp = tmp_path_factory.mktemp("runner")
    repo = tmp / "template"
    (repo / "benchmarks").mkdir(parents=True)
    conf = json.loads((ROOT / "asv.conf.json").read_text())
    conf.update(project="toy", project_url="", show_commit_url="", env_dir=str(tmp / "asv-env"))
    (repo / "asv.conf.json").write_text(json.dumps(conf, indent=1))
    for name in ("_asv_install.py", "gpu_env.py"):
        shutil.copy(ROOT / "benchmarks" / name, repo / "benchmarks" / name)
    (repo / "benchmarks" / "__init__.py").write_text('CPU_REGEX = r"^bench_toy\\."\nQUICK_REGEX = r"Toy"\n')
    (repo / "benchmarks" / "bench_toy.py").write_text(SUITE)
    (repo / "toylib").mkdir()
    lib = repo / "toylib" / "__init__.py"
    lib.write_text(LIB)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "A", when=0)
    shas = {"A": _git(repo, "rev-parse", "HEAD")}
    (repo / "README").write_text("docs only\n")
    _git(repo, "add", "README")
    _git(repo, "commit", "-q", "-m", "B: docs", when=1)
    shas["B"] = _git(repo, "rev-parse", "HEAD")
    lib.write_text(LIB.replace("WORK = 20_000", "WORK = 80_000"))
    _git(repo, "commit", "-q", "-am", "C: 4x the work", when=2)
    shas["C"] = _git(repo, "rev-parse", "HEAD")
    return repo, shas


@pytest.fixture
def toy(template, tmp_path, monkeypatch) -> tuple[Path, dict[str, str]]:
    """A private copy of the template repository, asv's machine file in a private HOME."""
    src, shas = template
    repo = tmp_path / "repo"
    shutil.copytree(src, repo, symlinks=True)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("ASV_MACHINE", raising=False)
    return repo, shas


def _cfg(repo: Path, tmp_path: Path, **kw) -> RunnerConfig:
    return RunnerConfig(repo=repo, db=str(tmp_path / "h.sqlite"), machine="cibox", bench=None, **kw)


def _run_rows(db: str) -> list[tuple[str, str]]:
    """(commit sha, file digest) of every stored run: a duplicate or a re-measured commit shows here."""
    with Store(db) as store:
        return sorted((sha, digest) for digest, sha in store.run_digests().items())


def test_a_history_job_judges_its_branch_not_the_pr_commits_beside_it(tmp_path):
    """`continuous` stores a PR's head (on no branch) in the store a history job uses by default: the
    job's change points and dashboard are its branch's commits, where the store holds any; an explicit
    --dashboard-branch wins, and a store without the branch's commits shows every commit."""
    db = str(tmp_path / "h.sqlite")
    (tmp_path / "asv.conf.json").write_text('{"version": 1, "project": "toy"}')
    cfg = RunnerConfig(repo=tmp_path, db=db, machine="cibox", bench=None, branch="main")
    with Store(db) as store:
        store.upsert_commits([Commit("c" * 40, (), "")])  # a PR head, on no branch
        assert history_branch(cfg, store) is None  # no main commit stored (e.g. ingested without a branch)
        store.upsert_commits([Commit("a" * 40, (), "main"), Commit("b" * 40, ("a" * 40,), "main")])
        assert history_branch(cfg, store) == "main"
        assert history_branch(RunnerConfig(repo=tmp_path, db=db, machine="cibox", bench=None, branch="main",
                                           dashboard_branch="release"), store) == "release"
        assert history_branch(RunnerConfig(repo=tmp_path, db=db, machine="cibox", bench=None, branch=None),
                              store) is None


def test_a_benchmark_heads_suite_no_longer_defines_is_named(tmp_path):
    """asv measures head's suite on both sides of a PR: a benchmark the PR deleted is measured on neither,
    and the job listed nothing of it. Base's result file still holds it (an earlier call's), so it is
    named, within the job's selection; a file or suite that cannot be read names nothing."""
    (tmp_path / "asv.conf.json").write_text('{"version": 1, "project": "toy", "results_dir": "results"}')
    results = tmp_path / "results"
    (results / "cibox").mkdir(parents=True)
    (results / "benchmarks.json").write_text(json.dumps(
        {"version": 2, "b.T.time_kept": {"type": "time"}, "b.T.time_new": {"type": "time"}}))
    base = "ab" * 20
    (results / "cibox" / f"{base[:8]}-virtualenv-py3.11.json").write_text(json.dumps(
        {"results": {"b.T.time_kept": [1.0], "b.T.time_gone": [2.0], "b.Other.time_gone_too": [3.0]}}))
    cfg = RunnerConfig(repo=tmp_path, db=str(tmp_path / "h.sqlite"), machine="cibox", bench=None)
    assert removed_on_head(cfg, base) == ["b.Other.time_gone_too", "b.T.time_gone"]
    cfg = RunnerConfig(repo=tmp_path, db=str(tmp_path / "h.sqlite"), machine="cibox", bench=r"b\.T\.")
    assert removed_on_head(cfg, base) == ["b.T.time_gone"]
    assert removed_on_head(cfg, "cd" * 20) == []  # no result file of that commit
    (results / "benchmarks.json").write_text("{")
    assert removed_on_head(cfg, base) == []


def test_range_and_since_last_then_resume_adds_nothing(toy, tmp_path, capsys):
    repo, shas = toy
    assert commits_in_range(repo, f"{shas['A']}..{shas['C']}") == [shas["B"], shas["C"]]
    assert commits_in_range(repo, shas["A"]) == [shas["A"]]
    db = str(tmp_path / "h.sqlite")
    common = ["--db", db, "--repo", str(repo), "--machine", "cibox", "--dashboard", str(tmp_path / "dash")]

    # The history so far: A and B (one asv call each), through the CLI as the workflow calls it.
    assert main(["run", "--commits", shas["A"], shas["B"], *common]) == 0
    out = capsys.readouterr().out
    assert "[runner] 1/2" in out and "[runner] 2/2" in out, out  # per-commit progress
    assert "bench_toy.Toy.time_work" in out, "asv's own per-benchmark lines are streamed through"
    with Store(db) as store:
        assert {r.commit_sha for r in store.results()} == {shas["A"], shas["B"]}
        machine = next(m for m in store.machines() if m.name == "cibox")
        assert machine.torch, "the GPU-state sidecar (torch/triton versions, clocks) was recorded"
    assert (tmp_path / "dash" / "index.html").is_file()
    sidecar = json.loads((repo / ".asv" / "results" / "cibox" / f"gpu-env-{shas['A'][:8]}.json").read_text())
    assert set(sidecar) >= {"gpu", "driver", "torch", "sm_clock_mhz"}

    # --since-last: only C is new on main, where ToyBroken stops running: the job fails, once, naming
    # the commit and the range to bisect (a history job noted it and exited 0 until 2026-12-07).
    assert main(["run", "--since-last", "--branch", "main", *common]) == 1
    out = capsys.readouterr().out
    assert "main: 1 new commit(s)" in out
    assert (f"benchmark FAILED to run at {shas['C'][:8]}: bench_toy.ToyBroken.time_breaks_at_c (failed to run "
            f"(asv recorded an error); it ran at {shas['B'][:8]}) on cibox; bisect {shas['B'][:8]}..{shas['C'][:8]}"
            in out), out
    rows = _run_rows(db)
    assert len(rows) == 3

    # Nothing new, and a full re-run of the range is resumed to nothing: no duplicate, no re-measure.
    assert main(["run", "--since-last", "--branch", "main", *common]) == 0
    assert "nothing new to measure" in capsys.readouterr().out
    assert main(["run", "--range", f"{shas['A']}~0..{shas['C']}", *common]) == 0
    assert main(["run", "--commits", shas["A"], *common]) == 0
    assert _run_rows(db) == rows


def _processes_mentioning(text: str) -> list[int]:
    pids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit() and int(d.name) != os.getpid():
            try:
                if text in (d / "cmdline").read_bytes().decode(errors="replace"):
                    pids.append(int(d.name))
            except OSError:
                pass
    return pids


def test_sigterm_stops_asv_and_a_rerun_resumes_without_losing_or_duplicating(toy, tmp_path):
    """A cancelled CI job (SIGTERM) mid-run: exit 2, asv's process group stopped, and the same
    command again measures only what is missing."""
    repo, shas = toy
    db = str(tmp_path / "h.sqlite")
    cmd = [sys.executable, "-m", "ci", "run", "--commits", shas["A"], shas["B"], shas["C"], "--db", db,
           "--repo", str(repo), "--machine", "cibox", "--dashboard", ""]  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    seen_first = False
    for line in proc.stdout:
        seen_first = seen_first or line.startswith("[runner] 1/3")
        if seen_first and "Benchmarking" in line:  # asv is measuring the second commit
            break
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 2, out + err
    assert "interrupted; run the same command again to resume" in err
    assert _processes_mentioning(str(repo)) == [], "asv and its benchmark processes were stopped"
    first = _run_rows(db)
    assert [sha for sha, _ in first] == [shas["A"]], "A was measured and stored before the interrupt"

    cfg = _cfg(repo, tmp_path)
    out = run_history(cfg, [shas["A"], shas["B"], shas["C"]])
    assert out.exit_code == 1  # ToyBroken stops running at C: a crash alert, reported once
    with Store(db) as store:
        jobs = {r.commit_sha: dict(r.environment).get(JOB_KEY) for r in store.results()}
    # Every asv call has a marker of its own under its job's id. A kept the marker of the interrupted
    # job's call that wrote it; C was measured by a call of this job. B's call is this job's, or the
    # interrupted job's second when asv had saved B's file before it stopped (and the resume skipped
    # it): either way the call that wrote the file marked it, and no two calls share a marker.
    first_job = jobs[shas["A"]].rsplit("/", 1)[0]
    assert first_job.startswith("local-") and first_job != cfg.job, jobs
    assert jobs[shas["C"]].startswith(f"{cfg.job}/"), jobs
    assert jobs[shas["B"]].rsplit("/", 1)[0] in (cfg.job, first_job), jobs
    assert len(set(jobs.values())) == 3, jobs
    rows = _run_rows(db)
    assert sorted(sha for sha, _ in rows) == sorted(shas.values()), "each commit stored once"
    assert first[0] in rows, "A's stored run is the one measured before the interrupt (not re-measured)"
    # The correctness gate judged every commit of the job, and passed.
    assert {v.head_sha for v in out.verdicts} == set(shas.values())
    assert all(v.outcome == Outcome.UNCHANGED for v in out.verdicts)


def test_pr_ab_interleaved_flags_the_slowdown_and_writes_the_comment(toy, tmp_path, capsys):
    repo, shas = toy
    # `release` does not exist here (like `main` in a detached CI checkout): stored without a branch.
    cfg = _cfg(repo, tmp_path, comment_path=tmp_path / "comment.md", dashboard_dir=tmp_path / "dash",
               branch="release")  # fmt: skip
    out = run_pr(cfg, shas["B"], shas["C"])
    assert "branch 'release' is not in" in capsys.readouterr().out
    assert out.exit_code == 1
    assert len(out.asv_runs) == 1 and out.asv_runs[0].shas == (shas["B"], shas["C"]), "one interleaved asv call"
    by_key = {v.benchmark.key: v for v in out.verdicts}
    slow = by_key["bench_toy.Toy.time_work"]
    assert slow.outcome == Outcome.REGRESSED and slow.ratio > 2.0, slow
    assert by_key["bench_toy.ToyCheck.track_max_abs_diff"].outcome == Outcome.UNCHANGED  # gate passes
    body = (tmp_path / "comment.md").read_text()
    assert body.startswith("<!-- ragged-vit-bench -->")
    assert "bench_toy.Toy.time_work" in body and shas["C"][:12] in body
    with Store(cfg.db) as store:
        samples = [len(r.samples) for r in store.results(commit_sha=shas["C"], benchmark_key="bench_toy.Toy.time_work")]
    assert samples == [12], "2 interleaved rounds x 6 samples, all kept"
    with Store(cfg.db) as store:
        assert {c.branch for c in store.commits()} == {""}
    assert (tmp_path / "dash" / "index.html").is_file()
    # asv's failure at head is reported, and the benchmark the head broke fails the check (it ran on base).
    assert out.notes == (f"benchmark failed at {shas['C'][:8]}: bench_toy.ToyBroken.time_breaks_at_c "
                         "(see asv's output above)",)  # fmt: skip
    broken = by_key["bench_toy.ToyBroken.time_breaks_at_c"]
    assert broken.outcome == Outcome.FAILED and "failed to run on head" in broken.reason
    assert "failed to run on head" in body
    # The checkout's asv.conf.json names the project; its CPU floor (`.*CPU\\.`) sets no toy series, so this
    # CPU run has no CPU banner (tests/ci/test_project.py shows one where the CPU subset ran).
    assert body.startswith("<!-- ragged-vit-bench -->\n## toy benchmarks\n") and "CPU only" not in body
    # Both sides were measured in this job's one asv call: its marker is on both, and the comment says so.
    with Store(cfg.db) as store:
        (call,) = {dict(r.environment)[JOB_KEY] for r in store.results()}
    assert call.startswith(f"{cfg.job}/")
    assert f"**In-job rule.** Measured in one job (`{call}`)" in body
    row = next(ln for ln in body.splitlines() if ln.startswith("| `bench_toy.Toy.time_work`"))
    assert row.count(" n=12") == 2, row  # each side's sample count
    print_outcome(out)  # the job's summary says the rule too
    assert f"[runner] in-job rule: base and head were measured in one job, one asv call ({call})" in \
        capsys.readouterr().out


def test_each_asv_call_is_its_own_job_and_a_file_rewritten_since_has_none(toy, tmp_path, capsys):
    """Job identity is one asv call, bound to the files it wrote. In one process with one config (as
    `python -m ci demo` runs a history, then a PR): the history commit's call and the PR's
    interleaved call have different markers, so history against a PR side is not "one job", while
    the PR pair still is. A result file that a plain `asv run` (not the runner) rewrote after the
    runner marked it is ingested with no marker, and the comparison says it used the cross-job rule."""
    from dataclasses import replace

    from ci.runner.asv import result_digests, run_asv
    from ci.verdicts import JobRelation, compare_commits

    repo, shas = toy
    cfg = _cfg(repo, tmp_path, dashboard_dir=None)
    run_history(cfg, [shas["A"]])
    pr = run_pr(cfg, shas["B"], shas["C"])

    def calls() -> dict[str, str | None]:
        with Store(cfg.db) as store:
            return {r.commit_sha: dict(r.environment).get(JOB_KEY) for r in store.results()}

    marked = calls()
    assert all(m and m.startswith(f"{cfg.job}/") for m in marked.values()), marked
    assert marked[shas["A"]] != marked[shas["B"]] == marked[shas["C"]], "two asv calls, two markers"
    assert pr.comparison.jobs.relation == JobRelation.SAME, "base and head of one interleaved call: one job"
    with Store(cfg.db) as store:
        apart = compare_commits(store, shas["A"], shas["C"], cfg.machine)
    assert apart.jobs.relation == JobRelation.DIFFERENT and not apart.jobs.together

    before = result_digests(cfg, shas["C"])
    run_asv(replace(cfg, resume=False), [shas["C"]], interleave=False, echo=lambda line: None)
    assert result_digests(cfg, shas["C"]) != before, "asv rewrote C's result file"
    assert main(["ingest", "--db", cfg.db, str(cfg.results_dir)]) == 0
    after = calls()
    assert after[shas["C"]] is None, "C's file is not the one the runner's call wrote: job unknown"
    assert after[shas["B"]] == marked[shas["B"]]
    capsys.readouterr()
    main(["compare", "--db", cfg.db, "--base", shas["B"], "--head", shas["C"], "--no-save"])
    out = capsys.readouterr().out
    assert "cross-job rule: base and head were not measured in one job" in out and "in-job rule" not in out, out


def test_bad_inputs_are_clear_errors(toy, tmp_path, capsys):
    repo, shas = toy
    with pytest.raises(ValueError, match="asv.conf.json"):
        RunnerConfig(repo=tmp_path, db="x", machine="m")
    with pytest.raises(ValueError, match="machine"):
        _cfg(repo, tmp_path).__class__(repo=repo, db="x", machine="bad/name")
    with pytest.raises(ValueError, match="regex"):
        RunnerConfig(repo=repo, db="x", machine="m", bench="(")
    with pytest.raises(ValueError, match="go together"):
        RunnerConfig(repo=repo, db="x", machine="m", github_repo="o/r")
    with pytest.raises(ValueError, match="A..B"):
        commits_in_range(repo, "-rf")
    with pytest.raises(ValueError, match="max_commits"):
        new_branch_commits(repo, "main", set(), max_commits=0)
    with pytest.raises(ValueError, match="same commit"):
        run_pr(_cfg(repo, tmp_path), shas["C"], shas["C"])
    assert new_branch_commits(repo, "main", {shas["A"]}, max_commits=1) == [shas["C"]]
    assert suite_regex(repo, "cpu") == r"^bench_toy\."
    assert suite_regex(repo, "full") == ""  # the toy suite names none: the whole suite, no filter
    with pytest.raises(ValueError, match="quick"):
        suite_regex(repo, "gpu")
    db = str(tmp_path / "h.sqlite")
    assert main(["run", "--db", db, "--repo", str(repo)]) == 2, "a mode is required"
    assert "one of the arguments" in capsys.readouterr().err
    assert main(["run", "--pr", "--base", shas["B"], "--db", db, "--repo", str(repo)]) == 2
    assert "--pr needs --base and --head" in capsys.readouterr().err
    assert main(["run", "--range", "nosuch..HEAD", "--db", db, "--repo", str(repo)]) == 2
    assert "nosuch" in capsys.readouterr().err
    assert main(["run", "--since-last", "--comment-out", "c.md", "--db", db, "--repo", str(repo)]) == 2
    assert "go with --pr" in capsys.readouterr().err
    # A range typed the wrong way round selects nothing: an error, not a green run of nothing.
    assert main(["run", "--range", "HEAD..HEAD~2", "--db", db, "--repo", str(repo)]) == 2
    assert "no commit is in it" in capsys.readouterr().err
    # A tag named like the branch: git picks one and warns; the runner refuses the name instead.
    subprocess.run(["git", "-C", str(repo), "tag", "main", shas["A"]], check=True)
    with pytest.raises(ValueError, match="names more than one ref"):
        resolve_commit(repo, "main")
    assert main(["run", "--since-last", "--branch", "main", "--db", db, "--repo", str(repo)]) == 2
    assert "refs/heads/main, refs/tags/main" in capsys.readouterr().err
    # git's warning silenced by a user's configuration: the refs are counted, not read off the warning
    subprocess.run(["git", "-C", str(repo), "config", "core.warnAmbiguousRefs", "false"], check=True)
    with pytest.raises(ValueError, match="names more than one ref"):
        resolve_commit(repo, "main")
    assert resolve_commit(repo, "refs/heads/main") == shas["C"]
    subprocess.run(["git", "-C", str(repo), "tag", "-d", "main"], check=True, capture_output=True)
    older: list[str] = []
    assert new_branch_commits(repo, "main", set(), max_commits=1, older=older) == [shas["C"]]
    assert older == [shas["A"], shas["B"]], "the cap's left-out commits, oldest first"
    # The range the job names for them works where the oldest is the root commit (a machine's first run).
    from ci.runner.git import git_has_parent

    assert not git_has_parent(repo, shas["A"]) and git_has_parent(repo, shas["B"])
    assert commits_in_range(repo, f"..{older[-1]}") == older
    assert not os.path.exists(repo / ".asv" / "results"), "nothing ran for bad arguments"


def test_a_comment_that_cannot_be_posted_does_not_lose_the_job(toy, tmp_path, monkeypatch):
    """A fork PR's read-only token (403) after the GPU work: verdicts, dashboard and summary stand,
    the comment file is written, and the exit code keeps the regression (1)."""
    import ci.outputs.github

    def refuse(*_a, **_k):
        raise ci.outputs.github.GitHubError("GitHub API POST /x failed with HTTP 403: forbidden", 403)

    repo, shas = toy
    monkeypatch.setenv("GITHUB_TOKEN", "t")
    monkeypatch.setattr(ci.outputs.github, "post_sticky_comment", refuse)
    cfg = _cfg(repo, tmp_path, comment_path=tmp_path / "comment.md", dashboard_dir=tmp_path / "dash",
               github_repo="o/r", pr_number=1)  # fmt: skip
    out = run_pr(cfg, shas["B"], shas["C"])
    assert out.exit_code == 1 and (tmp_path / "comment.md").is_file() and (tmp_path / "dash" / "index.html").is_file()
    assert out.notes[0].startswith("error: the PR comment was written to") and "HTTP 403" in out.notes[0]


def test_quick_without_a_gpu_says_to_use_cpu(toy, tmp_path, capsys, monkeypatch):
    import ci.runner.command

    repo, shas = toy
    monkeypatch.setattr(ci.runner.command, "has_gpu", lambda: False)
    argv = ["run", "--pr", "--base", shas["B"], "--head", shas["C"], "--quick", "--db", str(tmp_path / "h.sqlite"),
            "--repo", str(repo)]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "no GPU" in err and "pass --cpu" in err
    assert not os.path.exists(repo / ".asv" / "results"), "nothing ran"


def test_continuous_says_when_the_suite_is_not_heads(toy):
    """asv reads the benchmarks from the working tree for both sides: `continuous main feat` from main's
    checkout measured none of feat's benchmark changes without a word."""
    from ci.runner.continuous import suite_note

    repo, shas = toy
    assert suite_note(repo, shas["C"], "HEAD") == ""  # the checkout is at the head
    note = suite_note(repo, shas["B"], "feat")
    assert note.startswith("note: the benchmarks come from the checkout's working tree") and "feat" in note


def test_an_ab_call_cut_short_puts_the_result_files_back_as_they_were(toy, tmp_path, monkeypatch):
    """asv saves each interleaved round as it ends: a `continuous` stopped after round 1 left head's file
    half measured over a history job's complete run, and the next history ingest stored it ("replaced",
    exit 0). An interrupted A/B call restores both commits' files (and removes those it created); the
    history's runs stay as they were."""
    import ci.runner.measure as measure_mod
    from ci.runner.asv import result_files

    repo, shas = toy
    cfg = _cfg(repo, tmp_path, dashboard_dir=None)
    run_history(cfg, [shas["B"]])  # a complete run of B; C has no file yet
    (b_file,) = result_files(cfg, shas["B"])
    before, history = b_file.read_bytes(), _run_rows(cfg.db)

    def cut_short(cfg, commits, *, interleave, echo, quiet_s=8.0):
        b_file.write_bytes(before.replace(b'"result"', b'"result" ', 1))  # round 1 of base, then head's file
        (b_file.parent / f"{shas['C'][:8]}-{b_file.name.split('-', 1)[1]}").write_bytes(before)
        raise KeyboardInterrupt

    monkeypatch.setattr(measure_mod, "run_asv", cut_short)
    with pytest.raises(KeyboardInterrupt):
        run_pr(cfg, shas["B"], shas["C"])
    assert b_file.read_bytes() == before, "base's file is the history run's again"
    assert result_files(cfg, shas["C"]) == [], "the file the cut-short call created is gone"
    assert _run_rows(cfg.db) == history

    def killed(cfg, commits, *, interleave, echo, quiet_s=8.0):  # asv itself killed (the OOM killer)
        b_file.write_bytes(before.replace(b'"result"', b'"result" ', 1))
        return -9

    monkeypatch.setattr(measure_mod, "run_asv", killed)
    with pytest.raises(RunnerError, match="killed by signal 9"):
        run_pr(cfg, shas["B"], shas["C"])
    assert b_file.read_bytes() == before and _run_rows(cfg.db) == history


def test_a_store_that_cannot_be_written_stops_the_job_before_asv_measures(toy, tmp_path, monkeypatch):
    """A read-only store was found only when the job stored what it had measured: minutes (a history
    range: hours) of GPU time, then "attempt to write a readonly database" and nothing kept. The job
    probes the store with a write of no rows before its first asv call."""
    import ci.runner.measure as measure_mod
    from ci.store import StoreError

    repo, shas = toy
    cfg = _cfg(repo, tmp_path, dashboard_dir=None)
    run_history(cfg, [shas["B"]])
    calls = []
    monkeypatch.setattr(measure_mod, "run_asv", lambda *a, **k: calls.append(a) or 0)
    ro = replace(cfg, db=f"sqlite:///file:{cfg.db}?mode=ro&uri=true")
    for job in (lambda: run_history(ro, [shas["C"]]), lambda: run_pr(ro, shas["B"], shas["C"])):
        with pytest.raises(StoreError, match="cannot be written .*readonly database.*nothing was measured or written"):
            job()
    assert calls == [], "asv never ran"
    with Store(cfg.db) as store:
        store.require_writable()  # the same file, writable: the probe writes nothing and passes
    with Store(cfg.db, read_only=True) as store, pytest.raises(StoreError, match="opened read-only"):
        store.require_writable()


def test_a_pr_job_measures_both_sides_afresh_and_a_finished_one_is_reused(toy, tmp_path):
    """asv's files for base and head may hold results of another job (here: a history run, as an
    earlier `asv continuous` or one round of an interrupted PR job would): the PR job measures both
    sides again, in its own interleaved rounds. Run again once finished, it reuses its measurement;
    once asv's files change, it measures again."""
    repo, shas = toy
    cfg = _cfg(repo, tmp_path, dashboard_dir=None)
    run_history(cfg, [shas["B"], shas["C"]])  # 6 samples per point, one round each

    def samples(sha):
        with Store(cfg.db) as store:
            return [len(r.samples) for r in store.results(commit_sha=sha, benchmark_key="bench_toy.Toy.time_work")]

    history = _run_rows(cfg.db)
    assert samples(shas["C"]) == [12]  # the toy suite's 2 rounds x 6
    out = run_pr(cfg, shas["B"], shas["C"])
    measured = _run_rows(cfg.db)
    assert not set(measured) & set(history), "both sides measured again (asv rewrote both files)"
    assert samples(shas["B"]) == samples(shas["C"]) == [12], "2 fresh interleaved rounds x 6, nothing appended"
    again = run_pr(cfg, shas["B"], shas["C"])
    assert again.asv_runs[0].seconds == 0 and _run_rows(cfg.db) == measured, "a finished job is reused"
    assert again.exit_code == out.exit_code
    # ...and judges what the call it reuses measured, as that call's job did (not every result the files keep)
    assert again.asv_runs[0].measured == out.asv_runs[0].measured and out.asv_runs[0].measured
    assert {v.benchmark.key for v in again.verdicts} == {v.benchmark.key for v in out.verdicts}
    (result_file,) = [p for p in (repo / ".asv" / "results" / "cibox").glob(f"{shas['C'][:8]}-*.json")]
    result_file.write_text(result_file.read_text() + "\n")  # asv rewrote it since (another job)
    run_pr(cfg, shas["B"], shas["C"])
    assert not set(_run_rows(cfg.db)) & set(measured), "measured again"
    assert samples(shas["C"]) == [12]


@pytest.mark.parametrize("value", ["-3", "0", "three"])
def test_max_commits_must_be_positive_at_parse_time(tmp_path, capsys, value):
    """A usage error before anything runs: `--max-commits -3` used to be accepted (and ignored by --range)."""
    db = str(tmp_path / "h.sqlite")
    assert main(["run", "--range", "A..B", "--max-commits", value, "--db", db, "--repo", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "usage:" in err and "argument --max-commits:" in err and "positive integer" in err
    assert main(["run", "--pr", "--pr-number", "-7", "--db", db, "--repo", str(tmp_path)]) == 2
    assert "argument --pr-number:" in capsys.readouterr().err
    assert not os.path.exists(db), "nothing opened for bad arguments"


def test_every_run_option_has_a_help_text():
    import argparse

    from ci.runner.command import add_arguments

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert [a.option_strings for a in parser._actions if not a.help] == []
    assert "GitHub REST API" in parser.format_help()


def test_full_regex_leaves_out_only_the_uncapturable_end_to_end_cases():
    """As asv selects parameterised benchmarks: `name(param, ...)` with each param's repr."""
    import itertools

    from benchmarks import FULL_REGEX, QUICK_REGEX, bench_end_to_end

    assert suite_regex(Path(__file__).resolve().parents[2], "full") == FULL_REGEX
    pattern = re.compile(FULL_REGEX)
    from benchmarks.presets import MODEL_PRESETS

    for cls in (bench_end_to_end.EndToEnd, bench_end_to_end.EndToEndPR):
        methods = [m for m in dir(cls) if m.startswith(("time_", "track_"))]
        for method in methods:
            for combo in itertools.product(*cls.params):
                name = f"bench_end_to_end.{cls.__name__}.{method}({', '.join(repr(p) for p in combo)})"
                preset, _, backend, mode = combo
                never_runs = (
                    (backend in bench_end_to_end.NOT_CAPTURABLE and mode != "eager")
                    or (mode == "compile" and backend not in bench_end_to_end.COMPILED_BACKENDS)
                    or (mode == "fused" and backend not in bench_end_to_end.FUSED_BACKENDS)
                    or (method == "track_compile_seconds" and mode != "compile")
                    or (method.startswith("track_latency") and MODEL_PRESETS[preset].batch > 4)
                )
                assert bool(pattern.search(name)) is not never_runs, name
    for name in ["bench_attention.AttentionKernels.time_gpu('deitb224-b32-keep0.5', 'padded_sdpa')",
                 "bench_correctness.ModelCorrectness.track_max_abs_logit_diff('deit_small_patch16_224', 'ats', "
                 "'nested_sdpa')", "bench_pack.PackTokens.time_gpu('b64-keep0.5', 'pack')",
                 "bench_attention.AttentionCPU.time_host"]:
        assert pattern.search(name), name
    assert re.search(QUICK_REGEX, "bench_end_to_end.EndToEndPR.time_forward")  # the PR subset is unchanged


def test_setup_lines_are_echoed_as_they_come_and_silence_gets_a_heartbeat(toy, tmp_path, monkeypatch):
    """asv hides a successful setup_cache's output: each one appends its progress and `[setup]` lines
    to the file RAGGED_SETUP_LOG names (benchmarks.model_runs.report_case / report_setup), which run_asv
    echoes while asv runs, then removes; a silent stretch gets a `[runner] asv is still working` line."""
    import time

    from ci.runner import asv as runner

    repo, shas = toy
    script = ("import os, sys, time; log = os.environ['RAGGED_SETUP_LOG']; print(log, flush=True); "
              "open(log, 'a').write('[setup] Fake 1/2: a 0.1 s\\n'); time.sleep(3.5); "
              "open(log, 'a').write('[setup] Fake: 2 cases\\n'); print('asv done', flush=True)")
    monkeypatch.setattr(runner, "_asv_cmd", lambda cfg, *args: [sys.executable, "-c", script])
    seen: list[tuple[float, str]] = []
    t0 = time.monotonic()
    rc = runner.run_asv(_cfg(repo, tmp_path), [shas["A"]], interleave=False, quiet_s=1.5,
                        echo=lambda line: seen.append((time.monotonic() - t0, line)))  # fmt: skip
    assert rc == 0
    lines = [line for _, line in seen]
    assert lines.index("[setup] Fake 1/2: a 0.1 s") < lines.index("asv done"), "echoed while asv ran"
    beats = [t for t, line in seen if line.startswith("[runner] asv is still working")]
    assert beats and all(b < seen[lines.index("asv done")][0] for b in beats), lines
    gaps = [b - a for (a, _), (b, _) in zip(seen, seen[1:], strict=False)]
    assert max(gaps) < 3.0, f"no silence as long as the fake asv's 3.5 s: {seen}"
    assert "[setup] Fake: 2 cases" in lines
    assert not Path(lines[0]).exists()  # the file asv's processes wrote to is gone
    # A runner killed with SIGKILL leaves its files: the next call removes those of runners that are gone.
    scratch = Path(lines[0]).parent
    assert scratch == repo / ".asv" / "runner-tmp"
    (scratch / "999999999-setup-x.log").write_text("left by a killed runner")
    (scratch / f"{os.getppid()}-setup-y.log").write_text("a live runner's")
    runner.run_asv(_cfg(repo, tmp_path), [shas["A"]], interleave=False, quiet_s=30, echo=lambda line: None)
    assert sorted(p.name for p in scratch.iterdir()) == [f"{os.getppid()}-setup-y.log"]


def test_asv_and_the_benchmarks_it_runs_get_no_credential_of_the_runner(toy, tmp_path, monkeypatch):
    """asv runs the measured commit's suite, a pull request's code included, in processes that inherit
    its environment: a PR's benchmark read GITHUB_TOKEN and a DATABASE_URL's password at import. Those
    variables are withheld (by name or by what the value shows) and named, never their values; the
    runner's own `env` entries and ordinary variables pass."""
    from ci.runner import asv as runner

    repo, shas = toy
    token, password = "ghp_" + "F4ke" * 9, "s3cretPASSW0RD"
    monkeypatch.setenv("GITHUB_TOKEN", token)
    monkeypatch.setenv("DATABASE_URL", f"postgresql://user:{password}@db.example.com/x")
    monkeypatch.setenv("PGPASSWORD", password)
    monkeypatch.setenv("SLACK_WEBHOOK_URL", "https://hooks.slack.com/services/T0000/B0000/XXXXsecretXXXX")
    monkeypatch.setenv("HARMLESS_SETTING", "1")
    script = "import json, os; print(json.dumps(dict(os.environ)), flush=True)"
    monkeypatch.setattr(runner, "_asv_cmd", lambda cfg, *args: [sys.executable, "-c", script])
    protected: list[bool] = []  # this test's process stays readable (the next test shows what the flag does)
    monkeypatch.setattr(runner, "protect_this_process", lambda: protected.append(True) or True)
    seen: list[str] = []
    cfg = _cfg(repo, tmp_path, env=(("RUNNER_CHOSEN", "kept"),))
    assert runner.run_asv(cfg, [shas["A"]], interleave=False, echo=seen.append) == 0
    env = json.loads(next(line for line in seen if line.startswith("{")))
    assert not {"GITHUB_TOKEN", "DATABASE_URL", "PGPASSWORD", "SLACK_WEBHOOK_URL"} & env.keys()
    assert env["HARMLESS_SETTING"] == "1" and env["RUNNER_CHOSEN"] == "kept"
    said = [line for line in seen if line.startswith("[runner] not passed to asv")]
    assert said and all(name in said[0] for name in ("DATABASE_URL", "GITHUB_TOKEN", "PGPASSWORD")), seen
    assert not any(token in line or password in line for line in seen if not line.startswith("{"))
    assert protected, "the runner made its own memory unreadable before asv ran"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl and /proc are Linux's")
def test_a_protected_runner_process_hides_its_environment_from_the_code_it_runs():
    """A PR's benchmark read the runner's GITHUB_TOKEN from /proc/<runner pid>/environ (same user),
    though asv's own environment held none: once `protect_this_process` ran, a child cannot read it;
    without it, it can. As root (CI's containers), both run without capabilities (`setpriv`), as a
    runner's unprivileged user would: root with them reads every process whatever the flag."""
    probe = ("import os\n"
             "try:\n    open(f'/proc/{os.getppid()}/environ', 'rb').read(); print('read')\n"
             "except OSError as exc:\n    print('refused', type(exc).__name__)\n")
    parent = ("import subprocess, sys\nfrom ci.runner.asv import protect_this_process\n"
              "flag = sys.argv[1] == 'protect' and protect_this_process()\n"
              f"out = subprocess.run([sys.executable, '-c', {probe!r}], capture_output=True, text=True).stdout\n"
              "print(flag, out.strip())\n")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    prefix = []
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        assert setpriv, "setpriv (util-linux) runs the check without root's capabilities"
        prefix = [setpriv, "--inh-caps=-all", "--bounding-set=-all"]
    for mode, want in (("protect", "True refused PermissionError"), ("plain", "False read")):
        got = subprocess.run([*prefix, sys.executable, "-c", parent, mode], capture_output=True, text=True, env=env,
                             check=True)
        assert got.stdout.strip() == want, (mode, got.stdout, got.stderr)


@pytest.mark.parametrize("command", ["continuous", "run"])
def test_the_runner_protects_itself_before_any_of_the_checkouts_code_runs(toy, tmp_path, monkeypatch, command):
    """`ensure_machine` runs `python -m asv` from the checkout's folder and `gpu_state` its
    `benchmarks.gpu_env`: a PR's code, which read the runner's environ before the flag was set in
    `run_asv` (a review, 2026-12-07). `ci run` and `ci continuous` set it first."""
    import ci.runner.asv as runner_asv
    import ci.runner.jobs as runner_jobs

    repo, shas = toy
    order: list[str] = []

    def stop(cfg):
        order.append("checkout code")
        raise RuntimeError("stop here")

    monkeypatch.setattr(runner_asv, "protect_this_process", lambda: order.append("protect") or True)
    monkeypatch.setattr(runner_asv, "ensure_machine", stop)
    monkeypatch.setattr(runner_jobs, "ensure_machine", stop)
    args = (["continuous", shas["B"], shas["C"], "--repo", str(repo)] if command == "continuous" else
            ["run", "--pr", "--base", shas["B"], "--head", shas["C"], "--repo", str(repo)])
    assert main([*args, "--db", str(tmp_path / "h.sqlite")]) == 2  # stopped there
    assert order[:2] == ["protect", "checkout code"], order


def test_a_host_lock_file_is_shared_read_only_and_makes_jobs_take_turns(toy, tmp_path):
    """The workflow's GPU lock belongs to the trusted runner's user: a job that can only read it
    still takes its turn on it (flock on a read-only descriptor)."""
    import fcntl

    from ci.runner.measure import job_lock

    repo, _ = toy
    lock = tmp_path / "gpu.lock"
    lock.write_text("")
    lock.chmod(0o444)
    cfg = _cfg(repo, tmp_path, lock=lock)
    with job_lock(cfg):
        fd = os.open(lock, os.O_RDONLY)
        try:
            with pytest.raises(BlockingIOError):
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # another job waits its turn
        finally:
            os.close(fd)
    assert not (repo / ".asv" / "runner.lock").exists(), "the host's lock, not the checkout's"


@pytest.mark.parametrize(
    "regex",
    [r"CPU\.", r"^bench_toy\.Toy\.time_(work|it's)$", "a b", "$HOME`id`*", "-starts-with-a-dash", "!x;y&z"],
    ids=["backslash", "quote-and-group", "space", "shell-expansions", "dash", "shell-operators"],
)
def test_bench_option_pastes_back_into_a_shell(regex):
    """`-b` as printed for the user: `shlex.split` of it is exactly the regex asv was given."""
    from ci.runner.config import bench_option

    assert shlex.split(bench_option(regex)) == ["-b", regex]
    assert bench_option(None) == bench_option("") == "no -b (the whole suite)"


def test_git_reads_a_branch_name_that_is_not_utf8(tmp_path):
    """A branch name is bytes: read as strict UTF-8, `git rev-parse --abbrev-ref HEAD` on one in
    Latin-1 raised UnicodeDecodeError (the demo reads it so) instead of answering."""
    from ci.runner.git import git

    repo = tmp_path / "r"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", os.fsdecode(b"caf\xe9"))
    _git(repo, "commit", "-q", "--allow-empty", "-m", "one")
    assert git(repo, "rev-parse", "--abbrev-ref", "HEAD").strip() == "caf\ufffd"


def _step_samples(name: str, j: int, c: int) -> list[float] | None:
    """The conftest suite's samples with a regression from commit 6 on (one series 1.5x slower) and a
    failed correctness gate at commit 9; a little noise from commit to commit, as a real history has."""
    if "max_abs_diff" in name:
        return [0.01 if c == 9 else 0.001] * 4
    base = (1e-4 * (j + 1) if "time_" in name else 100.0 + j) * (1 + 0.003 * ((c * 7) % 5))
    if "time_gpu" in name and j == 0 and c >= 6:
        base *= 1.5
    return [base * (1 + 0.001 * k) for k in range(8)]


@pytest.mark.parametrize("stop", ["after-ingest", "while-publishing"])
def test_a_history_job_stopped_after_ingesting_loses_no_alert(toy, tmp_path, monkeypatch, capsys, stop):
    """A history job cancelled or timed out after it ingested (exit 2) used to lose its regression
    and its failed gates for good: the next `--since-last` job reported only steps its own commits
    made visible, and had none. Every alert is now kept in the store and reported by the next job,
    which exits 1; the job after it exits 0, and `ci ack` closes an alert."""
    import ci.runner.jobs
    from tests.ci.conftest import write_results

    repo, shas = toy
    for k in range(3, 12):  # 12 commits on main, each measured (asv's files of an earlier runner job)
        _git(repo, "commit", "-q", "--allow-empty", "-m", f"commit {k}", when=k)
    line = _git(repo, "rev-list", "--first-parent", "--reverse", "main").split()
    write_results(repo / ".asv" / "results", line, machine="cibox", samples=_step_samples)
    db = str(tmp_path / "h.sqlite")
    since_last = ["run", "--since-last", "--branch", "main", "--db", db, "--repo", str(repo), "--machine", "cibox",
                  "--dashboard", ""]  # fmt: skip

    def cancelled(*_args, **_kwargs):
        raise KeyboardInterrupt("signal 15")  # what SIGTERM becomes (`ci.cli.main`)

    if stop == "after-ingest":
        real = ci.runner.jobs.ingest_results

        def ingest_then_cancel(cfg, store):
            real(cfg, store)
            cancelled()

        monkeypatch.setattr(ci.runner.jobs, "ingest_results", ingest_then_cancel)
    else:
        monkeypatch.setattr(ci.runner.jobs, "render_dashboard", cancelled)
    assert main(since_last) == 2
    assert "interrupted" in capsys.readouterr().err
    with Store(db) as store:
        assert len(store.commits()) == 12, "the job ingested before it was stopped"
    monkeypatch.undo()

    assert main(since_last) == 1, "the next job reports what the stopped one found"
    out = capsys.readouterr().out
    assert "nothing new to measure" in out
    slow = "bench_attention.GPUTime.time_gpu(dtype=fp16, batch=1)"
    assert f"regression at {line[6][:8]}: {slow} x1.5" in out, out
    assert f"correctness FAILED at {line[9][:8]}: bench_correctness.Logits.track_max_abs_diff" in out, out
    with Store(db) as store:
        alerts = {(a.kind.value, a.commit_sha): a.state.value for a in store.alerts()}
    assert alerts == {("regression", line[6]): "reported", ("gate", line[9]): "reported"}, alerts

    assert main(since_last) == 0, "reported once"
    out = capsys.readouterr().out
    assert "regression at" not in out and "correctness FAILED" not in out
    assert main(["ack", "--db", db, "--benchmark", slow, "--commit", line[6], "--who", "me", "--why", "expected"]) == 0
    assert "closed 1 alert(s): regression on cibox" in capsys.readouterr().out
    with Store(db) as store:
        assert {a.commit_sha: a.state.value for a in store.alerts()}[line[6]] == "acknowledged"


def test_no_exact_leaves_the_exact_tier_out_of_any_selection_and_keeps_the_rest(tmp_path, monkeypatch):
    """`ci run --quick --no-exact` (a pull request's GPU job: exact.yml measures the exact tier on a CPU
    runner) selects what the subset selects less the exact tier, read as asv reads `-b` (`re.search` on the
    name and on the name with its parameters), for each of the suite's selections and a user's `-b`."""
    import argparse

    import ci.runner.command as command
    from benchmarks import CPU_REGEX, EXACT_REGEX, FULL_REGEX, QUICK_REGEX
    from ci.runner.command import without

    root = Path(__file__).resolve().parents[2]
    names = ["bench_structure.Launches.track_launches('DeiT-S', 'ATS', 'graph', 'B1')",
             "bench_structure.KernelResources.track_spilled_bytes", "bench_attention.AttentionKernelsPR.time_gpu",
             "bench_attention.AttentionKernels.time_gpu", "bench_pack.PackTokens.time_gpu",
             "bench_correctness.KernelError.track_max_abs_error", "bench_correctness.ModelCorrectnessPR.track_top1",
             "bench_end_to_end.EndToEndPR.track_images_per_second('deits224-b32', 'ats', 'triton', 'graph')",
             "bench_end_to_end.EndToEnd.track_compile_seconds('deits224-b32', 'ats', 'triton', 'eager')",
             "bench_attention.AttentionCPU.time_cpu", "bench_toy.Structure.time_x", "bench_structure_extra.X.time_y"]
    for bench in (QUICK_REGEX, CPU_REGEX, FULL_REGEX, None, r"time_gpu", r"CPU\.|Launches"):
        want = {n for n in names if (bench is None or re.search(bench, n)) and not re.search(EXACT_REGEX, n)}
        got = {n for n in names if re.search(without(bench, EXACT_REGEX), n)}
        assert got == want, bench
    assert not any(re.search(without(None, "Structure"), n) for n in names if "Structure" in n)  # found anywhere
    odd = "bench_pack.PackTokens.time_gpu('a\nb')"  # a parameter's repr with a newline in it
    assert re.search(r"b'\)", odd) and re.search(without(r"b'\)", EXACT_REGEX), odd)
    with pytest.raises(ValueError, match=r"cannot be combined with --no-exact.*\(\?i:"):
        without("(?i)time_gpu", EXACT_REGEX)
    # Through the command line's parsing, on the repository's own suite.
    monkeypatch.setattr(command, "has_gpu", lambda: True)
    p = argparse.ArgumentParser()
    p.add_argument("--db", default=str(tmp_path / "h.sqlite"))
    command.add_arguments(p)
    pr = ["--pr", "--base", "a", "--head", "b"]
    bench, _, _ = command.job_selection(p.parse_args([*pr, "--quick", "--no-exact"]), root)
    assert bench == without(QUICK_REGEX, EXACT_REGEX) and not re.search(bench, names[0]) and re.search(bench, names[2])
    assert command.job_selection(p.parse_args([*pr, "--quick"]), root)[0] == QUICK_REGEX
    with pytest.raises(ValueError, match="selects nothing"):
        command.job_selection(p.parse_args([*pr, "--exact", "--no-exact"]), root)


def test_the_suite_readme_states_the_quick_subset_the_runner_uses():
    """benchmarks/README.md's `QUICK='...'` is what `--quick` selects (it had lost the exact tier)."""
    from benchmarks import QUICK_REGEX

    root = Path(__file__).resolve().parents[2]
    stated = re.search(r"QUICK='([^']*)'", (root / "benchmarks" / "README.md").read_text(encoding="utf-8"))
    assert stated is not None and stated.group(1) == QUICK_REGEX == suite_regex(root, "quick")


@pytest.mark.parametrize(("extra", "says"), [
    (["--dashboard-url", "javascript:alert(1)"], "--dashboard-url must be an http(s) URL"),
    (["--github-repo", "o/r", "--pr-number", "1", "--api-url", "http://user:pw1234@ghe.example.com/api"],
     "api_url must be https"),
])
def test_a_pr_jobs_urls_are_refused_before_anything_is_measured(toy, tmp_path, monkeypatch, capsys, extra, says):
    """A bad --dashboard-url or --api-url was refused only after the benchmarks had run; now before asv
    starts (asv is never called), and a password in the URL is not printed."""
    from ci.runner import measure as measure_module

    repo, shas = toy
    monkeypatch.setattr(measure_module, "run_asv", lambda *a, **k: pytest.fail("asv ran"))
    code = main(["run", "--repo", str(repo), "--db", str(tmp_path / "h.sqlite"), "--pr", "--base", shas["B"],
                 "--head", shas["C"], "--dashboard", "", "-b", "Toy", *extra])
    err = capsys.readouterr().err
    assert code == 2 and says in err and "pw1234" not in err, err
