"""Ingest's records: one asv result file as parsed (`ParsedRun`, its points one by one and a grid's
points as columns) and a stored run replaced by another file's (`RunReplacement`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from ci.records.series import STAT_NAMES, Benchmark


@dataclass(frozen=True)
class RunReplacement:
    """A stored run (one asv result file: machine x commit x environment) replaced by another file's.

    asv rewriting its own file in place (`--append-samples`, a re-run) replaces the run from the same
    source; a file of another results folder replaces it only when the user says so (`ci ingest
    --replace`: `forced`). The store keeps a record of each.
    """

    run_key: str
    old_source: str  # the file the replaced run was ingested from
    new_source: str  # the file that replaced it
    old_digest: str  # their sha256
    new_digest: str
    forced: bool  # from another source, by `--replace`
    when: datetime


@dataclass(frozen=True)
class ParsedPoint:
    """One point of a benchmark's parameter grid in one run."""

    benchmark: Benchmark
    status: str  # "ok", "failed" (asv null) or "skipped" (asv NaN)
    samples: tuple[float, ...]  # raw samples; (value,) when asv ran without --record-samples
    has_raw_samples: bool
    value: float | None  # asv's reported value (the median); None unless status == "ok"
    stats: dict[str, float]  # ci_99_a, ci_99_b, q_25, q_75, number, repeat when asv recorded them
    benchmark_version: str | None
    started_at: datetime | None
    duration: float | None
    key: str = ""  # benchmark.key, computed once per grid instead of once per point

    def __post_init__(self) -> None:
        if not self.key:
            object.__setattr__(self, "key", self.benchmark.key)


@dataclass(frozen=True)
class PointBlock:
    """The points of one benchmark's parameter grid in one run, kept as columns: what the parse
    gives for the common case (every point "ok" and checked column by column), instead of one
    `ParsedPoint` each (2026-12-02: the per-point records and stats dicts were a third of the parse).
    `ParsedRun.all_points()` turns a block into the `ParsedPoint`s it stands for."""

    benches: tuple[tuple[Benchmark, str], ...]  # per point: its series and the series' key
    values: Sequence[float]  # asv's reported value (the median) per point
    samples: Sequence[Sequence[float]]  # per point its raw samples; (value,) when asv recorded none
    has_raw_samples: bool
    stats: tuple[Sequence[float | None], ...]  # per `STAT_NAMES` column, a value (None: not recorded) per point
    benchmark_version: str | None
    started_at: datetime | None
    duration: float | None
    # The store's column values of this block (`ci.store.codec.pack_block`) when they were made
    # already (by ingest's forked parser, `ci.ingest.reading`): the same as packing the fields.
    packed: tuple[bytes, bytes, bytes, bytes] | None = field(default=None, compare=False, repr=False)

    def __len__(self) -> int:
        return len(self.benches)

    def points(self) -> list[ParsedPoint]:
        """The block as `ParsedPoint`s, in grid order."""
        rows = zip(*self.stats, strict=True)
        return [
            ParsedPoint(bench, "ok", tuple(samples), self.has_raw_samples, value,
                        {s: x for s, x in zip(STAT_NAMES, row, strict=True) if x is not None},
                        self.benchmark_version, self.started_at, self.duration, key)
            for (bench, key), value, samples, row in zip(self.benches, self.values, self.samples, rows, strict=True)
        ]  # fmt: skip


@dataclass(frozen=True)
class ParsedRun:
    """One asv result file: a run of the suite on one commit, machine and environment."""

    path: Path
    run_key: str  # "<machine>/<commit_hash>/<env_name>": asv overwrites the same file for the same key
    digest: str  # sha256 of the file bytes: re-ingesting identical bytes is a no-op
    machine: str
    commit_hash: str
    commit_time: datetime | None  # asv's "date": the commit's time, not the run's
    env_name: str
    started_at: datetime | None  # earliest benchmark start in the file
    environment: tuple[tuple[str, str], ...]
    points: tuple[ParsedPoint, ...]
    skipped_unknown: tuple[str, ...]  # benchmark names absent from benchmarks.json (asv ignores them too)
    skipped_stale: tuple[str, ...]  # results whose benchmark version differs from benchmarks.json
    # The run's other points, a benchmark's grid per block (`PointBlock`): `points` holds only those
    # the parse checked one by one (failed or skipped points, ints, a missing statistic, ...).
    blocks: tuple[PointBlock, ...] = ()
    # asv's machine fields recorded in the file itself (`params`: arch, cpu, num_cpu, os, ram), which
    # describe the host at the time of the run (machine.json holds the latest `asv machine`'s).
    host_info: tuple[tuple[str, str], ...] = ()
    # Benchmarks left out because the store cannot hold one of their series (`ci.store.limits.storable`).
    skipped_unstorable: tuple[str, ...] = ()
    # (name, the file's version of it) of `skipped_unknown` and `skipped_stale`: what a later ingest checks
    # against benchmarks.json to read the file again (`ci.store.models.RunRow.skipped`).
    skipped_versions: tuple[tuple[str, str | None], ...] = ()

    @property
    def n_points(self) -> int:
        """How many points the run holds, in `points` and `blocks` together."""
        return len(self.points) + sum(map(len, self.blocks))

    def all_points(self) -> list[ParsedPoint]:
        """Every point of the run as a `ParsedPoint`: the blocks' (in file order), then `points`."""
        out = [p for block in self.blocks for p in block.points()]
        out.extend(self.points)
        return out
