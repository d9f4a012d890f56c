"""The same store on a real PostgreSQL server: migrations, ingest idempotence and atomicity,
several runners writing at once, and the reader contract. Each test gets its own database."""

from __future__ import annotations

import math
import multiprocessing as mp
import time
from datetime import UTC, datetime

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from ci.ingest import ingest_results_dir
from ci.records import Outcome, Verdict
from ci.store import Store, head_revision
from ci.store.models import Base
from ci.store.upserts import UpsertWrites
from tests.ci.conftest import MACHINE, load_history, sha_for
from tests.ci.data.history_reads import reads
from tests.ci.test_ingest import _ingest_worker, overlapping_result_dirs

pytestmark = pytest.mark.postgres


def test_schema_matches_models(pg_url):
    with Store(pg_url) as store, store.engine.connect() as conn:
        assert store.dialect == "postgresql"
        assert compare_metadata(MigrationContext.configure(conn), Base.metadata) == []
        assert MigrationContext.configure(conn).get_current_revision() == head_revision()


def test_ingest_roundtrip_and_idempotence(pg_url, asv_dir, tmp_path):
    root = asv_dir([sha_for(i) for i in range(3)])
    with Store(pg_url) as store:
        assert ingest_results_dir(store, root).count("inserted") == 3
        before = (store.counts(), store.results())
        assert ingest_results_dir(store, root).count("unchanged") == 3
        assert (store.counts(), store.results()) == before
    # The same files in SQLite give the same records: one code path for both backends.
    with Store(tmp_path / "same.sqlite") as lite:
        ingest_results_dir(lite, root)
        assert lite.results() == before[1]
        assert lite.commits() == Store(pg_url).commits()


def test_crash_mid_file_rolls_back(pg_url, asv_dir, monkeypatch):
    root = asv_dir([sha_for(0)])
    store = Store(pg_url)
    real = Store._insert_results

    def explode(self, conn, rows, blocks):
        real(self, conn, rows[:2], blocks[:1])
        raise RuntimeError("runner killed")

    monkeypatch.setattr(Store, "_insert_results", explode)
    report = ingest_results_dir(store, root)
    assert len(report.errors) == 1 and store.counts()["runs"] == 0 and store.counts()["results"] == 0
    store.close()


def test_concurrent_writers_postgres(pg_url, tmp_path):
    n_workers = 4
    dirs = overlapping_result_dirs(tmp_path, n_workers, n_commits=12)
    Store(pg_url).close()  # not required (migrations are locked), but keeps the race on the data
    with mp.get_context("fork").Pool(n_workers) as pool:
        start = time.time() + 1.0
        outcomes = pool.starmap(_ingest_worker, [(pg_url, str(d), start) for d in dirs])
    assert all(errors == 0 for _, _, errors in outcomes), outcomes
    assert sum(i for i, _, _ in outcomes) == 12
    with Store(pg_url) as store:
        counts = store.counts()
    assert counts["runs"] == 12 and counts["results"] == 84 and counts["benchmarks"] == 7 and counts["commits"] == 12
    assert counts["machines"] == 1


def _another_runner_ingests(monkeypatch, pg_url, root, *, after_choice: bool) -> list[str]:
    """Make another runner (its own store and connection) ingest `root`, and commit, while this one
    creates a machine: after it read the machines of that name, before it chooses the new one's
    name (`after_choice` False) or between that choice and its insert (True). Returns the other
    runner's file statuses."""
    real = UpsertWrites._free_machine_name
    statuses: list[str] = []

    def free(conn, name):
        if statuses:  # the other runner's own machine, or this one's retry
            return real(conn, name)
        statuses.append("")  # before the other ingest, which calls this too
        chosen = real(conn, name) if after_choice else None
        with Store(pg_url) as other:
            statuses[:] = [f.status for f in ingest_results_dir(other, root).files]
        return chosen if after_choice else real(conn, name)

    monkeypatch.setattr(UpsertWrites, "_free_machine_name", staticmethod(free))
    return statuses


def _runs_by_machine(url: str) -> dict[str, list[str]]:
    """The commits of the stored runs per machine name."""
    from sqlalchemy import select

    from ci.store.models import CommitRow, MachineRow, RunRow

    with Store(url) as store, store.engine.connect() as conn:
        rows = conn.execute(select(MachineRow.name, CommitRow.sha).join(RunRow, RunRow.machine_id == MachineRow.id)
                            .join(CommitRow, RunRow.commit_id == CommitRow.id)).all()  # fmt: skip
        machines = [m.name for m in store.machines()]
    return {m: sorted(sha for name, sha in rows if name == m) for m in machines}


def test_a_machine_another_runner_commits_meanwhile_is_not_made_twice(pg_url, asv_dir, monkeypatch):
    """Two runners ingest the same file of a new machine: the one that read no machine of the name
    and then saw the other's committed one as a taken name made a second machine ("h200-runner #2")
    and a second copy of the run, reported "inserted" by both. One machine, one run, inserted once."""
    mine, theirs = asv_dir([sha_for(0)], name="mine"), asv_dir([sha_for(0)], name="theirs")
    Store(pg_url).close()
    other = _another_runner_ingests(monkeypatch, pg_url, theirs, after_choice=False)
    with Store(pg_url) as store:
        report = ingest_results_dir(store, mine)
    assert other == ["inserted"] and [f.status for f in report.files] == ["unchanged"], report.summary()
    assert _runs_by_machine(pg_url) == {MACHINE: [sha_for(0)]}


