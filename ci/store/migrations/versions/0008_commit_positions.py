"""Commits get their position in git's history, so that history order is git's topology.

History order was commit time: a commit made on a machine whose clock ran a year ahead sorted last,
its step was blamed on the commit after it, and the commits after it sorted before it. `position`
is the commit's generation in git's graph (`ci.ingest.git`), written by ingest with `--repo`; NULL
until then, where the commit is ordered by time as before (the next ingest with `--repo` of the
same results fills it in). The detector's cached states check their runs' order themselves: a
history whose order changes is recomputed on the next read.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("commits") as batch:
        batch.add_column(sa.Column("position", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("commits") as batch:
        batch.drop_column("position")
