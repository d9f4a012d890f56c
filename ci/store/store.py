"""`Store`: a results history opened from a `--db` path or URL, its schema migrated to head, with
the read side (`ci.store.reads`) and the write side (`ci.store.writes`) on one object."""

from __future__ import annotations

import os

from ci.store.engine import StoreError, display_url, is_retryable, make_engine, resolve_url
from ci.store.schema import migrate_schema, require_head, stored_revision
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
        read_only: open it only to read (`compare --no-save`, `dashboard`): no write lock is
            ever taken, so a store on a read-only file reads, and a writer never makes this wait
            for more than a moment (`ci.store.engine.READ_WAIT_S`); nothing is migrated or created,
            and every write fails. The detector's cached states are not written back either.

    Raises:
        StoreError: the database holds other tables and no store schema, its schema is newer
            than this code, (create=False) there is no store, or (read_only) its schema is not
            this code's newest.
    """

    def __init__(
        self, db: str | os.PathLike[str] | None = None, *, migrate: bool = True, echo: bool = False,
        create: bool = True, read_only: bool = False,
    ) -> None:
        self.url = resolve_url(db, must_exist=not create or read_only)
        engine = make_engine(self.url, echo, read_only=read_only)
        try:
            if read_only:
                require_head(engine)
            elif not create and stored_revision(engine) is None:
                raise StoreError(f"{display_url(self.url)} holds no results store yet: ingest results first "
                                 "(python -m ci ingest), or check --db")
        except BaseException:
            engine.dispose()
            raise
        super().__init__(engine, read_only=read_only)
        if migrate and not read_only:
            migrate_schema(self.engine)

    def require_writable(self) -> None:
        """Raise `StoreError` now where this store cannot take a write, so that a runner job finds out
        before it measures for minutes, not when it stores what it measured (the measurements would be
        lost with the job), and an ingest says so once, not once per file: a read-only open, file or
        URL (`mode=ro`), a PostgreSQL role without the
        privilege, a read-only transaction or a standby server. The probe is a write of no rows,
        rolled back: SQLite refuses it on a read-only database, PostgreSQL checks the privilege and the
        transaction's mode before it looks for rows."""
        from sqlalchemy import text
        from sqlalchemy.exc import DBAPIError

        where = display_url(self.url)
        if self.read_only:
            raise StoreError(f"{where} was opened read-only: this command writes to it")
        try:
            with self.engine.connect() as conn, conn.begin() as tx:
                conn.execute(text("UPDATE runs SET source = source WHERE 1 = 0"))
                tx.rollback()
        except DBAPIError as exc:
            if is_retryable(exc):  # busy (another writer holds the lock past the wait), not read-only
                return
            lines = str(exc.orig if exc.orig is not None else exc).strip().splitlines()
            raise StoreError(f"{where} cannot be written ({lines[0] if lines else type(exc).__name__}); nothing was "
                             "measured or written: give a writable --db") from None

    def close(self) -> None:
        """Release every pooled connection."""
        self.engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
