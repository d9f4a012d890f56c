"""The rows every write shares: machines, commits and benchmarks (series), found or created inside
the caller's transaction, and the retried write transaction itself (`UpsertWrites._write_retrying`,
over `ci.store.engine.retry_write`): all of it or nothing.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np
from sqlalchemy import Connection, Engine, delete, func, insert, select, update
from sqlalchemy.exc import IntegrityError

from ci.records import Benchmark, Commit, Direction, Machine, ParsedRun
from ci.store.codec import utc
from ci.store.engine import insert_ignore, retry_write
from ci.store.hosts import merged, same_host
from ci.store.limits import column_length, without_benchmarks
from ci.store.models import BenchmarkRow, CommitRow, MachineRow
from ci.store.reads import SERIES_DEFINITIONS_SETTING, StoreReads

CHUNK = 500  # rows per IN (...) lookup; far below SQLite's bound-parameter limit
_UNDECLARED = "undeclared"  # `pending` keys (_UNDECLARED, benchmark key): series of unknown direction
_META = "meta"  # `pending` keys (_META, benchmark key): the series' stored (unit, direction, kind)


class SeriesRedefined(ValueError):
    """A file's benchmarks.json gives a stored series another unit or declared direction: another
    benchmark under the same name, not stored."""


def _check_definition(bench: Benchmark, stored: tuple[str, str, str]) -> None:
    """`SeriesRedefined` where `bench` redefines the stored series (`_redefines`): ingest leaves such a
    benchmark out of the run first (`UpsertWrites.leave_out_redefined`); this guards writes that race it."""
    if not _redefines(bench, stored):
        return
    unit, direction, _ = stored
    raise SeriesRedefined(
        f"benchmark {bench.key!r} is stored in {unit!r} ({direction} is better); this file's benchmarks.json "
        f"declares it in {bench.unit!r} ({bench.direction} is better): another benchmark under the same name, "
        "not stored")


def put_setting(conn: Connection, key: str, value: str) -> None:
    """Store a setting's value in `conn`'s transaction, replacing the one held (`ci.store.models.SettingRow`)."""
    from ci.store.models import SettingRow

    conn.execute(delete(SettingRow).where(SettingRow.key == key))
    conn.execute(insert(SettingRow.__table__).values(key=key, value=value, updated_at=datetime.now(UTC)))


def _retired_map(text: str | None) -> dict[str, str]:
    """The `series_definitions` setting's names (`UpsertWrites.retired_names`); {} where none or damaged."""
    try:
        held = json.loads(text) if text else {}
    except ValueError:
        return {}
    return {str(k): str(v) for k, v in held.items()} if isinstance(held, dict) else {}


def _meta(bench: Benchmark) -> tuple[str, str, str]:
    return bench.unit, str(bench.direction), str(bench.kind)


def _redefines(bench: Benchmark, stored: tuple[str, str, str]) -> bool:
    """Whether `bench` says another thing than the stored series: its unit, or a declared direction
    (an undeclared one never erases a declared one, and a declared one fills an unknown one)."""
    unit, direction, _ = stored
    declared = bench.direction != Direction.UNKNOWN and direction != str(Direction.UNKNOWN)
    return bench.unit != unit or (declared and str(bench.direction) != direction)


def _host(text: str) -> tuple[tuple[str, str], ...]:
    """A stored host fingerprint (JSON object text) as `ci.store.hosts` takes it."""
    try:
        value = json.loads(text or "{}")
    except ValueError:
        return ()
    return tuple(sorted((str(k), str(v)) for k, v in value.items())) if isinstance(value, dict) else ()


def _machine_fields(machine: Machine) -> dict[str, str]:
    """A machine row's fields besides its identity (name, asv name, environment, host)."""
    return {"gpu": machine.gpu, "driver": machine.driver, "cuda": machine.cuda, "torch": machine.torch,
            "triton": machine.triton, "cpu": machine.cpu, "extra": json.dumps(dict(machine.extra), sort_keys=True)}


