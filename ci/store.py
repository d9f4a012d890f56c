"""The results store: SQLAlchemy 2 over SQLite (default, a file) or any SQLAlchemy URL
(PostgreSQL when several runners share one history).

`Store` implements `ci.records.StoreReader` for the verdict code, the PR comment and the
dashboard, plus the write side: `ingest_run` (one asv result file, one transaction),
`save_verdicts` and `acknowledge`. The schema is created and upgraded by the alembic
migrations in `ci/migrations/` every time a store is opened, so an existing history survives
upgrades.

Concurrency: every write is one short transaction that is retried on a lost race.
- SQLite: WAL journal, a 60 s busy timeout, and writes start with `BEGIN IMMEDIATE`, so two
  writers queue on the file lock instead of one failing half-way with "database is locked"
  (pysqlite's default deferred BEGIN upgrades the lock late and can deadlock).
- PostgreSQL: rows that several runners may add at once (machines, commits, benchmarks) go in
  with `INSERT ... ON CONFLICT DO NOTHING`; two runners ingesting the same file race on the
  unique run key, the loser gets an IntegrityError, retries, and finds the run already there.
  Migrations run under a transaction-scoped advisory lock.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import (
    Connection,
    Engine,
    String,
    create_engine,
    delete,
    event,
    func,
    insert,
    select,
    text,
    type_coerce,
    update,
)
from sqlalchemy import inspect as sa_inspect
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.orm import Session
from sqlalchemy.pool import StaticPool

from ci.asv_results import ParsedRun
from ci.models import (
    AcknowledgementRow,
    BenchmarkRow,
    CommitRow,
    MachineRow,
    ResultRow,
    RunRow,
    VerdictRow,
)
from ci.records import (
    Acknowledgement,
    Benchmark,
    Commit,
    Direction,
    Kind,
    Machine,
    Outcome,
    Result,
    Verdict,
)

DEFAULT_DB = ".asv/history.sqlite"
MIGRATIONS_DIR = Path(__file__).with_name("migrations")
_PG_MIGRATION_LOCK = 0x72616767  # any constant shared by every process migrating this schema
_RETRIES = 8
_RESULT_COLUMNS = (
    "run_id", "benchmark_id", "status", "value", "samples", "has_raw_samples", "ci_99_a", "ci_99_b", "q_25", "q_75",
    "number", "repeat", "benchmark_version", "started_at", "duration",
)  # fmt: skip
_CHUNK = 500  # rows per IN (...) lookup; far below SQLite's bound-parameter limit


@dataclass(frozen=True)
class FailedPoint:
    """A benchmark point that asv recorded as failed (null) or skipped (NaN): never a value."""

    benchmark: Benchmark
    commit_sha: str
    machine: str
    status: str  # "failed" or "skipped"
    run_id: str


class StoreError(RuntimeError):
    """The database cannot serve as a results store: missing, not a store, or from a newer schema."""


def resolve_url(db: str | os.PathLike[str] | None, *, must_exist: bool = False) -> str:
    """The SQLAlchemy URL for a `--db` argument.

    Args:
        db: None for the default SQLite file (`.asv/history.sqlite`), a bare path for an SQLite
            file (its folder is created), `:memory:` for a private in-memory SQLite database, or
            any SQLAlchemy URL (`postgresql+psycopg://...`).
        must_exist: a bare path must name an existing file (commands that only read a history
            must not create an empty one where a path was mistyped).

    Returns:
        A SQLAlchemy URL string.
    """
    if db is None:
        db = DEFAULT_DB
    if not isinstance(db, str | os.PathLike):
        raise TypeError(f"db must be a path or SQLAlchemy URL string, got {type(db).__name__}")
    text_db = os.fspath(db)
    if not text_db.strip():
        raise ValueError("db must not be empty: give a path or a SQLAlchemy URL")
    if "://" in text_db:
        return text_db
    if text_db == ":memory:":
        return "sqlite://"
    path = Path(text_db).expanduser().resolve()
    if path.is_dir():
        raise StoreError(f"{text_db} is a folder, not an SQLite file: give the database file's path")
    if must_exist and not path.exists():
        raise StoreError(f"no results store at {path}: ingest results first (python -m ci ingest --db {text_db} "
                         "RESULTS_DIR), or check the --db path")
    path.parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{path}"


def _alembic_config() -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    return cfg


def head_revision() -> str:
    """The newest schema revision this code knows."""
    head = ScriptDirectory.from_config(_alembic_config()).get_current_head()
    assert head is not None
    return head


def _utc(dt: datetime | None) -> datetime | None:
    if dt is None:
        return None
    return dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt.astimezone(UTC)


def _parse_dt(value: Any, memo: dict[Any, datetime | None]) -> datetime | None:
    """A UTC datetime from a DateTime column read raw (text on SQLite), memoised per value."""
    if value is None:
        return None
    out = memo.get(value)
    if out is None:
        out = memo[value] = _utc(datetime.fromisoformat(value) if isinstance(value, str) else value)
    return out


def _samples_json(samples: tuple[float, ...]) -> str:
    """JSON text of a sample list, ~4x cheaper than json.dumps for the common all-finite case."""
    text = "[" + ",".join(map(repr, samples)) + "]"
    # repr gives nan/inf, which JSON spells NaN/Infinity: let json do those (rare) lists.
    return json.dumps(list(samples)) if "n" in text else text


def _parse_samples(text: str) -> tuple[float, ...]:
    """Samples from their stored JSON list. Always a flat list of numbers (`_samples_json`), so
    split + float, which also reads JSON's NaN/Infinity, costs a fifth of json.loads; anything
    else goes through json."""
    if text == "[]":
        return ()
    try:
        return tuple(map(float, text[1:-1].split(",")))
    except ValueError:
        return tuple(json.loads(text))


def _nan_to_none(x: float | None) -> float | None:
    if x is None:
        return None
    x = float(x)
    return None if math.isnan(x) else x


def _none_to_nan(x: float | None) -> float:
    return math.nan if x is None else float(x)


def _retryable(exc: DBAPIError) -> bool:
    if isinstance(exc, IntegrityError):
        return True  # lost a race on a unique key: the retry finds the winner's row
    message = str(exc.orig).lower() if exc.orig is not None else str(exc).lower()
    return any(s in message for s in ("database is locked", "deadlock", "could not serialize", "busy"))


class Store:
    """The results history. Open with a path or URL; use as a context manager or call close().

    Args:
        db: see `resolve_url`.
        migrate: upgrade the schema to the newest revision at open (default). False leaves an
            existing schema as it is (tests of migrations use this).
        echo: log SQL (debugging).
        create: make a new store where there is none (default). False (the commands that only
            read a history, or add to one) raises `StoreError` for a missing SQLite file or a
            database without the store's schema, instead of creating an empty history.

    Raises:
        StoreError: the database holds other tables and no store schema, its schema is newer
            than this code, or (create=False) there is no store.
    """

    def __init__(
        self, db: str | os.PathLike[str] | None = None, *, migrate: bool = True, echo: bool = False,
        create: bool = True,
    ) -> None:
        self.url = resolve_url(db, must_exist=not create)
        self.engine: Engine = self._make_engine(self.url, echo)
        if not create:
            with self.engine.connect() as conn:
                if MigrationContext.configure(conn).get_current_revision() is None:
                    self.engine.dispose()
                    raise StoreError(f"{display_url(self.url)} holds no results store yet: ingest results first "
                                     "(python -m ci ingest), or check --db")
        self._bench_ids: dict[str, int] = {}
        self._bench_by_id: dict[int, Benchmark] = {}
        self._results_sql: str | None = None
        self._result_procs: list[tuple[int, Any]] = []
        if migrate:
            migrate_schema(self.engine)

    # -- connection handling -------------------------------------------------------------

    @staticmethod
    def _make_engine(url: str, echo: bool) -> Engine:
        if url.startswith("sqlite"):
            memory = url in ("sqlite://", "sqlite:///:memory:")
            engine = create_engine(
                url,
                echo=echo,
                connect_args={"timeout": 60, "check_same_thread": False},
                **({"poolclass": StaticPool} if memory else {}),
            )

            @event.listens_for(engine, "connect")
            def _on_connect(dbapi_conn: Any, _record: Any) -> None:
                # Take transaction control from pysqlite so that "begin" below decides the BEGIN kind.
                dbapi_conn.isolation_level = None
                cur = dbapi_conn.cursor()
                cur.execute("PRAGMA busy_timeout = 60000")
                if not memory:
                    cur.execute("PRAGMA journal_mode = WAL")
                    cur.execute("PRAGMA synchronous = NORMAL")  # WAL + NORMAL is still crash-safe, fsyncs less
                cur.execute("PRAGMA foreign_keys = ON")
                # 64 MiB page cache instead of 2 MiB: a 10^6-row history's indexes stay in memory.
                cur.execute("PRAGMA cache_size = -65536")
                cur.close()

            @event.listens_for(engine, "begin")
            def _on_begin(conn: Connection) -> None:
                conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get("write") else "BEGIN")

            return engine
        return create_engine(url, echo=echo, pool_pre_ping=True)

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    def close(self) -> None:
        """Release every pooled connection."""
        self.engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _read(self) -> Iterator[Session]:
        # One read transaction (one snapshot) per call; ORM objects for the small tables.
        with self.engine.connect() as conn, conn.begin(), Session(bind=conn) as session:
            yield session

    def _write_retrying(self, fn: Any, *args: Any) -> Any:
        """Run `fn(conn, *args)` in one write transaction, retrying lost races; all or nothing."""
        delay = 0.05
        for attempt in range(_RETRIES):
            pending: dict[str, int] = {}
            try:
                with self.engine.connect() as conn:
                    conn.execution_options(write=True)
                    with conn.begin():
                        out = fn(conn, pending, *args)
                self._bench_ids.update(pending)  # only ids of committed rows are cached
                return out
            except DBAPIError as exc:
                if attempt == _RETRIES - 1 or not _retryable(exc):
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 1.0)
        raise AssertionError("unreachable")

    def _insert_ignore(self, table: Any) -> Any:
        """An INSERT that skips rows whose unique key exists, where the dialect supports it."""
        if self.dialect == "sqlite":
            from sqlalchemy.dialects.sqlite import insert as dialect_insert
        elif self.dialect == "postgresql":
            from sqlalchemy.dialects.postgresql import insert as dialect_insert
        else:
            return None
        return dialect_insert(table).on_conflict_do_nothing()

    # -- write side ----------------------------------------------------------------------

    def _upsert_machine(self, conn: Connection, machine: Machine) -> int:
        fields = {
            "gpu": machine.gpu,
            "driver": machine.driver,
            "cuda": machine.cuda,
            "torch": machine.torch,
            "triton": machine.triton,
            "cpu": machine.cpu,
            "extra": json.dumps(dict(machine.extra), sort_keys=True),
        }
        row = conn.execute(select(MachineRow.__table__).where(MachineRow.name == machine.name)).one_or_none()
        if row is None:
            stmt = self._insert_ignore(MachineRow.__table__)
            if stmt is None:
                conn.execute(insert(MachineRow.__table__).values(name=machine.name, **fields))
            else:
                conn.execute(stmt.values(name=machine.name, **fields))
            return conn.execute(select(MachineRow.id).where(MachineRow.name == machine.name)).scalar_one()
        # Newer information wins for fields this run knows; an unknown (empty) field never erases one.
        changes = {k: v for k, v in fields.items() if v not in ("", "{}") and getattr(row, k) != v}
        if changes:
            conn.execute(update(MachineRow).where(MachineRow.id == row.id).values(**changes))
        return row.id

    def _upsert_commit(self, conn: Connection, commit: Commit) -> int:
        fields = {
            "parents": json.dumps(list(commit.parents)),
            "branch": commit.branch,
            "time": _utc(commit.time),
            "subject": commit.subject,
        }
        row = conn.execute(select(CommitRow.__table__).where(CommitRow.sha == commit.sha)).one_or_none()
        if row is None:
            stmt = self._insert_ignore(CommitRow.__table__)
            values = dict(sha=commit.sha, **fields)
            conn.execute((stmt if stmt is not None else insert(CommitRow.__table__)).values(**values))
            return conn.execute(select(CommitRow.id).where(CommitRow.sha == commit.sha)).scalar_one()
        changes: dict[str, Any] = {}
        if commit.parents and row.parents != fields["parents"]:
            changes["parents"] = fields["parents"]
        if commit.subject and row.subject != commit.subject:
            changes["subject"] = commit.subject
        if commit.branch and not row.branch:  # the first branch a commit was seen on stays its branch
            changes["branch"] = commit.branch
        # git's time (a record with a subject or parents came from git) beats asv's date.
        if commit.time is not None and (row.time is None or commit.parents or commit.subject):
            if _utc(row.time) != fields["time"]:
                changes["time"] = fields["time"]
        if changes:
            conn.execute(update(CommitRow).where(CommitRow.id == row.id).values(**changes))
        return row.id

    def _benchmark_ids(
        self, conn: Connection, pending: dict[str, int], benches: Iterable[Benchmark] | dict[str, Benchmark]
    ) -> dict[str, int]:
        wanted = benches if isinstance(benches, dict) else {b.key: b for b in benches}
        ids = {k: self._bench_ids[k] for k in wanted if k in self._bench_ids}
        missing = sorted(k for k in wanted if k not in ids)  # sorted: concurrent writers lock keys in one order
        for i in range(0, len(missing), _CHUNK):
            chunk = missing[i : i + _CHUNK]
            found = dict(
                conn.execute(select(BenchmarkRow.key, BenchmarkRow.id).where(BenchmarkRow.key.in_(chunk))).all()
            )
            new = [k for k in chunk if k not in found]
            if new:
                rows = [
                    {
                        "key": k,
                        "name": wanted[k].name,
                        "params": json.dumps([list(p) for p in wanted[k].params]),
                        "unit": wanted[k].unit,
                        "direction": str(wanted[k].direction),
                        "kind": str(wanted[k].kind),
                    }
                    for k in new
                ]
                stmt = self._insert_ignore(BenchmarkRow.__table__)
                conn.execute(stmt if stmt is not None else insert(BenchmarkRow.__table__), rows)
                found.update(
                    conn.execute(select(BenchmarkRow.key, BenchmarkRow.id).where(BenchmarkRow.key.in_(new))).all()
                )
            ids.update(found)
            pending.update(found)
        return ids

    def ingest_run(self, run: ParsedRun, machine: Machine, commit: Commit) -> str:
        """Write one parsed asv result file in one transaction: all of it or nothing.

        Args:
            run: from `ci.asv_results.parse_result_file`.
            machine: the machine row to create or refresh (name must equal `run.machine`).
            commit: the commit row to create or enrich (sha must equal `run.commit_hash`).

        Returns:
            "inserted", "replaced" (asv rewrote the file since the last ingest) or "unchanged"
            (identical bytes were ingested before: nothing is written).
        """
        if not isinstance(run, ParsedRun):
            raise TypeError(f"run must be a ParsedRun, got {type(run).__name__}")
        if machine.name != run.machine:
            raise ValueError(f"machine {machine.name!r} does not match the run's machine {run.machine!r}")
        if commit.sha != run.commit_hash:
            raise ValueError(f"commit {commit.sha!r} does not match the run's commit {run.commit_hash!r}")
        return self._write_retrying(self._ingest_run_tx, run, machine, commit)

    def ingest_runs(self, items: Sequence[tuple[ParsedRun, Machine, Commit]]) -> list[str | Exception]:
        """Write several parsed result files in one transaction, each file inside its own
        SAVEPOINT: a file that fails is rolled back alone (never a partial run) while the others
        commit together. One commit per batch instead of per file: each file dirties ~500 pages
        of the (benchmark, run) index, and writing those once per batch made 1,000-file ingest
        2.5x faster on SQLite (2026-11-29, docs/performance.md "Ingest and store"). A crash loses the whole uncommitted
        batch, which the next ingest simply writes again.

        Args:
            items: (run, machine, commit) triples as for `ingest_run`.

        Returns:
            Per item, "inserted" / "replaced" / "unchanged", or the exception that failed it.
        """
        for run, machine, commit in items:
            if not isinstance(run, ParsedRun):
                raise TypeError(f"run must be a ParsedRun, got {type(run).__name__}")
            if machine.name != run.machine or commit.sha != run.commit_hash:
                raise ValueError(f"{run.path}: machine/commit records do not match the run")
        retry = object()

        def tx(conn: Connection, pending: dict[str, int]) -> list[Any]:
            out: list[Any] = []
            for run, machine, commit in items:
                before = dict(pending)
                try:
                    with conn.begin_nested():
                        out.append(self._ingest_run_tx(conn, pending, run, machine, commit))
                except Exception as exc:
                    # Ids of benchmarks created inside the rolled-back savepoint must not be cached.
                    pending.clear()
                    pending.update(before)
                    out.append(retry if isinstance(exc, DBAPIError) and _retryable(exc) else exc)
            return out

        statuses = self._write_retrying(tx)
        for i, status in enumerate(statuses):
            if status is retry:  # lost a race with another runner: redo that file on its own
                try:
                    statuses[i] = self.ingest_run(*items[i])
                except Exception as exc:
                    statuses[i] = exc
        return statuses

    def _ingest_run_tx(
        self, conn: Connection, pending: dict[str, int], run: ParsedRun, machine: Machine, commit: Commit
    ) -> str:
        existing = conn.execute(select(RunRow.id, RunRow.digest).where(RunRow.run_key == run.run_key)).one_or_none()
        machine_id = self._upsert_machine(conn, machine)
        commit_id = self._upsert_commit(conn, commit)
        values = {
            "run_key": run.run_key,
            "digest": run.digest,
            "machine_id": machine_id,
            "commit_id": commit_id,
            "env_name": run.env_name,
            "started_at": _utc(run.started_at),
            "ingested_at": datetime.now(UTC),
            "source": str(run.path),
            "environment": json.dumps(dict(run.environment), sort_keys=True),
        }
        if existing is not None:
            if existing.digest == run.digest:
                return "unchanged"
            # asv rewrote the file: its results replace the stored ones, except those of benchmarks
            # this parse had to skip (missing from benchmarks.json, or of another version): the
            # file could not be read for them, which is no reason to lose what was stored.
            unreadable = sorted(set(run.skipped_unknown) | set(run.skipped_stale))
            gone = delete(ResultRow).where(ResultRow.run_id == existing.id)
            if unreadable:
                gone = gone.where(
                    ResultRow.benchmark_id.not_in(select(BenchmarkRow.id).where(BenchmarkRow.name.in_(unreadable)))
                )
            conn.execute(gone)
            conn.execute(update(RunRow).where(RunRow.id == existing.id).values(**values))
            run_id = existing.id
            status = "replaced"
        else:
            run_id = conn.execute(
                insert(RunRow.__table__).values(**values).returning(RunRow.__table__.c.id)
            ).scalar_one()
            status = "inserted"
        bench_ids = self._benchmark_ids(conn, pending, {p.key: p.benchmark for p in run.points})
        rows = [
            (
                run_id,
                bench_ids[p.key],
                p.status,
                p.value,
                _samples_json(p.samples),
                p.has_raw_samples,
                p.stats.get("ci_99_a"),
                p.stats.get("ci_99_b"),
                p.stats.get("q_25"),
                p.stats.get("q_75"),
                p.stats.get("number"),
                p.stats.get("repeat"),
                p.benchmark_version,
                _utc(p.started_at),
                p.duration,
            )
            for p in run.points
        ]
        if rows:
            self._insert_results(conn, rows)
        return status

    def _insert_results(self, conn: Connection, rows: list[tuple[Any, ...]]) -> None:
        """One executemany for a file's results, the bulk of ingest time: straight to the driver
        with the column types' own bind processors, which halves the cost of Core's per-row
        parameter handling (measured 2026-11-29, docs/performance.md "Ingest and store")."""
        table = ResultRow.__table__
        if self._results_sql is None:
            cols = [c for c in table.c if c.name != "id"]
            assert [c.name for c in cols] == list(_RESULT_COLUMNS)
            style = conn.dialect.paramstyle
            mark = {"qmark": "?", "format": "%s", "pyformat": "%s"}.get(style)
            if mark is None:
                self._results_sql = ""
            else:
                quote = conn.dialect.identifier_preparer.quote
                self._results_sql = (
                    f"INSERT INTO {quote(table.name)} ({', '.join(quote(c.name) for c in cols)}) "
                    f"VALUES ({', '.join([mark] * len(cols))})"
                )
                self._result_procs = [
                    (i, proc)
                    for i, c in enumerate(cols)
                    if (proc := c.type.dialect_impl(conn.dialect).bind_processor(conn.dialect)) is not None
                ]
        if not self._results_sql:  # a DBAPI with named parameters: let Core do it
            conn.execute(insert(table), [dict(zip(_RESULT_COLUMNS, r, strict=True)) for r in rows])
            return
        if self._result_procs:
            memo: dict[tuple[int, Any], Any] = {}  # started_at repeats within a benchmark's grid
            fixed = []
            for r in rows:
                r = list(r)
                for i, proc in self._result_procs:
                    v = r[i]
                    if v is not None:
                        got = memo.get((i, v))
                        if got is None:
                            got = memo[(i, v)] = proc(v)
                        r[i] = got
                fixed.append(tuple(r))
            rows = fixed
        conn.exec_driver_sql(self._results_sql, rows)

    def upsert_commits(self, commits: Sequence[Commit]) -> None:
        """Create commits or enrich them with parents/branch/time/subject, in one transaction.

        Args:
            commits: records; empty fields never erase known ones.
        """
        for c in commits:
            if not isinstance(c, Commit):
                raise TypeError(f"expected Commit records, got {type(c).__name__}")

        def tx(conn: Connection, _pending: dict[str, int]) -> None:
            for c in commits:
                self._upsert_commit(conn, c)

        self._write_retrying(tx)

    def save_verdicts(self, verdicts: Sequence[Verdict]) -> int:
        """Store verdicts; a verdict for the same (series, machine, base, head) replaces the old one.

        Args:
            verdicts: from `ci.verdicts.compare` / `ci.gates.correctness_gates`.

        Returns:
            The number of verdicts written (an exact repeat within `verdicts` counts once).

        Raises:
            TypeError: an item is not a Verdict, or its machine is not a string.
            ValueError: two different verdicts for one (series, machine, base, head): one would be lost.
        """
        unique: dict[tuple[str, str, str, str], Verdict] = {}
        for v in verdicts:
            if not isinstance(v, Verdict):
                raise TypeError(f"expected Verdict records, got {type(v).__name__}")
            if not isinstance(v.machine, str):
                raise TypeError(f"Verdict.machine must be a str ('' when unknown), got {type(v.machine).__name__}")
            k = (v.benchmark.key, v.machine, v.base_sha, v.head_sha)
            # repr, not ==: fields that are NaN (never equal to themselves) still match in a repeat.
            if repr(unique.setdefault(k, v)) != repr(v):
                raise ValueError(
                    f"two different verdicts for series {k[0]!r} on machine {k[1]!r}, base {k[2]!r}, head {k[3]!r} "
                    f"({unique[k].outcome} and {v.outcome}): only one can be stored"
                )
        if not unique:
            return 0

        def tx(conn: Connection, pending: dict[str, int]) -> int:
            ids = self._benchmark_ids(conn, pending, (v.benchmark for v in unique.values()))
            now = datetime.now(UTC)
            for v in unique.values():
                bid = ids[v.benchmark.key]
                conn.execute(
                    delete(VerdictRow).where(
                        VerdictRow.benchmark_id == bid,
                        VerdictRow.machine == v.machine,
                        VerdictRow.base_sha == v.base_sha,
                        VerdictRow.head_sha == v.head_sha,
                    )
                )
            conn.execute(
                insert(VerdictRow.__table__),
                [
                    {
                        "benchmark_id": ids[v.benchmark.key],
                        "outcome": str(v.outcome),
                        "base_value": _nan_to_none(v.base_value),
                        "head_value": _nan_to_none(v.head_value),
                        "ratio": _nan_to_none(v.ratio),
                        "ci_low": _nan_to_none(v.ci_low),
                        "ci_high": _nan_to_none(v.ci_high),
                        "p_value": _nan_to_none(v.p_value),
                        "threshold": _nan_to_none(v.threshold),
                        "base_sha": v.base_sha,
                        "head_sha": v.head_sha,
                        "reason": v.reason,
                        "machine": v.machine,
                        "created_at": now,
                    }
                    for v in unique.values()
                ],
            )
            return len(unique)

        return self._write_retrying(tx)

    def acknowledge(
        self, benchmark_key: str, commit_sha: str, who: str, why: str, when: datetime | None = None
    ) -> Acknowledgement:
        """Record that a regression of one series at one commit is expected (who, when, why).

        Args:
            benchmark_key: a series key as in `Benchmark.key` (must exist in the store).
            commit_sha: the commit, full sha or a unique prefix of at least 7 characters.
            who: the person acknowledging (non-empty).
            why: the reason (non-empty).
            when: defaults to now (UTC).

        Returns:
            The stored Acknowledgement (with the full commit sha).
        """
        for name, value in (("benchmark_key", benchmark_key), ("commit_sha", commit_sha), ("who", who), ("why", why)):
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"acknowledge: {name} must be a non-empty string, got {value!r}")
        if when is not None and not isinstance(when, datetime):
            raise TypeError(f"acknowledge: when must be a datetime, got {type(when).__name__}")
        sha = self.resolve_commit(commit_sha)
        with self._read() as conn:
            if conn.execute(select(BenchmarkRow.id).where(BenchmarkRow.key == benchmark_key)).first() is None:
                raise ValueError(f"acknowledge: unknown benchmark series {benchmark_key!r}")
        ack = Acknowledgement(benchmark_key, sha, who.strip(), why.strip(), _utc(when) or datetime.now(UTC))

        def tx(conn: Connection, _pending: dict[str, int]) -> None:
            conn.execute(
                insert(AcknowledgementRow.__table__).values(
                    benchmark_key=ack.benchmark_key, commit_sha=ack.commit_sha, who=ack.who, why=ack.why, when=ack.when
                )
            )

        self._write_retrying(tx)
        return ack

    # -- read side (StoreReader) -----------------------------------------------------------

    def resolve_commit(self, sha_or_prefix: str) -> str:
        """The full sha of a stored commit from its sha or a unique prefix (>= 7 hex characters).

        Args:
            sha_or_prefix: the commit id as typed by a user.

        Returns:
            The full sha; raises ValueError when unknown or ambiguous.
        """
        if not isinstance(sha_or_prefix, str):
            raise TypeError(f"commit must be a string, got {type(sha_or_prefix).__name__}")
        prefix = sha_or_prefix.strip().lower()
        if prefix and any(c not in "0123456789abcdef" for c in prefix):
            raise ValueError(f"commit {sha_or_prefix!r} is not a sha: the store knows commits by sha, not by branch "
                             f"or tag name (pass e.g. $(git rev-parse {sha_or_prefix.strip()}))")
        if len(prefix) < 7:
            raise ValueError(f"commit {sha_or_prefix!r}: give a sha or a prefix of at least 7 characters")
        with self._read() as conn:
            found = conn.execute(
                select(CommitRow.sha).where(CommitRow.sha.startswith(prefix, autoescape=True))
            ).scalars()
            shas = list(found.all())
        if not shas:
            raise ValueError(f"commit {sha_or_prefix!r} is not in the store")
        if len(shas) > 1 and prefix not in shas:
            raise ValueError(f"commit prefix {sha_or_prefix!r} is ambiguous: {', '.join(sorted(shas)[:5])}")
        return prefix if prefix in shas else shas[0]

    def machines(self) -> list[Machine]:
        """Every machine, by name."""
        with self._read() as conn:
            rows = conn.execute(select(MachineRow).order_by(MachineRow.name)).scalars().all()
        return [
            Machine(
                name=r.name,
                gpu=r.gpu,
                driver=r.driver,
                cuda=r.cuda,
                torch=r.torch,
                triton=r.triton,
                cpu=r.cpu,
                extra=tuple(sorted(json.loads(r.extra).items())),
            )
            for r in rows
        ]

    @staticmethod
    def _commit_order() -> tuple[Any, ...]:
        # Commits without a time (none should exist: asv records one) go last, then insertion order.
        return (CommitRow.time.is_(None), CommitRow.time, CommitRow.id)

    def commits(self, branch: str | None = None) -> list[Commit]:
        """Commits in history order (oldest first); with `branch`, only that branch's.

        Args:
            branch: a branch name, or None for all commits.

        Returns:
            Commit records.
        """
        stmt = select(CommitRow).order_by(*self._commit_order())
        if branch is not None:
            stmt = stmt.where(CommitRow.branch == branch)
        with self._read() as conn:
            rows = conn.execute(stmt).scalars().all()
        return [
            Commit(
                sha=r.sha, parents=tuple(json.loads(r.parents)), branch=r.branch, time=_utc(r.time), subject=r.subject
            )
            for r in rows
        ]

    @staticmethod
    def _bench(row: Any) -> Benchmark:
        return Benchmark(
            name=row.name,
            params=tuple((str(k), str(v)) for k, v in json.loads(row.params)),
            unit=row.unit,
            direction=Direction(row.direction),
            kind=Kind(row.kind),
        )

    def benchmarks(self) -> list[Benchmark]:
        """Every series (benchmark name x parameter point), by key."""
        with self._read() as conn:
            rows = conn.execute(select(BenchmarkRow).order_by(BenchmarkRow.key)).scalars().all()
        return [self._bench(r) for r in rows]

    def _points(
        self, status_ok: bool, benchmark_key: str | None, machine: str | None, commit_sha: str | None
    ) -> list[Any]:
        stmt = (
            select(
                ResultRow.benchmark_id,
                ResultRow.samples,
                self._dt(ResultRow.started_at).label("started_at"),
                ResultRow.status,
                RunRow.run_key,
                self._dt(RunRow.started_at).label("run_started"),
                RunRow.environment,
                CommitRow.sha,
                MachineRow.name.label("machine"),
                ResultRow.benchmark_version,
            )
            .join(RunRow, ResultRow.run_id == RunRow.id)
            .join(CommitRow, RunRow.commit_id == CommitRow.id)
            .join(MachineRow, RunRow.machine_id == MachineRow.id)
            .order_by(*self._commit_order(), RunRow.started_at, RunRow.id, ResultRow.benchmark_id)
        )
        stmt = stmt.where(ResultRow.status == "ok") if status_ok else stmt.where(ResultRow.status != "ok")
        if machine is not None:
            stmt = stmt.where(MachineRow.name == machine)
        if commit_sha is not None:
            stmt = stmt.where(CommitRow.sha == commit_sha)
        with self.engine.connect() as conn, conn.begin():
            if benchmark_key is not None:
                # Resolve the key first so the query walks the (benchmark_id, run_id) index.
                bid = conn.execute(select(BenchmarkRow.id).where(BenchmarkRow.key == benchmark_key)).scalar()
                if bid is None:
                    return []
                stmt = stmt.where(ResultRow.benchmark_id == bid)
            return list(conn.execute(stmt).all())

    def _dt(self, column: Any) -> Any:
        """A DateTime column for bulk reads: on SQLite the stored text, parsed by `_parse_dt`
        (datetime.fromisoformat is ~10x cheaper than SQLAlchemy's regex-based SQLite processor,
        which was a third of a series read)."""
        return type_coerce(column, String) if self.dialect == "sqlite" else column

    def _bench_map(self, ids: Iterable[int]) -> dict[int, Benchmark]:
        """Benchmarks by id; cached, since a series' identity never changes once stored."""
        if not set(ids) <= self._bench_by_id.keys():
            with self._read() as conn:
                self._bench_by_id = {r.id: self._bench(r) for r in conn.execute(select(BenchmarkRow)).scalars().all()}
        return self._bench_by_id

    def results(
        self,
        *,
        benchmark_key: str | None = None,
        machine: str | None = None,
        commit_sha: str | None = None,
    ) -> list[Result]:
        """Measured results filtered by any combination of series key, machine and commit, in
        commit history order (oldest first). Failed and skipped points are not results: see
        `failures`.

        Args:
            benchmark_key: a `Benchmark.key`.
            machine: a machine name.
            commit_sha: a full commit sha.

        Returns:
            Result records with their raw samples (or asv's single reported value when the run
            did not record samples) and the run's environment.
        """
        rows = self._points(True, benchmark_key, machine, commit_sha)
        if not rows:
            return []
        benches = self._bench_map({r.benchmark_id for r in rows})
        envs: dict[str, tuple[tuple[str, str], ...]] = {}  # one parse per run, not per row
        times: dict[Any, datetime | None] = {}
        out = []
        for bid, samples, started, _status, run_key, run_started, env_text, sha, machine, version in rows:
            env = envs.get(env_text)
            if env is None:
                env = envs[env_text] = tuple(sorted(json.loads(env_text).items()))
            out.append(
                Result(
                    benchmark=benches[bid],
                    commit_sha=sha,
                    machine=machine,
                    samples=_parse_samples(samples),
                    run_id=run_key,
                    started_at=_parse_dt(started, times) or _parse_dt(run_started, times),
                    environment=env,
                    benchmark_version=version,
                )
            )
        return out

    def failures(
        self, *, benchmark_key: str | None = None, machine: str | None = None, commit_sha: str | None = None
    ) -> list[FailedPoint]:
        """Points asv recorded as failed or skipped, same filters and order as `results`.

        Args:
            benchmark_key: a `Benchmark.key`.
            machine: a machine name.
            commit_sha: a full commit sha.

        Returns:
            FailedPoint records (a crashed correctness benchmark is a failure, not a pass).
        """
        rows = self._points(False, benchmark_key, machine, commit_sha)
        benches = self._bench_map({r.benchmark_id for r in rows}) if rows else {}
        return [FailedPoint(benches[r.benchmark_id], r.sha, r.machine, r.status, r.run_key) for r in rows]

    def verdicts(self, *, head_sha: str | None = None) -> list[Verdict]:
        """Stored verdicts, oldest first; with `head_sha`, only that head's.

        Args:
            head_sha: a full commit sha.

        Returns:
            Verdict records (NaN where a number was not computed).
        """
        stmt = select(VerdictRow, BenchmarkRow).join(BenchmarkRow, VerdictRow.benchmark_id == BenchmarkRow.id)
        if head_sha is not None:
            stmt = stmt.where(VerdictRow.head_sha == head_sha)
        stmt = stmt.order_by(VerdictRow.created_at, VerdictRow.id)
        with self._read() as conn:
            rows = conn.execute(stmt).all()
        return [
            Verdict(
                benchmark=self._bench(b),
                outcome=Outcome(v.outcome),
                base_value=_none_to_nan(v.base_value),
                head_value=_none_to_nan(v.head_value),
                ratio=_none_to_nan(v.ratio),
                ci_low=_none_to_nan(v.ci_low),
                ci_high=_none_to_nan(v.ci_high),
                p_value=_none_to_nan(v.p_value),
                threshold=_none_to_nan(v.threshold),
                base_sha=v.base_sha,
                head_sha=v.head_sha,
                reason=v.reason,
                machine=v.machine,
            )
            for v, b in rows
        ]

    def acknowledgements(self) -> list[Acknowledgement]:
        """Every acknowledgement, oldest first."""
        stmt = select(AcknowledgementRow).order_by(AcknowledgementRow.when, AcknowledgementRow.id)
        with self._read() as conn:
            rows = conn.execute(stmt).scalars().all()
        return [Acknowledgement(r.benchmark_key, r.commit_sha, r.who, r.why, _utc(r.when)) for r in rows]

    def run_digests(self) -> dict[str, str]:
        """sha256 of every ingested result file -> its commit sha (lets ingest skip known files unparsed)."""
        stmt = select(RunRow.digest, CommitRow.sha).join(CommitRow, RunRow.commit_id == CommitRow.id)
        with self.engine.connect() as conn, conn.begin():
            return {digest: sha for digest, sha in conn.execute(stmt)}

    def counts(self) -> dict[str, int]:
        """Row counts per table (ingest summaries and tests)."""
        tables = {
            "machines": MachineRow,
            "commits": CommitRow,
            "benchmarks": BenchmarkRow,
            "runs": RunRow,
            "results": ResultRow,
            "verdicts": VerdictRow,
            "acknowledgements": AcknowledgementRow,
        }
        with self._read() as conn:
            return {name: conn.execute(select(func.count()).select_from(m)).scalar_one() for name, m in tables.items()}


