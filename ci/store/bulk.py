"""The bulk of ingest time: one executemany of a file's result rows, straight to the driver with the
column types' own bind processors, which halves the cost of Core's per-row parameter handling
(measured in 2026-11-29, docs/performance.md "Ingest and store")."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, Dialect, insert

from ci.store.models import ResultRow

RESULT_COLUMNS = (
    "run_id", "benchmark_id", "status", "value", "samples", "has_raw_samples", "ci_99_a", "ci_99_b", "q_25", "q_75",
    "number", "repeat", "benchmark_version", "started_at", "duration",
)  # fmt: skip


class ResultInsert:
    """The `results` INSERT for one dialect, prepared once: rows are tuples in `RESULT_COLUMNS` order.

    Args:
        dialect: the connection's dialect (its paramstyle and bind processors).
    """

    def __init__(self, dialect: Dialect) -> None:
        table = ResultRow.__table__
        cols = [c for c in table.c if c.name != "id"]
        assert [c.name for c in cols] == list(RESULT_COLUMNS)
        mark = {"qmark": "?", "format": "%s", "pyformat": "%s"}.get(dialect.paramstyle)
        self.sql = ""  # "": a DBAPI with named parameters, which Core serves
        self.procs: list[tuple[int, Any]] = []
        if mark is not None:
            quote = dialect.identifier_preparer.quote
            self.sql = (
                f"INSERT INTO {quote(table.name)} ({', '.join(quote(c.name) for c in cols)}) "
                f"VALUES ({', '.join([mark] * len(cols))})"
            )
            self.procs = [
                (i, proc)
                for i, c in enumerate(cols)
                if (proc := c.type.dialect_impl(dialect).bind_processor(dialect)) is not None
            ]

    def execute(self, conn: Connection, rows: list[tuple[Any, ...]]) -> None:
        """Insert `rows` in one executemany on `conn` (inside the caller's transaction)."""
        if not self.sql:  # a DBAPI with named parameters: let Core do it
            conn.execute(insert(ResultRow.__table__), [dict(zip(RESULT_COLUMNS, r, strict=True)) for r in rows])
            return
        if self.procs:
            memo: dict[tuple[int, Any], Any] = {}  # started_at repeats within a benchmark's grid
            fixed = []
            for r in rows:
                r = list(r)
                for i, proc in self.procs:
                    v = r[i]
                    if v is not None:
                        got = memo.get((i, v))
                        if got is None:
                            got = memo[(i, v)] = proc(v)
                        r[i] = got
                fixed.append(tuple(r))
            rows = fixed
        conn.exec_driver_sql(self.sql, rows)
