"""Verdicts carry their machine: runners sharing one history judge the same (series, base, head),
and without the machine in the key their verdicts overwrote each other.

Existing verdicts get machine "" (unknown: the dashboard shows them on every machine's series).

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Batch mode: SQLite cannot drop a constraint in place, so the table is copied (rows kept).
    with op.batch_alter_table("verdicts") as batch:
        batch.add_column(sa.Column("machine", sa.String(length=255), server_default="", nullable=False))
        batch.drop_constraint("uq_verdicts_benchmark_id_base_sha_head_sha", type_="unique")
        batch.create_unique_constraint(
            "uq_verdicts_benchmark_id_machine_base_sha_head_sha", ["benchmark_id", "machine", "base_sha", "head_sha"]
        )


def downgrade() -> None:
    # Going back keeps one verdict per (series, base, head): the newest, whichever machine it came from.
    op.execute(
        "DELETE FROM verdicts WHERE id NOT IN (SELECT max(id) FROM verdicts GROUP BY benchmark_id, base_sha, head_sha)"
    )
    with op.batch_alter_table("verdicts") as batch:
        batch.drop_constraint("uq_verdicts_benchmark_id_machine_base_sha_head_sha", type_="unique")
        batch.create_unique_constraint(
            "uq_verdicts_benchmark_id_base_sha_head_sha", ["benchmark_id", "base_sha", "head_sha"]
        )
        batch.drop_column("machine")
