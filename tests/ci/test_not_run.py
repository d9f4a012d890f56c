"""A check that did not run is not a pass, through the runner's real jobs (real git, real asv CLI on
the toy repository of test_runner): a correctness check that returned NaN fails the history job, a
pull request whose head measured nothing exits 2, and so does the demo."""

from __future__ import annotations

import pytest

from ci import demo
from ci.cli import main
from ci.exit_codes import EXIT_ERROR, EXIT_OK, EXIT_REGRESSION
from ci.runner.config import RunOutcome
from tests.ci.test_runner import LIB, _git, template, toy  # noqa: F401  (fixtures)


def test_a_nan_check_fails_the_history_job_and_a_head_that_measured_nothing_exits_2(toy, tmp_path, capsys):  # noqa: F811
    repo, shas = toy
    lib = repo / "toylib" / "__init__.py"
    lib.write_text(LIB.replace("return 1e-4", "return float('nan')"))  # asv stores a NaN result as skipped
    _git(repo, "commit", "-q", "-am", "D: the check returns NaN", when=3)
    nan = _git(repo, "rev-parse", "HEAD")
    lib.write_text("raise ImportError('broken on purpose')\n")  # every benchmark fails at import
    _git(repo, "commit", "-q", "-am", "E: the library does not import", when=4)
    broken = _git(repo, "rev-parse", "HEAD")
    db = str(tmp_path / "h.sqlite")
    common = ["--db", db, "--repo", str(repo), "--machine", "cibox", "--dashboard", ""]

    # History: A measured the check (a value), D returned NaN: the gate fails, exit 1.
    assert main(["run", "--commits", shas["A"], nan, *common]) == EXIT_REGRESSION
    out = capsys.readouterr().out
    assert f"correctness FAILED at {nan[:8]}: bench_toy.ToyCheck.track_max_abs_diff" in out, out

    # A PR whose head measured nothing: exit 2, and the comment's headline says what failed.
    comment = tmp_path / "comment.md"
    assert main(["run", "--pr", "--base", shas["A"], "--head", broken, "--comment-out", str(comment),
                 *common]) == EXIT_ERROR  # fmt: skip
    out = capsys.readouterr().out
    assert f"error: nothing was measured on head {broken[:12]}: all" in out, out
    body = comment.read_text()
    assert "**❌ Nothing was compared:** nothing was measured on head" in body
    assert "No regression" not in body and "No significant" not in body


def test_the_demo_fails_when_a_commit_measured_nothing(monkeypatch, tmp_path, capsys):
    """The demo with nothing installed to benchmark (no torch): every benchmark fails on base and
    head; the PR job exits 2 and so does the demo, never "done" with exit 0."""
    shas = ["a" * 40, "b" * 40, "c" * 40]
    monkeypatch.setattr(demo, "prepare_clone", lambda source, dest: dest)
    monkeypatch.setattr(demo, "suite_commits", lambda repo, count: shas)
    monkeypatch.setattr(demo, "suite_regex", lambda repo, which: r"CPU\.")
    monkeypatch.setattr(demo, "git", lambda *a: "main")
    monkeypatch.setattr(demo, "RunnerConfig", lambda **kw: type("Cfg", (), {**kw, "machine": "m"})())

    def outcome(mode: str, code: int) -> RunOutcome:
        return RunOutcome(mode, (), (), "", (), (), code)

    monkeypatch.setattr(demo, "run_history", lambda cfg, commits: outcome("history", EXIT_ERROR))
    monkeypatch.setattr(demo, "run_pr", lambda cfg, base, head: outcome("pr", EXIT_ERROR))
    assert demo.run_demo(tmp_path / "d", source=tmp_path, commits=3, gpu=False) == EXIT_ERROR
    assert "error: the demo measured nothing on some commit" in capsys.readouterr().err
    monkeypatch.setattr(demo, "run_history", lambda cfg, commits: outcome("history", EXIT_OK))
    monkeypatch.setattr(demo, "run_pr", lambda cfg, base, head: outcome("pr", EXIT_REGRESSION))
    assert demo.run_demo(tmp_path / "d", source=tmp_path, commits=3, gpu=False) == EXIT_OK


@pytest.mark.parametrize("value", ["nan", "inf"])
def test_a_correctness_benchmark_raises_on_a_value_that_is_no_number(value):
    """The suite's own checks make asv record a failure (null), not a skip (NaN), for no number."""
    from benchmarks.bench_correctness import checked

    assert checked(0.001, "x") == 0.001
    with pytest.raises(FloatingPointError, match="produced no number"):
        checked(float(value), "max |logit diff|")
