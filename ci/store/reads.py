"""The store's read side: `StoreReads` implements `ci.records.StoreReader` (what the verdict code,
the PR comment and the dashboard read) over an engine, plus the reads that only the service's own
commands need (failed points, commit prefixes, ingest's digests, row counts).

Every call is one read transaction, so one snapshot; inside `StoreReads.snapshot()` every call of
one thread reads the same snapshot (one transaction: REPEATABLE READ on PostgreSQL, one WAL read
snapshot on SQLite), so that a render, a comparison or a comment that reads a dozen times sees
one state of a history that an ingest may be writing meanwhile. Bulk reads skip the ORM (a series
read is ~10^5 rows) and parse DateTime text themselves on SQLite.
"""

from __future__ import annotations

import gc
import json
import struct
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from itertools import repeat
from typing import Any, NamedTuple, cast

import numpy as np
from sqlalchemy import Connection, Engine, String, func, select, text, type_coerce
from sqlalchemy.orm import Session

from ci.records import (
    Acknowledgement,
    Alert,
    AlertKind,
    AlertState,
    Benchmark,
    Commit,
    Direction,
    Kind,
    Machine,
    MachineHistory,
    Outcome,
    Project,
    Result,
    RunReplacement,
    SeriesColumns,
    Verdict,
)
from ci.store.codec import float64s, int64s, none_to_nan, split_samples, unpacker, utc
from ci.store.engine import StoreError, is_memory
from ci.store.models import (
    AcknowledgementRow,
    AlertRow,
    BenchmarkRow,
    CommitRow,
    MachineRow,
    ResultBlockRow,
    ResultRow,
    RunReplacementRow,
    RunRow,
    SettingRow,
    VerdictRow,
)

# History order: commits with a position in git's history (`ci.records.Commit.position`) by it, after
# those without one (ingested without a checkout: an older history, as a rule), which go by commit
# time; a commit's time alone put one made on a machine whose clock ran a year ahead last, and
# blamed its step on the commit after it. Then insertion order. `_commit_order` is the same in Core.
HISTORY_ORDER = ("commits.position IS NOT NULL, commits.position, commits.time IS NULL, commits.time, "
                 "commits.id")  # fmt: skip
# The setting that holds the project's asv.conf.json fields (`ci.records.Project.as_asv_conf`).
PROJECT_SETTING = "asv_conf"
_IN_LIST = 500  # run ids named in one IN (...); far below SQLite's bound-parameter limit
_MEMO_MAX = 200_000  # parsed datetimes / environments kept between reads (~40 MB at most)


@dataclass(frozen=True)
class FailedPoint:
    """A benchmark point that asv recorded as failed (null) or skipped (NaN): never a value."""

    benchmark: Benchmark
    commit_sha: str
    machine: str
    status: str  # "failed" or "skipped"
    run_id: str


def _parse_dt(value: Any, memo: dict[Any, datetime | None]) -> datetime | None:
    """A UTC datetime from a DateTime column read raw (text on SQLite), memoised per value."""
    if value is None:
        return None
    out = memo.get(value)
    if out is None:
        out = memo[value] = utc(datetime.fromisoformat(value) if isinstance(value, str) else value)
    return out


class _Run(NamedTuple):
    """What a result record takes from its run (the columns of `StoreReads._history_runs`)."""

    id: int
    run_key: str
    digest: str
    started_at: Any
    environment: str
    sha: str
    machine: str


# The `result_blocks` columns the point reads take, and how `_block_points` cuts them into points.
# asv's statistics of a point come only where it has no raw samples (one value): raw samples are the
# evidence there, and asv's statistics a function of them (`asv_runner.statistics.compute_stats`);
# read for every point they were +0.9 s of a 2.3 s read of 500,000 records (2026-12-05).
_BLOCK_COLUMNS = ("benchmark_ids", "samples", "lengths", "started_at", "benchmark_version", "stats")


def _block_read(columns: str, table: str = "") -> str:
    """The `_BLOCK_COLUMNS` of a point read of `columns` (`table`: "result_blocks." where the query
    joins others); the statistics are NULL unless `columns` asks for them."""
    stats = f"CASE WHEN {table}has_raw_samples THEN NULL ELSE {table}stats END" if "stats" in columns else "NULL"
    return ", ".join(stats if c == "stats" else f"{table}{c}" for c in _BLOCK_COLUMNS)


