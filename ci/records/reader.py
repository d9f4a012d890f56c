"""What the readers of the store rely on: `StoreReader` (the verdict code, the PR comment and the
dashboard) and `HistoryStore` (the history detector: series as columns, its cached states); and the
narrower reads of single callers: `ComparisonSource` (an A/B comparison: results and the points
that did not run, `PointFailure`), `RunWindowSource` (a window of one machine's runs as columns, what
the cross-job noise model reads), `ProjectSource` and `ProjectKeeper` (the project's asv.conf.json a
store keeps).
"""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from ci.records.decisions import Acknowledgement, Verdict
from ci.records.provenance import Commit, Machine, Project
from ci.records.series import Benchmark, Result


@runtime_checkable
class ResultSource(Protocol):
    """The series of a store, which is all `ci.verdicts.detect_all` reads: its machines, commits,
    benchmarks and results (a `StoreReader` is one)."""

    def machines(self) -> list[Machine]: ...

    def commits(self, branch: str | None = None) -> list[Commit]:
        """Commits in history order (oldest first: git's topology, `Commit.position`, and commit time
        only for commits without one); with `branch`, only that branch's."""
        ...

    def benchmarks(self) -> list[Benchmark]: ...

    def results(
        self,
        *,
        benchmark_key: str | None = None,
        machine: str | None = None,
        commit_sha: str | None = None,
    ) -> list[Result]:
        """Results filtered by any combination of series key, machine and commit, in commit
        history order (oldest first)."""
        ...


@runtime_checkable
class StoreReader(ResultSource, Protocol):
    """What the verdict code, the PR comment and the dashboard read from the store.

    Implemented by `ci.store.StoreReads`, the store's read side (so by `ci.store.Store`); tests and
    tools may implement it in memory (`tools.fixtures.MemoryStore`).
    """

    def verdicts(self, *, head_sha: str | None = None) -> list[Verdict]: ...

    def acknowledgements(self) -> list[Acknowledgement]: ...

    def project(self) -> Project | None:
        """What the project's asv.conf.json said at the last ingest that found one; None: nothing known."""
        ...


class PointFailure(Protocol):
    """A benchmark point asv recorded as failed (null) or skipped (NaN), never a value, as a store's
    `failures` returns it (`ci.store.FailedPoint`; read-only fields)."""

    @property
    def benchmark(self) -> Benchmark: ...

    @property
    def commit_sha(self) -> str: ...

    @property
    def machine(self) -> str: ...

    @property
    def status(self) -> str:
        """Either "failed" or "skipped"."""
        ...

    @property
    def run_id(self) -> str: ...


class ComparisonSource(Protocol):
    """What an A/B comparison reads of a store (`ci.verdicts.compare_commits`, `pick_machines`,
    `machine_keys`, `results_with_crashes`): its machines, and every point of a commit, measured
    (`results`) or not run (`failures`).

    Implemented by `ci.store.StoreReads` (so by `ci.store.Store`); a reader may serve one machine's
    points from memory (`tools.eval_history.pairs.MachineReader`).
    """

    def machines(self) -> list[Machine]: ...

    def results(
        self,
        *,
        benchmark_key: str | None = None,
        machine: str | None = None,
        commit_sha: str | None = None,
    ) -> list[Result]:
        """As `ResultSource.results`: filtered by series key, machine and commit, history order."""
        ...

    def failures(
        self,
        *,
        benchmark_key: str | None = None,
        machine: str | None = None,
        commit_sha: str | None = None,
    ) -> Sequence[PointFailure]:
        """The points asv recorded as failed or skipped, same filters and order as `results`."""
        ...


class ProjectSource(Protocol):
    """Where the project's settings come from when no asv.conf.json is given: the one a store kept
    (`ci.project.project_settings`; every `StoreReader` is one)."""

    def project(self) -> Project | None:
        """As `StoreReader.project`: the asv.conf.json the last ingest kept; None: nothing known."""
        ...


