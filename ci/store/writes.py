"""The store's write side: one asv result file per transaction (machines, commits, benchmarks, the
run and its results), commit metadata, verdicts and acknowledgements. Every write is one retried
transaction (`ci.store.engine.retry_write`): all of it or nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from operator import itemgetter
from typing import Any

from sqlalchemy import Connection, Engine, delete, insert, select, update
from sqlalchemy.exc import DBAPIError, IntegrityError

from ci.records import (
    Acknowledgement,
    Alert,
    AlertState,
    Benchmark,
    Commit,
    Direction,
    Machine,
    ParsedRun,
    Project,
    Verdict,
)
from ci.store.bulk import ResultInsert
from ci.store.codec import nan_to_none, pack_block, pack_int64s, pack_samples, utc
from ci.store.engine import insert_ignore, is_retryable, retry_write, upsert
from ci.store.hosts import merged, same_host
from ci.store.limits import StoreLimitError, check_acknowledgement, check_run, check_text, column_length
from ci.store.models import (
    AcknowledgementRow,
    AlertRow,
    BenchmarkRow,
    ChangePointStateRow,
    CommitRow,
    MachineRow,
    ResultBlockRow,
    ResultRow,
    RunReplacementRow,
    RunRow,
    SettingRow,
    VerdictRow,
)
from ci.store.reads import PROJECT_SETTING, StoreReads

_CHUNK = 500  # rows per IN (...) lookup; far below SQLite's bound-parameter limit


_UNDECLARED = "undeclared"  # `pending` keys (_UNDECLARED, benchmark key): series of unknown direction
_LOOK = object()  # `_ingest_run_tx`: the stored run is not known yet, look it up
_GRID_CACHE = 4096  # grids whose series ids a store keeps packed (`_grid_ids`); emptied when full


_second = itemgetter(1)
# `ingest_run`'s status for a run that replaced one stored from another file (`replace=True`).
REPLACED_FROM_ANOTHER_SOURCE = "replaced from another source"


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


def _host(text: str) -> tuple[tuple[str, str], ...]:
    """A stored host fingerprint (JSON object text) as `ci.store.hosts` takes it."""
    try:
        value = json.loads(text or "{}")
    except ValueError:
        return ()
    return tuple(sorted((str(k), str(v)) for k, v in value.items())) if isinstance(value, dict) else ()


def _by_benchmark_id(row: tuple[Any, ...]) -> int:
    return row[1]


class StoreWrites(StoreReads):
    """Writes to a results history through `engine`; it reads too (`acknowledge` resolves a commit
    prefix and checks that the series exists).

    Args:
        engine: from `ci.store.engine.make_engine`, holding the store's schema.
        read_only: the engine cannot write: every write fails, except the detector's cache
            (`save_change_point_states`), which is then not kept.
    """

    def __init__(self, engine: Engine, *, read_only: bool = False) -> None:
        super().__init__(engine, read_only=read_only)
        self._bench_ids: dict[str, int] = {}  # benchmark key -> id, only for committed rows
        # The same for series stored with an unknown direction, used only for a series wanted with
        # none either (a declared one looks its row up, to store the direction): an id never changes.
        self._undeclared_ids: dict[str, int] = {}
        self._result_insert: ResultInsert | None = None
        self._block_insert: ResultInsert | None = None
        # A grid's packed series ids, once every series of it is a committed row (ids never change),
        # by the identity of the parse's tuple of its series (the same tuple in every file of a
        # history, `ci.ingest.parse._grid_benchmarks`); the tuple is kept, so its id stays its own.
        # Looking a file's 500 series up one by one was ~0.6 ms of its ~5 ms write (2026-12-02).
        self._grid_ids: dict[int, tuple[tuple[tuple[Benchmark, str], ...], bytes]] = {}

    def _write_retrying(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run `fn(conn, pending, *args)` in one write transaction, retrying lost races; all or nothing.
        `pending` collects the ids of rows the attempt saw or made (benchmarks by key, machines by
        record); the benchmarks' are cached once it committed."""
        pending: dict[Any, int] = {}

        def attempt(conn: Connection) -> Any:
            pending.clear()
            return fn(conn, pending, *args)

        out = retry_write(self.engine, attempt)
        self._bench_ids.update((k, v) for k, v in pending.items() if isinstance(k, str))  # committed rows only
        self._undeclared_ids.update((k[1], v) for k, v in pending.items() if isinstance(k, tuple))
        return out

    def _upsert_machine(self, conn: Connection, machine: Machine, pending: dict[Any, Any] | None = None
                        ) -> tuple[int, str]:
        if pending is not None and machine in pending:
            return pending[machine]  # this transaction wrote this very record already (a batch's files share it)
        found = self._write_machine(conn, machine)
        if pending is not None:
            pending[machine] = found
        return found

    def _write_machine(self, conn: Connection, machine: Machine) -> tuple[int, str]:
        """The id and key of the machine (`ci.records.Machine`: asv machine name x environment x host)
        `machine` was measured on: an existing one of the same name, environment and host (its fields
        refreshed), else a new one, keyed as `ci.records.Machine` says."""
        asv_name, host = machine.machine_name, machine.host
        fields = {
            "gpu": machine.gpu,
            "driver": machine.driver,
            "cuda": machine.cuda,
            "torch": machine.torch,
            "triton": machine.triton,
            "cpu": machine.cpu,
            "extra": json.dumps(dict(machine.extra), sort_keys=True),
        }
        rows = conn.execute(select(MachineRow.__table__).where(MachineRow.asv_name == asv_name)
                            .order_by(MachineRow.id)).all()  # fmt: skip
        hosts: list[tuple[tuple[str, str], ...]] = []  # the name's hosts, in the order the store met them
        host_no = 0
        for row in rows:
            row_host = _host(row.host)
            known = next((k for k, h in enumerate(hosts, 1) if same_host(h, row_host)), 0)
            if not known:
                hosts.append(row_host)
                known = len(hosts)
            if not host_no and same_host(row_host, host):
                host_no = known
            if row.env_name == machine.env_name and same_host(row_host, host):
                # Newer information wins for fields this run knows; an unknown (empty) field never erases one.
                changes = {k: v for k, v in fields.items() if v not in ("", "{}") and getattr(row, k) != v}
                full = merged(row_host, host)
                if full != row_host:
                    changes["host"] = json.dumps(dict(full), sort_keys=True)
                if changes:
                    conn.execute(update(MachineRow).where(MachineRow.id == row.id).values(**changes))
                return row.id, row.name
        if not rows:
            name = asv_name
        else:
            host_no = host_no or len(hosts) + 1
            name = f"{asv_name} [{machine.env_name}" + (f", host {host_no}]" if host_no > 1 else "]")
        name = self._free_machine_name(conn, name)
        values = dict(name=name, asv_name=asv_name, env_name=machine.env_name,
                      host=json.dumps(dict(host), sort_keys=True), **fields)  # fmt: skip
        stmt = insert_ignore(self.dialect, MachineRow.__table__)
        conn.execute((stmt if stmt is not None else insert(MachineRow.__table__)).values(**values))
        row = conn.execute(select(MachineRow.id, MachineRow.asv_name).where(MachineRow.name == name)).one()
        if row.asv_name != asv_name:  # another writer took the key meanwhile: a lost race, retried
            raise IntegrityError("machine key taken by another writer", {"name": name}, Exception(name))
        return row.id, name

    @staticmethod
    def _free_machine_name(conn: Connection, name: str) -> str:
        """`name`, fitted to the column (a long one cut, with a digest of the whole), and numbered
        where another machine already has it (an asv machine named like a key)."""
        limit = column_length(MachineRow.name) or 255
        if len(name) > limit:
            name = name[: limit - 13] + " " + hashlib.sha256(name.encode()).hexdigest()[:12]
        candidate, k = name, 2
        while conn.execute(select(MachineRow.id).where(MachineRow.name == candidate)).first() is not None:
            suffix = f" #{k}"
            candidate = name[: limit - len(suffix)] + suffix
            k += 1
        return candidate

    def _upsert_commit(self, conn: Connection, commit: Commit) -> int:
        fields = {
            "parents": json.dumps(list(commit.parents)),
            "branch": commit.branch,
            "time": utc(commit.time),
            "subject": commit.subject,
            "position": commit.position,
        }
        stmt = insert_ignore(self.dialect, CommitRow.__table__)
        if stmt is not None and conn.dialect.insert_returning:
            # A new commit (most files bring one) in one statement; an existing one returns no row.
            new_id = conn.execute(stmt.values(sha=commit.sha, **fields).returning(CommitRow.id)).scalar()
            if new_id is not None:
                return new_id
        row = conn.execute(select(CommitRow.__table__).where(CommitRow.sha == commit.sha)).one_or_none()
        if row is None:
            values = dict(sha=commit.sha, **fields)
            conn.execute((stmt if stmt is not None else insert(CommitRow.__table__)).values(**values))
            return conn.execute(select(CommitRow.id).where(CommitRow.sha == commit.sha)).scalar_one()
        changes: dict[str, Any] = {}
        if commit.parents and row.parents != fields["parents"]:
            changes["parents"] = fields["parents"]
        if commit.subject and row.subject != commit.subject:
            changes["subject"] = commit.subject
        if commit.branch and not row.branch:  # the first branch a commit was seen on stays its branch
            changes["branch"] = commit.branch
        if commit.position is not None and row.position != commit.position:  # git's, whenever it was read
            changes["position"] = commit.position
        # git's time (a record with a subject or parents came from git) beats asv's date.
        if commit.time is not None and (row.time is None or commit.parents or commit.subject):
            if utc(row.time) != fields["time"]:
                changes["time"] = fields["time"]
        if changes:
            conn.execute(update(CommitRow).where(CommitRow.id == row.id).values(**changes))
        return row.id

    def _benchmark_ids(
        self, conn: Connection, pending: dict[Any, int], benches: Iterable[Benchmark] | dict[str, Benchmark]
    ) -> dict[str, int]:
        wanted = benches if isinstance(benches, dict) else {b.key: b for b in benches}
        # Ids committed before, then those this transaction created or found (`pending`): without the
        # latter every file of a store's first batch looked its 500 series up again (2026-12-02).
        committed = self._bench_ids
        ids = {k: v for k in wanted if (v := committed.get(k, pending.get(k))) is not None}
        for k, bench in wanted.items():
            if k not in ids and bench.direction == Direction.UNKNOWN:
                known = self._undeclared_ids.get(k, pending.get((_UNDECLARED, k)))
                if known is not None:
                    ids[k] = known
        missing = sorted(k for k in wanted if k not in ids)  # sorted: concurrent writers lock keys in one order
        for i in range(0, len(missing), _CHUNK):
            chunk = missing[i : i + _CHUNK]
            rows_ = conn.execute(
                select(BenchmarkRow.key, BenchmarkRow.id, BenchmarkRow.direction).where(BenchmarkRow.key.in_(chunk))
            ).all()
            found = {k: id_ for k, id_, _ in rows_}
            # A series stored before its benchmark declared a direction takes the one declared now;
            # an undeclared one never erases a declared one. Ids of series still of unknown direction
            # are not cached, so a later declaration is seen.
            unknown = {k for k, _, d in rows_ if d == Direction.UNKNOWN}
            for k in sorted(unknown):
                if wanted[k].direction != Direction.UNKNOWN:
                    conn.execute(update(BenchmarkRow).where(BenchmarkRow.id == found[k]).values(
                        direction=str(wanted[k].direction), kind=str(wanted[k].kind)))
                    unknown.discard(k)
            new = [k for k in chunk if k not in found]
            if new:
                rows = [
                    {
                        "key": k,
                        "name": wanted[k].name,
                        "params": json.dumps([list(p) for p in wanted[k].params]),
                        "unit": wanted[k].unit,
                        "direction": str(wanted[k].direction),
                        "kind": str(wanted[k].kind),
                    }
                    for k in new
                ]
                stmt = insert_ignore(self.dialect, BenchmarkRow.__table__)
                conn.execute(stmt if stmt is not None else insert(BenchmarkRow.__table__), rows)
                found.update(
                    conn.execute(select(BenchmarkRow.key, BenchmarkRow.id).where(BenchmarkRow.key.in_(new))).all()
                )
                unknown.update(k for k in new if wanted[k].direction == Direction.UNKNOWN)
            ids.update(found)
            pending.update({k if k not in unknown else (_UNDECLARED, k): v for k, v in found.items()})
        return ids

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
            for i in range(0, len(keys), _CHUNK):
                stmt = select(RunRow.run_key, RunRow.id, RunRow.digest, RunRow.source).where(
                    RunRow.run_key.in_(keys[i : i + _CHUNK]))
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
        }
        if existing is not None:
            if existing.digest == run.digest:
                return "unchanged"
            # asv rewrote the file: its results replace the stored ones, except those of benchmarks
            # this parse had to skip (missing from benchmarks.json, or of another version): the
            # file could not be read for them, which is no reason to lose what was stored.
            unreadable = sorted(set(run.skipped_unknown) | set(run.skipped_stale))
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
            status = REPLACED_FROM_ANOTHER_SOURCE if forced else "replaced"
        else:
            run_id = conn.execute(
                insert(RunRow.__table__).values(**values).returning(RunRow.__table__.c.id)
            ).scalar_one()
            status = "inserted"
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

    def upsert_commits(self, commits: Sequence[Commit]) -> None:
        """Create commits or enrich them with parents/branch/time/subject, in one transaction.

        Args:
            commits: records; empty fields never erase known ones.
        """
        for c in commits:
            if not isinstance(c, Commit):
                raise TypeError(f"expected Commit records, got {type(c).__name__}")

        def tx(conn: Connection, _pending: dict[str, int]) -> None:
            for c in commits:
                self._upsert_commit(conn, c)

        self._write_retrying(tx)

    def save_verdicts(self, verdicts: Sequence[Verdict]) -> int:
        """Store verdicts; a verdict for the same (series, machine, base, head) replaces the old one.

        Args:
            verdicts: from `ci.verdicts.compare` / `ci.verdicts.correctness_gates`.

        Returns:
            The number of verdicts written (an exact repeat within `verdicts` counts once).

        Raises:
            TypeError: an item is not a Verdict, or its machine is not a string.
            ValueError: two different verdicts for one (series, machine, base, head): one would be lost.
        """
        unique: dict[tuple[str, str, str, str], Verdict] = {}
        for v in verdicts:
            if not isinstance(v, Verdict):
                raise TypeError(f"expected Verdict records, got {type(v).__name__}")
            if not isinstance(v.machine, str):
                raise TypeError(f"Verdict.machine must be a str ('' when unknown), got {type(v.machine).__name__}")
            k = (v.benchmark.key, v.machine, v.base_sha, v.head_sha)
            # repr, not ==: fields that are NaN (never equal to themselves) still match in a repeat.
            if repr(unique.setdefault(k, v)) != repr(v):
                raise ValueError(
                    f"two different verdicts for series {k[0]!r} on machine {k[1]!r}, base {k[2]!r}, head {k[3]!r} "
                    f"({unique[k].outcome} and {v.outcome}): only one can be stored"
                )
        if not unique:
            return 0

        def tx(conn: Connection, pending: dict[str, int]) -> int:
            ids = self._benchmark_ids(conn, pending, (v.benchmark for v in unique.values()))
            now = datetime.now(UTC)
            for v in unique.values():
                bid = ids[v.benchmark.key]
                conn.execute(
                    delete(VerdictRow).where(
                        VerdictRow.benchmark_id == bid,
                        VerdictRow.machine == v.machine,
                        VerdictRow.base_sha == v.base_sha,
                        VerdictRow.head_sha == v.head_sha,
                    )
                )
            conn.execute(
                insert(VerdictRow.__table__),
                [
                    {
                        "benchmark_id": ids[v.benchmark.key],
                        "outcome": str(v.outcome),
                        "base_value": nan_to_none(v.base_value),
                        "head_value": nan_to_none(v.head_value),
                        "ratio": nan_to_none(v.ratio),
                        "ci_low": nan_to_none(v.ci_low),
                        "ci_high": nan_to_none(v.ci_high),
                        "p_value": nan_to_none(v.p_value),
                        "threshold": nan_to_none(v.threshold),
                        "base_sha": v.base_sha,
                        "head_sha": v.head_sha,
                        "reason": v.reason,
                        "machine": v.machine,
                        "created_at": now,
                    }
                    for v in unique.values()
                ],
            )
            return len(unique)

        return self._write_retrying(tx)

    def record_alerts(self, alerts: Sequence[Alert]) -> list[Alert]:
        """Keep the alerts the store does not hold yet (by `Alert.key`), in one transaction: a new one
        is "detected", or "acknowledged" where its series was acknowledged at its commit; one held
        already keeps its state (a reported alert is never reported again).

        Args:
            alerts: found by `ci.runner.alerts.history_alerts`; their state and times are ignored.

        Returns:
            The alerts this call added, as stored (state and detection time set).
        """
        unique: dict[tuple[str, str, str, str], Alert] = {}
        for a in alerts:
            if not isinstance(a, Alert):
                raise TypeError(f"expected Alert records, got {type(a).__name__}")
            unique.setdefault(a.key, a)
        if not unique:
            return []

        def tx(conn: Connection, pending: dict[Any, int]) -> list[Alert]:
            ids = self._benchmark_ids(conn, pending, (a.benchmark for a in unique.values()))
            shas = sorted({a.commit_sha for a in unique.values()})
            held: set[tuple[str, int, str, str]] = set()
            acked: set[tuple[str, str]] = set()
            for i in range(0, len(shas), _CHUNK):
                chunk = shas[i : i + _CHUNK]
                held.update(conn.execute(select(AlertRow.kind, AlertRow.benchmark_id, AlertRow.machine,
                                                AlertRow.commit_sha).where(AlertRow.commit_sha.in_(chunk))).all())
                acked.update(conn.execute(select(AcknowledgementRow.benchmark_key, AcknowledgementRow.commit_sha)
                                          .where(AcknowledgementRow.commit_sha.in_(chunk))).all())  # fmt: skip
            now = datetime.now(UTC)
            added = []
            for a in unique.values():
                if (str(a.kind), ids[a.benchmark.key], a.machine, a.commit_sha) in held:
                    continue
                closed = (a.benchmark.key, a.commit_sha) in acked
                added.append(replace(a, state=AlertState.ACKNOWLEDGED if closed else AlertState.DETECTED,
                                     detected_at=now, reported_at=None, acknowledged_at=now if closed else None))
            if added:
                conn.execute(insert(AlertRow.__table__), [
                    {"kind": str(a.kind), "benchmark_id": ids[a.benchmark.key], "machine": a.machine,
                     "commit_sha": a.commit_sha, "previous_sha": a.previous_sha, "ratio": nan_to_none(a.ratio),
                     "p_value": nan_to_none(a.p_value), "reason": a.reason, "state": str(a.state),
                     "detected_at": now, "acknowledged_at": a.acknowledged_at}
                    for a in added
                ])  # fmt: skip
            return added

        return self._write_retrying(tx)

    def mark_alerts_reported(self, alerts: Sequence[Alert]) -> int:
        """Mark alerts reported (a history job exited 1 with them), where they are still "detected".

        Args:
            alerts: as `alerts` returned them.

        Returns:
            How many changed state.
        """
        keys = sorted({a.key for a in alerts})
        if not keys:
            return 0

        def tx(conn: Connection, _pending: dict[str, int]) -> int:
            now = datetime.now(UTC)
            changed = 0
            for kind, bench_key, machine, sha in keys:
                bid = select(BenchmarkRow.id).where(BenchmarkRow.key == bench_key).scalar_subquery()
                changed += conn.execute(
                    update(AlertRow).where(AlertRow.kind == kind, AlertRow.benchmark_id == bid,
                                           AlertRow.machine == machine, AlertRow.commit_sha == sha,
                                           AlertRow.state == str(AlertState.DETECTED))
                    .values(state=str(AlertState.REPORTED), reported_at=now)
                ).rowcount  # fmt: skip
            return changed

        return self._write_retrying(tx)

    def save_change_point_states(
        self, branch: str, settings: str, states: dict[tuple[str, str], tuple[int, str, bytes]]
    ) -> None:
        """Store the history detector's cached states, replacing those of the same series, branch
        and settings (`ci.verdicts.history` computes them; they are a cache that checks itself, so
        two runners writing the same series at once cannot make a result wrong, only recomputed).

        Args:
            branch: the branch the states were computed on ("" for every commit).
            settings: the detector's settings fingerprint.
            states: (benchmark key, machine) -> (runs covered, their digest chain, state bytes);
                series the store does not know are left out.
        """
        if not states or self.read_only:  # a cache: a store opened read-only computes without it
            return

        def tx(conn: Connection, _pending: dict[str, int]) -> None:
            keys = sorted({k for k, _ in states})
            bench_ids: dict[str, int] = {}
            for i in range(0, len(keys), _CHUNK):
                chunk = keys[i : i + _CHUNK]
                bench_ids.update(conn.execute(select(BenchmarkRow.key, BenchmarkRow.id)
                                              .where(BenchmarkRow.key.in_(chunk))).all())  # fmt: skip
            machine_ids = dict(conn.execute(select(MachineRow.name, MachineRow.id)).all())
            now = datetime.now(UTC)
            rows = [
                {"benchmark_id": bench_ids[key], "machine_id": machine_ids[m], "branch": branch, "settings": settings,
                 "runs": runs, "runs_digest": digest, "state": state, "updated_at": now}
                for (key, m), (runs, digest, state) in sorted(states.items())
                if key in bench_ids and m in machine_ids
            ]  # fmt: skip
            if not rows:
                return
            table = ChangePointStateRow.__table__
            stmt = upsert(self.dialect, table, ["branch", "settings", "benchmark_id", "machine_id"],
                          ["runs", "runs_digest", "state", "updated_at"])  # fmt: skip
            if stmt is None:  # no ON CONFLICT: delete, then insert
                for r in rows:
                    conn.execute(delete(table).where(
                        table.c.benchmark_id == r["benchmark_id"], table.c.machine_id == r["machine_id"],
                        table.c.branch == branch, table.c.settings == settings))  # fmt: skip
                conn.execute(insert(table), rows)
                return
            conn.execute(stmt, rows)

        self._write_retrying(tx)

    def save_setting(self, key: str, value: str) -> None:
        """Store a setting (`ci.store.models.SettingRow`), replacing its value.

        Args:
            key: its name (e.g. "asv_conf").
            value: its text (JSON for structured settings).
        """
        check_text(key, SettingRow.key, "setting name")
        check_text(value, SettingRow.value, f"setting {key!r}")

        def tx(conn: Connection, _pending: dict[str, int]) -> None:
            conn.execute(delete(SettingRow).where(SettingRow.key == key))
            conn.execute(insert(SettingRow.__table__).values(key=key, value=value, updated_at=datetime.now(UTC)))

        self._write_retrying(tx)

    def save_project(self, project: Project) -> None:
        """Keep what the project's asv.conf.json says (`project` reads it back).

        Args:
            project: the fields ingest read from the file.
        """
        self.save_setting(PROJECT_SETTING, json.dumps(project.as_asv_conf(), sort_keys=True))

    def acknowledge(
        self, benchmark_key: str, commit_sha: str, who: str, why: str, when: datetime | None = None
    ) -> Acknowledgement:
        """Record that a regression of one series at one commit is expected (who, when, why), and close
        every alert of that series at that commit (`ci.records.Alert`: state "acknowledged").

        Args:
            benchmark_key: a series key as in `Benchmark.key` (must exist in the store).
            commit_sha: the commit, full sha or a unique prefix of at least 7 characters.
            who: the person acknowledging (non-empty).
            why: the reason (non-empty).
            when: defaults to now (UTC).

        Returns:
            The stored Acknowledgement (with the full commit sha).
        """
        for name, value in (("benchmark_key", benchmark_key), ("commit_sha", commit_sha), ("who", who), ("why", why)):
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"acknowledge: {name} must be a non-empty string, got {value!r}")
        if when is not None and not isinstance(when, datetime):
            raise TypeError(f"acknowledge: when must be a datetime, got {type(when).__name__}")
        check_acknowledgement(benchmark_key, commit_sha.strip(), who.strip())
        check_text(why, AcknowledgementRow.why, "why")
        sha = self.resolve_commit(commit_sha)
        with self._read() as conn:
            if conn.execute(select(BenchmarkRow.id).where(BenchmarkRow.key == benchmark_key)).first() is None:
                raise ValueError(f"acknowledge: unknown benchmark series {benchmark_key!r}")
        ack = Acknowledgement(benchmark_key, sha, who.strip(), why.strip(), utc(when) or datetime.now(UTC))

        def tx(conn: Connection, _pending: dict[str, int]) -> None:
            conn.execute(
                insert(AcknowledgementRow.__table__).values(
                    benchmark_key=ack.benchmark_key, commit_sha=ack.commit_sha, who=ack.who, why=ack.why, when=ack.when
                )
            )
            # Every alert of the series at that commit, on any machine, is closed with it.
            bid = select(BenchmarkRow.id).where(BenchmarkRow.key == ack.benchmark_key).scalar_subquery()
            conn.execute(update(AlertRow).where(AlertRow.benchmark_id == bid, AlertRow.commit_sha == ack.commit_sha,
                                                AlertRow.state != str(AlertState.ACKNOWLEDGED))
                         .values(state=str(AlertState.ACKNOWLEDGED), acknowledged_at=ack.when))  # fmt: skip

        self._write_retrying(tx)
        return ack
