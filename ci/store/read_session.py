"""The store's read sessions: `ReadSession` holds the engine and the caches of the read side, and
gives every read its connection.

Every call is one read transaction, so one snapshot; inside `ReadSession.snapshot()` every call of
one thread reads the same snapshot (one transaction: REPEATABLE READ on PostgreSQL, one WAL read
snapshot on SQLite), so that a render, a comparison or a comment that reads a dozen times sees
one state of a history that an ingest may be writing meanwhile. Bulk reads skip the ORM (a series
read is ~10^5 rows, `fetch_rows`) and parse DateTime text themselves on SQLite.
"""

from __future__ import annotations

import gc
import json
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any, Self, cast

from sqlalchemy import Connection, Engine, select, text
from sqlalchemy.orm import Session

from ci.records import Benchmark, Direction, Kind, Project
from ci.store.engine import is_memory
from ci.store.models import BenchmarkRow, CommitRow

# History order: commits with a position in git's history (`ci.records.Commit.position`) by it, after
# those without one (ingested without a checkout: an older history, as a rule), which go by commit
# time; a commit's time alone put one made on a machine whose clock ran a year ahead last, and
# blamed its step on the commit after it. Then insertion order. `_commit_order` is the same in Core.
HISTORY_ORDER = ("commits.position IS NOT NULL, commits.position, commits.time IS NULL, commits.time, "
                 "commits.id")  # fmt: skip
MEMO_MAX = 200_000  # parsed datetimes / environments kept between reads (~40 MB at most)


