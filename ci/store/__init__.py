"""The results store: SQLAlchemy 2 over SQLite (default, a file) or any SQLAlchemy URL
(PostgreSQL when several runners share one history).

`Store` implements `ci.records.StoreReader` for the verdict code, the PR comment and the
dashboard, and `ci.records.HistoryStore` for the history detector (series as columns, its cached
states), plus the write side: `ingest_run` (one asv result file, one transaction; another file's
run of a stored one only with `replace`, recorded: `replacements`), `ingest_runs` (a batch of files
in one transaction, each file in its own savepoint), `save_verdicts`, `acknowledge`,
`save_change_point_states`, and the history jobs' alerts (`record_alerts`, `alerts`,
`mark_alerts_reported`). `Store.snapshot()` makes every read of a block see one state of the
history; `Store(db, read_only=True)` opens it for the commands that only read. By concern:

- `engine`: `--db` arguments to URLs, the engine, retried write transactions, error lines;
- `schema` and `migrations/`: the alembic migrations, run to head every time a store is opened;
- `models`: the SQLAlchemy models, mirroring `ci.records`; `codec`: values to columns and back
  (samples as packed float64);
- `limits`: what the store can hold alike on SQLite and PostgreSQL, checked before a write;
- `reads`: `StoreReads`, the read side, over `series_reads` (results and series, bulk reads as
  plain DBAPI rows), `points` (block rows cut into points) and `read_session` (connections,
  snapshots); `writes`: `StoreWrites`, the write side, over `ingest_writes` (result files) and
  `upserts` (machines, commits, series, retried transactions), with `bulk` (results by
  `executemany` on SQLite, binary `COPY` on PostgreSQL);
- `store`: `Store`, both sides on a history opened from a path or URL.
"""

from ci.store.engine import DEFAULT_DB, StoreError, display_url, error_line, resolve_url
from ci.store.ingest_writes import REPLACED_FROM_ANOTHER_SOURCE, ReadAgain, Replaced, ReplacementRefused
from ci.store.limits import StoreLimitError
from ci.store.reads import FailedPoint, StoreReads
from ci.store.schema import head_revision, migrate_schema
from ci.store.series_reads import RunValues
from ci.store.store import Store
from ci.store.upserts import SeriesRedefined

__all__ = [
    "DEFAULT_DB",
    "REPLACED_FROM_ANOTHER_SOURCE",
    "ReadAgain",
    "Replaced",
    "FailedPoint",
    "ReplacementRefused",
    "SeriesRedefined",
    "RunValues",
    "Store",
    "StoreError",
    "StoreLimitError",
    "StoreReads",
    "display_url",
    "error_line",
    "head_revision",
    "migrate_schema",
    "resolve_url",
]
