"""`python -m ci`: commands wired to the store, verdicts, comment and dashboard; exit codes 0/1/2."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from ci.cli import main
from ci.store import Store
from tests.ci.conftest import MACHINE, sha_for

REPO_ROOT = Path(__file__).resolve().parents[2]
SLOW_KEY = "bench_attention.GPUTime.time_gpu(dtype=fp16, batch=1)"


def _samples(slow_head: bool = False, bad_gate: bool = False):
    def make(name: str, j: int, c: int) -> list[float]:
        if "max_abs_diff" in name:
            return [0.01 if (bad_gate and c == 1) else 0.001] * 6
        base = 1e-4 * (j + 1) if "time_" in name else 100.0 + j
        if slow_head and c == 1 and "time_gpu" in name and j == 0:
            base *= 1.5
        return [base * (1 + 0.002 * k) for k in range(12)]

    return make


def test_help_lists_every_command(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for command in ("ingest", "compare", "comment", "dashboard", "ack", "run", "demo"):
        assert command in out
    assert main(["ingest", "--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "--db" in out and "Each result file is all or nothing" in out and "50 files per transaction" in out
    assert "keeps the batches committed before it" in out and "points/s" in out


def test_python_dash_m_entry_point(tmp_path, asv_dir):
    root = asv_dir([sha_for(0)])
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    run = [sys.executable, "-m", "ci"]
    ok = subprocess.run(
        [*run, "ingest", "--db", str(tmp_path / "h.sqlite"), str(root)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert ok.returncode == 0, ok.stderr
    assert "1 inserted" in ok.stdout
    usage = subprocess.run([*run, "ingest"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert usage.returncode == 2 and "RESULTS_DIR" in usage.stderr


def test_default_db_is_asv_history_sqlite(tmp_path, asv_dir, monkeypatch):
    root = asv_dir([sha_for(0)])
    monkeypatch.chdir(tmp_path)
    assert main(["ingest", str(root)]) == 0
    assert (tmp_path / ".asv" / "history.sqlite").is_file()


def test_ingest_exit_codes(tmp_path, asv_dir, capsys):
    root = asv_dir([sha_for(0), sha_for(1)])
    db = str(tmp_path / "h.sqlite")
    assert main(["ingest", "--db", db, str(root)]) == 0
    assert main(["ingest", "--db", db, str(root)]) == 0
    assert "2 unchanged" in capsys.readouterr().out
    bad = next((root / MACHINE).glob("00000001-*.json"))
    bad.write_text(bad.read_text()[:100])
    (root / MACHINE / "00000009-x.json").write_text('{"version": 2, "commit')  # truncated new file
    assert main(["ingest", "--db", db, str(root)]) == 2
    err = capsys.readouterr().err
    assert "00000009-x.json: not valid JSON, truncated" in err
    assert main(["ingest", "--db", db, str(tmp_path / "missing")]) == 2
    assert "not a directory" in capsys.readouterr().err
    # benchmarks.json and no result file (a folder one level too high, or asv never wrote one): exit 2,
    # since nothing was read (it was exit 0, "0 result files", 2026-12-06)
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "benchmarks.json").write_bytes((root / "benchmarks.json").read_bytes())
    (empty / MACHINE).mkdir()
    assert main(["ingest", "--db", db, str(empty)]) == 2
    assert f"error: no asv result files under {empty}" in capsys.readouterr().err
    with Store(db) as store:
        assert store.counts()["runs"] == 2  # nothing lost, nothing partial


def test_ingest_reports_points_per_second_and_progress_on_long_runs(tmp_path, asv_dir, capsys):
    from ci.cli import ingest_progress_printer
    from ci.ingest import ingest_results_dir
    from ci.ingest.results_dir import NO_REPO_NOTE

    root = asv_dir([sha_for(i) for i in range(3)])
    assert main(["ingest", "--db", str(tmp_path / "a.sqlite"), str(root)]) == 0
    out, err = capsys.readouterr()
    assert re.search(r"21 points written in \d+\.\d s \([\d,]+ points/s\)", out), out
    assert err.splitlines() == [NO_REPO_NOTE]  # a short ingest prints no progress (only: no git order here)
    with Store(tmp_path / "b.sqlite") as store:
        report = ingest_results_dir(store, root, batch_size=1, progress=ingest_progress_printer(0.0))
    lines = capsys.readouterr().err.splitlines()
    assert report.points_written == 21 and report.seconds > 0
    assert [line.split(" points written")[0] for line in lines] == [
        "ingest: 1/3 files, 7", "ingest: 2/3 files, 14"]
    assert all(line.endswith("points/s)") for line in lines)


def test_compare_regression_exits_1_and_saves_verdicts(tmp_path, asv_dir, capsys):
    root = asv_dir([sha_for(0), sha_for(1)], samples=_samples(slow_head=True), job="gha-1.1-pr/1")
    db = str(tmp_path / "h.sqlite")
    assert main(["ingest", "--db", db, str(root)]) == 0
    assert main(["compare", "--db", db, "--base", sha_for(0)[:8], "--head", sha_for(1)[:10]]) == 1
    out = capsys.readouterr().out
    assert "regressed" in out and SLOW_KEY in out
    with Store(db) as store:
        saved = {v.benchmark.key: v.outcome.value for v in store.verdicts(head_sha=sha_for(1))}
    assert saved[SLOW_KEY] == "regressed"


def test_verdicts_a_store_refuses_to_save_are_still_printed(tmp_path, asv_dir, capsys, monkeypatch):
    """A read-only role or file: the verdicts were decided, so they are printed, then one error saying
    they were not saved and that --no-save compares without writing; exit 2. The refusal alone was
    printed in their place."""
    import sqlite3

    from sqlalchemy.exc import OperationalError

    root = asv_dir([sha_for(0), sha_for(1)], samples=_samples(slow_head=True), job="gha-1.1-pr/1")
    db = str(tmp_path / "h.sqlite")
    assert main(["ingest", "--db", db, str(root)]) == 0
    capsys.readouterr()

    def refused(self, verdicts):
        raise OperationalError("INSERT", {}, sqlite3.OperationalError("permission denied for table verdicts"))

    monkeypatch.setattr(Store, "save_verdicts", refused)
    assert main(["compare", "--db", db, "--base", sha_for(0), "--head", sha_for(1)]) == 2
    out, err = capsys.readouterr()
    assert "regressed" in out and SLOW_KEY in out
    assert err.strip() == (f"error: the verdicts above were not saved (database {db}: permission denied for table "
                           "verdicts); --no-save compares without writing"), err


def test_compare_clean_exits_0(tmp_path, asv_dir):
    root = asv_dir([sha_for(0), sha_for(1)], samples=_samples(), job="gha-1.1-pr/1")
    db = str(tmp_path / "h.sqlite")
    main(["ingest", "--db", db, str(root)])
    assert main(["compare", "--db", db, "--base", sha_for(0), "--head", sha_for(1), "--no-save"]) == 0
    with Store(db) as store:
        assert store.verdicts() == []


def test_failed_correctness_gate_exits_1(tmp_path, asv_dir, capsys):
    root = asv_dir([sha_for(0), sha_for(1)], samples=_samples(bad_gate=True), job="gha-1.1-pr/1")
    db = str(tmp_path / "h.sqlite")
    main(["ingest", "--db", db, str(root)])
    assert main(["compare", "--db", db, "--base", sha_for(0), "--head", sha_for(1)]) == 1
    assert "failed" in capsys.readouterr().out


def test_crashed_correctness_benchmark_fails_the_gate(tmp_path, asv_dir, capsys):
    def crash(name: str, j: int, c: int) -> list[float] | None:
        if "max_abs_diff" in name and c == 1:
            return None  # the correctness check raised on head: asv records null
        return _samples()(name, j, c)

    root = asv_dir([sha_for(0), sha_for(1)], samples=crash, job="gha-1.1-pr/1")
    db = str(tmp_path / "h.sqlite")
    main(["ingest", "--db", db, str(root)])
    assert main(["compare", "--db", db, "--base", sha_for(0), "--head", sha_for(1)]) == 1
    out = capsys.readouterr().out
    assert any(line.startswith("failed") and "max_abs_diff" in line for line in out.splitlines())


def test_compare_errors_exit_2(tmp_path, asv_dir, capsys):
    root = asv_dir([sha_for(0)])
    db = str(tmp_path / "h.sqlite")
    main(["ingest", "--db", db, str(root)])
    assert main(["compare", "--db", db, "--base", "feedfacefeed", "--head", sha_for(0)]) == 2
    assert "not in the store" in capsys.readouterr().err
    assert main(["compare", "--db", db, "--base", sha_for(0)]) == 2  # usage error
    # One commit as base and head read its one stored result twice: "unchanged" everywhere, exit 0
    # (2026-12-06). Refused, by compare and comment alike.
    for command in ("compare", "comment"):
        assert main([command, "--db", db, "--base", sha_for(0)[:8], "--head", sha_for(0)]) == 2
        assert "are the same commit" in capsys.readouterr().err
    with Store(db) as store:
        assert store.verdicts() == []


def test_comment_no_save_leaves_the_store_as_it_was(tmp_path, asv_dir):
    root = asv_dir([sha_for(0), sha_for(1)], samples=_samples(slow_head=True), job="gha-1.1-pr/1")
    db = tmp_path / "h.sqlite"
    main(["ingest", "--db", str(db), str(root)])
    before = db.read_bytes()
    out = tmp_path / "comment.md"
    code = main(["comment", "--db", str(db), "--base", sha_for(0), "--head", sha_for(1), "--out", str(out),
                 "--no-save"])
    assert code == 1 and "Regressions (1)" in out.read_text()
    assert db.read_bytes() == before, "opened read-only: not a byte written"


def test_comment_writes_markdown_and_dry_run_post(tmp_path, asv_dir, capsys):
    root = asv_dir(
        [sha_for(0), sha_for(1)], samples=_samples(slow_head=True), sidecar={"gpu": "NVIDIA H200", "driver": "580.65"},
        job="gha-1.1-pr/1",
    )
    db = str(tmp_path / "h.sqlite")
    main(["ingest", "--db", db, str(root)])
    out = tmp_path / "comment.md"
    assert main(["comment", "--db", db, "--base", sha_for(0), "--head", sha_for(1), "--out", str(out)]) == 1
    body = out.read_text()
    assert body.startswith("<!-- ragged-vit-bench -->") and "NVIDIA H200" in body and "dtype=fp16, batch=1" in body
    posted = tmp_path / "posted.md"
    code = main(
        [
            "comment",
            "--db",
            db,
            "--base",
            sha_for(0),
            "--head",
            sha_for(1),
            "--repo",
            "o/r",
            "--pr",
            "7",
            "--dry-run",
            str(posted),
        ]
    )
    # Posted to o/r, the commits link to that repository's pages; the rest is the same comment.
    link = f"[`{sha_for(1)[:12]}`](https://github.com/o/r/commit/{sha_for(1)})"
    assert code == 1 and link in posted.read_text() and link not in body
    assert posted.read_text().splitlines()[6:] == body.splitlines()[6:]
    assert main(["comment", "--db", db, "--base", sha_for(0), "--head", sha_for(1), "--repo", "o/r"]) == 2
    assert "--repo and --pr go together" in capsys.readouterr().err


def test_comment_judges_its_own_base_not_verdicts_saved_for_another(tmp_path, asv_dir):
    # The head got slower at commit 1; commit 2 (the PR head) is as slow as commit 1.
    def make(name: str, j: int, c: int) -> list[float]:
        if "max_abs_diff" in name:
            return [0.001] * 6
        base = 1e-4 * (j + 1) if "time_" in name else 100.0 + j
        return [base * (1.5 if c >= 1 and "time_gpu" in name and j == 0 else 1.0) * (1 + 0.002 * k) for k in range(12)]

    root = asv_dir([sha_for(0), sha_for(1), sha_for(2)], samples=make, job="gha-1.1-pr/1")
    db = str(tmp_path / "h.sqlite")
    main(["ingest", "--db", db, str(root)])
    assert main(["compare", "--db", db, "--base", sha_for(1), "--head", sha_for(2)]) == 0
    out = tmp_path / "comment.md"
    # Against commit 0 the head regressed: the verdicts saved for base 1 (and the base-less
    # correctness gates among them) must not stand in for this pair.
    assert main(["comment", "--db", db, "--base", sha_for(0), "--head", sha_for(2), "--out", str(out)]) == 1
    assert "Regressions (1)" in out.read_text()


def test_dashboard_command(tmp_path, asv_dir, capsys):
    root = asv_dir([sha_for(0), sha_for(1)])
    db = str(tmp_path / "h.sqlite")
    main(["ingest", "--db", db, str(root)])
    site = tmp_path / "site"
    assert main(["dashboard", "--db", db, "--out", str(site)]) == 0
    assert (site / "index.html").is_file()
    assert "7 series" in capsys.readouterr().out


def test_ack_command(tmp_path, asv_dir, capsys):
    root = asv_dir([sha_for(0)])
    db = str(tmp_path / "h.sqlite")
    main(["ingest", "--db", db, str(root)])
    assert (
        main(
            [
                "ack",
                "--db",
                db,
                "--benchmark",
                SLOW_KEY,
                "--commit",
                sha_for(0)[:9],
                "--who",
                "alice",
                "--why",
                "expected: new tiling",
            ]
        )
        == 0
    )
    with Store(db) as store:
        (ack,) = store.acknowledgements()
    assert (ack.benchmark_key, ack.commit_sha, ack.who, ack.why) == (
        SLOW_KEY,
        sha_for(0),
        "alice",
        "expected: new tiling",
    )
    assert "shows no regression of" in capsys.readouterr().err, "a one-commit history has none to acknowledge"
    assert main(["ack", "--db", db, "--benchmark", "nope", "--commit", sha_for(0), "--who", "a", "--why", "b"]) == 2
    assert "unknown benchmark series" in capsys.readouterr().err


def test_ack_says_nothing_more_where_the_history_has_the_regression(tmp_path, asv_dir, capsys):
    def step(name: str, j: int, c: int) -> list[float]:
        return _samples()(name, j, c) if not ("time_gpu" in name and j == 0 and c >= 8) else \
            [1.5e-4 * (1 + 0.002 * k) for k in range(12)]

    root = asv_dir([sha_for(c) for c in range(16)], samples=step)
    db = str(tmp_path / "h.sqlite")
    assert main(["ingest", "--db", db, str(root)]) == 0
    capsys.readouterr()
    ack = ["ack", "--db", db, "--benchmark", SLOW_KEY, "--who", "a", "--why", "expected"]
    assert main([*ack, "--commit", sha_for(8)]) == 0
    assert "shows no regression" not in capsys.readouterr().err
    assert main([*ack, "--commit", sha_for(5)]) == 0  # stored, but a commit without the step: said so
    assert "shows no regression of" in capsys.readouterr().err


def test_run_without_a_selection_is_a_usage_error(tmp_path, capsys):
    assert main(["run", "--db", str(tmp_path / "h.sqlite")]) == 2
    assert "usage:" in capsys.readouterr().err


def test_bad_db_url_exits_2(tmp_path, capsys):
    assert (
        main(["ack", "--db", "nosuchdialect://x", "--benchmark", "b", "--commit", "c" * 8, "--who", "a", "--why", "b"])
        == 2
    )
    assert "error:" in capsys.readouterr().err


def test_a_libpq_connection_string_is_refused_not_made_a_file(tmp_path, asv_dir, capsys, monkeypatch):
    """`--db "host=... dbname=... password=..."` (libpq's own form) made an SQLite file of that name, the
    password in it, and exit 0: the shared history got nothing (2026-12-07)."""
    monkeypatch.chdir(tmp_path)
    root = asv_dir([sha_for(0)])
    dsn = "host=127.0.0.1 port=5432 user=ci password=s3cr3tPW dbname=hist"
    assert main(["ingest", "--db", dsn, str(root)]) == 2
    err = capsys.readouterr().err
    assert "libpq connection string" in err and "postgresql+psycopg://" in err and "s3cr3tPW" not in err
    assert not any("s3cr3t" in p.name for p in tmp_path.iterdir())
    assert main(["ingest", "--db", "hosts=1.sqlite", str(root)]) == 0, "a file name with '=' is still a file"


def _ingested(tmp_path: Path, asv_dir, commits=(0, 1)) -> str:
    db = str(tmp_path / "h.sqlite")
    assert main(["ingest", "--db", db, str(asv_dir([sha_for(c) for c in commits]))]) == 0
    return db


def test_commands_that_read_a_history_never_create_one(tmp_path, asv_dir, capsys):
    """A mistyped --db is an error, not a new empty store (which `dashboard` would have published
    over the real site)."""
    db = _ingested(tmp_path, asv_dir)
    site = tmp_path / "site"
    assert main(["dashboard", "--db", db, "--out", str(site)]) == 0
    before = sorted(p.relative_to(site) for p in site.rglob("*"))
    typo = str(tmp_path / "histroy.sqlite")
    capsys.readouterr()
    for argv in (
        ["dashboard", "--db", typo, "--out", str(site)],
        ["compare", "--db", typo, "--base", sha_for(0), "--head", sha_for(1)],
        ["comment", "--db", typo, "--base", sha_for(0), "--head", sha_for(1)],
        ["ack", "--db", typo, "--benchmark", SLOW_KEY, "--commit", sha_for(0), "--who", "a", "--why", "b"],
    ):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("error: no results store at") and err.count("\n") == 1, err
    assert not Path(typo).exists()
    assert sorted(p.relative_to(site) for p in site.rglob("*")) == before


def test_the_ingest_command_a_missing_store_names_pastes_back_into_a_shell(tmp_path, capsys):
    """The hint printed the --db path as it is: a path with a space or a quote, pasted, named another
    file (or left the shell waiting for a closing quote). Its `shlex.split` is now the command."""
    db = str(tmp_path / "my runs" / "it's $HOME.sqlite")
    assert main(["compare", "--db", db, "--base", sha_for(0), "--head", sha_for(1)]) == 2
    err = capsys.readouterr().err
    hint = re.search(r"\((python -m ci ingest .*? RESULTS_DIR)\)", err)
    assert hint is not None, err
    assert shlex.split(hint.group(1)) == ["python", "-m", "ci", "ingest", "--db", db, "RESULTS_DIR"], err


def test_dashboard_refuses_an_unknown_branch_and_an_empty_out(tmp_path, asv_dir, capsys):
    db = _ingested(tmp_path, asv_dir)
    site = tmp_path / "site"
    assert main(["dashboard", "--db", db, "--out", str(site)]) == 0
    before = {p: p.read_bytes() for p in site.rglob("*") if p.is_file()}
    assert main(["dashboard", "--db", db, "--out", str(site), "--branch", "mian"]) == 2
    assert "no commits of branch 'mian'" in capsys.readouterr().err
    assert {p: p.read_bytes() for p in site.rglob("*") if p.is_file()} == before
    assert main(["dashboard", "--db", db, "--out", ""]) == 2
    assert "--out must name" in capsys.readouterr().err


def test_a_foreign_database_is_left_alone(tmp_path, asv_dir, capsys):
    import sqlite3

    other = tmp_path / "app.sqlite"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
        conn.execute("INSERT INTO users (name) VALUES ('ada')")
    assert main(["ingest", "--db", str(other), str(asv_dir([sha_for(0)]))]) == 2
    err = capsys.readouterr().err
    assert "is not a results store" in err and "users" in err and err.count("\n") == 1
    with sqlite3.connect(other) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    assert tables == ["users"]


def test_database_problems_are_one_line_errors(tmp_path, asv_dir, capsys):
    results = str(asv_dir([sha_for(0)]))
    folder = tmp_path / "a-folder"
    folder.mkdir()
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"this is not an SQLite file, not even its header" * 100)
    db = _ingested(tmp_path, asv_dir, commits=(0,))
    read_only = f"sqlite:///file:{db}?mode=ro&uri=true"
    newer = tmp_path / "newer.sqlite"
    with Store(newer) as store, store.engine.begin() as conn:
        from sqlalchemy import text

        conn.execute(text("UPDATE alembic_version SET version_num = 'ffff9999'"))
    damaged = tmp_path / "damaged.sqlite"
    with Store(damaged) as store, store.engine.begin() as conn:
        conn.execute(text("INSERT INTO alembic_version VALUES ('0001')"))  # two rows: alembic's "several heads"
    capsys.readouterr()
    for db_arg, expect in (
        (str(folder), "is a folder"),
        (str(junk), "file is not a database"),
        (str(newer), "written by a newer version"),
        (str(damaged), f"{damaged}: its schema version table is damaged"),
    ):
        assert main(["ingest", "--db", db_arg, results]) == 2, db_arg
        err = capsys.readouterr().err
        assert expect in err and err.count("\n") == 1, err
    # A read-only store: one error naming it with the driver's one-line reason (not one per file), and
    # nothing changes.
    with Store(db) as store:
        counts = store.counts()
    assert main(["ingest", "--db", read_only, str(asv_dir([sha_for(1), sha_for(2)], name="more"))]) == 2
    captured = capsys.readouterr()
    assert "readonly database" in captured.err and "[SQL:" not in captured.err
    assert captured.err.count("\n") == 1 and "cannot be written" in captured.err, captured.err
    with Store(db) as store:
        assert store.counts() == counts


def test_an_interrupted_command_says_so_in_one_line(tmp_path, asv_dir, monkeypatch, capsys):
    import ci.ingest

    def interrupted(*_a, **_k):
        raise KeyboardInterrupt

    monkeypatch.setattr(ci.ingest, "ingest_results_dir", interrupted)
    assert main(["ingest", "--db", str(tmp_path / "h.sqlite"), str(asv_dir([sha_for(0)]))]) == 2
    err = capsys.readouterr().err
    assert "interrupted" in err and "run the same ingest command again" in err and err.count("\n") == 1


def test_branch_names_are_not_commits_and_version(tmp_path, asv_dir, capsys):
    db = _ingested(tmp_path, asv_dir)
    assert main(["compare", "--db", db, "--base", "main", "--head", sha_for(1)]) == 2
    assert "not a sha" in capsys.readouterr().err
    assert main(["--version"]) == 0
    assert "ragged-vit 0.1.0" in capsys.readouterr().out
    assert main(["ingest", "--bogus", "x", "dir"]) == 2
    assert "usage: python -m ci ingest" in capsys.readouterr().err


def _with_many_series(tmp_path: Path, slow_head: bool) -> str:
    """A store whose compare prints ~600 lines (more than a pipe buffer holds)."""
    from tests.ci.conftest import write_results

    bench = {"name": "bench_attention.GPUTime.time_gpu", "type": "time", "unit": "seconds",
             "params": [[f"'{i}'" for i in range(600)]], "param_names": ["case"], "version": "1"}
    root = tmp_path / "res"
    write_results(root, [sha_for(0), sha_for(1)], benchmarks=[bench], samples=_samples(slow_head=slow_head),
                  job="job-1")
    db = str(tmp_path / "h.sqlite")
    assert main(["ingest", "--db", db, str(root)]) == 0
    return db


@pytest.mark.parametrize("slow_head", [False, True], ids=["clean", "regression"])
def test_compare_into_a_closed_pipe_keeps_its_exit_code(tmp_path, slow_head):
    """`python -m ci compare | head -1` ended in a BrokenPipeError traceback and exit 2: the reader
    leaving ends the printing, quietly, and the verdict's exit code stands (0 clean, 1 regression)."""
    db = _with_many_series(tmp_path, slow_head)
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "ci", "compare", "--db", db, "--base", sha_for(0), "--head",
                             sha_for(1), "--no-save"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                            cwd=tmp_path)
    first = proc.stdout.readline()
    proc.stdout.close()  # as `head -1` does
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == (1 if slow_head else 0), err
    assert first.startswith(b"base ") and err == ""


