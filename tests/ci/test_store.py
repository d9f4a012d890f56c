"""The store: StoreReader contract, verdicts, acknowledgements, URLs, and schema migrations."""

from __future__ import annotations

import inspect
import math
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine, func, select
from sqlalchemy import inspect as sa_inspect

from ci.ingest import ingest_results_dir
from ci.records import Benchmark, Commit, Direction, Kind, Outcome, StoreReader, Verdict
from ci.store import Store, StoreError, head_revision, resolve_url
from ci.store.models import Base
from tests.ci.conftest import MACHINE, load_history, sha_for, write_results
from tests.ci.data.history_reads import reads


def _filled(db, asv_dir, n=3) -> Store:
    store = Store(db)
    ingest_results_dir(store, asv_dir([sha_for(i) for i in range(n)]))
    return store


def test_store_implements_store_reader_exactly():
    for name, member in inspect.getmembers(StoreReader, predicate=inspect.isfunction):
        if name.startswith("_"):
            continue
        ours = getattr(Store, name)
        assert inspect.signature(ours).parameters.keys() == inspect.signature(member).parameters.keys(), name
    assert isinstance(Store.__init__, object)


def test_reader_filters_and_history_order(db_path, asv_dir):
    with _filled(db_path, asv_dir, 4) as store:
        commits = store.commits()
        assert [c.sha for c in commits] == [sha_for(i) for i in range(4)]  # oldest first (asv's commit date)
        assert all(c.time is not None and c.time.tzinfo is not None for c in commits)
        key = "bench_attention.GPUTime.time_gpu(dtype=fp16, batch=8)"
        series = store.results(benchmark_key=key)
        assert [r.commit_sha for r in series] == [sha_for(i) for i in range(4)]
        assert {r.benchmark.key for r in series} == {key}
        assert all(r.machine == MACHINE and r.run_id.startswith(f"{MACHINE}/") for r in series)
        one = store.results(commit_sha=sha_for(2), machine=MACHINE)
        assert len(one) == 7 and {r.commit_sha for r in one} == {sha_for(2)}
        assert store.results(machine="nobody") == []
        assert store.results(benchmark_key="no.such.bench") == []
        assert len(store.results()) == 28
        assert len(store.benchmarks()) == 7
        assert [m.name for m in store.machines()] == [MACHINE]
        assert store.commits(branch="main") == []  # no git metadata given


def test_results_carry_the_benchmark_version(db_path, asv_dir):
    with _filled(db_path, asv_dir, 2) as store:
        versions = {r.benchmark.name: r.benchmark_version for r in store.results()}
        assert versions["bench_attention.GPUTime.time_gpu"] == "v-attn-1"
        assert versions["bench_correctness.Logits.track_max_abs_diff"] == "v-corr-1"


def test_value_and_spread_from_raw_samples(db_path, asv_dir):
    samples = [3.0, 1.0, 2.0, 5.0, 4.0]
    store = Store(db_path)
    ingest_results_dir(store, asv_dir([sha_for(0)], samples=lambda n, j, c: list(samples)))
    r = store.results(benchmark_key="bench_model.Throughput.track_images_per_s")[0]
    assert r.samples == tuple(samples) and r.value == 3.0 and r.spread == (2.0, 4.0)
    store.close()