@contextmanager
def paused_gc() -> Iterator[None]:
    """Cyclic garbage collection off while a bulk read builds its records: they hold no cycles, and
    its collections, which walk every live object again and again as 500,000 records accumulate,
    were half of a whole-history read (6.2 -> 3.0 s, 2026-12-01). Refcounting still frees them."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def fetch_rows(conn: Connection, sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
    """Rows of `sql` (positional `?` parameters) as plain tuples from the DBAPI cursor, inside the
    connection's transaction: SQLAlchemy's Row objects cost ~0.3 us a row, a tenth of a history read."""
    style = conn.dialect.paramstyle
    if style not in ("qmark", "format", "pyformat"):  # another DBAPI: through Core's named parameters
        parts = sql.split("?")
        named = "".join(f"{part}:p{i}" for i, part in enumerate(parts[:-1])) + parts[-1]
        return [tuple(r) for r in conn.execute(text(named), {f"p{i}": v for i, v in enumerate(params)})]
    if style != "qmark":
        sql = sql.replace("?", "%s")
    dbapi = conn.connection.dbapi_connection
    # psycopg: rows in binary, so bytea and timestamps arrive without text decoding (a third of a
    # PostgreSQL history read, 2026-12-01).
    cur = dbapi.cursor(binary=True) if conn.dialect.driver == "psycopg" else dbapi.cursor()  # type: ignore[union-attr]
    try:
        cur.execute(sql, params)
        # sqlite3 and psycopg return a list of tuples; PEP 249 (and so SQLAlchemy's type) says a sequence
        return cast("list[tuple[Any, ...]]", cur.fetchall())
    finally:
        cur.close()


class ReadSession:
    """The engine, connections and caches every read of a results history goes through.

    Args:
        engine: from `ci.store.engine.make_engine`.
        read_only: the engine cannot write (`make_engine(..., read_only=True)`).
    """

    def __init__(self, engine: Engine, *, read_only: bool = False) -> None:
        self.engine = engine
        self.read_only = read_only
        self._pinned = threading.local()  # .conn: the connection of this thread's open snapshot
        self._bench_by_id: dict[int, Benchmark] = {}
        self._id_by_key: dict[str, int] = {}
        self._times: dict[Any, datetime | None] = {}
        self._envs: dict[str, tuple[tuple[str, str], ...]] = {}
        # The project whose `regressions_directions` give a series of unknown direction one (`_bench`):
        # None until first needed, then the stored project's (`use_project` sets another).
        self._directions_of: Project | None = None

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    @contextmanager
    def snapshot(self) -> Iterator[Self]:
        """Every read of this thread inside the block sees the store as it was when the block began:
        one read transaction on one connection (REPEATABLE READ and READ ONLY on PostgreSQL, one WAL
        snapshot on SQLite), however many reads it makes and whatever is written meanwhile. Writes
        inside it go through their own transactions, as outside. Nested blocks share the outer
        one's snapshot; a private in-memory store (one connection, no other writer) reads as it is.

        Yields:
            This store.
        """
        if getattr(self._pinned, "conn", None) is not None or is_memory(str(self.engine.url)):
            yield self
            return
        with self.engine.connect() as conn:
            if conn.dialect.name == "postgresql":
                conn.execution_options(isolation_level="REPEATABLE READ", postgresql_readonly=True)
            with conn.begin():
                # The snapshot is taken by the first statement that reads (SQLite: the first read of the file).
                conn.exec_driver_sql("SELECT count(*) FROM sqlite_master" if conn.dialect.name == "sqlite"
                                     else "SELECT 1")  # fmt: skip
                self._pinned.conn = conn
                try:
                    yield self
                finally:
                    self._pinned.conn = None

    @contextmanager
    def _connection(self) -> Iterator[Connection]:
        """A connection inside a read transaction: this thread's snapshot's, else a new one."""
        pinned = getattr(self._pinned, "conn", None)
        if pinned is not None:
            yield pinned
            return
        with self.engine.connect() as conn, conn.begin():
            yield conn

    @contextmanager
    def _read(self) -> Iterator[Session]:
        # One read transaction (one snapshot) per call, or the open snapshot's; ORM objects for the small tables.
        with self._connection() as conn, Session(bind=conn) as session:
            yield session

    @staticmethod
    def _commit_order() -> tuple[Any, ...]:
        """History order (`HISTORY_ORDER` in SQL): git's topology where ingest read it, time elsewhere."""
        return (CommitRow.position.is_not(None), CommitRow.position, CommitRow.time.is_(None), CommitRow.time,
                CommitRow.id)  # fmt: skip

    def use_project(self, project: Project) -> None:
        """Read series of unknown direction by `project`'s `regressions_directions` from here on (a
        command given another asv.conf.json than the one ingest kept: `--config`)."""
        self._directions_of = project
        self._bench_by_id, self._id_by_key = {}, {}

    def direction_rules(self) -> tuple[tuple[str, str], ...]:
        """The `regressions_directions` this store's reads resolve series of unknown direction by."""
        return self._directions().directions

    def _stored_project(self) -> Project | None:
        """The project ingest kept (`ci.store.reads.StoreReads.project`); None here, where none is read."""
        return None

    def _directions(self) -> Project:
        if self._directions_of is None:
            self._directions_of = self._stored_project() or Project()
        return self._directions_of

    def _bench(self, row: Any) -> Benchmark:
        """A stored series as a record. Its direction is what its benchmark declared (or its type or
        unit implies); where that is none, the project's `regressions_directions` say
        (`ci.records.Project.direction_for`): the store keeps what the files said, and a project that
        declares a direction later, or changes it, is read so at once, history included."""
        bench = Benchmark(
            name=row.name,
            params=tuple((str(k), str(v)) for k, v in json.loads(row.params)),
            unit=row.unit,
            direction=Direction(row.direction),
            kind=Kind(row.kind),
        )
        return self._directions().resolve(bench) if bench.direction == Direction.UNKNOWN else bench

    def _bench_map(self, ids: Iterable[int]) -> dict[int, Benchmark]:
        """Benchmarks by id; cached, since a series' identity never changes once stored."""
        if not set(ids) <= self._bench_by_id.keys():
            self._directions()  # read before the connection below is taken
            with self._read() as conn:
                self._bench_by_id = {r.id: self._bench(r) for r in conn.execute(select(BenchmarkRow)).scalars().all()}
            self._id_by_key = {b.key: i for i, b in self._bench_by_id.items()}
        return self._bench_by_id
