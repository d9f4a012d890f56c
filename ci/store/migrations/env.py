"""Alembic environment for the results store.

Run programmatically by `ci.store.schema.migrate_schema`, which hands over an open connection through
`config.attributes["connection"]` (so the caller's lock and transaction cover the upgrade).
A `sqlalchemy.url` main option works too, for alembic's own commands (e.g. autogenerate).
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine

from ci.store.models import Base

config = context.config
target_metadata = Base.metadata


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    url = config.get_main_option("sqlalchemy.url")
    if not url:
        raise ValueError("alembic: no connection and no sqlalchemy.url given")
    engine = create_engine(url)
    with engine.begin() as conn:
        _run(conn)
    engine.dispose()


def _run(connection) -> None:
    # render_as_batch: SQLite cannot ALTER most things; batch mode copies the table instead.
    context.configure(connection=connection, target_metadata=target_metadata, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    raise ValueError("offline (SQL script) migrations are not supported; open the store instead")
run_migrations_online()
