"""A benchmark's grid in one row (`result_blocks`), and the detector's states stored uncompressed.

`result_blocks` holds the points of one benchmark's parameter grid in one run as packed columns
(`ci.store.models.ResultBlockRow`): ingest writes one row per benchmark of a file where `results`
took one per point, and every entry of `results`' (benchmark, run) index landed on another page
(the write of a 500-point file 4.8 -> 1.1 ms on SQLite, 2026-12-02). The reads take points from both
tables, so the rows of an existing history stay where they are and read back as before: there is
nothing to convert on the way up. The way down writes each block's points back as `results` rows.

The history detector's states (~24 KB each at 1,000 runs, 12 MB for 500 series, rewritten after
every new commit) were stored EXTENDED on PostgreSQL, which tries pglz on each value: on these it
saved nothing (`pg_column_size` equals `length` for all 500) and slowed the write; change points
after one new commit took 0.64-0.85 s with it and 0.39-0.56 s with EXTERNAL (four alternating
rounds each, 2026-12-02). SQLite has no such setting. Both in docs/performance.md "Ingest and store".

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02
"""

from __future__ import annotations

import math

import sqlalchemy as sa
from alembic import op

from ci.store.codec import float64s, int64s, split_samples

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

_CHUNK = 2_000  # blocks written back per round trip on the way down: bounded memory at any history size
_STATS = ("ci_99_a", "ci_99_b", "q_25", "q_75", "number", "repeat")


def _storage(kind: str) -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"ALTER TABLE change_point_states ALTER COLUMN state SET STORAGE {kind}")


def upgrade() -> None:
    op.create_table(
        "result_blocks",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=512), nullable=False),
        sa.Column("points", sa.Integer(), nullable=False),
        sa.Column("benchmark_ids", sa.LargeBinary(), nullable=False),
        sa.Column("value", sa.LargeBinary(), nullable=False),
        sa.Column("samples", sa.LargeBinary(), nullable=False),
        sa.Column("lengths", sa.LargeBinary(), nullable=False),
        sa.Column("has_raw_samples", sa.Boolean(), nullable=False),
        sa.Column("stats", sa.LargeBinary(), nullable=False),
        sa.Column("benchmark_version", sa.String(length=128), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("duration", sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name=op.f("fk_result_blocks_run_id_runs"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_result_blocks")),
        sa.UniqueConstraint("run_id", "name", name=op.f("uq_result_blocks_run_id_name")),
    )
    op.create_index("ix_result_blocks_name_run_id", "result_blocks", ["name", "run_id"], unique=False)
    _storage("EXTERNAL")


def downgrade() -> None:
    _storage("EXTENDED")
    conn = op.get_bind()
    results = sa.table("results", *(sa.column(c) for c in (
        "run_id", "benchmark_id", "status", "value", "samples", "has_raw_samples", *_STATS, "benchmark_version",
        "started_at", "duration")))  # fmt: skip
    select_ = sa.text("SELECT id, run_id, benchmark_ids, value, samples, lengths, has_raw_samples, stats, "
                      f"benchmark_version, started_at, duration FROM result_blocks WHERE id > :last ORDER BY id "
                      f"LIMIT {_CHUNK}")  # fmt: skip
    last = 0
    while True:
        blocks = conn.execute(select_, {"last": last}).all()
        if not blocks:
            break
        last = blocks[-1][0]
        rows = []
        for _id, run_id, ids, values, samples, lengths, raw, stats, version, started, duration in blocks:
            ids = int64s(bytes(ids))
            n = len(ids)
            stat = float64s(bytes(stats))
            for j, (bid, value, blob) in enumerate(zip(ids, float64s(bytes(values)),
                                                       split_samples(bytes(samples), int64s(bytes(lengths))),
                                                       strict=True)):  # fmt: skip
                row = {"run_id": run_id, "benchmark_id": bid, "status": "ok", "value": value, "samples": blob,
                       "has_raw_samples": bool(raw), "benchmark_version": version, "started_at": started,
                       "duration": duration}  # fmt: skip
                for k, name in enumerate(_STATS):
                    x = stat[k * n + j]
                    row[name] = None if math.isnan(x) else x
                rows.append(row)
        conn.execute(sa.insert(results), rows)
    op.drop_index("ix_result_blocks_name_run_id", table_name="result_blocks")
    op.drop_table("result_blocks")
