"""A stored run is replaced by another file's run only where the user says so, and every replacement
is recorded.

A run (machine x commit x environment) ingested from another results folder replaced the stored one
silently ("1 replaced", exit 0). Ingest now refuses a different run from another source unless
`ci ingest --replace`; asv's rewrite of the same file (`--append-samples`) still replaces it. Each
replacement is a row of `run_replacements`: the run, both files and digests, and whether it was
forced.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "run_replacements",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("run_key", sa.String(length=1024), nullable=False),
        sa.Column("old_source", sa.Text(), nullable=False),
        sa.Column("new_source", sa.Text(), nullable=False),
        sa.Column("old_digest", sa.String(length=64), nullable=False),
        sa.Column("new_digest", sa.String(length=64), nullable=False),
        sa.Column("forced", sa.Boolean(), nullable=False),
        sa.Column("replaced_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_run_replacements")),
    )
    op.create_index(op.f("ix_run_replacements_run_key"), "run_replacements", ["run_key"], unique=False)


def downgrade() -> None:
    op.drop_table("run_replacements")
