"""The store's bulk reads: every result of a history, or of one series, machine or commit, as records
(`results`, `failures`) or as columns (`series_columns`), in history order. Plain DBAPI rows
(`ci.store.read_session.fetch_rows`), no ORM: a whole-history read is ~10^5 to 10^6 points.
"""

from __future__ import annotations

import json
from array import array
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

import numpy as np
from sqlalchemy import Connection, String, select, type_coerce

from ci.records import Benchmark, MachineHistory, Result, SeriesColumns
from ci.store.codec import float64s, unpacker, utc
from ci.store.models import BenchmarkRow, CommitRow, MachineRow, RunRow
from ci.store.points import block_points, block_read, block_spreads, fold_stats, result_columns, series_in_blocks
from ci.store.read_session import HISTORY_ORDER, MEMO_MAX, ReadSession, fetch_rows, paused_gc

_IN_LIST = 500  # run ids named in one IN (...); far below SQLite's bound-parameter limit


@dataclass(frozen=True)
class FailedPoint:
    """A benchmark point that asv recorded as failed (null) or skipped (NaN): never a value."""

    benchmark: Benchmark
    commit_sha: str
    machine: str
    status: str  # "failed" or "skipped"
    run_id: str


def _spreads_by_row(ids: np.ndarray, bids: np.ndarray, spread_rows: list[tuple[Any, ...]]
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Per row of a columns read (its run and benchmark ids), the (q_25, q_75, repeat) of
    `spread_rows` (`_recorded_spreads`) for the same point, NaN where there is none; and whether a row
    has a recorded q_25. Matched in numpy (a sort and a binary search), not per row."""
    out = np.full((ids.size, 3), np.nan)
    if not spread_rows:
        return out, np.zeros(ids.size, dtype=bool)
    table = np.array(spread_rows, dtype=np.float64)  # None: NaN
    width = int(max(bids.max(), table[:, 1].max())) + 1
    keys = table[:, 0].astype(np.int64) * width + table[:, 1].astype(np.int64)
    by_key = np.argsort(keys, kind="stable")
    keys = keys[by_key]
    wanted = ids * width + bids
    at = np.minimum(np.searchsorted(keys, wanted), keys.size - 1)
    hit = keys[at] == wanted
    out[hit] = table[by_key[at[hit]], 2:5]
    return out, hit & ~np.isnan(out[:, 0])


def _parse_dt(value: Any, memo: dict[Any, datetime | None]) -> datetime | None:
    """A UTC datetime from a DateTime column read raw (text on SQLite), memoised per value."""
    if value is None:
        return None
    out = memo.get(value)
    if out is None:
        out = memo[value] = utc(datetime.fromisoformat(value) if isinstance(value, str) else value)
    return out


class _Run(NamedTuple):
    """What a result record takes from its run (the columns of `SeriesReads._history_runs`)."""

    id: int
    run_key: str
    digest: str
    started_at: Any
    environment: str
    sha: str
    machine: str


def _by_benchmark(row: tuple[Any, ...]) -> Any:
    return row[1]


@dataclass(frozen=True)
class RunValues:
    """A machine's runs and asv's value of each series at each (`SeriesReads.run_values`).

    Attributes:
        runs: (run key, result file digest) of every run of the machine, history order.
        commit_shas: per run, its commit.
        series: per row of `levels`, the series' key.
        levels: series x runs, asv's value of the point (NaN: none "ok" there, or not read).
    """

    runs: tuple[tuple[str, str], ...]
    commit_shas: tuple[str, ...]
    series: tuple[str, ...]
    levels: np.ndarray


class SeriesReads(ReadSession):
    """The bulk reads of a results history: its results as records and as columns."""

    def _history_runs(
        self, conn: Connection, *, machine: str | None = None, commit_sha: str | None = None,
        branch: str | None = None,
    ) -> list[Any]:
        """Runs in history order (commit order, then the run's start, then insertion), with what a
        result record takes from its run: id, run_key, digest, started_at, environment, sha, machine."""
        stmt = (
            select(
                RunRow.id, RunRow.run_key, RunRow.digest, self._dt(RunRow.started_at).label("started_at"),
                RunRow.environment, CommitRow.sha, MachineRow.name.label("machine"),
            )
            .join(CommitRow, RunRow.commit_id == CommitRow.id)
            .join(MachineRow, RunRow.machine_id == MachineRow.id)
            .order_by(*self._commit_order(), RunRow.started_at, RunRow.id)
        )  # fmt: skip
        if machine is not None:
            stmt = stmt.where(MachineRow.name == machine)
        if commit_sha is not None:
            stmt = stmt.where(CommitRow.sha == commit_sha)
        if branch is not None:
            stmt = stmt.where(CommitRow.branch == branch)
        return list(conn.execute(stmt).all())

    @staticmethod
    def _run_filter(runs: list[Any], every_run: bool, machine: str | None) -> tuple[list[str], list[Any]]:
        """The WHERE terms (and their parameters) that keep the rows of `runs` (`_select_results`)."""
        where: list[str] = []
        params: list[Any] = []
        if not every_run:
            if len(runs) <= _IN_LIST:
                where.append(f"run_id IN ({', '.join('?' * len(runs))})")
                params.extend(sorted(r.id for r in runs))
            elif machine is not None:
                where.append("run_id IN (SELECT runs.id FROM runs JOIN machines ON runs.machine_id = machines.id "
                             "WHERE machines.name = ?)")
                params.append(machine)
        return where, params

    def _select_results(
        self, conn: Connection, columns: str, *, ok: bool, runs: list[Any], every_run: bool, machine: str | None
    ) -> list[tuple[Any, ...]]:
        """(run_id, benchmark_id, *columns) of the results of `runs` (all of the store's runs when
        `every_run`; rows of other runs may come too, for the caller to drop). One plain DBAPI query,
        no per-row objects and no ORDER BY: the read of a whole history is one table scan, put in
        order by the caller (a sort of 500,000 rows in SQL was a third of the read, 2026-12-01)."""
        where, params = self._run_filter(runs, every_run, machine)
        status = "status = ?" if ok else "status <> ?"
        sql = (f"SELECT run_id, benchmark_id, {result_columns(columns)} FROM results "
               f"WHERE {' AND '.join([status, *where])}")
        rows = fetch_rows(conn, sql, ["ok", *params])
        if columns.endswith("stats"):
            rows = list(map(fold_stats, rows))
        if ok:  # every point of a block is "ok"
            blocks = fetch_rows(conn, f"SELECT run_id, {block_read(columns)} FROM result_blocks"
                                  + (f" WHERE {' AND '.join(where)}" if where else ""), params)  # fmt: skip
            rows.extend(block_points(blocks, columns))
        return rows

    def _recorded_spreads(self, conn: Connection, runs: list[Any], every_run: bool, machine: str | None
                          ) -> list[tuple[Any, ...]]:
        """(run_id, benchmark_id, q_25, q_75, repeat) of the ok points of `runs` (as `_select_results`
        selects them) that hold one value and asv's recorded statistics (None or NaN: not recorded)."""
        where, params = self._run_filter(runs, every_run, machine)
        rows = fetch_rows(conn, "SELECT run_id, benchmark_id, q_25, q_75, repeat FROM results WHERE "
                          + " AND ".join(["status = ?", "NOT has_raw_samples", "q_25 IS NOT NULL", *where]),
                          ["ok", *params])  # fmt: skip
        blocks = fetch_rows(conn, "SELECT run_id, benchmark_ids, stats FROM result_blocks WHERE "
                            + " AND ".join(["NOT has_raw_samples", "stats IS NOT NULL", *where]), params)
        return [*rows, *block_spreads(blocks)]

    def _result_rows(
        self, conn: Connection, columns: str, *, ok: bool, runs: list[Any], every_run: bool, machine: str | None
    ) -> dict[int, list[tuple[Any, ...]]]:
        """`_select_results` grouped by run id, only `runs`' rows, each group in benchmark id order
        (the order the writer inserts a file's rows in, so the sort finds them sorted)."""
        wanted = {r.id for r in runs}
        grouped: dict[int, list[tuple[Any, ...]]] = {}
        for row in self._select_results(conn, columns, ok=ok, runs=runs, every_run=every_run, machine=machine):
            group = grouped.get(row[0])
            if group is None:
                if row[0] not in wanted:
                    continue  # a run outside the filter (branch, or a long run list read by machine)
                group = grouped[row[0]] = []
            group.append(row)
        for group in grouped.values():
            group.sort(key=_by_benchmark)
        return grouped

    def _benchmark_id(self, conn: Connection, key: str) -> int | None:
        known = self._id_by_key.get(key)  # ids never change once stored
        if known is not None:
            return known
        return conn.execute(select(BenchmarkRow.id).where(BenchmarkRow.key == key)).scalar()

    def _dt(self, column: Any) -> Any:
        """A DateTime column for bulk reads: on SQLite the stored text, parsed by `_parse_dt`
        (datetime.fromisoformat is ~10x cheaper than SQLAlchemy's regex-based SQLite processor,
        which was a third of a series read)."""
        return type_coerce(column, String) if self.dialect == "sqlite" else column

    def _points(
        self, ok: bool, columns: str, benchmark_key: str | None, machine: str | None, commit_sha: str | None
    ) -> tuple[list[Any], dict[int, list[tuple[Any, ...]]]]:
        """Runs in history order and their result rows by run id (each run's by benchmark id)."""
        with self._connection() as conn:  # one snapshot for every query
            if benchmark_key is not None:
                bid = self._benchmark_id(conn, benchmark_key)
                if bid is None:
                    return [], {}
                return self._series_points(conn, ok, columns, bid, machine, commit_sha)
            runs = self._history_runs(conn, machine=machine, commit_sha=commit_sha)
            if not runs:
                return [], {}
            every = machine is None and commit_sha is None
            grouped = self._result_rows(conn, columns, ok=ok, runs=runs, every_run=every, machine=machine)
        return runs, grouped

    def _series_points(
        self, conn: Connection, ok: bool, columns: str, bid: int, machine: str | None, commit_sha: str | None
    ) -> tuple[list[Any], dict[int, list[tuple[Any, ...]]]]:
        """`_points` of one series: one query that walks the (benchmark_id, run_id) index and joins
        its runs, in history order (a series is ~1,000 rows: sorting them in SQL is cheap)."""
        where = ["results.benchmark_id = ?", "results.status = ?" if ok else "results.status <> ?"]
        params: list[Any] = [bid, "ok"]
        if machine is not None:
            where.append("machines.name = ?")
            params.append(machine)
        if commit_sha is not None:
            where.append("commits.sha = ?")
            params.append(commit_sha)
        cols = ", ".join(f"results.{c.strip()}" for c in result_columns(columns).split(","))
        run_cols = "runs.id, runs.run_key, runs.digest, runs.started_at, runs.environment, commits.sha, machines.name"
        joins = ("JOIN runs ON {t}.run_id = runs.id JOIN commits ON runs.commit_id = commits.id "
                 "JOIN machines ON runs.machine_id = machines.id")  # fmt: skip
        order = f"ORDER BY {HISTORY_ORDER}, runs.started_at, runs.id"
        sql = (f"SELECT {run_cols}, results.run_id, results.benchmark_id, {cols}, commits.position, commits.time, "
               f"commits.id FROM results {joins.format(t='results')} WHERE {' AND '.join(where)} {order}")  # fmt: skip
        found = [(row[:7], row[7:-3], row[-3:]) for row in fetch_rows(conn, sql, params)]
        if columns.endswith("stats"):
            found = [(run, fold_stats(point), order) for run, point, order in found]
        if ok:  # the series' points in blocks: those of its benchmark (by name), cut to the series' own
            block_where = ["result_blocks.name = (SELECT name FROM benchmarks WHERE id = ?)", *where[2:]]
            sql = (f"SELECT {run_cols}, result_blocks.run_id, "
                   + block_read(columns, "result_blocks.")
                   + f", commits.position, commits.time, commits.id FROM result_blocks "
                   f"{joins.format(t='result_blocks')} WHERE {' AND '.join(block_where)}")  # fmt: skip
            in_blocks = series_in_blocks(fetch_rows(conn, sql, [bid, *params[2:]]), bid, columns)
            if in_blocks:
                # Put in the SQL order above here, not by the database: a sort there carries each
                # block's samples (ten series' worth) through a temporary B-tree, ~40% of a series
                # read (2026-12-02). PostgreSQL sorts a NULL start last, SQLite first.
                null_start = (1,) if conn.dialect.name == "postgresql" else (0,)
                found = sorted(found + in_blocks, key=lambda f: (  # HISTORY_ORDER, then the run's start and id
                    f[2][0] is not None, () if f[2][0] is None else (f[2][0],), f[2][1] is None,
                    () if f[2][1] is None else (f[2][1],), f[2][2],
                    null_start if f[0][3] is None else (null_start[0] ^ 1, f[0][3]), f[0][0]))  # fmt: skip
        runs: list[Any] = []
        grouped: dict[int, list[tuple[Any, ...]]] = {}
        for run, point, _order in found:
            if run[0] not in grouped:
                runs.append(_Run(*run))
                grouped[run[0]] = []
            grouped[run[0]].append(point)
        return runs, grouped

    def results(
        self,
        *,
        benchmark_key: str | None = None,
        machine: str | None = None,
        commit_sha: str | None = None,
    ) -> list[Result]:
        """Measured results filtered by any combination of series key, machine and commit, in
        commit history order (oldest first). Failed and skipped points are not results: see
        `failures`.

        Args:
            benchmark_key: a `Benchmark.key`.
            machine: a machine name.
            commit_sha: a full commit sha.

        Returns:
            Result records with their raw samples (or asv's single reported value when the run
            did not record samples) and the run's environment.
        """
        with paused_gc():
            return self._results(benchmark_key, machine, commit_sha)

    def _results(self, benchmark_key: str | None, machine: str | None, commit_sha: str | None) -> list[Result]:
        runs, grouped = self._points(True, "samples, started_at, benchmark_version, stats", benchmark_key, machine,
                                     commit_sha)  # fmt: skip
        if not grouped:
            return []
        benches = self._bench_map({row[1] for rows in grouped.values() for row in rows})
        # Parsed once per distinct text and kept across calls (the text -> value map never changes):
        # a series read parses ~1,000 times and environments that the previous series read did too.
        if len(self._times) > MEMO_MAX:
            self._times.clear()
        if len(self._envs) > MEMO_MAX:
            self._envs.clear()
        envs, times = self._envs, self._times
        unpackers: dict[int, Any] = {}
        out: list[Result] = []
        append = out.append
        for run in runs:
            rows = grouped.get(run.id)
            if not rows:
                continue
            env = envs.get(run.environment)
            if env is None:
                env = envs[run.environment] = tuple(sorted(json.loads(run.environment).items()))
            run_started = _parse_dt(run.started_at, times)
            sha, machine_name, run_key = run.sha, run.machine, run.run_key
            for _run_id, bid, samples, started, version, stats in rows:
                unpack = unpackers.get(len(samples))
                if unpack is None:
                    unpack = unpackers[len(samples)] = unpacker(len(samples))
                when = times.get(started) if started is not None else None
                if when is None:
                    when = _parse_dt(started, times) or run_started
                append(Result(benches[bid], sha, machine_name, unpack(samples), run_key, when, env, version, stats))
        return out

    def failures(
        self, *, benchmark_key: str | None = None, machine: str | None = None, commit_sha: str | None = None
    ) -> list[FailedPoint]:
        """Points asv recorded as failed or skipped, same filters and order as `results`.

        Args:
            benchmark_key: a `Benchmark.key`.
            machine: a machine name.
            commit_sha: a full commit sha.

        Returns:
            FailedPoint records (a crashed correctness benchmark is a failure, not a pass).
        """
        runs, grouped = self._points(False, "status", benchmark_key, machine, commit_sha)
        benches = self._bench_map({row[1] for rows in grouped.values() for row in rows}) if grouped else {}
        return [FailedPoint(benches[row[1]], run.sha, run.machine, row[2], run.run_key)
                for run in runs for row in grouped.get(run.id, ())]  # fmt: skip

    def run_commits(self, machine: str) -> list[str]:
        """The commit sha of each run of `machine`, in history order (the order of `series_columns`'
        `MachineHistory.runs`, which `runs_after` and `runs_before` count in).

        Args:
            machine: a machine name.

        Returns:
            One sha per run ([] for a machine without runs).
        """
        with self._connection() as conn:
            return [run.sha for run in self._history_runs(conn, machine=machine)]

    def run_values(self, machine: str, *, runs_after: int = 0) -> RunValues:
        """asv's reported value (the median of its samples) of every point of a machine's runs, as a
        series x runs matrix: what `ci.ingest.speed` reads a job's speed from, without the samples a
        `series_columns` read unpacks (a tenth of its cost on a 16,000-series store, 2026-12-06).

        Args:
            machine: a machine key.
            runs_after: leave out the values of the machine's first k runs in history order (their
                columns are NaN); its `runs` and `commit_shas` are all of them.

        Returns:
            A `RunValues`: NaN where a series has no "ok" point at a run.
        """
        with paused_gc(), self._connection() as conn:
            runs = self._history_runs(conn, machine=machine)
            wanted = runs[runs_after:]
            pairs: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # (run ids, benchmark ids, values)
            for at in range(0, len(wanted), _IN_LIST):
                ids = sorted(r.id for r in wanted[at : at + _IN_LIST])
                marks = ", ".join("?" * len(ids))
                rows = fetch_rows(conn, f"SELECT run_id, benchmark_id, value FROM results WHERE status = ? AND "
                                        f"run_id IN ({marks}) AND value IS NOT NULL", ["ok", *ids])  # fmt: skip
                if rows:
                    r, b, v = zip(*rows, strict=True)
                    pairs.append((np.asarray(r, dtype=np.int64), np.asarray(b, dtype=np.int64),
                                  np.asarray(v, dtype=float)))  # fmt: skip
                blocks = fetch_rows(conn, f"SELECT run_id, benchmark_ids, value FROM result_blocks "
                                          f"WHERE run_id IN ({marks})", ids)  # fmt: skip
                if blocks:  # every block's packed columns joined, then one conversion each
                    block_runs, id_blobs, value_blobs = zip(*blocks, strict=True)
                    sizes = np.fromiter(map(len, id_blobs), dtype=np.int64, count=len(id_blobs)) // 8
                    block_ids = np.frombuffer(b"".join(map(bytes, id_blobs)), dtype="<i8").astype(np.int64)
                    block_values = np.frombuffer(b"".join(map(bytes, value_blobs)), dtype="<f8").astype(float)
                    pairs.append((np.repeat(np.asarray(block_runs, dtype=np.int64), sizes), block_ids, block_values))
            keys = dict(conn.execute(select(BenchmarkRow.id, BenchmarkRow.key)).all()) if pairs else {}
        column = {r.id: j for j, r in enumerate(runs)}
        run_ids = np.concatenate([p[0] for p in pairs]) if pairs else np.empty(0, dtype=np.int64)
        bench_ids = np.concatenate([p[1] for p in pairs]) if pairs else np.empty(0, dtype=np.int64)
        values = np.concatenate([p[2] for p in pairs]) if pairs else np.empty(0)
        series, row_of = np.unique(bench_ids, return_inverse=True)
        levels = np.full((series.size, len(runs)), np.nan)
        known = np.fromiter(column, dtype=np.int64, count=len(column))
        position = np.zeros(int(known.max()) + 1 if known.size else 1, dtype=np.int64)
        position[known] = np.fromiter(column.values(), dtype=np.int64, count=len(column))
        levels[row_of, position[run_ids]] = values
        return RunValues(
            runs=tuple((r.run_key, r.digest) for r in runs), commit_shas=tuple(r.sha for r in runs),
            series=tuple(keys[int(b)] for b in series), levels=levels,
        )  # fmt: skip

    def series_columns(
        self,
        *,
        machine: str | None = None,
        branch: str | None = None,
        runs_after: dict[str, int] | None = None,
        runs_before: dict[str, int] | None = None,
    ) -> list[MachineHistory]:
        """Every series as columns (`ci.records.SeriesColumns`), per machine, results in history order.

        Args:
            machine: only this machine's series.
            branch: only results on commits of this branch.
            runs_after: {machine name: k}: leave out the results of that machine's first k runs in
                history order (a caller that holds state for them reads only the new ones).
            runs_before: {machine name: k}: leave out the results of that machine's runs from the k-th
                on; a window of runs is read by run id, so its cost is the window's, not the history's
                (`ci.verdicts.inputs.noise_history`).

        Returns:
            One MachineHistory per machine with runs in scope, by machine name; its `runs` are all
            of them (in scope), whatever `runs_after` and `runs_before` say.
        """
        with paused_gc():
            return self._series_columns(machine, branch, runs_after or {}, runs_before or {})

    def _series_columns(self, machine: str | None, branch: str | None, skip: dict[str, int],
                        stop: dict[str, int]) -> list[MachineHistory]:
        with self._connection() as conn:
            runs = self._history_runs(conn, machine=machine, branch=branch)
            by_machine: dict[str, list[Any]] = {}
            for run in runs:
                by_machine.setdefault(run.machine, []).append(run)
            wanted = [r for m, rs in by_machine.items() for r in rs[skip.get(m, 0):stop.get(m, len(rs))]]
            every = machine is None and branch is None and not any(skip.values()) and not stop
            rows: list[tuple[Any, ...]] = []
            # asv's quartiles of the points it kept one value of (most CI histories): the spread the
            # dashboard shows where the store holds one sample (`SeriesColumns.spreads`). Read apart, for
            # those points only: three more columns of every row cost a history of raw samples 23% of
            # this read (500,000 rows) and bought it nothing; apart, +3% there and 200 -> 300 ms on
            # uxarray's history repeated 6 times (51,780 one-value points), 2026-12-07.
            spread_rows: list[tuple[Any, ...]] = []
            if stop:  # a window: its runs by id, _IN_LIST at a time (a machine's rows would be the whole history)
                for at in range(0, len(wanted), _IN_LIST):
                    rows += self._select_results(conn, "samples, benchmark_version", ok=True,
                                                 runs=wanted[at : at + _IN_LIST],
                                                 every_run=False, machine=None)  # (the noise model's: no spreads)
            elif wanted:
                rows = self._select_results(conn, "samples, benchmark_version", ok=True, runs=wanted,
                                            every_run=every, machine=machine)  # fmt: skip
                spread_rows = self._recorded_spreads(conn, wanted, every, machine)
        names = sorted(by_machine)
        per_machine: dict[str, list[SeriesColumns]] = {name: [] for name in names}
        if rows:
            # Columns, then one sort by (machine, series, position in the machine's history order) in
            # numpy: each series is a slice of it. Per-row Python work was most of this read (1.1 of
            # 1.6 s CPU for 500,000 rows, 2026-12-01); what is left per row runs in C (zip, map, join).
            run_ids, bids, blobs, versions = zip(*rows, strict=True)
            ids = np.fromiter(run_ids, dtype=np.int64, count=len(rows))
            size = int(max(ids.max(), max(r.id for r in runs))) + 1
            position = np.full(size, -1, dtype=np.int64)
            machine_of = np.zeros(size, dtype=np.int64)
            for m, name in enumerate(names):
                rs = by_machine[name]
                first, last = skip.get(name, 0), min(stop.get(name, len(rs)), len(rs))
                position[[r.id for r in rs[first:last]]] = np.arange(first, max(first, last))
                machine_of[[r.id for r in rs[first:last]]] = m
            pos = position[ids]
            all_bids = np.fromiter(bids, dtype=np.int64, count=len(rows))
            spreads, spread_kept = _spreads_by_row(ids, all_bids, spread_rows)
            sel = np.flatnonzero(pos >= 0)  # rows of runs outside the filter are dropped
            order = sel[np.lexsort((pos[sel], all_bids[sel], machine_of[ids[sel]]))]
            mach_o, bid_o = machine_of[ids[order]], all_bids[order]
            cut = np.flatnonzero((np.diff(mach_o) != 0) | (np.diff(bid_o) != 0)) + 1
            lengths = np.fromiter(map(len, blobs), dtype=np.int64, count=len(rows)) // 8
            benches = self._bench_map(set(bid_o.tolist()))
            shas = {name: [r.sha for r in by_machine[name]] for name in names}
            for a, b in zip([0, *cut.tolist()], [*cut.tolist(), len(order)], strict=True):
                rows_of = order[a:b]
                idx = rows_of.tolist()
                name = names[int(mach_o[a])]
                positions = pos[rows_of].tolist()
                spread = array("d", spreads[rows_of].tobytes()) if spread_kept[rows_of].any() else array("d")
                per_machine[name].append(SeriesColumns(
                    benches[int(bid_o[a])], name, tuple(map(shas[name].__getitem__, positions)), tuple(positions),
                    tuple(lengths[rows_of].tolist()), float64s(b"".join(map(blobs.__getitem__, idx))),
                    tuple(map(versions.__getitem__, idx)), spread,
                ))  # fmt: skip
        out = []
        for name in names:
            series = sorted(per_machine[name], key=lambda c: c.benchmark.key)
            out.append(MachineHistory(name, tuple((r.run_key, r.digest) for r in by_machine[name]), tuple(series)))
        return out
