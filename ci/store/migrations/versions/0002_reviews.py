"""Reviews of the history: verdicts (A/B and change-point decisions) and acknowledgements.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "verdicts",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("benchmark_id", sa.Integer(), nullable=False),
        sa.Column("outcome", sa.String(length=16), nullable=False),
        sa.Column("base_value", sa.Float(), nullable=True),
        sa.Column("head_value", sa.Float(), nullable=True),
        sa.Column("ratio", sa.Float(), nullable=True),
        sa.Column("ci_low", sa.Float(), nullable=True),
        sa.Column("ci_high", sa.Float(), nullable=True),
        sa.Column("p_value", sa.Float(), nullable=True),
        sa.Column("threshold", sa.Float(), nullable=True),
        sa.Column("base_sha", sa.String(length=64), nullable=False),
        sa.Column("head_sha", sa.String(length=64), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["benchmark_id"], ["benchmarks.id"], name=op.f("fk_verdicts_benchmark_id_benchmarks")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_verdicts")),
        sa.UniqueConstraint(
            "benchmark_id", "base_sha", "head_sha", name=op.f("uq_verdicts_benchmark_id_base_sha_head_sha")
        ),
    )
    op.create_index(op.f("ix_verdicts_benchmark_id"), "verdicts", ["benchmark_id"], unique=False)
    op.create_index(op.f("ix_verdicts_head_sha"), "verdicts", ["head_sha"], unique=False)
    op.create_table(
        "acknowledgements",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("benchmark_key", sa.String(length=1024), nullable=False),
        sa.Column("commit_sha", sa.String(length=64), nullable=False),
        sa.Column("who", sa.String(length=255), nullable=False),
        sa.Column("why", sa.Text(), nullable=False),
        sa.Column("when", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_acknowledgements")),
    )
    op.create_index(op.f("ix_acknowledgements_benchmark_key"), "acknowledgements", ["benchmark_key"], unique=False)
    op.create_index(op.f("ix_acknowledgements_commit_sha"), "acknowledgements", ["commit_sha"], unique=False)


def downgrade() -> None:
    op.drop_table("acknowledgements")
    op.drop_table("verdicts")
