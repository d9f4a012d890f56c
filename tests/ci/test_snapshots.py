"""Readers beside writers: every render, comparison and comment reads one snapshot of the history,
and the commands that only read (`dashboard`, `compare --no-save`) open the store read-only: they
never take the write lock, never wait on a writer, read a store on a read-only file, and never
migrate one (an older store is a clear error)."""

from __future__ import annotations

import hashlib
import sqlite3
import threading
import time
from pathlib import Path

import pytest
from alembic.runtime.migration import MigrationContext

from ci.cli import main
from ci.ingest import ingest_results_dir
from ci.records import Outcome, Verdict
from ci.store import Store, StoreError
from ci.store.reads import StoreReads
from tests.ci.conftest import load_history, sha_for, write_results


def _history(tmp_path: Path, db: str, n: int = 4) -> None:
    """`n` commits ingested through the CLI (commit 3 a regression of one series)."""

    def samples(name: str, j: int, c: int) -> list[float]:
        base = 1e-4 * (j + 1) if "time_" in name else 100.0 + j
        return [base * (1.5 if c >= 3 and j == 0 and "time_gpu" in name else 1.0) * (1 + 0.002 * k) for k in range(8)]

    root = tmp_path / "first"
    write_results(root, [sha_for(i) for i in range(n)], samples=samples, job="gha-1.1-main/1")
    assert main(["ingest", "--db", db, str(root)]) == 0


def _ingest(db: str, root: Path) -> None:
    with Store(db) as store:
        report = ingest_results_dir(store, root)
    assert report.ok and report.count("inserted") == 1, report.summary()


def test_a_render_reads_one_snapshot_while_an_ingest_commits(tmp_path, store_url, monkeypatch, capsys):
    """An ingest commits a new commit's run each time the render has read the commit list: read in
    separate transactions, the render then met a result of a commit missing from its list ("names
    commit ..., which the store's commit history does not contain") and failed. In one snapshot it
    renders the history as it was when it started, and the next render shows the new commits."""
    _history(tmp_path, store_url)
    later = iter(range(4, 8))
    real = StoreReads.commits

    def commits_then_an_ingest(self, branch=None):  # type: ignore[no-untyped-def]
        out = real(self, branch)
        c = next(later, None)
        if c is not None:  # another process's ingest, committed between this read and the next
            root = tmp_path / f"later{c}"
            write_results(root, [sha_for(c)], first_commit=c)
            writer = threading.Thread(target=_ingest, args=(store_url, root))
            writer.start()
            writer.join(timeout=60)
            assert not writer.is_alive()
        return out

    monkeypatch.setattr(StoreReads, "commits", commits_then_an_ingest)
    site = tmp_path / "site"
    assert main(["dashboard", "--db", store_url, "--out", str(site)]) == 0, capsys.readouterr().err
    assert "4 commits" in capsys.readouterr().out  # the history as the render found it
    monkeypatch.setattr(StoreReads, "commits", real)
    with Store(store_url) as store:
        now = len(store.commits())
    assert now > 4, "the ingests committed meanwhile"
    assert main(["dashboard", "--db", store_url, "--out", str(site)]) == 0
    assert f"{now} commits" in capsys.readouterr().out


def test_readers_run_beside_a_writer_that_keeps_committing(tmp_path, store_url, capsys):
    """A writer ingesting commit after commit in another thread, and `dashboard` and `compare
    --no-save` run over and over beside it: every one of them succeeds."""
    _history(tmp_path, store_url)
    roots = []
    for c in range(4, 12):
        roots.append(tmp_path / f"later{c}")
        write_results(roots[-1], [sha_for(c)], first_commit=c)
    errors: list[BaseException] = []

    def write() -> None:
        try:
            for root in roots:
                _ingest(store_url, root)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)

    writer = threading.Thread(target=write)
    writer.start()
    runs = 0
    compare = ["compare", "--db", store_url, "--base", sha_for(2), "--head", sha_for(3), "--no-save"]
    while writer.is_alive() or runs < 2:
        assert main(["dashboard", "--db", store_url, "--out", str(tmp_path / "site")]) == 0, capsys.readouterr().err
        assert main(compare) == 1, capsys.readouterr().err  # the regression at commit 3, every time
        runs += 1
    writer.join()
    assert not errors, errors
    capsys.readouterr()
    assert main(["dashboard", "--db", store_url, "--out", str(tmp_path / "site")]) == 0
    assert "12 commits" in capsys.readouterr().out


