"""The bulk of ingest time: a file's result rows in one statement, prepared once per dialect.

- PostgreSQL through psycopg 3: one binary `COPY results FROM STDIN` per file, inside the caller's
  transaction (and savepoint), so a file is still all or nothing.
- SQLite: one DBAPI `executemany` of a prepared INSERT. Its driver binds floats, ints, bools,
  None and bytes itself (REAL columns store ints as floats), so only the start time goes through
  its column type's bind processor (`time`, once per distinct value): Core's per-row parameter
  handling was half of the write (measured 2026-11-29), the remaining processors a fifth of what
  was left (2026-12-01).
- Any other DBAPI with positional parameters: the same INSERT with every column's processor.
- A DBAPI with named parameters: Core's executemany.

Rows are tuples in `RESULT_COLUMNS` order (`BLOCK_COLUMNS` for `result_blocks`), their start time
from `time`; see docs/performance.md "Ingest and store".
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, DateTime, Dialect, insert

from ci.store.models import ResultBlockRow, ResultRow

RESULT_COLUMNS = (
    "run_id", "benchmark_id", "status", "value", "samples", "has_raw_samples", "ci_99_a", "ci_99_b", "q_25", "q_75",
    "number", "repeat", "benchmark_version", "started_at", "duration",
)  # fmt: skip
# PostgreSQL types of RESULT_COLUMNS for binary COPY (its wire format has no type tags to infer them from).
_PG_TYPES = (
    "int4", "int4", "text", "float8", "bytea", "bool", "float8", "float8", "float8", "float8", "float8", "float8",
    "text", "timestamptz", "float8",
)  # fmt: skip
BLOCK_COLUMNS = (
    "run_id", "name", "points", "benchmark_ids", "value", "samples", "lengths", "has_raw_samples", "stats",
    "benchmark_version", "started_at", "duration",
)  # fmt: skip
_PG_BLOCK_TYPES = (
    "int4", "text", "int4", "bytea", "bytea", "bytea", "bytea", "bool", "bytea", "text", "timestamptz", "float8",
)  # fmt: skip


def _same(x: Any) -> Any:
    return x


def _is_psycopg(dialect: Dialect) -> bool:
    return dialect.name == "postgresql" and dialect.driver == "psycopg"


class ResultInsert:
    """The `results` bulk write (or, with `blocks`, the `result_blocks` one) for one dialect, prepared once.

    Args:
        dialect: the connection's dialect (its driver, paramstyle and bind processors).
        blocks: write `result_blocks` rows (`BLOCK_COLUMNS`) instead of `results` rows.
    """

    def __init__(self, dialect: Dialect, blocks: bool = False) -> None:
        table = (ResultBlockRow if blocks else ResultRow).__table__
        self.table = table
        self.columns = BLOCK_COLUMNS if blocks else RESULT_COLUMNS
        self.pg_types = _PG_BLOCK_TYPES if blocks else _PG_TYPES
        cols = [c for c in table.c if c.name != "id"]
        assert [c.name for c in cols] == list(self.columns)
        quote = dialect.identifier_preparer.quote
        names = ", ".join(quote(c.name) for c in cols)
        self.copy_sql = ""
        self.sql = ""  # "": a DBAPI with named parameters, which Core serves
        self.procs: list[tuple[int, Any]] = []
        self.time: Any = _same  # a start time as the row carries it
        if _is_psycopg(dialect):
            self.copy_sql = f"COPY {quote(table.name)} ({names}) FROM STDIN (FORMAT BINARY)"
            return
        mark = {"qmark": "?", "format": "%s", "pyformat": "%s"}.get(dialect.paramstyle)
        if mark is None:
            return
        self.sql = f"INSERT INTO {quote(table.name)} ({names}) VALUES ({', '.join([mark] * len(cols))})"
        procs = [(i, c, c.type.dialect_impl(dialect).bind_processor(dialect)) for i, c in enumerate(cols)]
        if dialect.name == "sqlite":
            (proc,) = [p for _, c, p in procs if isinstance(c.type, DateTime)]
            self.time = proc or _same
        else:
            self.procs = [(i, p) for i, _, p in procs if p is not None]

    def execute(self, conn: Connection, rows: list[tuple[Any, ...]]) -> None:
        """Write `rows` on `conn`, inside the caller's transaction."""
        if self.copy_sql:
            driver = conn.connection.driver_connection
            assert driver is not None  # an open connection's
            with driver.cursor() as cur, cur.copy(self.copy_sql) as copy:
                copy.set_types(self.pg_types)
                for r in rows:
                    copy.write_row(r)
            return
        if not self.sql:  # a DBAPI with named parameters: let Core do it
            conn.execute(insert(self.table), [dict(zip(self.columns, r, strict=True)) for r in rows])
            return
        if self.procs:
            fixed = []
            for r in rows:
                row = list(r)
                for i, proc in self.procs:
                    if row[i] is not None:
                        row[i] = proc(row[i])
                fixed.append(tuple(row))
            rows = fixed
        conn.exec_driver_sql(self.sql, rows)
