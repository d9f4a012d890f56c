"""The store's read side: `StoreReads` implements `ci.records.StoreReader` (what the verdict code,
the PR comment and the dashboard read) over an engine, plus the reads that only the service's own
commands need (failed points, commit prefixes, ingest's digests, row counts).

Every call is one read transaction, so one snapshot; bulk reads skip the ORM (a series read is
~10^5 rows) and parse DateTime text themselves on SQLite.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, String, func, select, type_coerce
from sqlalchemy.orm import Session

from ci.records import Acknowledgement, Benchmark, Commit, Direction, Kind, Machine, Outcome, Result, Verdict
from ci.store.codec import none_to_nan, parse_samples, utc
from ci.store.models import AcknowledgementRow, BenchmarkRow, CommitRow, MachineRow, ResultRow, RunRow, VerdictRow


@dataclass(frozen=True)
class FailedPoint:
    """A benchmark point that asv recorded as failed (null) or skipped (NaN): never a value."""

    benchmark: Benchmark
    commit_sha: str
    machine: str
    status: str  # "failed" or "skipped"
    run_id: str


def _parse_dt(value: Any, memo: dict[Any, datetime | None]) -> datetime | None:
    """A UTC datetime from a DateTime column read raw (text on SQLite), memoised per value."""
    if value is None:
        return None
    out = memo.get(value)
    if out is None:
        out = memo[value] = utc(datetime.fromisoformat(value) if isinstance(value, str) else value)
    return out


class StoreReads:
    """Reads of a results history through `engine` (any SQLAlchemy engine holding the store's schema).

    Args:
        engine: from `ci.store.engine.make_engine`.
    """

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._bench_by_id: dict[int, Benchmark] = {}

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    @contextmanager
    def _read(self) -> Iterator[Session]:
        # One read transaction (one snapshot) per call; ORM objects for the small tables.
        with self.engine.connect() as conn, conn.begin(), Session(bind=conn) as session:
            yield session

    def resolve_commit(self, sha_or_prefix: str) -> str:
        """The full sha of a stored commit from its sha or a unique prefix (>= 7 hex characters).

        Args:
            sha_or_prefix: the commit id as typed by a user.

        Returns:
            The full sha; raises ValueError when unknown or ambiguous.
        """
        if not isinstance(sha_or_prefix, str):
            raise TypeError(f"commit must be a string, got {type(sha_or_prefix).__name__}")
        prefix = sha_or_prefix.strip().lower()
        if prefix and any(c not in "0123456789abcdef" for c in prefix):
            raise ValueError(f"commit {sha_or_prefix!r} is not a sha: the store knows commits by sha, not by branch "
                             f"or tag name (pass e.g. $(git rev-parse {sha_or_prefix.strip()}))")
        if len(prefix) < 7:
            raise ValueError(f"commit {sha_or_prefix!r}: give a sha or a prefix of at least 7 characters")
        with self._read() as conn:
            found = conn.execute(
                select(CommitRow.sha).where(CommitRow.sha.startswith(prefix, autoescape=True))
            ).scalars()
            shas = list(found.all())
        if not shas:
            raise ValueError(f"commit {sha_or_prefix!r} is not in the store")
        if len(shas) > 1 and prefix not in shas:
            raise ValueError(f"commit prefix {sha_or_prefix!r} is ambiguous: {', '.join(sorted(shas)[:5])}")
        return prefix if prefix in shas else shas[0]

    def machines(self) -> list[Machine]:
        """Every machine, by name."""
        with self._read() as conn:
            rows = conn.execute(select(MachineRow).order_by(MachineRow.name)).scalars().all()
        return [
            Machine(
                name=r.name,
                gpu=r.gpu,
                driver=r.driver,
                cuda=r.cuda,
                torch=r.torch,
                triton=r.triton,
                cpu=r.cpu,
                extra=tuple(sorted(json.loads(r.extra).items())),
            )
            for r in rows
        ]

    @staticmethod
    def _commit_order() -> tuple[Any, ...]:
        # Commits without a time (none should exist: asv records one) go last, then insertion order.
        return (CommitRow.time.is_(None), CommitRow.time, CommitRow.id)

    def commits(self, branch: str | None = None) -> list[Commit]:
        """Commits in history order (oldest first); with `branch`, only that branch's.

        Args:
            branch: a branch name, or None for all commits.

        Returns:
            Commit records.
        """
        stmt = select(CommitRow).order_by(*self._commit_order())
        if branch is not None:
            stmt = stmt.where(CommitRow.branch == branch)
        with self._read() as conn:
            rows = conn.execute(stmt).scalars().all()
        return [
            Commit(
                sha=r.sha, parents=tuple(json.loads(r.parents)), branch=r.branch, time=utc(r.time), subject=r.subject
            )
            for r in rows
        ]

    @staticmethod
    def _bench(row: Any) -> Benchmark:
        return Benchmark(
            name=row.name,
            params=tuple((str(k), str(v)) for k, v in json.loads(row.params)),
            unit=row.unit,
            direction=Direction(row.direction),
            kind=Kind(row.kind),
        )

    def benchmarks(self) -> list[Benchmark]:
        """Every series (benchmark name x parameter point), by key."""
        with self._read() as conn:
            rows = conn.execute(select(BenchmarkRow).order_by(BenchmarkRow.key)).scalars().all()
        return [self._bench(r) for r in rows]

    def _points(
        self, status_ok: bool, benchmark_key: str | None, machine: str | None, commit_sha: str | None
    ) -> list[Any]:
        stmt = (
            select(
                ResultRow.benchmark_id,
                ResultRow.samples,
                self._dt(ResultRow.started_at).label("started_at"),
                ResultRow.status,
                RunRow.run_key,
                self._dt(RunRow.started_at).label("run_started"),
                RunRow.environment,
                CommitRow.sha,
                MachineRow.name.label("machine"),
                ResultRow.benchmark_version,
            )
            .join(RunRow, ResultRow.run_id == RunRow.id)
            .join(CommitRow, RunRow.commit_id == CommitRow.id)
            .join(MachineRow, RunRow.machine_id == MachineRow.id)
            .order_by(*self._commit_order(), RunRow.started_at, RunRow.id, ResultRow.benchmark_id)
        )
        stmt = stmt.where(ResultRow.status == "ok") if status_ok else stmt.where(ResultRow.status != "ok")
        if machine is not None:
            stmt = stmt.where(MachineRow.name == machine)
        if commit_sha is not None:
            stmt = stmt.where(CommitRow.sha == commit_sha)
        with self.engine.connect() as conn, conn.begin():
            if benchmark_key is not None:
                # Resolve the key first so the query walks the (benchmark_id, run_id) index.
                bid = conn.execute(select(BenchmarkRow.id).where(BenchmarkRow.key == benchmark_key)).scalar()
                if bid is None:
                    return []
                stmt = stmt.where(ResultRow.benchmark_id == bid)
            return list(conn.execute(stmt).all())

    def _dt(self, column: Any) -> Any:
        """A DateTime column for bulk reads: on SQLite the stored text, parsed by `_parse_dt`
        (datetime.fromisoformat is ~10x cheaper than SQLAlchemy's regex-based SQLite processor,
        which was a third of a series read)."""
        return type_coerce(column, String) if self.dialect == "sqlite" else column

    def _bench_map(self, ids: Iterable[int]) -> dict[int, Benchmark]:
        """Benchmarks by id; cached, since a series' identity never changes once stored."""
        if not set(ids) <= self._bench_by_id.keys():
            with self._read() as conn:
                self._bench_by_id = {r.id: self._bench(r) for r in conn.execute(select(BenchmarkRow)).scalars().all()}
        return self._bench_by_id

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
        rows = self._points(True, benchmark_key, machine, commit_sha)
        if not rows:
            return []
        benches = self._bench_map({r.benchmark_id for r in rows})
        envs: dict[str, tuple[tuple[str, str], ...]] = {}  # one parse per run, not per row
        times: dict[Any, datetime | None] = {}
        out = []
        for bid, samples, started, _status, run_key, run_started, env_text, sha, machine, version in rows:
            env = envs.get(env_text)
            if env is None:
                env = envs[env_text] = tuple(sorted(json.loads(env_text).items()))
            out.append(
                Result(
                    benchmark=benches[bid],
                    commit_sha=sha,
                    machine=machine,
                    samples=parse_samples(samples),
                    run_id=run_key,
                    started_at=_parse_dt(started, times) or _parse_dt(run_started, times),
                    environment=env,
                    benchmark_version=version,
                )
            )
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
        rows = self._points(False, benchmark_key, machine, commit_sha)
        benches = self._bench_map({r.benchmark_id for r in rows}) if rows else {}
        return [FailedPoint(benches[r.benchmark_id], r.sha, r.machine, r.status, r.run_key) for r in rows]

    def verdicts(self, *, head_sha: str | None = None) -> list[Verdict]:
        """Stored verdicts, oldest first; with `head_sha`, only that head's.

        Args:
            head_sha: a full commit sha.

        Returns:
            Verdict records (NaN where a number was not computed).
        """
        stmt = select(VerdictRow, BenchmarkRow).join(BenchmarkRow, VerdictRow.benchmark_id == BenchmarkRow.id)
        if head_sha is not None:
            stmt = stmt.where(VerdictRow.head_sha == head_sha)
        stmt = stmt.order_by(VerdictRow.created_at, VerdictRow.id)
        with self._read() as conn:
            rows = conn.execute(stmt).all()
        return [
            Verdict(
                benchmark=self._bench(b),
                outcome=Outcome(v.outcome),
                base_value=none_to_nan(v.base_value),
                head_value=none_to_nan(v.head_value),
                ratio=none_to_nan(v.ratio),
                ci_low=none_to_nan(v.ci_low),
                ci_high=none_to_nan(v.ci_high),
                p_value=none_to_nan(v.p_value),
                threshold=none_to_nan(v.threshold),
                base_sha=v.base_sha,
                head_sha=v.head_sha,
                reason=v.reason,
                machine=v.machine,
            )
            for v, b in rows
        ]

    def acknowledgements(self) -> list[Acknowledgement]:
        """Every acknowledgement, oldest first."""
        stmt = select(AcknowledgementRow).order_by(AcknowledgementRow.when, AcknowledgementRow.id)
        with self._read() as conn:
            rows = conn.execute(stmt).scalars().all()
        return [Acknowledgement(r.benchmark_key, r.commit_sha, r.who, r.why, utc(r.when)) for r in rows]

    def run_digests(self) -> dict[str, str]:
        """sha256 of every ingested result file -> its commit sha (lets ingest skip known files unparsed)."""
        stmt = select(RunRow.digest, CommitRow.sha).join(CommitRow, RunRow.commit_id == CommitRow.id)
        with self.engine.connect() as conn, conn.begin():
            return {digest: sha for digest, sha in conn.execute(stmt)}

    def run_index(self) -> dict[str, tuple[str, str]]:
        """sha256 of every ingested result file -> (its commit sha, its run key "machine/commit/env"):
        ingest tells, without parsing a known file, which commit and run it holds."""
        stmt = select(RunRow.digest, CommitRow.sha, RunRow.run_key).join(CommitRow, RunRow.commit_id == CommitRow.id)
        with self.engine.connect() as conn, conn.begin():
            return {digest: (sha, run_key) for digest, sha, run_key in conn.execute(stmt)}

    def counts(self) -> dict[str, int]:
        """Row counts per table (ingest summaries and tests)."""
        tables = {
            "machines": MachineRow,
            "commits": CommitRow,
            "benchmarks": BenchmarkRow,
            "runs": RunRow,
            "results": ResultRow,
            "verdicts": VerdictRow,
            "acknowledgements": AcknowledgementRow,
        }
        with self._read() as conn:
            return {name: conn.execute(select(func.count()).select_from(m)).scalar_one() for name, m in tables.items()}
