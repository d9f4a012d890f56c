"""SQLAlchemy 2 models of the results store, mirroring the records in `ci.records`.

The schema is owned by the alembic migrations in `ci/store/migrations/versions/`; these models must
match them (tests/ci/test_store.py compares the two with alembic's autogenerate). Change a
model only together with a new migration.

Lists and maps (params, parents, environment) are JSON text: the store is read whole series at a
time, never queried inside those values, and JSON text behaves the same on SQLite and PostgreSQL.
A result's samples, the bulk of the store, are packed float64 bytes (`ci.store.codec`): a fifth of
the JSON text's cost to write and read (docs/performance.md "Ingest and store"). Floats that may
be NaN are stored as NULL (SQLite turns NaN into NULL anyway).
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, ClassVar

from sqlalchemy import (
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

# Explicit constraint names so that migrations can refer to them on every backend.
NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)

    if TYPE_CHECKING:
        # Every mapped class here is a plain declarative table, so its __table__ is a Table (which
        # insert(), delete() and the dialect upserts take), not DeclarativeBase's wider FromClause.
        __table__: ClassVar[Table]


class MachineRow(Base):
    """Where series are measured: one asv machine name x environment x host (`ci.records.Machine`);
    `name` is its key, the others asv's machine name, its environment and the host's fingerprint."""

    __tablename__ = "machines"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(255), unique=True)
    asv_name: Mapped[str] = mapped_column(String(255), index=True, default="", server_default="")
    env_name: Mapped[str] = mapped_column(String(255), default="", server_default="")
    host: Mapped[str] = mapped_column(Text, default="{}", server_default="{}")  # JSON object (ci.store.hosts)
    gpu: Mapped[str] = mapped_column(String(255), default="")
    driver: Mapped[str] = mapped_column(String(64), default="")
    cuda: Mapped[str] = mapped_column(String(64), default="")
    torch: Mapped[str] = mapped_column(String(64), default="")
    triton: Mapped[str] = mapped_column(String(64), default="")
    cpu: Mapped[str] = mapped_column(String(255), default="")
    extra: Mapped[str] = mapped_column(Text, default="{}")  # JSON object of asv's other machine.json fields


class CommitRow(Base):
    __tablename__ = "commits"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    sha: Mapped[str] = mapped_column(String(64), unique=True)
    parents: Mapped[str] = mapped_column(Text, default="[]")  # JSON list of shas
    branch: Mapped[str] = mapped_column(String(255), default="", index=True)
    time: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    subject: Mapped[str] = mapped_column(Text, default="")
    # Its place in git's history (`ci.records.Commit.position`, read by ingest from a checkout); NULL
    # where none was read: history order is by position, by time only among commits without one.
    position: Mapped[int | None] = mapped_column(Integer, nullable=True)


class BenchmarkRow(Base):
    __tablename__ = "benchmarks"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    key: Mapped[str] = mapped_column(String(1024), unique=True)  # Benchmark.key: name(params)
    name: Mapped[str] = mapped_column(String(512), index=True)
    params: Mapped[str] = mapped_column(Text, default="[]")  # JSON list of [name, value] pairs
    unit: Mapped[str] = mapped_column(String(64), default="seconds")
    direction: Mapped[str] = mapped_column(String(16))
    kind: Mapped[str] = mapped_column(String(16))


class RunRow(Base):
    """One asv result file: a commit x machine x environment. asv rewrites that file in place
    (e.g. --append-samples), so a changed file from the same source replaces the run; identical
    bytes are a no-op; a different run from another file is refused unless `ci ingest --replace`."""

    __tablename__ = "runs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_key: Mapped[str] = mapped_column(String(1024), unique=True)  # machine/commit/env
    digest: Mapped[str] = mapped_column(String(64))  # sha256 of the file bytes
    machine_id: Mapped[int] = mapped_column(ForeignKey("machines.id"), index=True)
    commit_id: Mapped[int] = mapped_column(ForeignKey("commits.id"), index=True)
    env_name: Mapped[str] = mapped_column(String(255))
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    ingested_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    # The file it came from: its absolute path (as given, for runs ingested before 2026-12-05). Another
    # file's run of the same key replaces it only by `ci ingest --replace` (`RunReplacementRow`).
    source: Mapped[str] = mapped_column(Text, default="")
    environment: Mapped[str] = mapped_column(Text, default="{}")  # JSON object
    # The benchmarks the file held that its parse skipped (not in benchmarks.json, or of another version):
    # a JSON list of [name, the file's version or null]; NULL for runs written before 2026-12-06. Ingest
    # reads a stored file again once benchmarks.json knows one of them (`ci.ingest.results_dir`).
    skipped: Mapped[str | None] = mapped_column(Text, nullable=True)


class RunReplacementRow(Base):
    """A stored run replaced by another file's run of it (`ci.records.RunReplacement`): asv's rewrite of
    the same file, or (`forced`) a file of another source that `ci ingest --replace` let in."""

    __tablename__ = "run_replacements"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_key: Mapped[str] = mapped_column(String(1024), index=True)
    old_source: Mapped[str] = mapped_column(Text)
    new_source: Mapped[str] = mapped_column(Text)
    old_digest: Mapped[str] = mapped_column(String(64))
    new_digest: Mapped[str] = mapped_column(String(64))
    forced: Mapped[bool] = mapped_column(Boolean)
    replaced_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class ResultRow(Base):
    """One point of one benchmark's parameter grid in one run."""

    __tablename__ = "results"
    __table_args__ = (
        UniqueConstraint("run_id", "benchmark_id"),
        Index("ix_results_benchmark_id_run_id", "benchmark_id", "run_id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    benchmark_id: Mapped[int] = mapped_column(ForeignKey("benchmarks.id"))
    status: Mapped[str] = mapped_column(String(16))  # ok, failed (asv null), skipped (asv NaN)
    value: Mapped[float | None] = mapped_column(Float, nullable=True)  # asv's reported median
    samples: Mapped[bytes] = mapped_column(LargeBinary, default=b"")  # packed float64 (ci.store.codec)
    has_raw_samples: Mapped[bool] = mapped_column(Boolean, default=False)
    ci_99_a: Mapped[float | None] = mapped_column(Float, nullable=True)
    ci_99_b: Mapped[float | None] = mapped_column(Float, nullable=True)
    q_25: Mapped[float | None] = mapped_column(Float, nullable=True)
    q_75: Mapped[float | None] = mapped_column(Float, nullable=True)
    number: Mapped[float | None] = mapped_column(Float, nullable=True)
    repeat: Mapped[float | None] = mapped_column(Float, nullable=True)
    benchmark_version: Mapped[str | None] = mapped_column(String(128), nullable=True)
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    duration: Mapped[float | None] = mapped_column(Float, nullable=True)


class ResultBlockRow(Base):
    """The points of one benchmark's parameter grid in one run, as packed columns: one row where
    `results` takes one per point (the grid of the tool's history is 10 points), written when every
    point is "ok" and read back as the same points (`ci.store.reads`). A 500-point file is 50 rows
    instead of 500 index entries scattered over the (benchmark, run) index: the write of a file's
    rows 4.8 -> 1.1 ms on SQLite (2026-12-02, docs/performance.md "Ingest and store"). Failed and
    skipped points, and the points of a grid checked one by one, stay rows of `results`."""

    __tablename__ = "result_blocks"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(512))  # the benchmark's name: every point's series has it
    points: Mapped[int] = mapped_column(Integer)
    benchmark_ids: Mapped[bytes] = mapped_column(LargeBinary)  # per point its series id, int64 little-endian
    value: Mapped[bytes] = mapped_column(LargeBinary)  # per point asv's reported median, packed float64
    samples: Mapped[bytes] = mapped_column(LargeBinary)  # every point's samples one after the other, packed float64
    lengths: Mapped[bytes] = mapped_column(LargeBinary)  # per point its number of samples, int64 little-endian
    has_raw_samples: Mapped[bool] = mapped_column(Boolean)
    # ci_99_a, ci_99_b, q_25, q_75, number, repeat: a column of `points` float64s each, NaN where
    # asv recorded none (a statistic is never NaN: the parse refuses one).
    stats: Mapped[bytes] = mapped_column(LargeBinary)
    benchmark_version: Mapped[str | None] = mapped_column(String(128), nullable=True)
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    duration: Mapped[float | None] = mapped_column(Float, nullable=True)

    # A run's blocks by benchmark (one each; a replaced file deletes them), and a series' by its name.
    __table_args__ = (UniqueConstraint("run_id", "name"), Index("ix_result_blocks_name_run_id", "name", "run_id"))


class VerdictRow(Base):
    __tablename__ = "verdicts"
    # One verdict per machine: runners sharing a history judge the same (series, base, head).
    __table_args__ = (UniqueConstraint("benchmark_id", "machine", "base_sha", "head_sha"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    benchmark_id: Mapped[int] = mapped_column(ForeignKey("benchmarks.id"), index=True)
    outcome: Mapped[str] = mapped_column(String(16))
    base_value: Mapped[float | None] = mapped_column(Float, nullable=True)
    head_value: Mapped[float | None] = mapped_column(Float, nullable=True)
    ratio: Mapped[float | None] = mapped_column(Float, nullable=True)
    ci_low: Mapped[float | None] = mapped_column(Float, nullable=True)
    ci_high: Mapped[float | None] = mapped_column(Float, nullable=True)
    p_value: Mapped[float | None] = mapped_column(Float, nullable=True)
    threshold: Mapped[float | None] = mapped_column(Float, nullable=True)
    base_sha: Mapped[str] = mapped_column(String(64), default="")
    head_sha: Mapped[str] = mapped_column(String(64), default="", index=True)
    reason: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    machine: Mapped[str] = mapped_column(String(255), default="", server_default="")  # "": before 0003


class AcknowledgementRow(Base):
    __tablename__ = "acknowledgements"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    benchmark_key: Mapped[str] = mapped_column(String(1024), index=True)
    commit_sha: Mapped[str] = mapped_column(String(64), index=True)
    who: Mapped[str] = mapped_column(String(255))
    why: Mapped[str] = mapped_column(Text)
    when: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class AlertRow(Base):
    """A regression change point or a failed correctness gate of the history (`ci.records.Alert`),
    kept from detection until reported or acknowledged (`state`: detected, reported, acknowledged)."""

    __tablename__ = "alerts"
    __table_args__ = (UniqueConstraint("kind", "benchmark_id", "machine", "commit_sha"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    kind: Mapped[str] = mapped_column(String(16))  # regression or gate
    benchmark_id: Mapped[int] = mapped_column(ForeignKey("benchmarks.id"))
    machine: Mapped[str] = mapped_column(String(255))
    commit_sha: Mapped[str] = mapped_column(String(64), index=True)
    previous_sha: Mapped[str] = mapped_column(String(64), default="")
    ratio: Mapped[float | None] = mapped_column(Float, nullable=True)
    p_value: Mapped[float | None] = mapped_column(Float, nullable=True)
    reason: Mapped[str] = mapped_column(Text, default="")
    state: Mapped[str] = mapped_column(String(16), index=True)
    detected_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    reported_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    acknowledged_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class ChangePointStateRow(Base):
    """The history detector's cached state of one series (benchmark x machine) for one branch and
    one set of detector settings: opaque bytes that `ci.verdicts.history` writes and reads, valid
    for the first `runs` runs of the machine's history, whose (run key, file digest) chain hashes to
    `runs_digest`. A state whose chain no longer matches the history is recomputed, never trusted."""

    __tablename__ = "change_point_states"
    # Branch and settings first: the detector loads all of a branch's states for its settings at once.
    __table_args__ = (UniqueConstraint("branch", "settings", "benchmark_id", "machine_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    benchmark_id: Mapped[int] = mapped_column(ForeignKey("benchmarks.id"))
    machine_id: Mapped[int] = mapped_column(ForeignKey("machines.id"))
    branch: Mapped[str] = mapped_column(String(255))  # "": every commit
    settings: Mapped[str] = mapped_column(String(255))  # the detector's settings and algorithm version
    runs: Mapped[int] = mapped_column(Integer)
    runs_digest: Mapped[str] = mapped_column(String(64))
    state: Mapped[bytes] = mapped_column(LargeBinary)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class SettingRow(Base):
    """What the project's asv.conf.json said at the last ingest that found one (key "asv_conf": its
    project name, URLs and `regressions_thresholds` as JSON), so every command that decides or
    writes reads one set of settings from the history it works on."""

    __tablename__ = "settings"

    key: Mapped[str] = mapped_column(String(255), primary_key=True)
    value: Mapped[str] = mapped_column(Text)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