def test_readers_never_wait_behind_a_writer_holding_the_lock(tmp_path, capsys):
    """SQLite: a writer in the middle of a write transaction holds the database's write lock. The
    commands that only read took it too (to migrate at open): they waited its 60 s busy timeout and
    failed "database is locked". Opened read-only, they read beside it at once."""
    db = str(tmp_path / "h.sqlite")
    _history(tmp_path, db)
    writer = sqlite3.connect(db, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    writer.execute("INSERT INTO settings (key, value, updated_at) VALUES ('busy', 'x', '2026-12-05 00:00:00')")
    try:
        t0 = time.monotonic()
        assert main(["dashboard", "--db", db, "--out", str(tmp_path / "site")]) == 0, capsys.readouterr().err
        assert main(["compare", "--db", db, "--base", sha_for(2), "--head", sha_for(3), "--no-save"]) == 1, \
            capsys.readouterr().err
        assert time.monotonic() - t0 < 20
        assert "regressed" in capsys.readouterr().out
    finally:
        writer.execute("ROLLBACK")
        writer.close()


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_read_only_store_file_renders_and_compares_and_stays_as_it_was(tmp_path, capsys):
    """A store on a file without write permission (a published copy, another user's history):
    `dashboard` and `compare --no-save` read it and write nothing to it (the detector's cached
    states are computed, not kept; nothing is migrated), while a writing command still refuses to
    write through a read-only open."""
    db = tmp_path / "h.sqlite"
    _history(tmp_path, str(db))
    db.chmod(0o444)
    before = _digest(db)
    assert main(["dashboard", "--db", str(db), "--out", str(tmp_path / "site")]) == 0, capsys.readouterr().err
    assert main(["compare", "--db", str(db), "--base", sha_for(2), "--head", sha_for(3), "--no-save"]) == 1
    assert "regressed" in capsys.readouterr().out
    assert _digest(db) == before
    wal = db.with_name(db.name + "-wal")
    assert not wal.exists() or wal.stat().st_size == 0, "nothing was written beside it either"
    with Store(db, read_only=True) as store:
        assert store.read_only and store.change_point_states("", "any") == {}
        bench = store.benchmarks()[0]
        with pytest.raises(Exception, match="readonly database"):
            store.save_verdicts([Verdict(benchmark=bench, outcome=Outcome.UNCHANGED, base_value=1.0, head_value=1.0,
                                         ratio=1.0, head_sha=sha_for(3))])
    assert _digest(db) == before


def test_an_older_store_opened_read_only_is_an_error_that_says_what_to_run(tmp_path, capsys):
    """A read-only open never migrates: a store at an older schema revision is refused with the
    command that upgrades it, and is left at its revision (it used to be upgraded by `dashboard`)."""
    db = tmp_path / "old.sqlite"
    load_history(f"sqlite:///{db}", "0003")
    for argv in (["dashboard", "--out", str(tmp_path / "site")],
                 ["compare", "--base", sha_for(0), "--head", sha_for(1), "--no-save"]):
        assert main([argv[0], "--db", str(db), *argv[1:]]) == 2
        err = capsys.readouterr().err
        assert "schema revision '0003', older than this version's" in err and "run a writing command" in err, err
    engine = Store(db, migrate=False).engine
    with engine.connect() as conn:
        assert MigrationContext.configure(conn).get_current_revision() == "0003"
    engine.dispose()
    with pytest.raises(StoreError, match="holds no results store yet"):
        sqlite3.connect(tmp_path / "empty.sqlite").close()
        Store(tmp_path / "empty.sqlite", read_only=True)


def test_snapshots_nest_and_end_with_their_block(tmp_path, store_url):
    """Reads inside `snapshot()` see the state at its first read; nested blocks share it; after the
    block each read sees the newest state again."""
    _history(tmp_path, store_url, n=2)
    root = tmp_path / "later"
    write_results(root, [sha_for(2)], first_commit=2)
    with Store(store_url, read_only=True) as reader:
        with reader.snapshot():
            assert len(reader.commits()) == 2
            _ingest(store_url, root)
            with reader.snapshot():
                assert len(reader.commits()) == 2 and len({r.commit_sha for r in reader.results()}) == 2
        assert len(reader.commits()) == 3 and len({r.commit_sha for r in reader.results()}) == 3


def test_a_point_asv_kept_one_value_of_shows_the_quartiles_asv_recorded(tmp_path: Path, store_url: str) -> None:
    """Most CI histories run asv without `--record-samples`: a point is one value, and its spread is
    only in the statistics asv recorded of its samples (`stats_q_25`, `stats_q_75`, `stats_repeat`).
    The series shows those quartiles and that sample count (as the PR comment does), read as columns
    from a store (SQLite and PostgreSQL) and from a store without that read alike; a point with its
    raw samples keeps their own."""
    import json

    import ci.site.model as model

    def samples(name: str, j: int, c: int) -> list[float]:
        base = 1e-3 * (j + 1) if "time_" in name else 100.0 + j
        return [base * (1 + 0.01 * k + 0.002 * c) for k in range(10)]

    one, raw = tmp_path / "one", tmp_path / "raw"
    write_results(one, [sha_for(i) for i in range(3)], samples=samples, record_samples=False)
    write_results(raw, [sha_for(i) for i in range(3, 5)], samples=samples, first_commit=3)
    recorded: dict[tuple[str, str], tuple[float, float, int]] = {}
    for path in sorted(one.glob("*/*.json")):
        if path.name == "machine.json":
            continue
        data = json.loads(path.read_text())
        cols = data["result_columns"]
        res = dict(zip(cols, data["results"]["bench_attention.GPUTime.time_gpu"], strict=False))
        assert res.get("samples") is None  # asv kept one value and its statistics
        recorded[(data["commit_hash"], "fp16-1")] = (res["stats_q_25"][0], res["stats_q_75"][0], res["stats_repeat"][0])
    store = Store(store_url)
    try:
        for root in (one, raw):
            assert ingest_results_dir(store, root).ok

        class Reader:  # the StoreReader protocol only: the per-result read
            def __getattr__(self, name: str) -> object:
                if name in ("series_columns", "change_point_states", "save_change_point_states"):
                    raise AttributeError(name)
                return getattr(store, name)

        columns = model.load_snapshot(store)
        assert repr(columns) == repr(model.load_snapshot(Reader()))  # type: ignore[arg-type]
        by_key = {(s.benchmark.name, s.benchmark.params, s.machine): s for s in columns.series}
        gpu = next(s for (name, params, _), s in by_key.items() if name.endswith("time_gpu")
                   and [v.strip("'") for _, v in params] == ["fp16", "1"])  # asv's first point of the grid
        points = gpu.points
        for p in points[:3]:
            lo, hi, reps = recorded[(p.sha, "fp16-1")]
            assert (p.low, p.high, p.n) == (lo, hi, reps) and lo < p.value < hi and reps == 10
        for p in points[3:]:  # raw samples: their own quartiles
            assert p.n == 10 and p.low < p.value < p.high
    finally:
        store.close()