def test_ingest_help_says_what_ingest_does(capsys):
    """--help said one transaction per file while ingest commits per 50-file batch."""
    from ci.ingest import BATCH_FILES, ingest_results_dir

    assert main(["ingest", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert f"{BATCH_FILES} files per transaction" in text and "one transaction per file" not in text
    import inspect

    assert inspect.signature(ingest_results_dir).parameters["batch_size"].default == BATCH_FILES


def test_compare_output_cannot_be_forged_by_a_benchmark_name(tmp_path, capsys):
    """A series key comes from the PR's benchmark code: a newline or a terminal escape in a
    parameter value must not make `compare` print an extra line or repaint one."""
    from tests.ci.conftest import write_results

    bench = {"name": "bench_attention.GPUTime.time_gpu", "type": "time", "unit": "seconds",
             "params": [["'ok'", "'x\nregressed  9.999  forged'", "'\x1b[2Jwipe'"]], "param_names": ["case"],
             "version": "1"}
    root = tmp_path / "res"
    write_results(root, [sha_for(0), sha_for(1)], benchmarks=[bench], samples=_samples(), job="job-1")
    db = str(tmp_path / "h.sqlite")
    assert main(["ingest", "--db", db, str(root)]) == 0
    capsys.readouterr()
    assert main(["compare", "--db", db, "--base", sha_for(0), "--head", sha_for(1)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 6 and all(line.isprintable() for line in lines), lines  # 3 heading lines, 3 series
    assert any("x\\nregressed  9.999  forged" in line for line in lines)


@pytest.mark.timeout(60)  # with multiprocessing.Pool the command waited for the dead worker forever
def test_dashboard_exits_2_when_a_render_worker_is_killed(tmp_path, asv_dir, capsys, monkeypatch):
    import multiprocessing
    import signal

    import ci.site.render as render

    if "fork" not in multiprocessing.get_all_start_methods():
        pytest.skip("no fork")
    root = asv_dir([sha_for(0), sha_for(1)])
    db = str(tmp_path / "h.sqlite")
    main(["ingest", "--db", db, str(root)])
    capsys.readouterr()
    monkeypatch.setattr(render, "PARALLEL_MIN_PAGES", 1)
    monkeypatch.setattr(render, "fork_workers", lambda items, least: 2)
    parent, real = os.getpid(), render._Site.series_page

    def dies(self, s):
        if os.getpid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)
        real(self, s)

    monkeypatch.setattr(render._Site, "series_page", dies)
    assert main(["dashboard", "--db", db, "--out", str(tmp_path / "site")]) == 2
    err = capsys.readouterr().err
    assert re.fullmatch(r"error: WorkerLost: a forked worker stopped \(killed\? out of memory\?\); "
                        r"7 series pages not rendered: .+ and 4 more\n", err), err
    assert multiprocessing.active_children() == []


def test_a_base_newer_than_its_head_is_warned_about(tmp_path, asv_dir, capsys):
    """`--base` and `--head` swapped read every change inverted (the slower head's regression as the
    base's improvement, exit 0): compare and comment say so on stderr; in order they say nothing."""
    root = asv_dir([sha_for(0), sha_for(1)], samples=_samples(slow_head=True), job="gha-1.1-pr/1")
    db = str(tmp_path / "h.sqlite")
    assert main(["ingest", "--db", db, str(root)]) == 0
    capsys.readouterr()
    assert main(["compare", "--db", db, "--base", sha_for(0), "--head", sha_for(1), "--no-save"]) == 1
    assert "warning" not in capsys.readouterr().err
    assert main(["compare", "--db", db, "--base", sha_for(1), "--head", sha_for(0), "--no-save"]) == 0
    err = capsys.readouterr().err
    assert f"warning: base {sha_for(1)[:12]} is dated after head {sha_for(0)[:12]}" in err
    assert "swap --base and --head" in err
    assert main(["comment", "--db", db, "--base", sha_for(1), "--head", sha_for(0), "--no-save",
                 "--out", str(tmp_path / "c.md")]) == 0
    assert "swap --base and --head" in capsys.readouterr().err


def test_a_swapped_pairs_verdicts_are_not_saved_unless_asked(tmp_path, asv_dir, capsys):
    """Stored, a swapped pair's verdicts showed on the dashboard as regressions of the older commit for
    good (a later compare in order removes none): compare and comment keep them out of the store and
    say so; --save-reversed stores them; a pair in order is stored as before."""
    from ci.store import Store

    root = asv_dir([sha_for(0), sha_for(1)], samples=_samples(slow_head=True), job="gha-1.1-pr/1")
    db = str(tmp_path / "h.sqlite")
    assert main(["ingest", "--db", db, str(root)]) == 0

    def stored() -> set[tuple[str, str]]:
        with Store(db) as store:
            return {(v.base_sha, v.head_sha) for v in store.verdicts() if v.base_sha}  # gates have none

    for cmd in ("compare", "comment"):
        out = ["--out", str(tmp_path / "c.md")] if cmd == "comment" else []
        capsys.readouterr()
        assert main([cmd, "--db", db, "--base", sha_for(1), "--head", sha_for(0), *out]) == 0
        assert "its verdicts were not saved (--save-reversed saves them)" in capsys.readouterr().err
        assert stored() == set()
    assert main(["compare", "--db", db, "--base", sha_for(0), "--head", sha_for(1)]) == 1
    assert "not saved" not in capsys.readouterr().err and stored() == {(sha_for(0), sha_for(1))}
    assert main(["compare", "--db", db, "--base", sha_for(1), "--head", sha_for(0), "--save-reversed"]) == 0
    assert "not saved" not in capsys.readouterr().err
    assert stored() == {(sha_for(0), sha_for(1)), (sha_for(1), sha_for(0))}


def test_the_order_warning_reads_git_generations_before_dates():
    """Where ingest read a checkout, a commit's generation orders it (a later date on an older line of
    history is no reason to warn); dates only where a side has no generation."""
    from datetime import UTC, datetime

    from ci.cli import _order_warning
    from ci.records import Commit
    from tools.fixtures import MemoryStore

    early, late = datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 2, 1, tzinfo=UTC)
    a, b = "a" * 40, "b" * 40

    def warning(**sides):
        store = MemoryStore(commit_list=[Commit(a, **sides["a"]), Commit(b, **sides["b"])])
        return _order_warning(store, a, b)

    assert warning(a={"position": 5, "time": early}, b={"position": 7, "time": late}) is None
    assert "generation 7 > 5" in warning(a={"position": 7, "time": early}, b={"position": 5, "time": late})
    assert warning(a={"position": 5, "time": late}, b={"position": 7, "time": early}) is None  # git says in order
    assert "is dated after head" in warning(a={"time": late}, b={"position": 7, "time": early})
    assert warning(a={}, b={"position": 7}) is None  # nothing to order them by


def test_sigterm_stops_any_command_with_its_message(tmp_path):
    """A cancelled CI job (SIGTERM) stops `ingest` as Ctrl-C does: the message and exit 2, where it
    ended with status 143 and not a word."""
    code = ("import os, signal, time\n"
            "import ci.ingest\n"
            "def stopped(*a, **k):\n"
            "    os.kill(os.getpid(), signal.SIGTERM)\n"
            "    time.sleep(30)\n"
            "ci.ingest.ingest_results_dir = stopped\n"
            "from ci.cli import main\n"
            f"raise SystemExit(main(['ingest', {str(tmp_path)!r}, '--db', {str(tmp_path / 'h.sqlite')!r}]))")
    (tmp_path / "benchmarks.json").write_text('{"version": 2}')
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO_ROOT)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "error: interrupted; nothing half-written was kept: run the same ingest command again" in proc.stderr


def test_a_series_new_on_head_reads_new_not_unchanged(capsys):
    """A series with no base measurement is stored as unchanged (it decides nothing): `ci compare` and the
    series pages read "unchanged" where nothing was compared (stingray's new environment, 2026-12-07)."""
    import math

    from ci.cli import _print_verdicts
    from ci.records import NEW_SERIES, Benchmark, Outcome, Verdict

    new = Verdict(benchmark=Benchmark("b.S.time_new"), outcome=Outcome.UNCHANGED, base_value=math.nan,
                  head_value=1.0, ratio=math.nan, reason=NEW_SERIES)
    same = Verdict(benchmark=Benchmark("b.S.time_old"), outcome=Outcome.UNCHANGED, base_value=1.0, head_value=1.0,
                   ratio=1.0, reason="+0.0% within the threshold")
    assert new.shown == "new" and same.shown == "unchanged"
    _print_verdicts([new, same])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("new ") and "b.S.time_new" in lines[0] and lines[1].startswith("unchanged ")


def test_a_benchmark_acknowledged_as_broken_no_longer_fails_every_comparison(tmp_path, asv_dir, capsys):
    """A benchmark that fails at every commit fails every comparison (it did not run on head): astropy's
    and geocat-comp's real histories were red on every pair, and `ci ack` silenced nothing. Acknowledged
    at a commit it has not run since, a comparison lists it as not compared (who and why beside it) and
    exits 0; once it has run in between, the acknowledgement no longer covers it and it fails again."""
    broken = "bench_attention.GPUTime.time_gpu"

    def samples(name, j, c):
        if name == broken and j == 0 and c not in (3,):  # the first point fails everywhere but at commit 3
            return None
        return [1e-4 * (j + 1) * (1 + 0.01 * k) for k in range(6)]

    root = asv_dir([sha_for(i) for i in range(6)], samples=samples, job="gha-1.1-pr/1")
    db = str(tmp_path / "h.sqlite")
    assert main(["ingest", "--db", db, str(root)]) == 0
    key = next(k for k in _keys(db) if k.startswith(broken + "(") and "fp16" in k and "batch=1" in k)
    compare = ["compare", "--db", db, "--no-save", "--base", sha_for(1), "--head", sha_for(2)]
    assert main(compare) == 1
    assert "failed to run on head, and on base" in capsys.readouterr().out
    assert main(["ack", "--db", db, "--benchmark", key, "--commit", sha_for(0), "--who", "ana", "--why", "no GPU"]) == 0
    assert f"has not run at {sha_for(0)[:12]} or since on {MACHINE} (it failed)" in capsys.readouterr().out
    assert main(compare) == 0
    out = capsys.readouterr().out
    assert "known broken, not run since" in out and "(acknowledged by ana: no GPU)" in out
    later = ["compare", "--db", db, "--no-save", "--base", sha_for(4), "--head", sha_for(5)]
    assert main(later) == 1, "it ran at commit 3: broken anew since, which the acknowledgement does not cover"
    capsys.readouterr()


def _keys(db: str) -> list[str]:
    with Store(db) as store:
        return sorted({r.benchmark.key for r in store.results()} | {f.benchmark.key for f in store.failures()})