def test_results_carry_asvs_statistics_from_blocks_and_rows(store_url, asv_dir):
    """Points recorded without raw samples (one value each) keep asv's statistics (99 % interval,
    quartiles, number, repeat) on their `Result`, whichever table holds them (a grid with a failed
    point is stored point by point) and whichever read returns them: the A/B verdicts decide with
    them."""
    import json

    def samples(name: str, j: int, c: int) -> list[float] | None:
        if "time_gpu" in name and j == 3 and c == 1:
            return None  # a failed point: this grid of commit 1 is stored as rows, not a block
        return [(1e-4 if "time_" in name else 100.0) * (1 + j + 0.1 * c) * (1 + 0.01 * k) for k in range(6)]

    root = asv_dir([sha_for(0), sha_for(1)], samples=samples, record_samples=False)
    expected = {}
    for path in sorted((root / MACHINE).glob("*-existing-*.json")):
        data = json.loads(path.read_text())
        cols = data["result_columns"]
        for name, row in data["results"].items():
            got = dict(zip(cols, row, strict=False))
            for j, value in enumerate(got["result"]):
                if value is not None:  # values are distinct within a grid: they name their point
                    stats = tuple(float(got[f"stats_{s}"][j]) for s in ("ci_99_a", "ci_99_b", "q_25", "q_75",
                                                                         "number", "repeat"))
                    expected[(data["commit_hash"], name, value)] = stats
    with Store(store_url) as store:
        ingest_results_dir(store, root)
        everything = store.results()
        assert len(everything) == len(expected) == 13
        for r in everything:
            assert r.stats == expected[(r.commit_sha, r.benchmark.name, r.samples[0])], r
            assert r.asv_stats() == dict(zip(("ci_99_a", "ci_99_b", "q_25", "q_75", "number", "repeat"), r.stats,
                                             strict=True))
        for r in everything:  # the series read and the commit read
            (same,) = [x for x in store.results(benchmark_key=r.benchmark.key) if x.commit_sha == r.commit_sha]
            assert same.stats == r.stats
            (same,) = [x for x in store.results(commit_sha=r.commit_sha, machine=MACHINE) if x.benchmark == r.benchmark]
            assert same.stats == r.stats
        # A point with raw samples has them as its evidence: no statistics read for it.
        write_results(root, [sha_for(2)], first_commit=2)
        ingest_results_dir(store, root)
        raw = store.results(commit_sha=sha_for(2))
        assert raw and all(len(r.samples) == 6 and r.stats is None and r.asv_stats() is None for r in raw)
        assert all(x.stats is None for x in store.results(benchmark_key=raw[0].benchmark.key)
                   if x.commit_sha == sha_for(2))


def test_verdicts_roundtrip_with_nan_and_replace(db_path, asv_dir):
    with _filled(db_path, asv_dir, 2) as store:
        bench = store.benchmarks()[0]
        v = Verdict(benchmark=bench, outcome=Outcome.REGRESSED, base_value=1.0, head_value=1.2, ratio=1.2, ci_low=1.1,
                    ci_high=1.3, p_value=0.001, threshold=0.05, base_sha=sha_for(0), head_sha=sha_for(1),
                    reason="slower")
        gate = Verdict(
            benchmark=Benchmark("new.gate", (), "max abs diff", Direction.LOWER, Kind.CORRECTNESS),
            outcome=Outcome.FAILED,
            base_value=math.nan,
            head_value=0.01,
            ratio=2.5,
            head_sha=sha_for(1),
            reason="too far",
        )
        assert store.save_verdicts([v, gate]) == 2
        got = store.verdicts(head_sha=sha_for(1))
        assert got[0] == v
        assert got[1].benchmark == gate.benchmark and math.isnan(got[1].base_value) and math.isnan(got[1].p_value)
        assert got[1].outcome is Outcome.FAILED
        # A second verdict for the same (series, base, head) replaces the first.
        store.save_verdicts(
            [Verdict(benchmark=bench, outcome=Outcome.UNCHANGED, base_value=1.0, head_value=1.0, ratio=1.0,
                     base_sha=sha_for(0), head_sha=sha_for(1))]
        )
        again = [x for x in store.verdicts(head_sha=sha_for(1)) if x.benchmark == bench]
        assert [x.outcome for x in again] == [Outcome.UNCHANGED]
        assert store.verdicts(head_sha=sha_for(0)) == []
        with pytest.raises(TypeError, match="Verdict"):
            store.save_verdicts(["regressed"])  # type: ignore[list-item]
        # Two different verdicts for one (series, base, head) in one call: one would be dropped
        # silently (a FAILED gate hidden by a pass), so the whole call is refused.
        ok = Verdict(benchmark=bench, outcome=Outcome.UNCHANGED, base_value=1.0, head_value=1.0, ratio=1.0,
                     base_sha=sha_for(0), head_sha=sha_for(1))
        with pytest.raises(ValueError, match="two different verdicts"):
            store.save_verdicts([v, ok])
        assert [x.outcome for x in store.verdicts(head_sha=sha_for(1)) if x.benchmark == bench] == [Outcome.UNCHANGED]
        assert store.save_verdicts([ok, ok]) == 1  # an exact repeat is one verdict
        assert store.save_verdicts([gate, Verdict(**{**gate.__dict__, "base_value": float("nan")})]) == 1


