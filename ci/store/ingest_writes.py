"""The store's ingest writes: one parsed asv result file per transaction (`ingest_run`: its
machine, commit, series, the run and its results), or a batch of them in one transaction, each file
in its own savepoint (`ingest_runs`); another file's run of a stored one only with `replace`,
recorded (`ci.store.models.RunReplacementRow`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from operator import itemgetter
from typing import Any

from sqlalchemy import Connection, Engine, delete, insert, select, update
from sqlalchemy.exc import DBAPIError

from ci.records import Benchmark, Commit, Machine, ParsedRun
from ci.store.bulk import ResultInsert
from ci.store.codec import pack_block, pack_int64s, pack_samples, utc
from ci.store.engine import database_failed, is_retryable
from ci.store.limits import StoreLimitError, check_run
from ci.store.models import BenchmarkRow, ResultBlockRow, ResultRow, RunReplacementRow, RunRow
from ci.store.upserts import CHUNK, UpsertWrites

_LOOK = object()  # `_ingest_run_tx`: the stored run is not known yet, look it up
_GRID_CACHE = 4096  # grids whose series ids a store keeps packed (`_grid_ids`); emptied when full


_second = itemgetter(1)
# `ingest_run`'s status for a run that replaced one stored from another file (`replace=True`).
REPLACED_FROM_ANOTHER_SOURCE = "replaced from another source"
# A stored file read again whose skipped benchmarks benchmarks.json knows now: their points were added.
READ_AGAIN = "read again"


class ReadAgain(str):
    """The status `READ_AGAIN` (equal to it), with how many points the file added."""

    points: int

    def __new__(cls, points: int) -> ReadAgain:
        status = super().__new__(cls, READ_AGAIN)
        status.points = points
        return status


class Replaced(str):
    """The status "replaced" or `REPLACED_FROM_ANOTHER_SOURCE` (equal to it), with the benchmarks
    the stored run held that the rewritten file does not: their points went with the stored run."""

    dropped: tuple[str, ...]

    def __new__(cls, status: str, dropped: tuple[str, ...]) -> Replaced:
        out = super().__new__(cls, status)
        out.dropped = dropped
        return out


class ReplacementRefused(ValueError):
    """A file holds a different run of a stored (machine, environment, commit) than the one stored,
    from another file: not replaced without `replace=True` (`ci ingest --replace`)."""


def same_source(stored: str, new: str) -> bool:
    """True when a run stored from `stored` and a file at absolute path `new` are the same file: asv
    rewriting it in place, which replaces the run. A run stored without a source, or stored with a
    relative path (before sources were absolute, 2026-12-05) that `new` ends with, counts as the same."""
    if stored == new or not stored:
        return True
    if os.path.isabs(stored):
        return False
    rel = os.path.normpath(stored)
    return new.endswith(os.sep + rel)


def _by_name(item: tuple[str, str | None]) -> tuple[str, str]:
    return item[0], item[1] or ""


def _by_benchmark_id(row: tuple[Any, ...]) -> int:
    return row[1]


class IngestWrites(UpsertWrites):
    """Ingest's writes of parsed asv result files.

    Args:
        engine: from `ci.store.engine.make_engine`, holding the store's schema.
        read_only: the engine cannot write.
    """

    def __init__(self, engine: Engine, *, read_only: bool = False) -> None:
        super().__init__(engine, read_only=read_only)
        self._result_insert: ResultInsert | None = None
        self._block_insert: ResultInsert | None = None
        # A grid's packed series ids, once every series of it is a committed row (ids never change),
        # by the identity of the parse's tuple of its series (the same tuple in every file of a
        # history, `ci.ingest.parse._grid_benchmarks`); the tuple is kept, so its id stays its own.
        # Looking a file's 500 series up one by one was ~0.6 ms of its ~5 ms write (2026-12-02).
        self._grid_ids: dict[int, tuple[tuple[tuple[Benchmark, str], ...], bytes]] = {}

    def ingest_run(self, run: ParsedRun, machine: Machine, commit: Commit, *, replace: bool = False) -> str:
        """Write one parsed asv result file in one transaction: all of it or nothing.

        Args:
            run: from `ci.ingest.parse.parse_result_file`.
            machine: the machine row to create or refresh (name must equal `run.machine`).
            commit: the commit row to create or enrich (sha must equal `run.commit_hash`).
            replace: a different run of a stored (machine, environment, commit) from another file
                replaces the stored one (recorded in `run_replacements`); without it, refused.

        Returns:
            "inserted", "replaced" (asv rewrote the file since the last ingest),
            `REPLACED_FROM_ANOTHER_SOURCE` (`replace`) or "unchanged" (identical bytes were
            ingested before: nothing is written).

        Raises:
            ReplacementRefused: the run is stored from another file with other contents, and not `replace`.
        """
        if not isinstance(run, ParsedRun):
            raise TypeError(f"run must be a ParsedRun, got {type(run).__name__}")
        if machine.name != run.machine:
            raise ValueError(f"machine {machine.name!r} does not match the run's machine {run.machine!r}")
        if commit.sha != run.commit_hash:
            raise ValueError(f"commit {commit.sha!r} does not match the run's commit {run.commit_hash!r}")
        check_run(run, machine, commit)  # the same outcome on SQLite and PostgreSQL (ci.store.limits)
        return self._write_retrying(self._ingest_run_tx, run, machine, commit, _LOOK, replace)

    def ingest_runs(
        self, items: Sequence[tuple[ParsedRun, Machine, Commit]], *, replace: bool = False
    ) -> list[str | Exception]:
        """Write several parsed result files in one transaction, each file inside its own
        SAVEPOINT: a file that fails is rolled back alone (never a partial run) while the others
        commit together. One commit per batch instead of per file: each file dirties ~500 pages
        of the (benchmark, run) index, and writing those once per batch made 1,000-file ingest
        2.5x faster on SQLite (2026-11-29, docs/performance.md "Ingest and store"). A crash loses the whole uncommitted
        batch, which the next ingest simply writes again.

        Args:
            items: (run, machine, commit) triples as for `ingest_run`.
            replace: as for `ingest_run`.

        Returns:
            Per item, a status as `ingest_run` returns it, or the exception that failed it (a
            `ci.store.limits.StoreLimitError` for a value the store cannot hold on every database,
            `ReplacementRefused` for another file's run of a stored one: that file is not written,
            the others are).
        """
        refused: dict[int, StoreLimitError] = {}
        for i, (run, machine, commit) in enumerate(items):
            if not isinstance(run, ParsedRun):
                raise TypeError(f"run must be a ParsedRun, got {type(run).__name__}")
            if machine.name != run.machine or commit.sha != run.commit_hash:
                raise ValueError(f"{run.path}: machine/commit records do not match the run")
            try:
                check_run(run, machine, commit)  # the same outcome on SQLite and PostgreSQL (ci.store.limits)
            except StoreLimitError as exc:
                refused[i] = exc
        retry = object()

        def tx(conn: Connection, pending: dict[Any, int]) -> list[Any]:
            out: list[Any] = []
            # The batch's runs already stored, in one query instead of one per file (not the refused
            # files' keys: a NUL in one would fail the query, so the batch, on PostgreSQL).
            keys = sorted({run.run_key for i, (run, _, _) in enumerate(items) if i not in refused})
            known: dict[str, Any] = {}  # run key -> its stored (id, digest) row; absent: not stored
            for i in range(0, len(keys), CHUNK):
                stmt = select(RunRow.run_key, RunRow.id, RunRow.digest, RunRow.source).where(
                    RunRow.run_key.in_(keys[i : i + CHUNK]))
                known.update((r.run_key, r) for r in conn.execute(stmt))
            for i, (run, machine, commit) in enumerate(items):
                if i in refused:
                    out.append(refused[i])
                    continue
                before = dict(pending)
                try:
                    with conn.begin_nested():
                        out.append(self._ingest_run_tx(conn, pending, run, machine, commit, known.get(run.run_key),
                                                       replace))
                        known[run.run_key] = _LOOK  # a second file of this run in the batch looks it up
                except Exception as exc:
                    if isinstance(exc, DBAPIError) and database_failed(exc):
                        raise  # the database failed as a whole (read-only, full, gone): no file's fault
                    # Ids of benchmarks created inside the rolled-back savepoint must not be cached.
                    pending.clear()
                    pending.update(before)
                    out.append(retry if isinstance(exc, DBAPIError) and is_retryable(exc) else exc)
            return out

        statuses = self._write_retrying(tx)
        for i, status in enumerate(statuses):
            if status is retry:  # lost a race with another runner: redo that file on its own
                try:
                    statuses[i] = self.ingest_run(*items[i], replace=replace)
                except Exception as exc:
                    statuses[i] = exc
        return statuses

    def _ingest_run_tx(
        self, conn: Connection, pending: dict[Any, int], run: ParsedRun, machine: Machine, commit: Commit,
        existing: Any = _LOOK, replace: bool = False,
    ) -> str:
        machine_id, machine_key = self._upsert_machine(conn, machine, pending)
        run_key = run.run_key
        if machine_key not in (run.machine, f"{run.machine} [{run.env_name}]"):
            # A second host of this machine name and environment: asv's key (machine/commit/env) is
            # the first host's run of the commit, never to be replaced by this one.
            run_key = f"{machine_key}/{run.commit_hash}"
            existing = _LOOK
        if existing is _LOOK:
            existing = conn.execute(select(RunRow.id, RunRow.digest, RunRow.source)
                                    .where(RunRow.run_key == run_key)).one_or_none()  # fmt: skip
        # The file's own path, whichever folder ingest was run from: what tells asv's rewrite of a
        # file from another folder's file of the same run.
        source = os.path.realpath(run.path)
        if existing is not None and existing.digest != run.digest and not replace and \
                not same_source(existing.source, source):
            raise ReplacementRefused(
                f"a different run of {run_key!r} (machine/commit/environment) is stored, ingested from "
                f"{existing.source}; not replaced: a run of a stored commit from another results folder replaces "
                "the stored one only with --replace (python -m ci ingest --replace)")
        commit_id = self._upsert_commit(conn, commit)
        values = {
            "run_key": run_key,
            "digest": run.digest,
            "machine_id": machine_id,
            "commit_id": commit_id,
            "env_name": run.env_name,
            "started_at": utc(run.started_at),
            "ingested_at": datetime.now(UTC),
            "source": source,
            "environment": json.dumps(dict(run.environment), sort_keys=True),
            "skipped": json.dumps(sorted(run.skipped_versions, key=_by_name)),
        }
        if existing is not None:
            if existing.digest == run.digest:
                # The same file read again (its skipped benchmarks may be known now): what it holds that the
                # store lacks goes in beside what is stored, which stays as it is.
                run = self._unstored(conn, existing.id, run)
                conn.execute(update(RunRow).where(RunRow.id == existing.id).values(skipped=values["skipped"]))
                if not run.n_points:
                    return "unchanged"
                return self._write_points(conn, pending, run, existing.id, ReadAgain(run.n_points))
            # asv rewrote the file: its results replace the stored ones, except those of benchmarks
            # this parse had to skip (missing from benchmarks.json, or of another version): the
            # file could not be read for them, which is no reason to lose what was stored.
            unreadable = sorted(set(run.skipped_unknown) | set(run.skipped_stale))
            dropped = self._stored_names(conn, existing.id) - set(unreadable) - \
                {p.benchmark.name for p in run.points} - {b.benches[0][0].name for b in run.blocks}
            gone = delete(ResultRow).where(ResultRow.run_id == existing.id)
            gone_blocks = delete(ResultBlockRow).where(ResultBlockRow.run_id == existing.id)
            if unreadable:
                gone = gone.where(
                    ResultRow.benchmark_id.not_in(select(BenchmarkRow.id).where(BenchmarkRow.name.in_(unreadable)))
                )
                gone_blocks = gone_blocks.where(ResultBlockRow.name.not_in(unreadable))
            conn.execute(gone)
            conn.execute(gone_blocks)
            conn.execute(update(RunRow).where(RunRow.id == existing.id).values(**values))
            run_id = existing.id
            forced = not same_source(existing.source, source)
            conn.execute(insert(RunReplacementRow.__table__).values(
                run_key=run_key, old_source=existing.source, new_source=source, old_digest=existing.digest,
                new_digest=run.digest, forced=forced, replaced_at=values["ingested_at"]))  # fmt: skip
            status: str = Replaced(REPLACED_FROM_ANOTHER_SOURCE if forced else "replaced", tuple(sorted(dropped)))
        else:
            run_id = conn.execute(
                insert(RunRow.__table__).values(**values).returning(RunRow.__table__.c.id)
            ).scalar_one()
            status = "inserted"
        return self._write_points(conn, pending, run, run_id, status)

    def _stored_names(self, conn: Connection, run_id: int) -> set[str]:
        """The benchmark names (asv's, without parameters) the stored run `run_id` holds points of."""
        stored = set(conn.execute(select(ResultBlockRow.name).where(ResultBlockRow.run_id == run_id)).scalars())
        stored.update(conn.execute(select(BenchmarkRow.name).join(ResultRow, ResultRow.benchmark_id == BenchmarkRow.id)
                                   .where(ResultRow.run_id == run_id)).scalars())  # fmt: skip
        # A benchmark's points kept under an earlier definition's name (`retire_benchmark`) are its points:
        # a file read again (its skipped benchmarks known now) added them a second time, in the new series.
        retired = self.retired_names()
        return {retired.get(n, n) for n in stored}

    def _unstored(self, conn: Connection, run_id: int, run: ParsedRun) -> ParsedRun:
        """`run` less the benchmarks whose points the stored run `run_id` holds already."""
        stored = self._stored_names(conn, run_id)
        return replace(run, points=tuple(p for p in run.points if p.benchmark.name not in stored),
                       blocks=tuple(b for b in run.blocks if b.benches[0][0].name not in stored))

    def _write_points(self, conn: Connection, pending: dict[Any, int], run: ParsedRun, run_id: int,
                      status: str) -> str:
        """Write `run`'s points and blocks as rows of the stored run `run_id`; returns `status`."""
        grid_ids: list[bytes | None] = []  # per block its packed series ids, where known already
        wanted: dict[str, Benchmark] = {}
        for block in run.blocks:
            hit = self._grid_ids.get(id(block.benches))
            if hit is not None and hit[0] is block.benches:
                grid_ids.append(hit[1])
            else:
                grid_ids.append(None)
                wanted.update((key, bench) for bench, key in block.benches)
        wanted.update((p.key, p.benchmark) for p in run.points)
        bench_ids = self._benchmark_ids(conn, pending, wanted) if wanted else {}
        if self._result_insert is None:
            self._result_insert = ResultInsert(conn.dialect)
        times: dict[Any, Any] = {}  # the points of one benchmark share its start time: convert it once
        rows = []
        for p in run.points:
            at = times.get(p.started_at)
            if at is None and p.started_at is not None:
                at = times[p.started_at] = self._result_insert.time(utc(p.started_at))
            st = p.stats
            rows.append((  # in `ci.store.bulk.RESULT_COLUMNS` order
                run_id, bench_ids[p.key], p.status, p.value, pack_samples(p.samples), p.has_raw_samples,
                st.get("ci_99_a"), st.get("ci_99_b"), st.get("q_25"), st.get("q_75"), st.get("number"),
                st.get("repeat"), p.benchmark_version, at, p.duration,
            ))  # fmt: skip
        rows.sort(key=_by_benchmark_id)  # the order reads want a run's rows in: they find them sorted
        if self._block_insert is None:
            self._block_insert = ResultInsert(conn.dialect, blocks=True)
        to_time = self._block_insert.time
        blocks = []  # a benchmark's grid in one row of packed columns (`ResultBlockRow`)
        for block, packed_ids in zip(run.blocks, grid_ids, strict=True):
            if packed_ids is None:
                keys = list(map(_second, block.benches))
                ids = list(map(bench_ids.__getitem__, keys))
                packed_ids = pack_int64s(ids)
                committed = self._bench_ids
                if all(committed.get(k) == i for k, i in zip(keys, ids, strict=True)):
                    if len(self._grid_ids) >= _GRID_CACHE:
                        self._grid_ids.clear()
                    self._grid_ids[id(block.benches)] = (block.benches, packed_ids)
            at = times.get(block.started_at)  # one conversion per distinct start (all alike in a file)
            if at is None and block.started_at is not None:
                at = times[block.started_at] = to_time(utc(block.started_at))
            value, samples, lengths, stats = block.packed or pack_block(block.values, block.samples, block.stats)
            blocks.append((run_id, block.benches[0][0].name, len(block.benches), packed_ids, value, samples, lengths,
                           block.has_raw_samples, stats, block.benchmark_version, at, block.duration))  # fmt: skip
        self._insert_results(conn, rows, blocks)
        return status

    def _insert_results(self, conn: Connection, rows: list[tuple[Any, ...]], blocks: list[tuple[Any, ...]]) -> None:
        """The bulk writes of a file's results (`ci.store.bulk`): its `results` rows (points one by
        one) and its `result_blocks` rows (a benchmark's grid each), prepared on first use."""
        if rows:
            if self._result_insert is None:
                self._result_insert = ResultInsert(conn.dialect)
            self._result_insert.execute(conn, rows)
        if blocks:
            if self._block_insert is None:
                self._block_insert = ResultInsert(conn.dialect, blocks=True)
            self._block_insert.execute(conn, blocks)
