"""The store's schema: the alembic migrations in `ci/store/migrations/`, run to head every time a
store is opened, so an existing history survives upgrades. Migrations run under a lock (SQLite's
write lock, a transaction-scoped advisory lock on PostgreSQL), so runners opening one history at
the same time migrate it once; a database that holds other tables is never given the store's.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util import CommandError
from sqlalchemy import Connection, Engine, text
from sqlalchemy import inspect as sa_inspect

from ci.store.engine import StoreError, display_url

MIGRATIONS_DIR = Path(__file__).with_name("migrations")
_PG_MIGRATION_LOCK = 0x72616767  # any constant shared by every process migrating this schema


def _alembic_config() -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    return cfg


def head_revision() -> str:
    """The newest schema revision this code knows."""
    head = ScriptDirectory.from_config(_alembic_config()).get_current_head()
    assert head is not None
    return head


def stored_revision(engine: Engine) -> str | None:
    """The schema revision of the database behind `engine`; None where it holds no store."""
    with engine.connect() as conn:
        return _current(conn, engine)


def _current(conn: Connection, engine: Engine) -> str | None:
    """The revision alembic's version table names; `StoreError` naming the store where it names several
    (a hand-edited or damaged table: alembic's own "CommandError: ... more than one head" named no file)."""
    try:
        return MigrationContext.configure(conn).get_current_revision()
    except CommandError as exc:
        where = display_url(engine.url.render_as_string(hide_password=True))
        raise StoreError(f"{where}: its schema version table is damaged ({exc}); restore the store from a "
                         "backup, or use another --db") from None


def require_head(engine: Engine) -> None:
    """Check, without writing, that the store behind `engine` is at this code's newest revision: a
    store opened read-only is never migrated, so an older one cannot be read by this code.

    Raises:
        StoreError: no store there, an older revision (a writing command upgrades it), or a
            revision this code does not know.
    """
    current = stored_revision(engine)
    head = head_revision()
    if current == head:
        return
    where = display_url(engine.url.render_as_string(hide_password=True))
    if current is None:
        raise StoreError(f"{where} holds no results store yet: ingest results first (python -m ci ingest), "
                         "or check --db")
    known = {sc.revision for sc in ScriptDirectory.from_config(_alembic_config()).walk_revisions()}
    if current not in known:
        raise StoreError(f"{where} has schema revision {current!r}, which this version of ragged-vit does not know "
                         f"(newest here: {head!r}): it was written by a newer version; upgrade, or use another --db")
    raise StoreError(f"{where} has schema revision {current!r}, older than this version's {head!r}, and this command "
                     "only reads, so it does not upgrade it: run a writing command on it first (python -m ci ingest, "
                     "or python -m ci run), which upgrades the store in place")


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
            current = _current(conn, engine)
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
