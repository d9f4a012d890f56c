"""The store's write side: one asv result file per transaction (machines, commits, benchmarks, the
run and its results), commit metadata, verdicts and acknowledgements. Every write is one retried
transaction (`ci.store.engine.retry_write`): all of it or nothing.

`StoreWrites` is `IngestWrites` (`ci.store.ingest_writes`: asv result files, over
`ci.store.upserts.UpsertWrites`: machines, commits, series and the retried transaction) plus the
writes here: verdicts, the history jobs' alerts, the detector's cached states, settings and
acknowledgements.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, delete, insert, select, update

from ci.records import Acknowledgement, Alert, AlertState, Machine, Project, Verdict
from ci.store.codec import nan_to_none, utc
from ci.store.engine import upsert
from ci.store.ingest_writes import IngestWrites
from ci.store.limits import check_acknowledgement, check_text
from ci.store.models import (
    AcknowledgementRow,
    AlertRow,
    BenchmarkRow,
    ChangePointStateRow,
    CommitRow,
    MachineRow,
    RunRow,
    SettingRow,
    VerdictRow,
)
from ci.store.reads import PROJECT_SETTING
from ci.store.upserts import CHUNK, put_setting


class StoreWrites(IngestWrites):
    """Writes to a results history through `engine`; it reads too (`acknowledge` resolves a commit
    prefix and checks that the series exists).

    Args:
        engine: from `ci.store.engine.make_engine`, holding the store's schema.
        read_only: the engine cannot write: every write fails, except the detector's cache
            (`save_change_point_states`), which is then not kept.
    """

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
            ids = self._benchmark_ids(conn, pending, (v.benchmark for v in unique.values()), declared=False)
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
            ids = self._benchmark_ids(conn, pending, (a.benchmark for a in unique.values()), declared=False)
            shas = sorted({a.commit_sha for a in unique.values()})
            held: set[tuple[str, int, str, str]] = set()
            acked: set[tuple[str, str]] = set()
            for i in range(0, len(shas), CHUNK):
                chunk = shas[i : i + CHUNK]
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

    def move_runs(self, moves: dict[str, Machine]) -> int:
        """Give stored runs to other machines of their asv machine name and environment: the jobs of a
        host the result files do not tell apart (`ci.ingest.speed`), or back from them.

        Args:
            moves: run key -> the machine it belongs to, found by asv name, environment and host (as
                given: `ci.store.hosts` keys plus what tells it apart), its `extra` fields refreshed;
                one the store does not have is added with the record's fields.

        Returns:
            How many runs changed machine.
        """
        by_target: dict[str, tuple[Machine, list[str]]] = {}
        for run_key, machine in moves.items():
            by_target.setdefault(machine.name, (machine, []))[1].append(run_key)

        def tx(conn: Connection, _pending: dict[str, int]) -> int:
            moved = 0
            for _name, (machine, keys) in sorted(by_target.items()):
                machine_id = self._machine_row(conn, machine)
                for at in range(0, len(keys), CHUNK):
                    elsewhere = (RunRow.run_key.in_(keys[at : at + CHUNK]), RunRow.machine_id != machine_id)
                    moved += conn.execute(update(RunRow).where(*elsewhere).values(machine_id=machine_id)).rowcount
            return moved

        return self._write_retrying(tx)

    def leave_branch(self, branch: str, on_it: set[str], until: datetime) -> list[str]:
        """Take the label `branch` off the stored commits no longer on it (`on_it`: every commit git
        reaches from the branch now) and not newer than `until` (the branch's newest commit time in that
        checkout): after a force-push or a reset, the commits it dropped read as the branch's for good,
        its dashboard's newest commit among them, and the old and new histories interleaved in its
        series (2026-12-07). Only when the branch was rewritten: every such commit is older than the
        checkout's branch (a rewrite is newer than what it dropped); one newer than it means the checkout
        is a stale clone, and nothing is taken off. The commits and their runs stay, on no branch.

        Args:
            branch: the branch name.
            on_it: full shas of every commit reachable from the branch (`git log BRANCH`).
            until: the newest commit time on the branch in that checkout (git's committer time).

        Returns:
            The shas that left it, sorted.
        """
        until = utc(until)

        def tx(conn: Connection, _pending: dict[str, int]) -> list[str]:
            rows = conn.execute(select(CommitRow.id, CommitRow.sha, CommitRow.time)
                                .where(CommitRow.branch == branch)).all()
            # Commits stored under their full sha only: one a result file named by an abbreviation is
            # stored under it, and `on_it` holds full shas.
            off = [(i, sha, utc(when)) for i, sha, when in rows
                   if len(sha) in (40, 64) and when is not None and sha not in on_it]
            if not off or max(when for _, _, when in off) > until:
                # Nothing left the branch, or this checkout is behind the store: a stale clone lacks the
                # newest commits, and with them the merged commits they brought, whose own times can be
                # older than the clone's tip. A rewrite is newer than every commit it dropped.
                return []
            gone = [(i, sha) for i, sha, _ in off]
            for at in range(0, len(gone), CHUNK):
                ids = [i for i, _ in gone[at : at + CHUNK]]
                conn.execute(update(CommitRow).where(CommitRow.id.in_(ids)).values(branch=""))
            return sorted(sha for _, sha in gone)

        return self._write_retrying(tx)

    def _machine_row(self, conn: Connection, machine: Machine) -> int:
        """The id of the stored machine `machine` is: the row of its asv name, environment and host (the
        whole fingerprint as stored, what tells it apart included), its `extra` fields refreshed from the
        record; else a new row named `machine.name` (cut to the column, numbered if another machine has
        that name)."""
        rows = conn.execute(select(MachineRow.id, MachineRow.host, MachineRow.env_name, MachineRow.extra)
                            .where(MachineRow.asv_name == machine.machine_name)
                            .order_by(MachineRow.id)).all()  # fmt: skip
        host = json.dumps(dict(machine.host), sort_keys=True)
        extra = json.dumps(dict(machine.extra), sort_keys=True)
        for row in rows:
            if row.env_name == machine.env_name and row.host == host:
                if row.extra != extra:
                    conn.execute(update(MachineRow).where(MachineRow.id == row.id).values(extra=extra))
                return int(row.id)
        name = self._free_machine_name(conn, machine.name)
        self._insert_machine(conn, machine, name)
        return int(conn.execute(select(MachineRow.id).where(MachineRow.name == name)).scalar_one())

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
            for i in range(0, len(keys), CHUNK):
                chunk = keys[i : i + CHUNK]
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

        self._write_retrying(lambda conn, _pending: put_setting(conn, key, value))

    def save_project(self, project: Project) -> None:
        """Keep what the project's asv.conf.json says (`project` reads it back).

        Args:
            project: the fields ingest read from the file.
        """
        self.save_setting(PROJECT_SETTING, json.dumps(project.as_asv_conf(), sort_keys=True))
        self.use_project(project)  # its `regressions_directions` from the next read on

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
