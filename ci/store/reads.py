"""The store's read side: `StoreReads` implements `ci.records.StoreReader` (what the verdict code,
the PR comment and the dashboard read) over an engine, plus the reads that only the service's own
commands need (failed points, commit prefixes, ingest's digests, row counts).

`StoreReads` is `SeriesReads` (`ci.store.series_reads`: results as records and as columns, over
`ci.store.read_session.ReadSession`: the connections and snapshots) plus the reads of the small
tables here: commits, machines, series, settings, verdicts, acknowledgements, alerts, run
replacements, the detector's cached states, ingest's run index and row counts. The dashboard
imports the read side from this module (`paused_gc` too).
"""

from __future__ import annotations

import json

from sqlalchemy import func, or_, select

from ci.records import (
    Acknowledgement,
    Alert,
    AlertKind,
    AlertState,
    Benchmark,
    Commit,
    Direction,
    Machine,
    Outcome,
    Project,
    RunReplacement,
    Verdict,
)
from ci.store.codec import none_to_nan, utc
from ci.store.engine import StoreError
from ci.store.models import (
    AcknowledgementRow,
    AlertRow,
    BenchmarkRow,
    CommitRow,
    MachineRow,
    ResultBlockRow,
    ResultRow,
    RunReplacementRow,
    RunRow,
    SettingRow,
    VerdictRow,
)
from ci.store.read_session import HISTORY_ORDER, MEMO_MAX, fetch_rows, paused_gc
from ci.store.series_reads import FailedPoint, SeriesReads

__all__ = ["HISTORY_ORDER", "PROJECT_SETTING", "SERIES_DEFINITIONS_SETTING", "FailedPoint", "StoreReads", "paused_gc"]

# The setting that holds the project's asv.conf.json fields (`ci.records.Project.as_asv_conf`).
PROJECT_SETTING = "asv_conf"
# The names `ci.store.upserts.UpsertWrites.retire_benchmark` gave series of an earlier definition, each
# -> its benchmark's asv name (a JSON object); what a render keeps of series identities is read again
# when it changes.
SERIES_DEFINITIONS_SETTING = "series_definitions"


