"""Alerts: every regression change point and failed correctness gate a history job finds, kept
with its state (detected -> reported -> acknowledged) until a job has reported it.

A history job used to report only the steps its own commits made visible: one cancelled or timed
out after ingesting lost its alerts for good, since the next job's commits made nothing new
visible. The next job now reports every alert still in state "detected" (`ci.runner.alerts`).

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "alerts",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("benchmark_id", sa.Integer(), nullable=False),
        sa.Column("machine", sa.String(length=255), nullable=False),
        sa.Column("commit_sha", sa.String(length=64), nullable=False),
        sa.Column("previous_sha", sa.String(length=64), nullable=False),
        sa.Column("ratio", sa.Float(), nullable=True),
        sa.Column("p_value", sa.Float(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("detected_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("reported_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("acknowledged_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["benchmark_id"], ["benchmarks.id"], name=op.f("fk_alerts_benchmark_id_benchmarks")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_alerts")),
        sa.UniqueConstraint("kind", "benchmark_id", "machine", "commit_sha",
                            name=op.f("uq_alerts_kind_benchmark_id_machine_commit_sha")),
    )
    op.create_index(op.f("ix_alerts_commit_sha"), "alerts", ["commit_sha"], unique=False)
    op.create_index(op.f("ix_alerts_state"), "alerts", ["state"], unique=False)


def downgrade() -> None:
    op.drop_table("alerts")
