"""Alembic migrations of the results store; `ci.store.Store` runs them to head at open."""