class UpsertWrites(StoreReads):
    """The shared rows of the write side (machines, commits, series) and its retried transactions.

    Args:
        engine: from `ci.store.engine.make_engine`, holding the store's schema.
        read_only: the engine cannot write.
    """

    def __init__(self, engine: Engine, *, read_only: bool = False) -> None:
        super().__init__(engine, read_only=read_only)
        self._bench_ids: dict[str, int] = {}  # benchmark key -> id, only for committed rows
        # The same for series stored with an unknown direction, used only for a series wanted with
        # none either (a declared one looks its row up, to store the direction): an id never changes.
        self._undeclared_ids: dict[str, int] = {}
        self._bench_meta: dict[str, tuple[str, str, str]] = {}  # key -> stored (unit, direction, kind), committed
        self._bench_absent: set[str] = set()  # keys `leave_out_redefined` found in no row (made by a write since)
        self._retired: dict[str, str] | None = None  # `retired_names`, read once

    def _write_retrying(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run `fn(conn, pending, *args)` in one write transaction, retrying lost races; all or nothing.
        `pending` collects the ids of rows the attempt saw or made (benchmarks by key, machines by
        record); the benchmarks' are cached once it committed."""
        pending: dict[Any, Any] = {}  # ids; (_META, key): a series' stored (unit, direction, kind)

        def attempt(conn: Connection) -> Any:
            pending.clear()
            return fn(conn, pending, *args)

        out = retry_write(self.engine, attempt)
        self._bench_ids.update((k, v) for k, v in pending.items() if isinstance(k, str))  # committed rows only
        for k, v in pending.items():
            if isinstance(k, tuple) and k[0] == _UNDECLARED:
                self._undeclared_ids[k[1]] = v
            elif isinstance(k, tuple):
                self._bench_meta[k[1]] = v
                self._bench_absent.discard(k[1])
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
        fields = _machine_fields(machine)
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
        self._insert_machine(conn, machine, name)
        row = conn.execute(select(MachineRow.id, MachineRow.asv_name, MachineRow.env_name, MachineRow.host)
                           .where(MachineRow.name == name)).one()  # fmt: skip
        # On PostgreSQL every statement reads what other writers committed before it, so a machine
        # of this name committed since `rows` was read makes the name chosen above stale: taken by
        # another writer's machine (the insert did nothing), or chosen without seeing that machine,
        # which may be this very one (a second "name #2" machine then held a copy of every run).
        # A lost race: retried, and the retry reads that machine.
        ours = row.asv_name == asv_name and row.env_name == machine.env_name and same_host(_host(row.host), host)
        added = set(conn.execute(select(MachineRow.id).where(MachineRow.asv_name == asv_name)).scalars())
        added -= {r.id for r in rows} | {row.id}
        if not ours or added:
            raise IntegrityError("machine added by another writer meanwhile", {"name": name}, Exception(name))
        return row.id, name

    def _insert_machine(self, conn: Connection, machine: Machine, name: str) -> None:
        """A machine row named `name` for `machine` (its host and fields as the record gives them);
        nothing where another writer inserted that name meanwhile (the caller reads it back)."""
        values = dict(name=name, asv_name=machine.machine_name, env_name=machine.env_name,
                      host=json.dumps(dict(machine.host), sort_keys=True), **_machine_fields(machine))  # fmt: skip
        stmt = insert_ignore(self.dialect, MachineRow.__table__)
        conn.execute((stmt if stmt is not None else insert(MachineRow.__table__)).values(**values))

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
        self, conn: Connection, pending: dict[Any, Any], benches: Iterable[Benchmark] | dict[str, Benchmark],
        *, declared: bool = True,
    ) -> dict[str, int]:
        """The ids of the series of `benches` (by key), found or created. A series the store holds with
        another unit or declared direction (`_redefines`) raises `SeriesRedefined`: ingest leaves such a
        benchmark out beforehand (`leave_out_redefined`), so only a write racing another runner's sees it.
        `declared`: `benches` are what result files declare, whose direction fills a stored unknown one;
        False for records read back (verdicts, alerts), whose direction may be the project's reading
        (`regressions_directions`): never written into the series, nor checked against it (a suite that
        declares a direction meanwhile made saving a verdict raise `SeriesRedefined`)."""
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
        for k in ids:
            stored = pending.get((_META, k)) or self._bench_meta.get(k)
            if stored is not None and declared:
                _check_definition(wanted[k], stored)
        missing = sorted(k for k in wanted if k not in ids)  # sorted: concurrent writers lock keys in one order
        for i in range(0, len(missing), CHUNK):
            chunk = missing[i : i + CHUNK]
            # Keys `leave_out_redefined` just found in no row are not looked up again: the insert below
            # ignores a row another runner made meanwhile, and its read-back checks that row's definition.
            rows_ = [] if self._bench_absent.issuperset(chunk) else conn.execute(
                select(BenchmarkRow.key, BenchmarkRow.id, BenchmarkRow.direction, BenchmarkRow.unit, BenchmarkRow.kind)
                .where(BenchmarkRow.key.in_(chunk))
            ).all()
            found = {k: id_ for k, id_, *_ in rows_}
            for k, _, direction, unit, kind in rows_:
                pending[(_META, k)] = stored = (unit, direction, kind)
                if declared:  # a record read back names a stored series, whatever direction it was read with
                    _check_definition(wanted[k], stored)
            # A series stored before its benchmark declared a direction takes the one declared now;
            # an undeclared one never erases a declared one. Ids of series still of unknown direction
            # are not cached, so a later declaration is seen.
            unknown = {k for k, _, d, *_ in rows_ if d == Direction.UNKNOWN}
            for k in sorted(unknown):
                if declared and wanted[k].direction != Direction.UNKNOWN:
                    conn.execute(update(BenchmarkRow).where(BenchmarkRow.id == found[k]).values(
                        direction=str(wanted[k].direction), kind=str(wanted[k].kind)))
                    pending[(_META, k)] = (pending[(_META, k)][0], *_meta(wanted[k])[1:])
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
                for k, id_, direction, unit, kind in conn.execute(
                        select(BenchmarkRow.key, BenchmarkRow.id, BenchmarkRow.direction, BenchmarkRow.unit,
                               BenchmarkRow.kind).where(BenchmarkRow.key.in_(new))):
                    found[k] = id_
                    if declared:  # another runner's row, made meanwhile
                        _check_definition(wanted[k], (unit, direction, kind))
                unknown.update(k for k in new if wanted[k].direction == Direction.UNKNOWN)
                pending.update(((_META, k), _meta(wanted[k])) for k in new)
            ids.update(found)
            pending.update({k if k not in unknown else (_UNDECLARED, k): v for k, v in found.items()})
        return ids

    def retired_names(self) -> dict[str, str]:
        """Each series name `retire_benchmark` gave -> the asv benchmark name it had (cached per store
        object; a rename here reads it again): a file read again never adds its points of a benchmark
        that the store holds under a retired name a second time (`ci.store.ingest_writes`)."""
        if self._retired is None:
            self._retired = _retired_map(self.setting(SERIES_DEFINITIONS_SETTING))
        return self._retired

    def retire_benchmark(self, wanted: Benchmark, until: str) -> list[str]:
        """Keep the stored series of benchmark `wanted.name` under another name where their definition is
        not `wanted`'s (`_redefines`: another unit or declared direction), so that `wanted`'s results
        start new series under the name (`ci ingest --redefine`). A suite that changes a benchmark's unit
        on purpose had it left out of every later file until renamed (`leave_out_redefined`); its history
        in the old unit is not mixed into the new one's, and nothing of it is lost.

        The rows of each other definition (one per parameter point) are renamed "NAME [UNIT until DATE]"
        ("NAME [UNIT, lower is better, until DATE]" where only the direction changed; " #2" and on where
        that is taken), their keys with them; rows of `wanted`'s definition stay. The acknowledgements of
        their keys and the result blocks all of whose points are theirs follow, and results, verdicts,
        alerts and the detector's states follow by id. The names given are kept in the store's
        `series_definitions` setting (`retired_names`), which the dashboard's render reads too. The
        stored runs ingested since the benchmark was first stored that hold no point of any of its
        definitions are read again by the next ingest (`RunRow.skipped` cleared): the files where it
        was left out give the new series their points. Run it while no other process writes the store:
        another's cached ids would still point at the renamed series.

        Args:
            wanted: the benchmark's definition now (its name, unit, direction and kind; params ignored).
            until: the date the old series' new names give, e.g. "2026-12-07".

        Returns:
            The names the old series were given; none where none is stored or every one is `wanted`'s.

        Raises:
            ValueError: a new name is longer than the store holds (nothing is renamed).
        """
        from ci.store.models import AcknowledgementRow, ResultBlockRow, ResultRow, RunRow, SettingRow

        def tx(conn: Connection, _pending: dict[Any, Any]) -> list[str]:
            rows = conn.execute(select(BenchmarkRow.id, BenchmarkRow.key, BenchmarkRow.params, BenchmarkRow.unit,
                                       BenchmarkRow.direction, BenchmarkRow.kind)
                                .where(BenchmarkRow.name == wanted.name)).all()
            # Only the series of another definition: those of this one (a grid point new with it) stay.
            groups: dict[tuple[str, str], list[Any]] = {}
            for row in rows:
                if _redefines(wanted, (row.unit, row.direction, row.kind)):
                    groups.setdefault((row.unit, row.direction), []).append(row)
            if not groups:
                return []
            retired = _retired_map(conn.execute(select(SettingRow.value)
                                                .where(SettingRow.key == SERIES_DEFINITIONS_SETTING)).scalar())
            taken = set(retired) | set(conn.execute(select(BenchmarkRow.name).where(
                BenchmarkRow.name.startswith(f"{wanted.name} [", autoescape=True))).scalars())
            most_name = column_length(BenchmarkRow.name) or 1 << 30
            most_key = column_length(BenchmarkRow.key) or 1 << 30
            given = []
            for (unit, direction), members in groups.items():
                said = f"{unit or 'no unit'}" + (f", {direction} is better," if unit == wanted.unit else "")
                base = f"{wanted.name} [{said} until {until}]"
                name = next(n for i in itertools.count(1) if (n := base + (f" #{i}" if i > 1 else "")) not in taken)
                taken.add(name)
                for row in members:
                    new_key = Benchmark(name, tuple((str(k), str(v)) for k, v in json.loads(row.params))).key
                    if len(name) > most_name or len(new_key) > most_key:
                        raise ValueError(f"benchmark {wanted.name[:80]!r}: its old series cannot be renamed "
                                         f"{name[:120]!r}: longer than the store holds; nothing was renamed")
                    conn.execute(update(BenchmarkRow).where(BenchmarkRow.id == row.id).values(name=name, key=new_key))
                    conn.execute(update(AcknowledgementRow).where(AcknowledgementRow.benchmark_key == row.key)
                                 .values(benchmark_key=new_key))
                # A run's points of one grid are one block, named after the benchmark: a block all of whose
                # points are these series' goes with them.
                ids = {row.id for row in members}
                for block_id, packed in conn.execute(select(ResultBlockRow.id, ResultBlockRow.benchmark_ids)
                                                     .where(ResultBlockRow.name == wanted.name)):
                    if set(np.frombuffer(packed, dtype="<i8").tolist()) <= ids:
                        conn.execute(update(ResultBlockRow).where(ResultBlockRow.id == block_id).values(name=name))
                retired[name] = wanted.name
                given.append(name)
            # The stored files ingested since the benchmark was first stored that hold no point of any of
            # its definitions (where ingest left it out) are read again by the next ingest: their points of
            # it, in the new definition, start its new series. A file with points of it is not, nor one
            # ingested before it was stored (it never held it: reading it again would add nothing).
            names = [n for n, was in retired.items() if was == wanted.name] + [wanted.name]
            every = select(BenchmarkRow.id).where(BenchmarkRow.name.in_(names))
            with_points = select(ResultRow.run_id).where(ResultRow.benchmark_id.in_(every)).union(
                select(ResultBlockRow.run_id).where(ResultBlockRow.name.in_(names)))
            first = conn.execute(select(func.min(with_points.subquery().c.run_id))).scalar()
            if first is not None:
                conn.execute(update(RunRow).where(RunRow.id > first, RunRow.id.not_in(with_points))
                             .values(skipped=None))
            put_setting(conn, SERIES_DEFINITIONS_SETTING, json.dumps(retired, sort_keys=True))
            return given

        renamed: list[str] = self._write_retrying(tx)
        if renamed:  # every cache of series by key or id is read again
            getattr(self, "_grid_ids", {}).clear()
            self._bench_ids.clear()
            self._undeclared_ids.clear()
            self._bench_meta.clear()
            self._bench_absent.clear()
            self._bench_by_id, self._id_by_key = {}, {}
            self._retired = None
        return renamed

    def leave_out_redefined(self, run: ParsedRun) -> tuple[ParsedRun, tuple[str, ...]]:
        """`run` (a `ci.ingest.ParsedRun`) less the benchmarks whose series the store holds with another
        unit or declared direction (`_redefines`), and a message per benchmark left out. A foreign
        benchmarks.json that declared a stored time benchmark a track in images/s put its values, negative
        ones too, into the seconds history, and a +339% step read "inconclusive" (2026-12-07); a suite that
        corrects a unit keeps its version (asv's is a hash of the code), so refusing the whole file refused
        every later file of the machine. Only that benchmark is left out, each time, and said so; the stored
        definition is never rewritten by a file (an unknown direction is filled in, `_benchmark_ids`)."""
        declared: dict[str, Benchmark] = {p.key: p.benchmark for p in run.points}
        for block in run.blocks:
            declared.update((key, bench) for bench, key in block.benches)
        # Each key is read once per store object: its row's definition, or that there is none yet (the write
        # that makes it records it, `_write_retrying`). A batch's files looked each series up once, and still do.
        missing = sorted(k for k in declared if k not in self._bench_meta and k not in self._bench_absent)
        if missing:
            self._bench_absent.update(missing)
            with self._read() as conn:
                for i in range(0, len(missing), CHUNK):
                    rows = conn.execute(select(BenchmarkRow.key, BenchmarkRow.unit, BenchmarkRow.direction,
                                               BenchmarkRow.kind).where(BenchmarkRow.key.in_(missing[i:i + CHUNK])))
                    for key, unit, direction, kind in rows:
                        self._bench_meta[key] = (unit, direction, kind)
                        self._bench_absent.discard(key)
        bad: dict[str, str] = {}
        for key, bench in declared.items():
            stored = self._bench_meta.get(key)
            if stored is not None and bench.name not in bad and _redefines(bench, stored):
                bad[bench.name] = (
                    f"left out benchmark {bench.name!r}: this file's benchmarks.json declares it in {bench.unit!r} "
                    f"({bench.direction} is better), but the store holds its series in {stored[0]!r} ({stored[1]} is "
                    "better): another benchmark under the same name, or a changed definition; its points are not "
                    "stored (a definition changed on purpose: `python -m ci ingest --redefine NAME` keeps the old "
                    "series under another name and starts new ones; another suite: ingest it into another --db)")
        return (without_benchmarks(run, bad) if bad else run), tuple(bad.values())

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
