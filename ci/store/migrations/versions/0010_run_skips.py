"""A run records which benchmarks its file held that ingest could not read, so that they are read once
benchmarks.json knows them.

A result file is known by its bytes: one ingested while benchmarks.json lacked one of its benchmarks
(or held another version of it) was "unchanged" on every later ingest, and that benchmark's points
never reached the store, even after benchmarks.json was fixed. `skipped` is the JSON list of
[name, the file's version of it] that the file's parse skipped; ingest reads a known file again when
benchmarks.json now knows one of them. NULL for runs written before: such a file is read once more
(nothing it stored is rewritten; what it skipped and benchmarks.json now knows is added).

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("skipped", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("skipped")