def test_verdicts_of_two_machines_both_survive(db_path, asv_dir):
    """Runners sharing one history judge the same (series, base, head): one verdict per machine."""
    with _filled(db_path, asv_dir, 2) as store:
        bench = store.benchmarks()[0]
        on_a = Verdict(benchmark=bench, outcome=Outcome.REGRESSED, base_value=1.0, head_value=1.2, ratio=1.2,
                       base_sha=sha_for(0), head_sha=sha_for(1), machine="a")
        on_b = Verdict(benchmark=bench, outcome=Outcome.UNCHANGED, base_value=1.0, head_value=1.0, ratio=1.0,
                       base_sha=sha_for(0), head_sha=sha_for(1), machine="b")
        assert store.save_verdicts([on_a]) == 1
        assert store.save_verdicts([on_b]) == 1
        got = store.verdicts(head_sha=sha_for(1))
        assert sorted((v.machine, v.outcome) for v in got) == [("a", Outcome.REGRESSED), ("b", Outcome.UNCHANGED)]
        # A new verdict from one machine still replaces only that machine's.
        store.save_verdicts([Verdict(**{**on_a.__dict__, "outcome": Outcome.IMPROVED})])
        got = store.verdicts(head_sha=sha_for(1))
        assert sorted((v.machine, v.outcome) for v in got) == [("a", Outcome.IMPROVED), ("b", Outcome.UNCHANGED)]
        assert store.save_verdicts([on_a, on_b]) == 2  # not "two different verdicts": different machines
        with pytest.raises(TypeError, match="machine"):
            store.save_verdicts([Verdict(**{**on_a.__dict__, "machine": None})])


def test_acknowledge(db_path, asv_dir):
    with _filled(db_path, asv_dir, 2) as store:
        key = store.benchmarks()[0].key
        when = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
        ack = store.acknowledge(key, sha_for(1)[:10], "alice", "new tiling trades batch-1 latency", when)
        assert ack.commit_sha == sha_for(1)  # prefix resolved
        assert store.acknowledgements() == [ack]
        with pytest.raises(ValueError, match="unknown benchmark series"):
            store.acknowledge("nope", sha_for(1), "alice", "x")
        with pytest.raises(ValueError, match="not in the store"):
            store.acknowledge(key, "deadbeefdead", "alice", "x")
        with pytest.raises(ValueError, match="who must be a non-empty"):
            store.acknowledge(key, sha_for(1), "  ", "x")
        with pytest.raises(ValueError, match="at least 7"):
            store.acknowledge(key, "0000", "alice", "x")


def test_ambiguous_prefix(db_path, asv_dir):
    with _filled(db_path, asv_dir, 3) as store, pytest.raises(ValueError, match="ambiguous"):
        store.resolve_commit("0000000")


def test_upsert_commits_enriches_never_erases(db_path):
    with Store(db_path) as store:
        t = datetime(2026, 1, 1, tzinfo=UTC)
        store.upsert_commits([Commit("a" * 40, ("b" * 40,), "main", t, "subject")])
        store.upsert_commits([Commit("a" * 40)])
        assert store.commits() == [Commit("a" * 40, ("b" * 40,), "main", t, "subject")]
        with pytest.raises(TypeError, match="Commit"):
            store.upsert_commits(["a" * 40])  # type: ignore[list-item]


def test_resolve_url(tmp_path):
    assert resolve_url("postgresql+psycopg://u@h/db") == "postgresql+psycopg://u@h/db"
    url = resolve_url(tmp_path / "sub" / "h.sqlite")
    assert url == f"sqlite:///{tmp_path / 'sub' / 'h.sqlite'}" and (tmp_path / "sub").is_dir()
    assert resolve_url(None).endswith(".asv/history.sqlite")
    with pytest.raises(ValueError, match="empty"):
        resolve_url(" ")
    with pytest.raises(TypeError, match="path or SQLAlchemy URL"):
        resolve_url(42)  # type: ignore[arg-type]


