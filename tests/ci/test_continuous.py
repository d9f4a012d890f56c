"""`python -m ci continuous` on the toy repository of test_runner through the real asv CLI: the local
`asv continuous` decided by the bot's rule (the same verdicts, table and exit code as the PR
comment), base == head refused or, when asked, an A/A check."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

from ci.cli import main
from ci.outputs.table import render_table
from ci.records import Benchmark, Outcome, Result, Verdict
from ci.store import Store
from tests.ci.test_runner import template, toy  # noqa: F401  (fixtures)


def _rows(out: str) -> dict[str, str]:
    """benchmark key -> mark, from the printed table."""
    lines = out.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.split()[:3] == ["base", "head", "ratio"])
    rows = {}
    for ln in lines[start + 1:]:
        if not ln.strip():
            break
        rows[ln.split()[-1]] = ln[0]
    return rows


def test_continuous_gives_the_bots_verdicts_and_exit_code(toy, tmp_path, capsys):  # noqa: F811
    repo, shas = toy
    db = str(tmp_path / "h.sqlite")
    code = main(["continuous", "--repo", str(repo), "--db", db, "--machine", "cibox", shas["B"], shas["C"]])
    out = capsys.readouterr().out
    assert code == 1, out
    rows = _rows(out)
    assert rows == {"bench_toy.ToyBroken.time_breaks_at_c": "!", "bench_toy.Toy.time_work": "+"}, out
    assert out.rstrip().splitlines()[-1].startswith("❌ Performance check failed: 1 benchmark(s) failed to run on "
                                                    "head, 1 regression(s)")
    assert " n=12 " in out, "each side's sample count (2 interleaved rounds x 6)"
    assert "in-job rule: base and head were measured in one job, one asv call" in out, "the rule, in words"
    # The bot's comment on the same store: the same verdicts, the same exit code.
    comment = tmp_path / "c.md"
    assert main(["comment", "--db", db, "--base", shas["B"], "--head", shas["C"], "--out", str(comment)]) == code
    body = comment.read_text()
    assert "### 🔴 Regressions (1)" in body and "`bench_toy.Toy.time_work`" in body.split("### 🔴 Regressions")[1]
    assert "Measured in one job" in body, "one interleaved asv call, recorded as one job"
    with Store(db) as store:
        assert {r.commit_sha for r in store.results()} == {shas["B"], shas["C"]}


def test_base_equal_to_head_is_refused_naming_both(toy, tmp_path, capsys):  # noqa: F811
    repo, shas = toy
    db = str(tmp_path / "h.sqlite")
    assert main(["continuous", "--repo", str(repo), "--db", db, "main", "HEAD"]) == 2
    err = capsys.readouterr().err
    assert f"base main ({shas['C'][:12]}) and head HEAD ({shas['C'][:12]}) are the same commit" in err
    assert "--aa" in err
    assert not os.path.exists(repo / ".asv" / "results") and not os.path.exists(db), "nothing ran"


def test_a_repo_that_is_no_checkout_is_named_as_such(tmp_path, capsys):
    """`--repo` naming a missing folder or one outside git said "unknown commit 'HEAD~1'" (2026-12-07)."""
    for repo, why in ((tmp_path / "missing", "no such folder"), (tmp_path, "not a git checkout")):
        assert main(["continuous", "--repo", str(repo), "--db", str(tmp_path / "h.sqlite"), "HEAD~1", "HEAD"]) == 2
        assert f"error: --repo {repo}: {why}" in capsys.readouterr().err


def test_aa_check_measures_one_commit_once_and_says_so(toy, tmp_path, capsys):  # noqa: F811
    repo, shas = toy
    db = str(tmp_path / "h.sqlite")
    code = main(["continuous", "--repo", str(repo), "--db", db, "--machine", "cibox", "--aa", "--all",
                 shas["B"], shas["B"]])  # fmt: skip
    out = capsys.readouterr().out
    assert f"A/A check of {shas['B'][:12]}: one asv call" in out
    assert f"A/A check of {shas['B'][:12]} on cibox" in out
    assert "in-job rule: both halves come from one asv call of one commit" in out
    assert "bench_toy.Toy.time_work" in out and out.count(" n=6 ") >= 2, "each half of the 12 samples"
    if code:  # the rule called noise a change: said as such
        assert "a false alarm" in out
    with Store(db) as store:
        assert len(store.run_digests()) == 1, "one asv call of one commit"


def test_the_printed_b_regex_pastes_back_into_a_shell(toy, tmp_path, capsys):  # noqa: F811
    r"""The header printed `-b '^bench_toy\\.Toy'` (a Python repr): pasted after `asv run`, the
    doubled backslash selects nothing. Now its `shlex.split` is the regex the run used."""
    repo, shas = toy
    regex = r"^bench_toy\.Toy\.time_(work|it's)$"
    code = main(["continuous", "--repo", str(repo), "--db", str(tmp_path / "h.sqlite"), "--machine", "cibox", "--aa",
                 "--all", "-b", regex, shas["B"], shas["B"]])  # fmt: skip
    out = capsys.readouterr().out
    assert code in (0, 1), out
    (header,) = [ln for ln in out.splitlines() if ln.startswith(f"A/A check of {shas['B'][:12]} on cibox")]
    assert shlex.split(header.split(" -b ", 1)[1]) == [regex], header
    assert set(_rows(out)) == {"bench_toy.Toy.time_work"}, "the regex selected what it says"


def test_a_reader_that_leaves_keeps_the_verdicts_exit_code(toy, tmp_path):  # noqa: F811
    """`ci continuous ... | head -1` ended in exit 2 ("the output pipe was closed") although the
    measuring and the verdicts went on: the printing stops, the run and its exit code stand."""
    repo, shas = toy
    db = str(tmp_path / "h.sqlite")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.Popen([sys.executable, "-m", "ci", "continuous", "--repo", str(repo), "--db", db, "--machine",
                             "cibox", "--aa", shas["B"], shas["B"]], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=env, cwd=tmp_path)  # fmt: skip
    first = proc.stdout.readline()
    proc.stdout.close()  # as `head -1` does
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=300) in (0, 1), err
    assert first and "pipe was closed" not in err and "Traceback" not in err, err
    with Store(db) as store:
        assert len(store.run_digests()) == 1, "the run went on after the reader left"


def test_table_marks_and_hides_unchanged_rows():
    b = Benchmark("s.X.time_\x1b[31mred")
    verdicts = [Verdict(benchmark=b, outcome=Outcome.REGRESSED, base_value=1.0, head_value=1.2, ratio=1.2, ci_low=1.1,
                        ci_high=1.3, p_value=1e-4, threshold=0.05),
                Verdict(benchmark=Benchmark("s.X.time_same"), outcome=Outcome.UNCHANGED, base_value=1.0,
                        head_value=1.0, ratio=1.0, ci_low=0.99, ci_high=1.01, p_value=0.9, threshold=0.05),
                Verdict(benchmark=Benchmark("s.X.time_fast"), outcome=Outcome.INCONCLUSIVE, base_value=1.0,
                        head_value=0.6, ratio=0.6, ci_low=0.3, ci_high=0.9, p_value=0.2, threshold=0.05)]
    out = render_table(verdicts)
    assert "\x1b" not in out and "s.X.time_?[31mred" in out, "control characters cannot reach the terminal"
    assert "time_same" not in out and "1 series unchanged or new, not listed" in out
    assert out.rstrip().splitlines()[-1] == ("❌ Performance check failed: 1 regression(s), 1 unconfirmed "
                                             "speed-up(s), 1 unchanged.")
    assert "time_same" in render_table(verdicts, only_changed=False)


def test_table_lists_an_unknown_direction_as_not_judged():
    """A series whose benchmark declares no direction: its change is listed, marked not judged (x),
    and the headline asks for a look, as the comment does; never a speed-up or a slowdown."""
    from ci.records import UNKNOWN_DIRECTION, Direction, Kind
    from ci.verdicts import compare

    bench = Benchmark("bench_io.Copy.track_bandwidth", unit="GB/s", direction=Direction.UNKNOWN, kind=Kind.OTHER)
    base = Result(bench, "a" * 40, "h200", tuple(100 * (1 + 0.001 * i) for i in range(12)))
    head = Result(bench, "b" * 40, "h200", tuple(70 * (1 + 0.001 * i) for i in range(12)))
    (v,) = compare([base], [head])
    assert v.reason.startswith(UNKNOWN_DIRECTION)
    out = render_table([v])
    assert _rows(out) == {"bench_io.Copy.track_bandwidth": "x"}, out
    assert out.rstrip().splitlines()[-1] == ("🟡 No regression confirmed; look at the series below: 1 of unknown "
                                             "direction.")


EXACT_SUITE = '''
import toylib


class Shape:
    def track_launches(self):
        return toylib.LAUNCHES

    track_launches.unit = "launches"
    track_launches.direction = "lower"
    track_launches.exact = True
'''


def test_cpu_continuous_tells_the_exact_tier_first(toy, tmp_path, capsys):  # noqa: F811
    """`ci continuous --cpu`: an exact series (declared through benchmarks.declare, as bench_structure's)
    is measured beside the CPU timings and told first, before → after, with no threshold; the table and the
    bot's comment agree."""
    import shutil

    from tests.ci.test_runner import _git

    repo, shas = toy
    root = Path(__file__).resolve().parents[2]
    shutil.copy(root / "benchmarks" / "declare.py", repo / "benchmarks" / "declare.py")
    (repo / "benchmarks" / "__init__.py").write_text(
        "from .declare import register_with_asv\n\nregister_with_asv()\n"
        'CPU_REGEX = r"^bench_toy\\.Toy\\.|^bench_shape\\."\nQUICK_REGEX = r"Toy"\n')
    (repo / "benchmarks" / "bench_shape.py").write_text(EXACT_SUITE)
    lib = repo / "toylib" / "__init__.py"
    lib.write_text(lib.read_text() + "\nLAUNCHES = 139\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "D: the exact toy", when=3)
    base = _git(repo, "rev-parse", "HEAD")
    lib.write_text(lib.read_text().replace("LAUNCHES = 139", "LAUNCHES = 142"))
    _git(repo, "commit", "-q", "-am", "E: three more launches", when=4)
    head = _git(repo, "rev-parse", "HEAD")
    db = str(tmp_path / "h.sqlite")
    code = main(["continuous", "--repo", str(repo), "--db", db, "--machine", "cibox", "--cpu", "--all", base,
                 head])
    out = capsys.readouterr().out
    # The toy's timing on a loaded box decides the exit code either way; the exact change never does (no gate
    # reads launches without a dense sibling), and the headline counts it apart.
    assert code in (0, 1), out
    assert "1 structural change(s)" in out.rstrip().splitlines()[-1], out
    told = out.split("[runner] exit")[-1] if "[runner] exit" in out else out
    lines = [ln for ln in told.splitlines() if ln.strip()]
    first = next(i for i, ln in enumerate(lines) if ln.startswith("* "))
    assert lines[first] == "* bench_shape.Shape.track_launches: 139 -> 142 launches", lines
    assert lines[first + 1].startswith("1 of 1 exact series changed, 0 failed a gate")
    assert any("bench_toy.Toy.time_work" in ln for ln in lines[first + 2:]), "the CPU timing is beside it"
    comment = tmp_path / "c.md"
    assert main(["comment", "--db", db, "--base", base, "--head", head, "--out", str(comment)]) == code
    body = comment.read_text()
    assert "- `bench_shape.Shape.track_launches`: 139 -\\> 142 launches" in body.split("### Structure")[1], body


def test_only_what_the_call_measured_is_judged(toy, tmp_path, capsys):  # noqa: F811
    """asv keeps, in a commit's result file, the results of the benchmarks a call did not select, from
    earlier calls, and the rewritten file is that call's: `continuous -b X` after a full run judged the
    others' old results as measured in one call (a stale crash listed as failing, exit 1), and a
    selection that matched nothing still printed verdicts of old results. Now a call is judged on what
    it measured, and a call that measured nothing is an error that says why."""
    repo, shas = toy
    db = str(tmp_path / "h.sqlite")
    run = ["continuous", "--repo", str(repo), "--db", db, "--machine", "cibox"]
    assert main([*run, shas["B"], shas["C"]]) == 1  # the whole suite: a crash and a regression
    capsys.readouterr()
    assert main([*run, "-b", "Toy.time_work", shas["B"], shas["C"]]) == 1
    out = capsys.readouterr().out
    assert _rows(out) == {"bench_toy.Toy.time_work": "+"}, out  # the crash was not measured by this call
    assert ", 1 series: -b" in out
    assert main([*run, "-b", "no_such_benchmark", shas["B"], shas["C"]]) == 2
    captured = capsys.readouterr()
    assert "asv measured no benchmark in this call: its selection (-b no_such_benchmark) matched none" in (
        captured.out + captured.err), captured


def test_without_a_gpu_another_projects_suite_runs_whole(tmp_path, monkeypatch):
    """Without a GPU and without -b, the CPU subset is that of a suite that declares one (`CPU_REGEX`);
    a suite that declares none (another project's) runs whole: this project's `CPU\\.` selected none of
    an ordinary suite's benchmarks, and asv ran nothing."""
    import argparse

    from ci.runner import command, continuous

    monkeypatch.setattr(command, "has_gpu", lambda: False)
    p = argparse.ArgumentParser()
    p.add_argument("--db", default=str(tmp_path / "h.sqlite"))
    continuous.add_arguments(p)
    repo = tmp_path / "repo"
    (repo / "benchmarks").mkdir(parents=True)
    (repo / "benchmarks" / "__init__.py").write_text("")
    assert command.job_selection(p.parse_args(["main"]), repo, cpu_without_gpu=True)[0] is None
    (repo / "benchmarks" / "__init__.py").write_text('CPU_REGEX = r"^bench_toy\\."\n')
    assert command.job_selection(p.parse_args(["main"]), repo, cpu_without_gpu=True)[0] == r"^bench_toy\."
    assert command.job_selection(p.parse_args(["main", "-b", "x"]), repo, cpu_without_gpu=True)[0] == "x"
    assert command.job_selection(p.parse_args(["main", "--cpu"]), tmp_path, cpu_without_gpu=True)[0] == r"CPU\."


def test_sigterm_stops_continuous_as_ctrl_c_does(tmp_path, monkeypatch, capsys):
    """A cancelled job, `timeout` or `kill` sends SIGTERM: it was exit 143 with no word; now it stops
    the command as Ctrl-C does (exit 2, one line), and the handler before it is back afterwards."""
    import signal

    from ci.runner import continuous

    def killed(args):  # noqa: ANN001, ANN202 - stands in for the asv call in progress
        os.kill(os.getpid(), signal.SIGTERM)
        raise AssertionError("SIGTERM did not stop the command")

    before = signal.getsignal(signal.SIGTERM)
    monkeypatch.setattr(continuous, "cmd_continuous", killed)
    assert main(["continuous", "--repo", str(tmp_path), "--db", str(tmp_path / "h.sqlite"), "HEAD~1"]) == 2
    assert "error: interrupted" in capsys.readouterr().err
    assert signal.getsignal(signal.SIGTERM) is before


def test_uncommitted_changes_are_named_before_measuring(tmp_path):
    """asv measures each commit as committed: an uncommitted change to the code is not measured, and
    the working tree's benchmarks serve both sides; said up front, nothing said on a clean checkout."""
    from ci.runner.continuous import uncommitted_note

    repo = tmp_path / "repo"
    (repo / "benchmarks").mkdir(parents=True)
    (repo / "lib.py").write_text("x = 1\n")
    (repo / "benchmarks" / "b.py").write_text("def time_x(): pass\n")
    for args in (["init", "-q"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "A"]):
        subprocess.run(["git", "-C", str(repo), *args], check=True)
    assert uncommitted_note(repo) == ""
    (repo / "lib.py").write_text("x = 2\n")
    note = uncommitted_note(repo)
    assert note.startswith("note: uncommitted changes (lib.py)") and "not measured" in note and "both sides" not in note
    (repo / "benchmarks" / "b.py").write_text("def time_x(): return 1\n")
    assert "the benchmarks and asv.conf.json of the working tree are used for both sides" in uncommitted_note(repo)


def test_an_existing_environment_is_refused_before_asv_runs(tmp_path, capsys):
    """environment_type "existing" measures the installed Python whatever the commit, and asv refuses
    interleaved rounds there: said up front, naming the setting, instead of through asv's own message
    and "asv exited 1 and wrote no result file"."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "asv.conf.json").write_text('{"version": 1, "project": "p", "repo": ".", // asv allows comments\n'
                                        '"environment_type": "existing"}')
    for args in (["init", "-q"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "A"],
                 ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "B"]):
        subprocess.run(["git", "-C", str(repo), *args], check=True)
    for cmd in (["continuous", "--repo", str(repo), "HEAD~1"],
                ["run", "--repo", str(repo), "--commits", "HEAD", "--dashboard", ""]):
        assert main([*cmd, "--db", str(tmp_path / "h.sqlite")]) == 2
        err = capsys.readouterr().err
        assert "environment_type 'existing' measures the Python already installed" in err and 'set it to "virtualenv"' \
            in err, err