# A point's asv statistics (`ci.records.STAT_NAMES`): six columns of `results`, one column of
# `result_blocks` (six runs of a float64 per point). A point read asks for them as "stats", last.
_RESULT_STATS = "has_raw_samples, ci_99_a, ci_99_b, q_25, q_75, number, repeat"
_NAN = float("nan")
_NONE6, _NAN6 = (None,) * 6, (_NAN,) * 6
_STRIDED: dict[int, Any] = {}


def _result_columns(columns: str) -> str:
    """The `results` columns of a point read's `columns` ("stats" stands for the six statistics)."""
    return columns.replace("stats", _RESULT_STATS)


def _fold_stats(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """A `results` row whose seven last columns are has_raw_samples and the statistics, with them as
    one tuple (NULL: NaN), or None for a point with raw samples."""
    if row[-7]:
        return (*row[:-7], None)
    stats = tuple(row[-6:])
    if stats == _NONE6:  # asv recorded none (a track_ benchmark)
        stats = _NAN6
    elif None in stats:  # some
        stats = tuple(_NAN if x is None else x for x in stats)
    return (*row[:-7], stats)


def _block_stats(blob: bytes | None, n: int) -> Any:
    """Per point of an `n`-point block, its six statistics from the block's `stats` column (None
    each where the block has raw samples: the column is read as NULL)."""
    if blob is None:
        return repeat(None, n)
    blob = bytes(blob)
    if len(blob) != 48 * n:
        raise ValueError(f"a block's statistics are {len(blob)} bytes, its {n} points need {48 * n}")
    values = unpacker(len(blob))(blob)
    if n == 1:  # a benchmark without parameters: most blocks of some histories (MetPy's 7,441 of 7,552)
        return (values,)
    return list(zip(*(values[i * n : (i + 1) * n] for i in range(6)), strict=True))


def _point_stats(blob: bytes | None, n: int, j: int) -> tuple[float, ...] | None:
    """Point `j`'s six statistics from an `n`-point block's `stats` column: one strided unpack."""
    if blob is None:
        return None
    unpack = _STRIDED.get(n)
    if unpack is None:
        unpack = _STRIDED[n] = struct.Struct("<" + f"{8 * (n - 1)}x".join(["d"] * 6) if n > 1 else "<6d").unpack_from
    return unpack(bytes(blob), 8 * j)


def _block_points(blocks: Iterable[tuple[Any, ...]], columns: str) -> list[tuple[Any, ...]]:
    """`results`-like rows (run_id, benchmark_id, *columns) of every point of `blocks` (rows of
    run_id and `_block_read`); `columns` names some of samples, started_at, benchmark_version, stats."""
    wanted = [c.strip() for c in columns.split(",")]
    out: list[tuple[Any, ...]] = []
    for run_id, ids_blob, samples, lengths, started, version, stats in blocks:
        ids = int64s(bytes(ids_blob))
        n = len(ids)
        per = {"samples": split_samples(bytes(samples), int64s(bytes(lengths))), "started_at": repeat(started, n),
               "benchmark_version": repeat(version, n)}  # fmt: skip
        if "stats" in wanted:
            per["stats"] = _block_stats(stats, n)
        out.extend(zip(repeat(run_id, n), ids, *map(per.__getitem__, wanted), strict=True))
    return out


def _series_in_blocks(blocks: list[tuple[Any, ...]], bid: int, columns: str) -> list[tuple[Any, ...]]:
    """Series `bid`'s points in `blocks` (rows of 7 run columns, run_id, `_block_read`, and 3 order
    columns: the commit's position, time and id) as (run columns, `_block_points` row, order
    columns). Where the series sits in a block and where its samples lie are worked out once per
    distinct ids / lengths value (a grid's are the same in every run): unpacked per row they were
    most of a series read (2026-12-02)."""
    where: dict[bytes, tuple[int, int]] = {}  # a block's ids -> (the series' position in them (-1: not there), points)
    spans: dict[tuple[bytes, int], tuple[int, int]] = {}  # (lengths, position) -> the samples' byte range
    wanted = [c.strip() for c in columns.split(",")]
    out = []
    for row in blocks:
        ids, samples, lengths = bytes(row[8]), bytes(row[9]), bytes(row[10])
        place = where.get(ids)
        if place is None:
            found = int64s(ids)
            place = where[ids] = (found.index(bid) if bid in found else -1, len(found))
        j, n = place
        if j < 0:
            continue
        span = spans.get((lengths, j))
        if span is None:
            counts = int64s(lengths)
            at = 8 * sum(counts[:j])
            span = spans[lengths, j] = (at, at + 8 * counts[j])
        per = {"samples": samples[span[0] : span[1]], "started_at": row[11], "benchmark_version": row[12]}
        if "stats" in wanted:
            per["stats"] = _point_stats(row[13], n, j)
        out.append((row[:7], (row[7], bid, *map(per.__getitem__, wanted)), row[-3:]))
    return out


def _by_benchmark(row: tuple[Any, ...]) -> Any:
    return row[1]


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


def _fetch(conn: Connection, sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
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


class StoreReads:
    """Reads of a results history through `engine` (any SQLAlchemy engine holding the store's schema).

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

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    @contextmanager
    def snapshot(self) -> Iterator[StoreReads]:
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
        """Every machine (asv machine name x environment x host, `ci.records.Machine`), by key."""
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
                asv_name=r.asv_name,
                env_name=r.env_name,
                host=tuple(sorted((str(k), str(v)) for k, v in json.loads(r.host or "{}").items())),
            )
            for r in rows
        ]

    def setting(self, key: str) -> str | None:
        """A stored setting's value (`ci.store.models.SettingRow`), None where there is none."""
        with self._read() as conn:
            return conn.execute(select(SettingRow.value).where(SettingRow.key == key)).scalar()

    def project(self) -> Project | None:
        """What the project's asv.conf.json said at the last ingest that found one (`save_project`),
        None where no ingest found one.

        Raises:
            StoreError: the stored value is not what `save_project` writes.
        """
        text = self.setting(PROJECT_SETTING)
        if text is None:
            return None
        try:
            conf = json.loads(text)
            return Project.from_asv_conf(conf, source=str(conf.get("source", "")))
        except (ValueError, AttributeError) as exc:
            raise StoreError(f"the store's setting {PROJECT_SETTING!r} is damaged ({exc}): ingest with --config "
                             "to write it again") from None

    @staticmethod
    def _commit_order() -> tuple[Any, ...]:
        """History order (`HISTORY_ORDER` in SQL): git's topology where ingest read it, time elsewhere."""
        return (CommitRow.position.is_not(None), CommitRow.position, CommitRow.time.is_(None), CommitRow.time,
                CommitRow.id)  # fmt: skip

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
                sha=r.sha, parents=tuple(json.loads(r.parents)), branch=r.branch, time=utc(r.time), subject=r.subject,
                position=r.position,
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

    def _history_runs(
        self, conn: Connection, *, machine: str | None = None, commit_sha: str | None = None,
        branch: str | None = None,
    ) -> list[Any]:
        """Runs in history order (commit order, then the run's start, then insertion), with what a
        result record takes from its run: id, run_key, digest, started_at, environment, sha, machine."""
        stmt = (
            select(
                RunRow.id, RunRow.run_key, RunRow.digest, self._dt(RunRow.started_at).label("started_at"),
                RunRow.environment, CommitRow.sha, MachineRow.name.label("machine"),
            )
            .join(CommitRow, RunRow.commit_id == CommitRow.id)
            .join(MachineRow, RunRow.machine_id == MachineRow.id)
            .order_by(*self._commit_order(), RunRow.started_at, RunRow.id)
        )  # fmt: skip
        if machine is not None:
            stmt = stmt.where(MachineRow.name == machine)
        if commit_sha is not None:
            stmt = stmt.where(CommitRow.sha == commit_sha)
        if branch is not None:
            stmt = stmt.where(CommitRow.branch == branch)
        return list(conn.execute(stmt).all())

    def _select_results(
        self, conn: Connection, columns: str, *, ok: bool, runs: list[Any], every_run: bool, machine: str | None
    ) -> list[tuple[Any, ...]]:
        """(run_id, benchmark_id, *columns) of the results of `runs` (all of the store's runs when
        `every_run`; rows of other runs may come too, for the caller to drop). One plain DBAPI query,
        no per-row objects and no ORDER BY: the read of a whole history is one table scan, put in
        order by the caller (a sort of 500,000 rows in SQL was a third of the read, 2026-12-01)."""
        where: list[str] = []
        params: list[Any] = []
        if not every_run:
            if len(runs) <= _IN_LIST:
                where.append(f"run_id IN ({', '.join('?' * len(runs))})")
                params.extend(sorted(r.id for r in runs))
            elif machine is not None:
                where.append("run_id IN (SELECT runs.id FROM runs JOIN machines ON runs.machine_id = machines.id "
                             "WHERE machines.name = ?)")
                params.append(machine)
        status = "status = ?" if ok else "status <> ?"
        sql = (f"SELECT run_id, benchmark_id, {_result_columns(columns)} FROM results "
               f"WHERE {' AND '.join([status, *where])}")
        rows = _fetch(conn, sql, ["ok", *params])
        if columns.endswith("stats"):
            rows = list(map(_fold_stats, rows))
        if ok:  # every point of a block is "ok"
            blocks = _fetch(conn, f"SELECT run_id, {_block_read(columns)} FROM result_blocks"
                                  + (f" WHERE {' AND '.join(where)}" if where else ""), params)  # fmt: skip
            rows.extend(_block_points(blocks, columns))
        return rows

    def _result_rows(
        self, conn: Connection, columns: str, *, ok: bool, runs: list[Any], every_run: bool, machine: str | None
    ) -> dict[int, list[tuple[Any, ...]]]:
        """`_select_results` grouped by run id, only `runs`' rows, each group in benchmark id order
        (the order the writer inserts a file's rows in, so the sort finds them sorted)."""
        wanted = {r.id for r in runs}
        grouped: dict[int, list[tuple[Any, ...]]] = {}
        for row in self._select_results(conn, columns, ok=ok, runs=runs, every_run=every_run, machine=machine):
            group = grouped.get(row[0])
            if group is None:
                if row[0] not in wanted:
                    continue  # a run outside the filter (branch, or a long run list read by machine)
                group = grouped[row[0]] = []
            group.append(row)
        for group in grouped.values():
            group.sort(key=_by_benchmark)
        return grouped

    def _benchmark_id(self, conn: Connection, key: str) -> int | None:
        known = self._id_by_key.get(key)  # ids never change once stored
        if known is not None:
            return known
        return conn.execute(select(BenchmarkRow.id).where(BenchmarkRow.key == key)).scalar()

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
            self._id_by_key = {b.key: i for i, b in self._bench_by_id.items()}
        return self._bench_by_id

    def _points(
        self, ok: bool, columns: str, benchmark_key: str | None, machine: str | None, commit_sha: str | None
    ) -> tuple[list[Any], dict[int, list[tuple[Any, ...]]]]:
        """Runs in history order and their result rows by run id (each run's by benchmark id)."""
        with self._connection() as conn:  # one snapshot for every query
            if benchmark_key is not None:
                bid = self._benchmark_id(conn, benchmark_key)
                if bid is None:
                    return [], {}
                return self._series_points(conn, ok, columns, bid, machine, commit_sha)
            runs = self._history_runs(conn, machine=machine, commit_sha=commit_sha)
            if not runs:
                return [], {}
            every = machine is None and commit_sha is None
            grouped = self._result_rows(conn, columns, ok=ok, runs=runs, every_run=every, machine=machine)
        return runs, grouped

    def _series_points(
        self, conn: Connection, ok: bool, columns: str, bid: int, machine: str | None, commit_sha: str | None
    ) -> tuple[list[Any], dict[int, list[tuple[Any, ...]]]]:
        """`_points` of one series: one query that walks the (benchmark_id, run_id) index and joins
        its runs, in history order (a series is ~1,000 rows: sorting them in SQL is cheap)."""
        where = ["results.benchmark_id = ?", "results.status = ?" if ok else "results.status <> ?"]
        params: list[Any] = [bid, "ok"]
        if machine is not None:
            where.append("machines.name = ?")
            params.append(machine)
        if commit_sha is not None:
            where.append("commits.sha = ?")
            params.append(commit_sha)
        cols = ", ".join(f"results.{c.strip()}" for c in _result_columns(columns).split(","))
        run_cols = "runs.id, runs.run_key, runs.digest, runs.started_at, runs.environment, commits.sha, machines.name"
        joins = ("JOIN runs ON {t}.run_id = runs.id JOIN commits ON runs.commit_id = commits.id "
                 "JOIN machines ON runs.machine_id = machines.id")  # fmt: skip
        order = f"ORDER BY {HISTORY_ORDER}, runs.started_at, runs.id"
        sql = (f"SELECT {run_cols}, results.run_id, results.benchmark_id, {cols}, commits.position, commits.time, "
               f"commits.id FROM results {joins.format(t='results')} WHERE {' AND '.join(where)} {order}")  # fmt: skip
        found = [(row[:7], row[7:-3], row[-3:]) for row in _fetch(conn, sql, params)]
        if columns.endswith("stats"):
            found = [(run, _fold_stats(point), order) for run, point, order in found]
        if ok:  # the series' points in blocks: those of its benchmark (by name), cut to the series' own
            block_where = ["result_blocks.name = (SELECT name FROM benchmarks WHERE id = ?)", *where[2:]]
            sql = (f"SELECT {run_cols}, result_blocks.run_id, "
                   + _block_read(columns, "result_blocks.")
                   + f", commits.position, commits.time, commits.id FROM result_blocks "
                   f"{joins.format(t='result_blocks')} WHERE {' AND '.join(block_where)}")  # fmt: skip
            in_blocks = _series_in_blocks(_fetch(conn, sql, [bid, *params[2:]]), bid, columns)
            if in_blocks:
                # Put in the SQL order above here, not by the database: a sort there carries each
                # block's samples (ten series' worth) through a temporary B-tree, ~40% of a series
                # read (2026-12-02). PostgreSQL sorts a NULL start last, SQLite first.
                null_start = (1,) if conn.dialect.name == "postgresql" else (0,)
                found = sorted(found + in_blocks, key=lambda f: (  # HISTORY_ORDER, then the run's start and id
                    f[2][0] is not None, () if f[2][0] is None else (f[2][0],), f[2][1] is None,
                    () if f[2][1] is None else (f[2][1],), f[2][2],
                    null_start if f[0][3] is None else (null_start[0] ^ 1, f[0][3]), f[0][0]))  # fmt: skip
        runs: list[Any] = []
        grouped: dict[int, list[tuple[Any, ...]]] = {}
        for run, point, _order in found:
            if run[0] not in grouped:
                runs.append(_Run(*run))
                grouped[run[0]] = []
            grouped[run[0]].append(point)
        return runs, grouped

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
        with paused_gc():
            return self._results(benchmark_key, machine, commit_sha)

    def _results(self, benchmark_key: str | None, machine: str | None, commit_sha: str | None) -> list[Result]:
        runs, grouped = self._points(True, "samples, started_at, benchmark_version, stats", benchmark_key, machine,
                                     commit_sha)  # fmt: skip
        if not grouped:
            return []
        benches = self._bench_map({row[1] for rows in grouped.values() for row in rows})
        # Parsed once per distinct text and kept across calls (the text -> value map never changes):
        # a series read parses ~1,000 times and environments that the previous series read did too.
        if len(self._times) > _MEMO_MAX:
            self._times.clear()
        if len(self._envs) > _MEMO_MAX:
            self._envs.clear()
        envs, times = self._envs, self._times
        unpackers: dict[int, Any] = {}
        out: list[Result] = []
        append = out.append
        for run in runs:
            rows = grouped.get(run.id)
            if not rows:
                continue
            env = envs.get(run.environment)
            if env is None:
                env = envs[run.environment] = tuple(sorted(json.loads(run.environment).items()))
            run_started = _parse_dt(run.started_at, times)
            sha, machine_name, run_key = run.sha, run.machine, run.run_key
            for _run_id, bid, samples, started, version, stats in rows:
                unpack = unpackers.get(len(samples))
                if unpack is None:
                    unpack = unpackers[len(samples)] = unpacker(len(samples))
                when = times.get(started) if started is not None else None
                if when is None:
                    when = _parse_dt(started, times) or run_started
                append(Result(benches[bid], sha, machine_name, unpack(samples), run_key, when, env, version, stats))
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
        runs, grouped = self._points(False, "status", benchmark_key, machine, commit_sha)
        benches = self._bench_map({row[1] for rows in grouped.values() for row in rows}) if grouped else {}
        return [FailedPoint(benches[row[1]], run.sha, run.machine, row[2], run.run_key)
                for run in runs for row in grouped.get(run.id, ())]  # fmt: skip

    def series_columns(
        self,
        *,
        machine: str | None = None,
        branch: str | None = None,
        runs_after: dict[str, int] | None = None,
    ) -> list[MachineHistory]:
        """Every series as columns (`ci.records.SeriesColumns`), per machine, results in history order.

        Args:
            machine: only this machine's series.
            branch: only results on commits of this branch.
            runs_after: {machine name: k}: leave out the results of that machine's first k runs in
                history order (a caller that holds state for them reads only the new ones).

        Returns:
            One MachineHistory per machine with runs in scope, by machine name; its `runs` are all
            of them (in scope), whatever `runs_after` says.
        """
        with paused_gc():
            return self._series_columns(machine, branch, runs_after or {})

    def _series_columns(self, machine: str | None, branch: str | None, skip: dict[str, int]) -> list[MachineHistory]:
        with self._connection() as conn:
            runs = self._history_runs(conn, machine=machine, branch=branch)
            by_machine: dict[str, list[Any]] = {}
            for run in runs:
                by_machine.setdefault(run.machine, []).append(run)
            wanted = [r for m, rs in by_machine.items() for r in rs[skip.get(m, 0):]]
            every = machine is None and branch is None and not any(skip.values())
            rows = self._select_results(conn, "samples, benchmark_version", ok=True, runs=wanted, every_run=every,
                                        machine=machine) if wanted else []  # fmt: skip
        names = sorted(by_machine)
        per_machine: dict[str, list[SeriesColumns]] = {name: [] for name in names}
        if rows:
            # Columns, then one sort by (machine, series, position in the machine's history order) in
            # numpy: each series is a slice of it. Per-row Python work was most of this read (1.1 of
            # 1.6 s CPU for 500,000 rows, 2026-12-01); what is left per row runs in C (zip, map, join).
            run_ids, bids, blobs, versions = zip(*rows, strict=True)
            ids = np.fromiter(run_ids, dtype=np.int64, count=len(rows))
            size = int(max(ids.max(), max(r.id for r in runs))) + 1
            position = np.full(size, -1, dtype=np.int64)
            machine_of = np.zeros(size, dtype=np.int64)
            for m, name in enumerate(names):
                rs = by_machine[name]
                first = skip.get(name, 0)
                position[[r.id for r in rs[first:]]] = np.arange(first, len(rs))
                machine_of[[r.id for r in rs[first:]]] = m
            pos = position[ids]
            all_bids = np.fromiter(bids, dtype=np.int64, count=len(rows))
            sel = np.flatnonzero(pos >= 0)  # rows of runs outside the filter are dropped
            order = sel[np.lexsort((pos[sel], all_bids[sel], machine_of[ids[sel]]))]
            mach_o, bid_o = machine_of[ids[order]], all_bids[order]
            cut = np.flatnonzero((np.diff(mach_o) != 0) | (np.diff(bid_o) != 0)) + 1
            lengths = np.fromiter(map(len, blobs), dtype=np.int64, count=len(rows)) // 8
            benches = self._bench_map(set(bid_o.tolist()))
            shas = {name: [r.sha for r in by_machine[name]] for name in names}
            for a, b in zip([0, *cut.tolist()], [*cut.tolist(), len(order)], strict=True):
                idx = order[a:b].tolist()
                name = names[int(mach_o[a])]
                positions = pos[order[a:b]].tolist()
                per_machine[name].append(SeriesColumns(
                    benches[int(bid_o[a])], name, tuple(map(shas[name].__getitem__, positions)), tuple(positions),
                    tuple(lengths[order[a:b]].tolist()), float64s(b"".join(map(blobs.__getitem__, idx))),
                    tuple(map(versions.__getitem__, idx)),
                ))  # fmt: skip
        out = []
        for name in names:
            series = sorted(per_machine[name], key=lambda c: c.benchmark.key)
            out.append(MachineHistory(name, tuple((r.run_key, r.digest) for r in by_machine[name]), tuple(series)))
        return out

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
                base_value=none_to_nan(v.base_value),
                head_value=none_to_nan(v.head_value),
                ratio=none_to_nan(v.ratio),
                ci_low=none_to_nan(v.ci_low),
                ci_high=none_to_nan(v.ci_high),
                p_value=none_to_nan(v.p_value),
                threshold=none_to_nan(v.threshold),
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
        return [Acknowledgement(r.benchmark_key, r.commit_sha, r.who, r.why, utc(r.when)) for r in rows]

    def alerts(self, *, state: AlertState | str | None = None) -> list[Alert]:
        """The history's alerts (`ci.records.Alert`), oldest first; with `state`, only those in it.

        Args:
            state: e.g. `AlertState.DETECTED`: the alerts no job has reported yet.

        Returns:
            Alert records, their times set by the store.
        """
        stmt = select(AlertRow, BenchmarkRow).join(BenchmarkRow, AlertRow.benchmark_id == BenchmarkRow.id)
        if state is not None:
            stmt = stmt.where(AlertRow.state == str(AlertState(state)))
        stmt = stmt.order_by(AlertRow.detected_at, AlertRow.id)
        with self._read() as conn:
            rows = conn.execute(stmt).all()
        return [
            Alert(AlertKind(a.kind), self._bench(b), a.machine, a.commit_sha, AlertState(a.state), a.previous_sha,
                  none_to_nan(a.ratio), none_to_nan(a.p_value), a.reason, utc(a.detected_at), utc(a.reported_at),
                  utc(a.acknowledged_at))
            for a, b in rows
        ]  # fmt: skip

    def replacements(self, run_key: str | None = None) -> list[RunReplacement]:
        """Every stored run replaced by another file's run (`ci.records.RunReplacement`), oldest first;
        with `run_key`, only that run's."""
        stmt = select(RunReplacementRow).order_by(RunReplacementRow.replaced_at, RunReplacementRow.id)
        if run_key is not None:
            stmt = stmt.where(RunReplacementRow.run_key == run_key)
        with self._read() as conn:
            rows = conn.execute(stmt).scalars().all()
        return [RunReplacement(r.run_key, r.old_source, r.new_source, r.old_digest, r.new_digest, r.forced,
                               utc(r.replaced_at)) for r in rows]  # fmt: skip

    def run_digests(self) -> dict[str, str]:
        """sha256 of every ingested result file -> its commit sha (lets ingest skip known files unparsed)."""
        stmt = select(RunRow.digest, CommitRow.sha).join(CommitRow, RunRow.commit_id == CommitRow.id)
        with self._connection() as conn:
            return {digest: sha for digest, sha in conn.execute(stmt)}

    def change_point_states(self, branch: str, settings: str) -> dict[tuple[str, str], tuple[int, str, bytes]]:
        """The history detector's cached states (`ci.verdicts.history`) for one branch and settings.

        Args:
            branch: the branch the states were computed on ("" for every commit).
            settings: the detector's settings fingerprint.

        Returns:
            (benchmark key, machine) -> (runs covered, their digest chain, state bytes).
        """
        # Plain DBAPI rows (binary on psycopg): through Core's Row objects and bytea's text form this
        # read of 500 states was 0.35 s of the 0.9 s a new commit's change points took on PostgreSQL
        # (cProfile, 2026-12-02).
        sql = (
            "SELECT benchmarks.key, machines.name, change_point_states.runs, change_point_states.runs_digest, "
            "change_point_states.state FROM change_point_states "
            "JOIN benchmarks ON change_point_states.benchmark_id = benchmarks.id "
            "JOIN machines ON change_point_states.machine_id = machines.id "
            "WHERE change_point_states.branch = ? AND change_point_states.settings = ?"
        )
        with self._connection() as conn:
            rows = _fetch(conn, sql, [branch, settings])
        return {(key, m): (runs, digest, bytes(state)) for key, m, runs, digest, state in rows}

    def run_environments(self) -> dict[str, tuple[tuple[str, str], ...]]:
        """Every run's environment, by run key, as `results` gives it (`Result.environment`): the
        dashboard reads results as columns (`series_columns`), which leave the environment out."""
        with self._connection() as conn:
            rows = conn.execute(select(RunRow.run_key, RunRow.environment)).all()
        envs = self._envs
        if len(envs) > _MEMO_MAX:
            envs.clear()
        out = {}
        for run_key, env_json in rows:
            env = envs.get(env_json)
            if env is None:
                env = envs[env_json] = tuple(sorted(json.loads(env_json).items()))
            out[run_key] = env
        return out

    def run_index(self) -> dict[str, tuple[str, str]]:
        """sha256 of every ingested result file -> (its commit sha, its run key "machine/commit/env"):
        ingest tells, without parsing a known file, which commit and run it holds."""
        stmt = select(RunRow.digest, CommitRow.sha, RunRow.run_key).join(CommitRow, RunRow.commit_id == CommitRow.id)
        with self._connection() as conn:
            return {digest: (sha, run_key) for digest, sha, run_key in conn.execute(stmt)}

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
            out = {name: conn.execute(select(func.count()).select_from(m)).scalar_one() for name, m in tables.items()}
            # "results" counts points: a block row holds several
            out["results"] += conn.execute(select(func.coalesce(func.sum(ResultBlockRow.points), 0))).scalar_one()
        return out