def test_two_new_hosts_of_one_machine_name_at_once_stay_apart(pg_url, asv_dir, monkeypatch):
    """Two runners on two new hosts of a stored machine name both choose "host 2" for theirs: the
    one whose insert met the other's committed machine took that machine (the other host's) for its
    run. Each host keeps its own machine and runs."""
    with Store(pg_url) as store:
        ingest_results_dir(store, asv_dir([sha_for(0)], name="first"))
    mine = asv_dir([sha_for(1)], name="mine", host={"cpu": "AMD EPYC 7763", "ram": "64G", "num_cpu": "4"})
    theirs = asv_dir([sha_for(2)], name="theirs", host={"cpu": "Xeon 6980P", "ram": "1T", "num_cpu": "128"})
    other = _another_runner_ingests(monkeypatch, pg_url, theirs, after_choice=True)
    with Store(pg_url) as store:
        report = ingest_results_dir(store, mine)
        cpus = {m.name: dict(m.host)["cpu"] for m in store.machines()}
    assert other == ["inserted"] and [f.status for f in report.files] == ["inserted"], report.summary()
    by_cpu = {cpus[m]: shas for m, shas in _runs_by_machine(pg_url).items()}
    assert by_cpu == {"Xeon 8480": [sha_for(0)], "Xeon 6980P": [sha_for(2)], "AMD EPYC 7763": [sha_for(1)]}


def test_concurrent_first_open_migrates_once(pg_url):
    with mp.get_context("fork").Pool(3) as pool:
        pool.map(_open_and_count, [pg_url] * 3)
    with Store(pg_url) as store:
        assert store.counts()["runs"] == 0


def _open_and_count(url: str) -> int:
    with Store(url) as store:
        return store.counts()["runs"]


def test_verdicts_and_acks_on_postgres(pg_url, asv_dir):
    with Store(pg_url) as store:
        ingest_results_dir(store, asv_dir([sha_for(0), sha_for(1)]))
        bench = store.benchmarks()[0]
        v = Verdict(
            benchmark=bench,
            outcome=Outcome.INCONCLUSIVE,
            base_value=1.0,
            head_value=1.05,
            ratio=1.05,
            ci_low=math.nan,
            ci_high=math.nan,
            p_value=0.2,
            threshold=0.03,
            base_sha=sha_for(0),
            head_sha=sha_for(1),
            reason="need more samples",
        )
        store.save_verdicts([v])
        (got,) = store.verdicts(head_sha=sha_for(1))
        assert got.benchmark == v.benchmark and got.outcome == v.outcome and math.isnan(got.ci_low)
        assert got.machine == ""
        # Two runners' verdicts for the same (series, base, head) both stay, each with its machine.
        store.save_verdicts([Verdict(**{**v.__dict__, "machine": m}) for m in ("gpu-a", "gpu-b")])
        assert sorted(x.machine for x in store.verdicts(head_sha=sha_for(1))) == ["", "gpu-a", "gpu-b"]
        when = datetime(2026, 11, 29, 9, 30, tzinfo=UTC)
        ack = store.acknowledge(bench.key, sha_for(1)[:12], "carol", "accepted trade-off", when)
        assert store.acknowledgements() == [ack] and ack.when == when


@pytest.mark.parametrize("revision", ["0002", "0003"])
def test_history_written_by_older_code_migrates_on_postgres(pg_url, revision):
    """The 0003 migration (machine column, new unique key) and the 0004 one (samples packed in
    place) on PostgreSQL: an older tree's history reads back exactly as that tree read it."""
    expected = load_history(pg_url, revision)
    with Store(pg_url) as store:
        assert reads(store) == expected
        if revision == "0002":
            (kept,) = store.verdicts(head_sha=sha_for(1))
            assert (kept.outcome, kept.reason, kept.machine) == (Outcome.REGRESSED, "slower", "")
            store.save_verdicts([Verdict(benchmark=kept.benchmark, outcome=Outcome.UNCHANGED, base_value=1.0,
                                         head_value=1.0, ratio=1.0, base_sha=sha_for(0),
                                         head_sha=sha_for(1), machine="gpu-a")])  # fmt: skip
            assert sorted(v.machine for v in store.verdicts(head_sha=sha_for(1))) == ["", "gpu-a"]
        with store.engine.connect() as conn:
            assert compare_metadata(MigrationContext.configure(conn), Base.metadata) == []


def _state_storage(engine) -> str:
    from sqlalchemy import text

    with engine.connect() as conn:
        return conn.execute(text("SELECT attstorage FROM pg_attribute WHERE attrelid = 'change_point_states'::regclass "
                                 "AND attname = 'state'")).scalar_one()  # fmt: skip


