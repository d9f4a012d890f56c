"""The history detector's cached states stored uncompressed on PostgreSQL.

A state is ~24 KB of packed floats per series at 1,000 runs (12 MB for 500 series), rewritten
after every new commit. PostgreSQL's default storage for bytea (EXTENDED) tries pglz on each value
before moving it out of line; on these values the attempt saves nothing (`pg_column_size` equals
`length` for all 500 states, 2026-12-02) but cost the write: change points after one new commit
0.64-0.85 s with it, 0.39-0.56 s without it (four alternating rounds each, the tool's 1,000-commit
history, docs/performance.md "Ingest and store"). EXTERNAL keeps the out-of-line storage without
the compression. It applies to values written from now on; the existing states are rewritten by the
next detection anyway. SQLite has no such setting: nothing to do there.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02
"""

from __future__ import annotations

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def _storage(kind: str) -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"ALTER TABLE change_point_states ALTER COLUMN state SET STORAGE {kind}")


def upgrade() -> None:
    _storage("EXTERNAL")


def downgrade() -> None:
    _storage("EXTENDED")