def migrate_schema(engine: Engine, revision: str = "head") -> None:
    """Upgrade the store's schema to `revision` under a lock, so that runners opening one
    history at the same time migrate it once.

    Args:
        engine: the store's engine.
        revision: an alembic revision id, "head" by default.
    """
    cfg = _alembic_config()
    scripts = ScriptDirectory.from_config(cfg)
    target = head_revision() if revision == "head" else revision
    with engine.connect() as conn:
        conn.execution_options(write=True)  # SQLite: BEGIN IMMEDIATE, i.e. the database's write lock
        with conn.begin():
            if conn.dialect.name == "postgresql":
                conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_MIGRATION_LOCK})
            current = MigrationContext.configure(conn).get_current_revision()
            if current == target:
                return
            where = display_url(engine.url.render_as_string(hide_password=True))
            if current is None:
                # Never add the store's tables to somebody else's database.
                foreign = sorted(sa_inspect(conn).get_table_names())
                if foreign:
                    shown = ", ".join(foreign[:5]) + (", ..." if len(foreign) > 5 else "")
                    raise StoreError(f"{where} is not a results store: it holds other tables ({shown}) and no store "
                                     "schema; give a new file or an empty database")
            elif current not in {sc.revision for sc in scripts.walk_revisions()}:
                raise StoreError(f"{where} has schema revision {current!r}, which this version of ragged-vit does "
                                 f"not know (newest here: {head_revision()!r}): it was written by a newer version; "
                                 "upgrade, or use another --db")
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, revision)


def error_line(exc: BaseException) -> str:
    """An exception as one line: a database error as its driver's own message (SQLAlchemy adds the
    SQL, its parameters and a link on further lines), anything else as `Type: message`."""
    from sqlalchemy.exc import SQLAlchemyError

    if isinstance(exc, DBAPIError) and exc.orig is not None:
        text_ = str(exc.orig)
    elif isinstance(exc, SQLAlchemyError):
        text_ = str(exc).split("\n[SQL:")[0].split("\n(Background on this error")[0]
    else:
        text_ = f"{exc.__class__.__name__}: {exc}"
    lines = [line.strip() for line in text_.splitlines() if line.strip()]
    return " / ".join(lines[:3]) if lines else exc.__class__.__name__


def display_url(url: str) -> str:
    """A database (a URL or a bare path) as shown in messages: the file path for SQLite, the URL
    without its password otherwise."""
    if "://" not in url:
        return url
    if url.startswith("sqlite:///"):
        return url[len("sqlite:///"):]
    if url.startswith("sqlite://"):
        return "the in-memory SQLite database"
    try:
        from sqlalchemy.engine import make_url

        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return "the database"