def test_detector_states_are_stored_uncompressed_after_the_upgrade(pg_url, asv_dir):
    """Revision 0005: the detector's states (rewritten after every commit, incompressible) are
    stored EXTERNAL, not EXTENDED (pglz tried on every write); a history at 0004 upgrades to it
    and keeps what it held, and the states written then read back as written."""
    from sqlalchemy import create_engine

    from ci.store import migrate_schema
    from ci.verdicts import HistorySettings, detect_all

    expected = load_history(pg_url, "0003")
    engine = create_engine(pg_url)
    migrate_schema(engine, "0004")
    assert _state_storage(engine) == "x"  # EXTENDED, PostgreSQL's default for bytea
    fingerprint = HistorySettings().fingerprint
    with Store(pg_url) as store:  # opening migrates to head
        assert _state_storage(store.engine) == "e"  # EXTERNAL: out of line, never compressed
        assert reads(store) == expected
        cps = detect_all(store)
        states = store.change_point_states("", fingerprint)
        assert states and detect_all(store) == cps
        store.save_change_point_states("", fingerprint, {k: (n, d, s + b"x") for k, (n, d, s) in states.items()})
        assert {k: s for k, (_, _, s) in store.change_point_states("", fingerprint).items()} == {
            k: s + b"x" for k, (_, _, s) in states.items()}
    engine.dispose()


def test_blocks_read_with_the_rows_of_an_older_history_on_postgres(pg_url, tmp_path):
    from tests.ci.test_store import check_blocks_next_to_older_rows

    check_blocks_next_to_older_rows(pg_url, tmp_path)


def test_jobs_of_an_unrecorded_host_are_kept_apart_alike_on_postgres(pg_url, tmp_path):
    """`ci.ingest.speed` on PostgreSQL: the same sibling machine and the same jobs in it as on SQLite,
    and a second ingest moves nothing."""
    from tools.synthetic_history import write_history

    write_history(tmp_path / "h", benchmarks=12, grids=0, commits=60, envs=1, noise=0.01, step=0.0,
                  step_share=0.0, seed=5, slow_share=0.2, hide_host=True)
    results = tmp_path / "h" / "results"
    got = {}
    for url in (pg_url, str(tmp_path / "same.sqlite")):
        with Store(url) as store:
            report = ingest_results_dir(store, results)
            assert any("slower jobs" in n for n in report.notes)
            got[url] = {m.name: store.run_commits(m.name) for m in store.machines()}
            assert not any("slower jobs" in n for n in ingest_results_dir(store, results).notes)
    pg, lite = got.values()
    assert pg == lite and len(pg) == 2 and pg["runner [virtualenv-py3.11, slower jobs]"]


def test_a_server_that_never_answers_is_an_error_not_a_hang(tmp_path):
    """A server that accepts the connection and says nothing: the store gives up after its connect
    timeout with one line that keeps the password out, instead of waiting forever (libpq's default)."""
    import socket
    import subprocess
    import sys

    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(4)
        port = silent.getsockname()[1]
        code = ("import ci.store.engine as e; e.CONNECT_TIMEOUT_S = 1\n"
                "from ci.cli import main\n"
                f"raise SystemExit(main(['dashboard', '--db', 'postgresql+psycopg://u:s3cretPW@127.0.0.1:{port}/x', "
                f"'--out', {str(tmp_path / 'dash')!r}]))")
        t0 = time.monotonic()
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        assert time.monotonic() - t0 < 30
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "timeout" in proc.stderr.lower() and "s3cretPW" not in proc.stdout + proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_role_or_session_that_cannot_write_is_found_before_a_job_measures(pg_url):
    """`Store.require_writable` (called before a runner job's first asv call): a role granted SELECT
    only, and a session whose transactions are read-only, are refused with the server's reason; the
    owner's session passes and writes nothing."""
    import uuid

    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    from ci.store import StoreError

    with Store(pg_url) as store:
        store.require_writable()
        before = store.run_digests()
    role, secret = f"ci_reader_{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    owner = create_engine(pg_url, isolation_level="AUTOCOMMIT")
    try:
        with owner.connect() as conn:
            conn.execute(text(f"CREATE ROLE {role} LOGIN PASSWORD '{secret}'"))
            conn.execute(text(f"GRANT USAGE ON SCHEMA public TO {role}"))
            conn.execute(text(f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {role}"))
        reader = make_url(pg_url).set(username=role, password=secret).render_as_string(hide_password=False)
        refused = pytest.raises(StoreError, match="cannot be written .*permission")
        with Store(reader, create=False) as store, refused as exc:
            store.require_writable()
        assert secret not in str(exc.value)
        ro_session = make_url(pg_url).update_query_dict({"options": "-c default_transaction_read_only=on"})
        with Store(ro_session.render_as_string(hide_password=False), migrate=False) as store, \
                pytest.raises(StoreError, match="cannot be written .*read-only transaction"):
            store.require_writable()
        with Store(pg_url) as store:
            assert store.run_digests() == before
    finally:
        with owner.connect() as conn:
            conn.execute(text(f"DROP OWNED BY {role}"))
            conn.execute(text(f"DROP ROLE IF EXISTS {role}"))
        owner.dispose()