@pytest.mark.parametrize("url", [
    "postgresql://127.0.0.1:1/x?password=hunter2SECRET",
    "postgresql:///x?host=127.0.0.1&port=1&user=a&password=hunter2SECRET",
    "postgresql://127.0.0.1:1/x?sslpassword=hunter2SECRET&sslmode=bogus",
    "postgresql://alice:hunter2SECRET@127.0.0.1:1/x",
    "postgresql://alice:hun@ter2SECRET@127.0.0.1:1/x",
    "postgresql://alice:hunter2SECRET@127.0.0.1:notaport/x",
    "alice:hunter2SECRET@127.0.0.1:5432/x",  # the scheme left out: once taken as a file path and echoed
    "mysql://alice:hunter2SECRET@127.0.0.1/x",
    "postgres://alice:hunter2SECRET@127.0.0.1/x",
])
def test_a_database_password_is_never_printed(url, capsys):
    """However the password is given (the user-info part, a query option, an unescaped "@" that the
    parser splits), no message shows it; a URL that does not parse is an error naming --db."""
    from ci.cli import main
    from ci.store.engine import display_url

    assert "hunter2" not in display_url(url) and "ter2SECRET" not in display_url(url)
    assert main(["compare", "--db", url, "--base", "05baf11f", "--head", "0b76c841"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "ter2SECRET" not in err and "hunter2" not in err, err


@pytest.mark.parametrize(("url", "says"), [
    ("alice:pw@db.internal:5432/ragged", "a database URL without its scheme"),
    ("mysql://alice@db.internal/ragged", "runs on SQLite (a file path) or PostgreSQL"),
    ("postgres://alice@db.internal/ragged", "not 'postgres'"),
    ("postgresql+psycopg2://alice@db.internal/ragged", "psycopg2 driver is not installed; the service installs"),
])
def test_a_database_the_store_cannot_run_on_is_one_clear_error(url, says):
    """A forgotten scheme was taken as a file path; mysql:// and postgres:// failed in SQLAlchemy with
    "No module named 'MySQLdb'" and "Can't load plugin: sqlalchemy.dialects:postgres"."""
    with pytest.raises(StoreError, match=re.escape(says)):
        resolve_url(url, must_exist=True)


def test_in_memory_store(asv_dir):
    with Store("sqlite://") as store:
        ingest_results_dir(store, asv_dir([sha_for(0)]))
        assert store.counts()["results"] == 7


def test_models_match_migrations(tmp_path):
    """The alembic migrations build exactly the schema the models describe."""
    with Store(tmp_path / "m.sqlite") as store, store.engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
        assert diff == []
        assert MigrationContext.configure(conn).get_current_revision() == head_revision()


@pytest.mark.parametrize("revision", ["0002", "0003"])
def test_history_written_by_older_code_migrates_and_reads_back_identical(tmp_path, revision):
    """A store written at an older schema revision by that revision's own code (JSON text samples)
    upgrades in place on open and reads back exactly what that code read: every result's samples
    bit for bit, failures, verdicts, acknowledgements, commits and machines."""
    db = tmp_path / "old.sqlite"
    expected = load_history(f"sqlite:///{db}", revision)
    with Store(db) as store:  # opening migrates to head
        assert MigrationContext.configure(store.engine.connect()).get_current_revision() == head_revision()
        assert reads(store) == expected
        with store.engine.connect() as conn:
            assert compare_metadata(MigrationContext.configure(conn), Base.metadata) == []
        # and the upgraded store takes new results
        root = tmp_path / "more"
        write_results(root, [sha_for(7)])
        assert ingest_results_dir(store, root).count("inserted") == 1
        assert len(store.results(commit_sha=sha_for(7))) == 7


def test_verdicts_survive_upgrade_from_0002(tmp_path):
    """A store at revision 0002 (verdicts without a machine) keeps its verdicts through the upgrade;
    they come back with machine "" and a machine's verdict for the same key is added, not merged."""
    db = tmp_path / "old.sqlite"
    load_history(f"sqlite:///{db}", "0002")
    engine = create_engine(f"sqlite:///{db}")
    assert "machine" not in {c["name"] for c in sa_inspect(engine).get_columns("verdicts")}
    engine.dispose()
    with Store(db) as store:  # opening migrates to head
        (kept,) = store.verdicts(head_sha=sha_for(1))
        assert (kept.outcome, kept.ratio, kept.reason, kept.machine) == (Outcome.REGRESSED, 1.3, "slower", "")
        mine = Verdict(
            benchmark=kept.benchmark, outcome=Outcome.UNCHANGED, base_value=1.0, head_value=1.0, ratio=1.0,
            base_sha=sha_for(0), head_sha=sha_for(1), machine=MACHINE
        )
        store.save_verdicts([mine])
        assert sorted(v.machine for v in store.verdicts(head_sha=sha_for(1))) == ["", MACHINE]


def test_downgrade_to_0003_gives_back_the_json_text_samples(tmp_path):
    """The 0004 migration's downgrade writes the samples back as the JSON text 0003's code reads."""
    from ci.store.codec import parse_samples

    db = tmp_path / "old.sqlite"
    expected = load_history(f"sqlite:///{db}", "0003")
    Store(db).close()  # up to head
    from alembic import command
    from alembic.config import Config

    from ci.store.schema import MIGRATIONS_DIR

    engine = create_engine(f"sqlite:///{db}")
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0003")
    with engine.connect() as conn:
        texts = [t for (t,) in conn.exec_driver_sql("SELECT samples FROM results WHERE status = 'ok' ORDER BY id")]
    engine.dispose()
    assert all(isinstance(t, str) for t in texts)
    back = sorted(tuple(x.hex() for x in parse_samples(t)) for t in texts)
    assert back == sorted(tuple(r["samples"]) for r in expected["results"])


def test_reopen_is_a_noop_migration(tmp_path, asv_dir):
    db = tmp_path / "h.sqlite"
    with _filled(db, asv_dir, 1) as store:
        counts = store.counts()
    with Store(db) as store:
        assert store.counts() == counts


def test_corrupt_database_file_is_a_clear_error(tmp_path):
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"this is not a database" * 100)
    with pytest.raises(Exception, match="not a database"):
        Store(bad)


def test_ingest_run_checks_its_arguments(tmp_path):
    from ci.ingest.asv_files import load_benchmarks_json, load_machine_json
    from ci.ingest.parse import parse_result_file
    from ci.records import Machine

    root = tmp_path / "r"
    (path,) = write_results(root, [sha_for(0)])
    run = parse_result_file(path, load_benchmarks_json(root), load_machine_json(root / MACHINE))
    with Store(tmp_path / "h.sqlite") as store:
        with pytest.raises(ValueError, match="does not match the run's machine"):
            store.ingest_run(run, Machine("other"), Commit(sha_for(0)))
        with pytest.raises(ValueError, match="does not match the run's commit"):
            store.ingest_run(run, Machine(MACHINE), Commit(sha_for(1)))
        with pytest.raises(TypeError, match="ParsedRun"):
            store.ingest_run({"run": 1}, Machine(MACHINE), Commit(sha_for(0)))  # type: ignore[arg-type]
        assert store.ingest_run(run, Machine(MACHINE), Commit(sha_for(0))) == "inserted"
        assert store.ingest_run(run, Machine(MACHINE), Commit(sha_for(0))) == "unchanged"


def test_path_like_db(tmp_path: Path):
    with Store(tmp_path / "x" / "y.sqlite") as store:
        assert store.dialect == "sqlite" and (tmp_path / "x" / "y.sqlite").exists()


def test_bulk_written_times_read_back_through_sqlalchemy(db_path, asv_dir):
    """The raw executemany path stores datetimes in the column type's own format."""
    from sqlalchemy import select

    from ci.store.models import ResultBlockRow, ResultRow

    with _filled(db_path, asv_dir, 1) as store, store.engine.connect() as conn:
        typed = list(conn.execute(select(ResultRow.started_at)).scalars().all())
        blocks = conn.execute(select(ResultBlockRow.started_at, ResultBlockRow.points)).all()
        assert blocks  # the fixture's benchmarks are written as blocks, the point-by-point rows are the others
        typed = sorted(typed + [t for t, n in blocks for _ in range(n)])
        ours = sorted(r.started_at for r in store.results())
        assert [t.replace(tzinfo=UTC) if t.tzinfo is None else t for t in typed] == ours
        for table in (ResultRow, ResultBlockRow):
            assert all(isinstance(flag, bool) for flag in conn.execute(select(table.has_raw_samples)).scalars())


@pytest.mark.parametrize(
    "samples",
    [(1.0, 2.5e-05, 3), (math.nan, 1.0), (1e300, math.inf, -math.inf), (), (0.1,), (-0.0, 5e-324)],
    ids=["mixed", "nan", "inf", "empty", "one", "extremes"],
)
def test_samples_text_roundtrip(samples):
    from ci.store.codec import parse_samples, samples_json

    back = parse_samples(samples_json(samples))
    assert len(back) == len(samples)
    assert all(a == b or (math.isnan(a) and math.isnan(b)) for a, b in zip(samples, back, strict=True))


def test_a_rewritten_file_keeps_the_results_it_can_no_longer_be_read_for(db_path, asv_dir):
    """asv rewrote a result file, and benchmarks.json no longer lists one of its benchmarks: the
    file's readable results replace the stored ones, the unreadable ones stay as they were."""
    import json

    root = asv_dir([sha_for(0)])
    with Store(db_path) as store:
        ingest_results_dir(store, root)
        before = {r.benchmark.key: r for r in store.results()}
    dropped = "bench_model.Throughput.track_images_per_s"
    index = json.loads((root / "benchmarks.json").read_text())
    del index[dropped]
    (root / "benchmarks.json").write_text(json.dumps(index))
    (result_file,) = [p for p in (root / MACHINE).glob("*.json") if p.name != "machine.json"]
    data = json.loads(result_file.read_text())
    timing = data["results"]["bench_attention.GPUTime.time_gpu"]  # asv re-ran it: twice the times
    col = {name: i for i, name in enumerate(data["result_columns"])}
    timing[col["result"]] = [v * 2 for v in timing[col["result"]]]
    timing[col["samples"]] = [[v * 2 for v in point] for point in timing[col["samples"]]]
    result_file.write_text(json.dumps(data))
    with Store(db_path) as store:
        report = ingest_results_dir(store, root)
        after = {r.benchmark.key: r for r in store.results()}
    assert [f.status for f in report.files] == ["replaced"]
    assert after.keys() == before.keys()
    for key, old in before.items():
        if key.startswith(dropped):
            assert after[key] == old  # kept, not lost
        elif key.startswith("bench_attention.GPUTime.time_gpu"):
            assert after[key].value == pytest.approx(2 * old.value)


def test_the_reads_walk_the_indexes_they_need(db_path, asv_dir):
    """SQLite's plan for each query a series, a commit, or the detector's states make: an index, never
    a scan of the results or result_blocks table (a whole-history read scans them once, on purpose)."""
    import sqlite3

    from sqlalchemy import event

    from ci.verdicts import HistorySettings, detect_all

    with _filled(db_path, asv_dir, 4) as store:
        detect_all(store)
        store.engine.dispose()
        seen: list[str] = []
        event.listen(store.engine, "connect", lambda dbapi, _: dbapi.set_trace_callback(seen.append))
        key = store.benchmarks()[0].key
        store.results(benchmark_key=key)
        store.failures(benchmark_key=key)
        store.results(commit_sha=sha_for(2))
        store.results(machine=MACHINE)
        store.change_point_states("", HistorySettings().fingerprint)
        store.engine.dispose()
    queries = [q for q in seen if q.lstrip().upper().startswith("SELECT")]
    plans = {}
    with sqlite3.connect(db_path) as conn:
        for q in queries:
            plans[q] = " / ".join(row[-1] for row in conn.execute(f"EXPLAIN QUERY PLAN {q}"))
    on_results = {q: p for q, p in plans.items() if " FROM results" in q}
    assert len(on_results) >= 4, plans
    for q, plan in on_results.items():
        assert "SCAN results" not in plan, (q, plan)
    on_blocks = {q: p for q, p in plans.items() if " FROM result_blocks" in q}
    assert len(on_blocks) >= 3, plans  # a series, a commit, a machine (failures are never blocks)
    for q, plan in on_blocks.items():
        assert "SCAN result_blocks" not in plan, (q, plan)
    (states,) = [p for q, p in plans.items() if "change_point_states" in q]
    assert "SEARCH change_point_states USING INDEX" in states and "(branch=? AND settings=?)" in states, states


def check_blocks_next_to_older_rows(url: str, tmp_path: Path) -> None:
    """A history of revision 0003 (every point a `results` row) upgraded, then given runs written as
    blocks between its runs (machine a100-runner had commits 1 and 3; now 0 and 2 too, and a new
    commit 7 on both machines): every read gives the same points in the same history order as a
    read of the whole history does, the older rows exactly as that older code read them; and a
    downgrade to 0004 writes the blocks back as `results` rows that read back identical."""
    from alembic import command
    from alembic.config import Config

    from ci.store.models import ResultBlockRow
    from ci.store.schema import MIGRATIONS_DIR

    expected = load_history(url, "0003")
    with Store(url) as store:
        before = reads(store)
        assert before == expected
        a100 = tmp_path / "a100"
        write_results(a100, [sha_for(0), sha_for(2), sha_for(7)], machine="a100-runner", record_samples=False)
        write_results(tmp_path / "h200", [sha_for(7)])
        assert ingest_results_dir(store, a100).count("inserted") == 3
        assert ingest_results_dir(store, tmp_path / "h200").count("inserted") == 1
        with store.engine.connect() as conn:
            assert conn.execute(select(func.count()).select_from(ResultBlockRow)).scalar_one() > 0
        everything = store.results()
        old = {(r.run_id, r.benchmark.key) for r in everything}
        assert {(r["run_id"], r["benchmark"]) for r in expected["results"]} < old  # nothing of the old lost
        for bench in store.benchmarks():
            for machine in (None, "a100-runner"):
                want = [r for r in everything if r.benchmark.key == bench.key and machine in (None, r.machine)]
                assert store.results(benchmark_key=bench.key, machine=machine) == want
        for machine in ("a100-runner", MACHINE):
            assert store.results(machine=machine) == [r for r in everything if r.machine == machine]
        columns = {(s.benchmark.key, h.machine): s.commit_shas for h in store.series_columns() for s in h.series}
        for (key, machine), shas in columns.items():
            assert list(shas) == [r.commit_sha for r in everything if r.benchmark.key == key and r.machine == machine]
        assert store.counts()["results"] == len(everything) + len(store.failures())
        after = reads(store)
    engine = create_engine(url)
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0004")
    engine.dispose()
    with Store(url) as store:  # up again: the blocks are `results` rows now
        with store.engine.connect() as conn:
            assert conn.execute(select(func.count()).select_from(ResultBlockRow)).scalar_one() == 0
        assert reads(store) == after


def test_blocks_read_with_the_rows_of_an_older_history_in_history_order(tmp_path):
    check_blocks_next_to_older_rows(f"sqlite:///{tmp_path / 'old.sqlite'}", tmp_path)


def test_the_project_is_kept_whole_and_a_damaged_one_is_an_error(store_url: str) -> None:
    """What ingest keeps of asv.conf.json reads back equal, on SQLite and PostgreSQL; a value that
    is not what `save_project` writes is a clear error, never the defaults."""
    from ci.records import Project
    from ci.store import StoreError

    project = Project("uxarray", "https://github.com/UXARRAY/uxarray", "https://github.com/UXARRAY/uxarray/commit/",
                      ((".*", 0.06), (r"mpas_ocean\.Gradient", 0.8)), "/data/uxarray-asv/asv.conf.json")
    with Store(store_url, create=True) as store:
        assert store.project() is None
        store.save_project(project)
        store.save_project(project)  # replaced, not added
        assert store.project() == project
        store.save_setting("asv_conf", '{"project": 3}')
        with pytest.raises(StoreError, match="damaged"):
            store.project()


def test_a_busy_store_passes_the_write_probe_and_a_read_only_one_does_not(tmp_path, monkeypatch):
    """The write probe before a job measures (`Store.require_writable`) refuses a store that cannot be
    written, not one another writer holds past the lock's wait: that store is busy, and the job's writes
    wait their turn (a busy store read "cannot be written (database is locked)", 2026-12-07)."""
    import sqlite3

    from sqlalchemy.engine import Connection
    from sqlalchemy.exc import OperationalError

    from ci.store import StoreError

    db = tmp_path / "h.sqlite"
    real = Connection.execute

    def answer(message):
        def execute(self, statement, *args, **kwargs):
            if "WHERE 1 = 0" in str(statement):
                raise OperationalError(str(statement), {}, sqlite3.OperationalError(message))
            return real(self, statement, *args, **kwargs)
        return execute

    with Store(db) as store:
        monkeypatch.setattr(Connection, "execute", answer("database is locked"))
        store.require_writable()
        monkeypatch.setattr(Connection, "execute", answer("attempt to write a readonly database"))
        with pytest.raises(StoreError, match="cannot be written .attempt to write a readonly database"):
            store.require_writable()
