"""`Store`: a results history opened from a `--db` path or URL, its schema migrated to head, with
the read side (`ci.store.reads`) and the write side (`ci.store.writes`) on one object."""

from __future__ import annotations

import os

from ci.store.engine import StoreError, display_url, make_engine, resolve_url
from ci.store.schema import migrate_schema, stored_revision
from ci.store.writes import StoreWrites


class Store(StoreWrites):
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
        engine = make_engine(self.url, echo)
        if not create and stored_revision(engine) is None:
            engine.dispose()
            raise StoreError(f"{display_url(self.url)} holds no results store yet: ingest results first "
                             "(python -m ci ingest), or check --db")
        super().__init__(engine)
        if migrate:
            migrate_schema(self.engine)

    def close(self) -> None:
        """Release every pooled connection."""
        self.engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
