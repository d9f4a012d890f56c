"""Samples as packed float64 bytes instead of JSON text, and the history detector's cached states.

A result's samples are most of the store: 10 samples were ~200 bytes of JSON text, written with
repr and read back with float() per sample; packed they are 80 bytes, written and read by one
struct call (docs/performance.md "Ingest and store"). The existing history is converted in place,
in chunks of rows, every sample kept bit for bit (JSON's NaN and Infinity included).

`change_point_states` holds `ci.verdicts.history`'s per-series state so that a new commit
re-examines only the tail of each series; it starts empty (the first detection fills it).

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from alembic import op

from ci.store.codec import pack_samples, parse_samples, samples_json, unpack_samples

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

_CHUNK = 20_000  # rows converted per round trip: bounded memory at any history size


def _convert(source: str, target: str, fn: Callable[[Any], Any]) -> None:
    """Fill results.`target` with fn(results.`source`), chunk by chunk in id order."""
    conn = op.get_bind()
    select_ = sa.text(f"SELECT id, {source} FROM results WHERE id > :last ORDER BY id LIMIT {_CHUNK}")
    last = 0
    while True:
        rows = conn.execute(select_, {"last": last}).all()
        if not rows:
            return
        values = [(fn(v), i) for i, v in rows]
        last = rows[-1][0]
        if conn.dialect.name == "postgresql":
            # One COPY into a scratch table and one joined UPDATE: row-by-row UPDATEs are round trips.
            driver = conn.connection.driver_connection
            assert driver is not None  # an open connection's
            cur = driver.cursor()
            cur.execute("CREATE TEMP TABLE IF NOT EXISTS samples_0004 (id integer PRIMARY KEY, v bytea, t text)")
            cur.execute("TRUNCATE samples_0004")
            col = "v" if isinstance(values[0][0], bytes) else "t"
            with cur.copy(f"COPY samples_0004 (id, {col}) FROM STDIN") as copy:
                for v, i in values:
                    copy.write_row((i, v))
            cur.execute(f"UPDATE results SET {target} = s.{col} FROM samples_0004 s WHERE results.id = s.id")
        else:
            conn.exec_driver_sql(f"UPDATE results SET {target} = ? WHERE id = ?", values)


def upgrade() -> None:
    op.add_column("results", sa.Column("packed", sa.LargeBinary(), nullable=True))
    _convert("samples", "packed", lambda text: pack_samples(parse_samples(text)))
    # Batch mode: SQLite cannot make a column NOT NULL in place, so the table is copied (rows,
    # indexes and constraints kept); PostgreSQL alters it in place.
    with op.batch_alter_table("results") as batch:
        batch.drop_column("samples")
        batch.alter_column("packed", new_column_name="samples", existing_type=sa.LargeBinary(), nullable=False)
    op.create_table(
        "change_point_states",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("benchmark_id", sa.Integer(), nullable=False),
        sa.Column("machine_id", sa.Integer(), nullable=False),
        sa.Column("branch", sa.String(length=255), nullable=False),
        sa.Column("settings", sa.String(length=255), nullable=False),
        sa.Column("runs", sa.Integer(), nullable=False),
        sa.Column("runs_digest", sa.String(length=64), nullable=False),
        sa.Column("state", sa.LargeBinary(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["benchmark_id"], ["benchmarks.id"], name=op.f("fk_change_point_states_benchmark_id_benchmarks")
        ),
        sa.ForeignKeyConstraint(
            ["machine_id"], ["machines.id"], name=op.f("fk_change_point_states_machine_id_machines")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_change_point_states")),
        sa.UniqueConstraint(
            "branch", "settings", "benchmark_id", "machine_id",
            name=op.f("uq_change_point_states_branch_settings_benchmark_id_machine_id"),
        ),
    )  # fmt: skip


def downgrade() -> None:
    op.drop_table("change_point_states")
    op.add_column("results", sa.Column("text_samples", sa.Text(), nullable=True))
    _convert("samples", "text_samples", lambda blob: samples_json(unpack_samples(bytes(blob))))
    with op.batch_alter_table("results") as batch:
        batch.drop_column("samples")
        batch.alter_column("text_samples", new_column_name="samples", existing_type=sa.Text(), nullable=False)
