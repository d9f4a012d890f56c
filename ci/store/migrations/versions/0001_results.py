"""Results history: machines, commits, benchmarks, runs (one per asv result file) and results.

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "machines",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("gpu", sa.String(length=255), nullable=False),
        sa.Column("driver", sa.String(length=64), nullable=False),
        sa.Column("cuda", sa.String(length=64), nullable=False),
        sa.Column("torch", sa.String(length=64), nullable=False),
        sa.Column("triton", sa.String(length=64), nullable=False),
        sa.Column("cpu", sa.String(length=255), nullable=False),
        sa.Column("extra", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_machines")),
        sa.UniqueConstraint("name", name=op.f("uq_machines_name")),
    )
    op.create_table(
        "commits",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("sha", sa.String(length=64), nullable=False),
        sa.Column("parents", sa.Text(), nullable=False),
        sa.Column("branch", sa.String(length=255), nullable=False),
        sa.Column("time", sa.DateTime(timezone=True), nullable=True),
        sa.Column("subject", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_commits")),
        sa.UniqueConstraint("sha", name=op.f("uq_commits_sha")),
    )
    op.create_index(op.f("ix_commits_branch"), "commits", ["branch"], unique=False)
    op.create_table(
        "benchmarks",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("key", sa.String(length=1024), nullable=False),
        sa.Column("name", sa.String(length=512), nullable=False),
        sa.Column("params", sa.Text(), nullable=False),
        sa.Column("unit", sa.String(length=64), nullable=False),
        sa.Column("direction", sa.String(length=16), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_benchmarks")),
        sa.UniqueConstraint("key", name=op.f("uq_benchmarks_key")),
    )
    op.create_index(op.f("ix_benchmarks_name"), "benchmarks", ["name"], unique=False)
    op.create_table(
        "runs",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("run_key", sa.String(length=1024), nullable=False),
        sa.Column("digest", sa.String(length=64), nullable=False),
        sa.Column("machine_id", sa.Integer(), nullable=False),
        sa.Column("commit_id", sa.Integer(), nullable=False),
        sa.Column("env_name", sa.String(length=255), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("ingested_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("environment", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(["commit_id"], ["commits.id"], name=op.f("fk_runs_commit_id_commits")),
        sa.ForeignKeyConstraint(["machine_id"], ["machines.id"], name=op.f("fk_runs_machine_id_machines")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_runs")),
        sa.UniqueConstraint("run_key", name=op.f("uq_runs_run_key")),
    )
    op.create_index(op.f("ix_runs_commit_id"), "runs", ["commit_id"], unique=False)
    op.create_index(op.f("ix_runs_machine_id"), "runs", ["machine_id"], unique=False)
    op.create_table(
        "results",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("benchmark_id", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("value", sa.Float(), nullable=True),
        sa.Column("samples", sa.Text(), nullable=False),
        sa.Column("has_raw_samples", sa.Boolean(), nullable=False),
        sa.Column("ci_99_a", sa.Float(), nullable=True),
        sa.Column("ci_99_b", sa.Float(), nullable=True),
        sa.Column("q_25", sa.Float(), nullable=True),
        sa.Column("q_75", sa.Float(), nullable=True),
        sa.Column("number", sa.Float(), nullable=True),
        sa.Column("repeat", sa.Float(), nullable=True),
        sa.Column("benchmark_version", sa.String(length=128), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("duration", sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(["benchmark_id"], ["benchmarks.id"], name=op.f("fk_results_benchmark_id_benchmarks")),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name=op.f("fk_results_run_id_runs"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_results")),
        sa.UniqueConstraint("run_id", "benchmark_id", name=op.f("uq_results_run_id_benchmark_id")),
    )
    op.create_index("ix_results_benchmark_id_run_id", "results", ["benchmark_id", "run_id"], unique=False)


def downgrade() -> None:
    op.drop_table("results")
    op.drop_table("runs")
    op.drop_table("benchmarks")
    op.drop_table("commits")
    op.drop_table("machines")