class StoreReads(SeriesReads):
    """Reads of a results history through `engine` (any SQLAlchemy engine holding the store's schema).

    Args:
        engine: from `ci.store.engine.make_engine`.
        read_only: the engine cannot write (`make_engine(..., read_only=True)`).
    """

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
            # In any case: a result file may name its commit in capitals (asv writes lower case), and the
            # store keeps a sha as its file wrote it. SQLite's LIKE ignores ASCII case, PostgreSQL's does
            # not: there such a commit was found by no spelling (2026-12-05).
            found = conn.execute(
                select(CommitRow.sha).where(func.lower(CommitRow.sha).startswith(prefix, autoescape=True))
            ).scalars()
            shas = list(found.all())
        if not shas:
            raise ValueError(f"commit {sha_or_prefix!r} is not in the store")
        if prefix in shas:
            return prefix
        exact = [s for s in shas if s.lower() == prefix]
        if len(exact) == 1:
            return exact[0]
        if len(shas) > 1:
            raise ValueError(f"commit prefix {sha_or_prefix!r} is ambiguous: {', '.join(sorted(shas)[:5])}")
        return shas[0]

    def machines(self) -> list[Machine]:
        """Every machine (asv machine name x environment x host, `ci.records.Machine`), by key."""
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
                asv_name=r.asv_name,
                env_name=r.env_name,
                host=tuple(sorted((str(k), str(v)) for k, v in json.loads(r.host or "{}").items())),
            )
            for r in rows
        ]

    def setting(self, key: str) -> str | None:
        """A stored setting's value (`ci.store.models.SettingRow`), None where there is none."""
        with self._read() as conn:
            return conn.execute(select(SettingRow.value).where(SettingRow.key == key)).scalar()

    def declared_keys(self) -> set[str]:
        """The keys of the series whose own benchmark declares a direction (its type, unit or `direction`
        attribute), as stored: the project's `regressions_directions` never decide for them."""
        with self._read() as conn:
            return set(conn.execute(select(BenchmarkRow.key).where(BenchmarkRow.direction != str(Direction.UNKNOWN)))
                       .scalars())

    def series_definitions(self) -> str:
        """Text that changes whenever stored series are renamed (`retire_benchmark`); "" before any."""
        return self.setting(SERIES_DEFINITIONS_SETTING) or ""

    def _stored_project(self) -> Project | None:
        try:
            return self.project()
        except StoreError:  # damaged: no directions here; the commands that read the project say so
            return None

    def project(self) -> Project | None:
        """What the project's asv.conf.json said at the last ingest that found one (`save_project`),
        None where no ingest found one.

        Raises:
            StoreError: the stored value is not what `save_project` writes.
        """
        text = self.setting(PROJECT_SETTING)
        if text is None:
            return None
        try:
            conf = json.loads(text)
            return Project.from_asv_conf(conf, source=str(conf.get("source", "")))
        except (ValueError, AttributeError) as exc:
            raise StoreError(f"the store's setting {PROJECT_SETTING!r} is damaged ({exc}): ingest with --config "
                             "to write it again") from None


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
                sha=r.sha, parents=tuple(json.loads(r.parents)), branch=r.branch, time=utc(r.time), subject=r.subject,
                position=r.position,
            )
            for r in rows
        ]


    def benchmarks(self) -> list[Benchmark]:
        """Every series (benchmark name x parameter point), by key."""
        with self._read() as conn:
            rows = conn.execute(select(BenchmarkRow).order_by(BenchmarkRow.key)).scalars().all()
        return [self._bench(r) for r in rows]


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

    def alerts(self, *, state: AlertState | str | None = None) -> list[Alert]:
        """The history's alerts (`ci.records.Alert`), oldest first; with `state`, only those in it.

        Args:
            state: e.g. `AlertState.DETECTED`: the alerts no job has reported yet.

        Returns:
            Alert records, their times set by the store.
        """
        stmt = select(AlertRow, BenchmarkRow).join(BenchmarkRow, AlertRow.benchmark_id == BenchmarkRow.id)
        if state is not None:
            stmt = stmt.where(AlertRow.state == str(AlertState(state)))
        stmt = stmt.order_by(AlertRow.detected_at, AlertRow.id)
        with self._read() as conn:
            rows = conn.execute(stmt).all()
        return [
            Alert(AlertKind(a.kind), self._bench(b), a.machine, a.commit_sha, AlertState(a.state), a.previous_sha,
                  none_to_nan(a.ratio), none_to_nan(a.p_value), a.reason, utc(a.detected_at), utc(a.reported_at),
                  utc(a.acknowledged_at))
            for a, b in rows
        ]  # fmt: skip

    def replacements(self, run_key: str | None = None) -> list[RunReplacement]:
        """Every stored run replaced by another file's run (`ci.records.RunReplacement`), oldest first;
        with `run_key`, only that run's."""
        stmt = select(RunReplacementRow).order_by(RunReplacementRow.replaced_at, RunReplacementRow.id)
        if run_key is not None:
            stmt = stmt.where(RunReplacementRow.run_key == run_key)
        with self._read() as conn:
            rows = conn.execute(stmt).scalars().all()
        return [RunReplacement(r.run_key, r.old_source, r.new_source, r.old_digest, r.new_digest, r.forced,
                               utc(r.replaced_at)) for r in rows]  # fmt: skip

    def run_digests(self) -> dict[str, str]:
        """sha256 of every ingested result file -> its commit sha (lets ingest skip known files unparsed)."""
        stmt = select(RunRow.digest, CommitRow.sha).join(CommitRow, RunRow.commit_id == CommitRow.id)
        with self._connection() as conn:
            return {digest: sha for digest, sha in conn.execute(stmt)}

    def change_point_states(self, branch: str, settings: str) -> dict[tuple[str, str], tuple[int, str, bytes]]:
        """The history detector's cached states (`ci.verdicts.history`) for one branch and settings.

        Args:
            branch: the branch the states were computed on ("" for every commit).
            settings: the detector's settings fingerprint.

        Returns:
            (benchmark key, machine) -> (runs covered, their digest chain, state bytes).
        """
        # Plain DBAPI rows (binary on psycopg): through Core's Row objects and bytea's text form this
        # read of 500 states was 0.35 s of the 0.9 s a new commit's change points took on PostgreSQL
        # (cProfile, 2026-12-02).
        sql = (
            "SELECT benchmarks.key, machines.name, change_point_states.runs, change_point_states.runs_digest, "
            "change_point_states.state FROM change_point_states "
            "JOIN benchmarks ON change_point_states.benchmark_id = benchmarks.id "
            "JOIN machines ON change_point_states.machine_id = machines.id "
            "WHERE change_point_states.branch = ? AND change_point_states.settings = ?"
        )
        with self._connection() as conn:
            rows = fetch_rows(conn, sql, [branch, settings])
        return {(key, m): (runs, digest, bytes(state)) for key, m, runs, digest, state in rows}

    def run_environments(self) -> dict[str, tuple[tuple[str, str], ...]]:
        """Every run's environment, by run key, as `results` gives it (`Result.environment`): the
        dashboard reads results as columns (`series_columns`), which leave the environment out."""
        with self._connection() as conn:
            rows = conn.execute(select(RunRow.run_key, RunRow.environment)).all()
        envs = self._envs
        if len(envs) > MEMO_MAX:
            envs.clear()
        out = {}
        for run_key, env_json in rows:
            env = envs.get(env_json)
            if env is None:
                env = envs[env_json] = tuple(sorted(json.loads(env_json).items()))
            out[run_key] = env
        return out

    def run_index(self) -> dict[str, tuple[str, str]]:
        """sha256 of every ingested result file -> (its commit sha, its run key "machine/commit/env"):
        ingest tells, without parsing a known file, which commit and run it holds."""
        stmt = select(RunRow.digest, CommitRow.sha, RunRow.run_key).join(CommitRow, RunRow.commit_id == CommitRow.id)
        with self._connection() as conn:
            return {digest: (sha, run_key) for digest, sha, run_key in conn.execute(stmt)}

    def run_skips(self) -> dict[str, list[tuple[str, str | None]] | None]:
        """sha256 of every ingested result file whose parse skipped benchmarks -> their (name, the file's
        version) pairs; None for a file ingested before that was recorded (2026-12-06)."""
        stmt = select(RunRow.digest, RunRow.skipped).where(or_(RunRow.skipped.is_(None), RunRow.skipped != "[]"))
        with self._connection() as conn:
            return {digest: None if skipped is None else [(n, v) for n, v in json.loads(skipped)]
                    for digest, skipped in conn.execute(stmt)}

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
            out = {name: conn.execute(select(func.count()).select_from(m)).scalar_one() for name, m in tables.items()}
            # "results" counts points: a block row holds several
            out["results"] += conn.execute(select(func.coalesce(func.sum(ResultBlockRow.points), 0))).scalar_one()
        return out