class ProjectKeeper(ProjectSource, Protocol):
    """A store that keeps the project's asv.conf.json (`ci.project.record_project`): reads it and
    replaces it (`ci.store.Store`)."""

    def save_project(self, project: Project) -> None:
        """Keep `project` as the store's, replacing the one kept before."""
        ...


@dataclass(frozen=True)
class SeriesColumns:
    """One series (a benchmark on one machine) as columns, its results in history order: what the
    history detector reads instead of one `Result` record per measurement.

    Attributes:
        benchmark: the series' identity.
        machine: where it was measured.
        commit_shas: per result, its commit (results of one commit are adjacent).
        runs: per result, the index of its run in the machine's `MachineHistory.runs`.
        counts: per result, how many samples it has in `samples`.
        samples: every result's samples, concatenated in result order (float64, native byte order).
        versions: per result, asv's benchmark version (None: unknown).
        spreads: per result, three float64s: the quartiles asv recorded of a point it kept one value
            of (`stats_q_25`, `stats_q_75`) and how many samples they summarise (`stats_repeat`), NaN
            where asv recorded none or the point has raw samples; empty when no result has them, and
            in a window of runs (`runs_before`: the noise model's read). What the dashboard shows as a
            run's spread where the store holds one sample.
    """

    benchmark: Benchmark
    machine: str
    commit_shas: tuple[str, ...]
    runs: tuple[int, ...]
    counts: tuple[int, ...]
    samples: array
    versions: tuple[str | None, ...]
    spreads: array = field(default_factory=lambda: array("d"))


@dataclass(frozen=True)
class MachineHistory:
    """One machine's runs in history order, and its series as columns.

    Attributes:
        machine: the machine's name.
        runs: (run key, result file digest) of every run of this machine, history order; a series'
            results come from these runs.
        series: the series, by benchmark key; with `runs_after` / `runs_before`, only results of
            the runs in that window.
    """

    machine: str
    runs: tuple[tuple[str, str], ...]
    series: tuple[SeriesColumns, ...]


def run_chain(runs: Sequence[tuple[str, str]]) -> list[str]:
    """chain[k]: a digest of the first k runs (run key and result file digest, in history order),
    what a cache of a machine's history checks its runs against (the history detector's kept states,
    ingest's kept job shifts). chain[0] is ""."""
    out = [""]
    h = hashlib.sha256()
    for key, digest in runs:
        h.update(f"{key}\0{digest}\n".encode())
        out.append(h.copy().hexdigest())
    return out


class ColumnSource(Protocol):
    """A source that serves series as columns (`ci.store.Store`)."""

    def series_columns(
        self,
        *,
        machine: str | None = None,
        branch: str | None = None,
        runs_after: dict[str, int] | None = None,
        runs_before: dict[str, int] | None = None,
    ) -> list[MachineHistory]:
        """Every series as columns, per machine; `runs_after` {machine: k} leaves out the results of
        that machine's first k runs (in history order), `runs_before` {machine: k} those of its runs
        from the k-th on (together: only the runs between them)."""
        ...


@runtime_checkable
class HistoryStore(StoreReader, ColumnSource, Protocol):
    """A `StoreReader` that also serves series as columns and keeps the history detector's cached
    states (`ci.store.Store`); `ci.verdicts.history.detect_all` uses them when its source has them."""

    def change_point_states(self, branch: str, settings: str) -> dict[tuple[str, str], tuple[int, str, bytes]]:
        """(benchmark key, machine) -> (runs covered, their digest chain, state bytes)."""
        ...

    def save_change_point_states(
        self, branch: str, settings: str, states: dict[tuple[str, str], tuple[int, str, bytes]]
    ) -> None:
        """Store states as `change_point_states` returns them, replacing older ones."""
        ...


@runtime_checkable
class RunWindowSource(ColumnSource, Protocol):
    """A source that serves a window of one machine's runs as columns (`ci.store.Store`): what the
    cross-job noise model reads (`ci.verdicts.inputs.noise_history`), a bounded part of a history of
    any length, instead of one `Result` record per point of all of it."""

    def run_commits(self, machine: str) -> list[str]:
        """The commit of each of `machine`'s runs, in history order (the order of `MachineHistory.runs`)."""
        ...
