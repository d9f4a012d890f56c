"""A machine is one asv machine name x environment x host, and the project's settings are stored.

asv keys a result by machine *and* environment; one machine name may carry several environments
(two conda environments under `GH-Actions` in a real history) and be given to several hosts. Until
this revision every environment of a machine name was one series. Each existing machine row keeps
its name for the environment it measured first and gets a row of its own, "<name> [<environment>]",
for every other environment, its runs moved there: no point is lost, none changes. Two hosts merged
before cannot be told apart afterwards (runs did not record theirs): they stay one machine. The
history detector's cached states are dropped (a cache: recomputed on the next read).

`settings` holds what the project's asv.conf.json said (`ci.store.models.SettingRow`).

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-05
"""

from __future__ import annotations

import json

import sqlalchemy as sa
from alembic import op

from ci.store.hosts import host_fingerprint

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("machines") as batch:
        batch.add_column(sa.Column("asv_name", sa.String(length=255), server_default="", nullable=False))
        batch.add_column(sa.Column("env_name", sa.String(length=255), server_default="", nullable=False))
        batch.add_column(sa.Column("host", sa.Text(), server_default="{}", nullable=False))
        batch.create_index("ix_machines_asv_name", ["asv_name"], unique=False)
    op.create_table(
        "settings",
        sa.Column("key", sa.String(length=255), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("key", name="pk_settings"),
    )
    conn = op.get_bind()
    rows = conn.execute(sa.text("SELECT id, name, gpu, driver, cuda, torch, triton, cpu, extra FROM machines "
                                "ORDER BY id")).all()  # fmt: skip
    taken = {r.name for r in rows}
    for m in rows:
        try:
            extra = json.loads(m.extra or "{}")
        except ValueError:
            extra = {}
        info = {k: str(v) for k, v in extra.items() if isinstance(k, str)} if isinstance(extra, dict) else {}
        info.update(cpu=m.cpu or "", gpu=m.gpu or "")
        host = json.dumps(dict(host_fingerprint(info)), sort_keys=True)
        envs = [e for (e,) in conn.execute(sa.text(
            "SELECT env_name FROM runs WHERE machine_id = :m GROUP BY env_name ORDER BY min(id)"), {"m": m.id})]
        conn.execute(sa.text("UPDATE machines SET asv_name = :n, env_name = :e, host = :h WHERE id = :m"),
                     {"n": m.name, "e": envs[0] if envs else "", "h": host, "m": m.id})  # fmt: skip
        for env in envs[1:]:
            name = f"{m.name} [{env}]"[:255]
            k = 2
            while name in taken:
                name = f"{m.name} [{env}] #{k}"[-255:]
                k += 1
            taken.add(name)
            conn.execute(sa.text(
                "INSERT INTO machines (name, gpu, driver, cuda, torch, triton, cpu, extra, asv_name, env_name, host) "
                "VALUES (:name, :gpu, :driver, :cuda, :torch, :triton, :cpu, :extra, :asv, :env, :host)"),
                {"name": name, "gpu": m.gpu, "driver": m.driver, "cuda": m.cuda, "torch": m.torch, "triton": m.triton,
                 "cpu": m.cpu, "extra": m.extra, "asv": m.name, "env": env, "host": host})  # fmt: skip
            new_id = conn.execute(sa.text("SELECT id FROM machines WHERE name = :n"), {"n": name}).scalar_one()
            conn.execute(sa.text("UPDATE runs SET machine_id = :new WHERE machine_id = :m AND env_name = :e"),
                         {"new": new_id, "m": m.id, "e": env})
    conn.execute(sa.text("DELETE FROM change_point_states"))


def downgrade() -> None:
    # Back to one machine per asv name: runs of the other environments and hosts return to the row
    # named as asv's machine (one is made where none is left), their own rows go.
    conn = op.get_bind()
    conn.execute(sa.text("DELETE FROM change_point_states"))
    for m in conn.execute(sa.text("SELECT id, name, asv_name FROM machines WHERE asv_name <> '' AND asv_name <> name"
                                  " ORDER BY id")).all():  # fmt: skip
        base = conn.execute(sa.text("SELECT id FROM machines WHERE name = :n"), {"n": m.asv_name}).scalar()
        if base is None:
            conn.execute(sa.text("UPDATE machines SET name = :n WHERE id = :m"), {"n": m.asv_name, "m": m.id})
            continue
        conn.execute(sa.text("UPDATE runs SET machine_id = :b WHERE machine_id = :m"), {"b": base, "m": m.id})
        conn.execute(sa.text("DELETE FROM machines WHERE id = :m"), {"m": m.id})
    op.drop_table("settings")
    with op.batch_alter_table("machines") as batch:
        batch.drop_index("ix_machines_asv_name")
        batch.drop_column("host")
        batch.drop_column("env_name")
        batch.drop_column("asv_name")
