"""The results store: SQLAlchemy 2 over SQLite (default, a file) or any SQLAlchemy URL
(PostgreSQL when several runners share one history).

`Store` implements `ci.records.StoreReader` for the verdict code, the PR comment and the
dashboard, plus the write side: `ingest_run` (one asv result file, one transaction),
`save_verdicts` and `acknowledge`. By concern:

- `engine`: `--db` arguments to URLs, the engine, retried write transactions, error lines;
- `schema` and `migrations/`: the alembic migrations, run to head every time a store is opened;
- `models`: the SQLAlchemy models, mirroring `ci.records`; `codec`: values to columns and back;
- `limits`: what the store can hold alike on SQLite and PostgreSQL, checked before a write;
- `reads`: `StoreReads`, the read side; `writes` and `bulk`: `StoreWrites`, the write side;
- `store`: `Store`, both sides on a history opened from a path or URL.
"""

from ci.store.engine import DEFAULT_DB, StoreError, display_url, error_line, resolve_url
from ci.store.limits import StoreLimitError
from ci.store.reads import FailedPoint, StoreReads
from ci.store.schema import head_revision, migrate_schema
from ci.store.store import Store

__all__ = [
    "DEFAULT_DB",
    "FailedPoint",
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
