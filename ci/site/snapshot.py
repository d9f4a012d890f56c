"""What the dashboard shows, read once from a `StoreReader` into plain records.

One pass over the store (its columnar read, `series_columns`, when it has one) builds every series
(a benchmark on one machine: numbers from different GPUs are never mixed in one line), the
regressions (stored verdicts plus detected change points), the suspected regressions of the newest
commits (`ci.verdicts.suspects`), each series' noise threshold per commit (a change is coloured only
past it) and the acknowledgements. Pages are rendered from this snapshot only, so the store is
queried a fixed number of times however many pages there are.

`load_snapshot` and `Snapshot` live here with the one builder of the series (`_columns_built`), fed
by the store's columnar read (`_from_columns`, with the `ColumnsCache` kept between renders) or, for
a store without one, by its results read as the same columns (`ci.site.columns`); the series are
judged by `ci.site.judge` and `ci.site.model` re-exports the public names.
"""

from __future__ import annotations

import io
import itertools
import json
import math
import statistics
import zipfile
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ci.records import (
    RECORDED_ROUNDING,
    Acknowledgement,
    Benchmark,
    Commit,
    Direction,
    HistoryStore,
    Kind,
    Machine,
    MachineHistory,
    Outcome,
    Result,
    SeriesColumns,
    StoreReader,
    Verdict,
    current_versions,
    is_worse_step,
    machine_labels,
)
from ci.site.columns import Env, result_columns
from ci.site.judge import add_history_verdicts
from ci.site.series import RECENT_COMMITS, NotReporting, Regression, Series, verdict_machines
from ci.site.stats import median_iqr_all, median_iqr_columns
from ci.verdicts import (
    AlertGroup,
    ChangePoint,
    Suspect,
    SuspectState,
    SuspectTrack,
    detect_all,
    expire_quiet,
    gate_of,
    gate_value,
)
from ci.verdicts.groups import MIN_GROUP

# A verdict's regression is fixed once two commits in a row are back within this share of its step.
RETURNED = 0.25


@dataclass
class Snapshot:
    """Everything the pages need, read from the store in a fixed number of queries."""

    machines: list[Machine]
    commits: list[Commit]
    position: dict[str, int]
    series: list[Series]
    verdicts_by_sha: dict[str, list[Verdict]]
    regressions: list[Regression]
    acks: dict[tuple[str, str], Acknowledgement]
    environments: dict[str, dict[tuple[str, str], tuple[tuple[str, str], ...]]]  # sha -> (machine, run) -> env
    baseline_sha: str | None
    # sha -> points asv recorded as failed or skipped: (benchmark, machine, status). Read from
    # `store.failures()` when the store has it (ci.store.Store does; it is not in StoreReader).
    failures_by_sha: dict[str, list[tuple[Benchmark, str, str]]] = field(default_factory=dict)
    # The store's columns as this snapshot read them, for the next render (`ColumnsCache`); None for
    # a store without columns.
    columns: ColumnsCache | None = field(default=None, repr=False, compare=False)
    # Each series' suspicion test as this snapshot left it (`ci.verdicts.SuspectTrack`, by
    # `track_name`), for the next render.
    tracks: dict[str, SuspectTrack] = field(default_factory=dict, repr=False, compare=False)
    # The crowds of change points: many series stepping at one commit of a machine, one alert each
    # (`ci.verdicts.group_changes`), newest first.
    groups: list[AlertGroup] = field(default_factory=list)
    # Machines that stopped measuring while the others went on (`quiet_machines`): machine -> (its last
    # measured commit, how many newer commits the others measured).
    quiet: dict[str, tuple[str, int]] = field(default_factory=dict)

    def recent(self, sha: str) -> bool:
        """Whether `sha` is among the RECENT_COMMITS newest commits."""
        return self.position.get(sha, -1) >= len(self.commits) - RECENT_COMMITS

    @property
    def open_suspects(self) -> list[Suspect]:
        """Suspected regressions not (yet) covered by an open regression of the same series and
        commit, newest first: what the overview's banner counts beside the regressions."""
        covered = {(r.benchmark.key, m, r.sha) for r in self.regressions if r.is_open for m in r.machines}
        out = [x for s in self.series for x in s.suspects if x.state == SuspectState.SUSPECTED
               and (x.benchmark.key, x.machine, x.commit_sha) not in covered]
        return sorted(out, key=lambda x: (-self.position[x.commit_sha], x.benchmark.key, x.machine))

    def suspect_crowds(self) -> list[list[Suspect]]:
        """The open suspicions (`open_suspects`) of one machine at one commit where there are at least
        `MIN_GROUP` of them: one alert each, as a crowd of change points is (`AlertGroup`), biggest
        change first; newest commit first."""
        at: dict[tuple[str, str], list[Suspect]] = defaultdict(list)
        for x in self.open_suspects:
            at[(x.machine, x.commit_sha)].append(x)
        crowds = [sorted(xs, key=lambda x: -abs(math.log(x.ratio)) if x.ratio > 0 else math.inf)  # no ratio: last
                  for xs in at.values() if len(xs) >= MIN_GROUP]
        return sorted(crowds, key=lambda xs: (-self.position[xs[0].commit_sha], xs[0].machine))

    def not_reporting(self) -> tuple[list[NotReporting], list[NotReporting]]:
        """Series a reader must not take for fine: those failing at their machine's newest measured
        commit ("failing since" the first of that streak of failures; a correctness check skipped
        where it ran before counts: a check that did not run is not a pass), and those that stopped
        reporting (no result and no failure at the machine's two newest measured commits: "no
        results since" their last result). Newest first.

        Returns:
            (failing, stopped).
        """
        pos = self.position
        runs: dict[str, set[str]] = defaultdict(set)  # machine -> the commits it measured
        for sha, envs in self.environments.items():
            for machine, _ in envs:
                runs[machine].add(sha)
        failed_at: dict[tuple[str, str], set[str]] = defaultdict(set)  # (series key, machine) -> commits
        benches: dict[str, Benchmark] = {}
        has_results = {(s.benchmark.key, s.machine) for s in self.series if len(s)}
        for sha, fails in self.failures_by_sha.items():
            for bench, machine, status in fails:
                runs[machine].add(sha)
                if status == "failed" or (bench.kind == Kind.CORRECTNESS and (bench.key, machine) in has_results):
                    failed_at[(bench.key, machine)].add(sha)
                    benches[bench.key] = bench
        order = {m: sorted(shas, key=pos.__getitem__) for m, shas in runs.items() if shas}
        failing = []
        for (key, machine), shas in failed_at.items():
            seq = order[machine]
            if seq[-1] not in shas:
                continue
            k = len(seq) - 1
            while k > 0 and seq[k - 1] in shas:
                k -= 1
            failing.append(NotReporting(benches[key], machine, seq[k], seq[-1]))
        stopped = []
        for s in self.series:
            seq = order.get(s.machine, [])
            if not len(s) or len(seq) < 3 or (s.benchmark.key, s.machine) in failed_at:
                continue
            last = s.shas[-1]
            if pos[last] < pos[seq[-2]]:
                stopped.append(NotReporting(s.benchmark, s.machine, last, seq[-1]))
        def newest_first(x: NotReporting) -> tuple[int, str, str]:
            return -pos[x.since], x.benchmark.key, x.machine

        return sorted(failing, key=newest_first), sorted(stopped, key=newest_first)

    def resolved_suspects(self, *, recent_only: bool) -> list[Suspect]:
        """Suspicions confirmed or withdrawn, newest first; `recent_only`: resolved by one of the
        RECENT_COMMITS newest commits."""
        out = [x for s in self.series for x in s.suspects if x.state != SuspectState.SUSPECTED
               and (not recent_only or self.recent(x.resolved_sha))]
        return sorted(out, key=lambda x: (-self.position[x.commit_sha], x.benchmark.key, x.machine))


def resolve_sha(commits: list[Commit], sha: str) -> str:
    """The full sha of the one commit that `sha` names (a full sha or a unique prefix).

    Args:
        commits: the history.
        sha: a full sha or a prefix.

    Returns:
        The full sha.

    Raises:
        ValueError: when no commit or several commits match.
    """
    if not isinstance(sha, str) or not sha:
        raise ValueError(f"baseline commit must be a non-empty sha string, got {sha!r}")
    matches = [c.sha for c in commits if c.sha == sha] or [c.sha for c in commits if c.sha.startswith(sha)]
    if not matches:
        raise ValueError(f"baseline commit {sha!r} is not in the store's history")
    if len(set(matches)) > 1:
        raise ValueError(f"baseline commit {sha!r} is ambiguous: matches {', '.join(sorted(set(matches))[:5])}")
    return matches[0]


# (series by key, raw results by key, environments by commit and (machine, run key))
_Built = tuple[dict[tuple[str, str], Series], dict[tuple[str, str], list[Result]],
               dict[str, dict[tuple[str, str], Env]]]


class _Stale(Exception):
    """The kept columns (`ColumnsCache`) cannot give this snapshot: read the store in full."""


@dataclass
class _Stats:
    """One series' every result (before the version and branch filters) as columns: its run (index
    into the machine's runs), version, value (the median, or the worst sample for a gated series),
    quartiles and sample count; `col` holds the samples when they were read now in full (a series
    with several runs of one commit pools them, `commit_levels`)."""

    benchmark: Benchmark
    runs: np.ndarray  # int64
    versions: list[str | None]
    values: np.ndarray
    q1: np.ndarray
    q3: np.ndarray
    ns: np.ndarray  # int64
    col: SeriesColumns | None

    def __post_init__(self) -> None:
        self.runs, self.ns = np.asarray(self.runs, dtype=np.int64), np.asarray(self.ns, dtype=np.int64)
        self.values, self.q1, self.q3 = (np.asarray(a, dtype=float) for a in (self.values, self.q1, self.q3))


@dataclass
class ColumnsCache:
    """What a render keeps of the store's columns for the next one: per machine its runs in history
    order as (run key, result file digest) and each run's commit, per series `_Stats` without the
    samples. The next render reads only the runs after these (`series_columns(runs_after=...)`) when
    the store's runs still begin with exactly these; else it reads everything (`_from_columns`).

    Kept as one file in the output folder's bookkeeping (`to_bytes`/`from_bytes`, numpy's npz with
    no pickles), checked there by a digest in the manifest (`ci.site.writer.PageWriter.blob`).
    32 bytes per result (16 MB at 1,000 commits x 500 series, 2026-12-02); the samples stay in the store.
    """

    runs: dict[str, list[tuple[str, str]]]
    run_shas: dict[str, list[str]]
    series: dict[tuple[str, str], _Stats]
    # The project's `regressions_directions` the series were read with: a series' direction changes with
    # them and no new run (`ci.store.read_session.ReadSession.direction_rules`), so other ones read it all.
    directions: tuple[tuple[str, str], ...] = ()
    # The store's `series_definitions` token: series renamed since (`ci ingest --redefine`) read it all too.
    definitions: str = ""

    def to_bytes(self) -> bytes:
        keys = sorted(self.series)
        stats = [self.series[k] for k in keys]
        meta = {
            "runs": self.runs, "run_shas": self.run_shas, "directions": [list(p) for p in self.directions],
            "definitions": self.definitions,
            "series": [[m, _bench_json(st.benchmark), len(st.runs), _run_lengths(st.versions)]
                       for (_, m), st in zip(keys, stats, strict=True)],
        }

        def cat(name: str, dtype: str) -> np.ndarray:
            return np.concatenate([np.asarray(getattr(st, name), dtype=dtype) for st in stats]) if stats else \
                np.zeros(0, dtype=dtype)

        buf = io.BytesIO()
        np.savez(buf, meta=np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8), runs=cat("runs", "<i4"),
                 ns=cat("ns", "<i4"), values=cat("values", "<f8"), q1=cat("q1", "<f8"), q3=cat("q3", "<f8"))
        return buf.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> ColumnsCache | None:
        """The cache `to_bytes` wrote, None when `data` is not one (a damaged file costs a full read)."""
        try:
            with np.load(io.BytesIO(data), allow_pickle=False) as z:
                meta = json.loads(z["meta"].tobytes())
                arrays = {k: z[k] for k in ("runs", "ns", "values", "q1", "q3")}
            runs = {m: [(str(k), str(d)) for k, d in rs] for m, rs in meta["runs"].items()}
            run_shas = {m: [str(s) for s in ss] for m, ss in meta["run_shas"].items()}
            series: dict[tuple[str, str], _Stats] = {}
            at = 0
            for machine, bench, n, versions in meta["series"]:
                b, end = _bench_of(bench), at + int(n)
                st = _Stats(b, arrays["runs"][at:end], _versions_of(versions), arrays["values"][at:end],
                            arrays["q1"][at:end], arrays["q3"][at:end], arrays["ns"][at:end], None)
                if end > len(arrays["runs"]) or len(st.versions) != len(st.runs):
                    return None
                if st.runs.size and not 0 <= int(st.runs.min()) <= int(st.runs.max()) < len(run_shas[machine]):
                    return None
                series[(b.key, str(machine))] = st
                at = end
            if at != len(arrays["runs"]) or set(run_shas) != set(runs):
                return None
            directions = tuple((str(p), str(d)) for p, d in meta.get("directions", []))
            return cls(runs, run_shas, series, directions, str(meta.get("definitions", "")))
        except (ValueError, KeyError, TypeError, OSError, EOFError, zipfile.BadZipFile):
            return None


def _bench_json(b: Benchmark) -> list[Any]:
    return [b.name, [list(p) for p in b.params], b.unit, b.direction.value, b.kind.value]


def _bench_of(row: list[Any]) -> Benchmark:
    name, params, unit, direction, kind = row
    return Benchmark(str(name), tuple((str(k), str(v)) for k, v in params), str(unit), Direction(direction),
                     Kind(kind))


def _run_lengths(versions: list[str | None]) -> list[list[Any]]:
    return [[v, sum(1 for _ in group)] for v, group in itertools.groupby(versions)]


def _versions_of(lengths: list[list[Any]]) -> list[str | None]:
    out: list[str | None] = []
    for v, n in lengths:  # list repetition: one version per result, 500,000 of them at 500 series
        out += [None if v is None else str(v)] * int(n)
    return out


_Read = tuple[dict[tuple[str, str], "_Stats"], dict[str, list[tuple[str, str]]], dict[str, list[str]]]


@runtime_checkable
class ColumnStore(HistoryStore, Protocol):
    """A store the snapshot reads as columns (`_from_columns`): one that keeps the history detector's
    states (`ci.records.HistoryStore`, i.e. `ci.store.Store`), and its runs' recorded environments."""

    def run_environments(self) -> dict[str, tuple[tuple[str, str], ...]]:
        """Run key -> the environment its run recorded, as (name, value) pairs."""
        ...


def _read_columns(hists: list[MachineHistory], cache: ColumnsCache | None) -> _Read:
    """Every series' `_Stats`, the machines' runs and each run's commit from the histories read (with
    `cache`, those of the runs after its runs, `series_columns(runs_after=...)`): appended to `cache`'s
    when the store's runs begin with the cached ones (`_Stale` when what was read contradicts it)."""
    if cache is not None:
        names = {h.machine for h in hists}
        if not names >= set(cache.runs) or any(list(h.runs[:len(cache.runs.get(h.machine, []))])
                                               != cache.runs.get(h.machine, []) for h in hists):
            raise _Stale
    series = dict(cache.series) if cache else {}
    runs = {h.machine: list(h.runs) for h in hists}
    run_shas = {h.machine: (list(cache.run_shas.get(h.machine, [])) if cache else []) for h in hists}
    for hist in hists:
        shas = run_shas[hist.machine]
        shas.extend([""] * (len(hist.runs) - len(shas)))
        for col in hist.series:
            for run, sha in zip(col.runs, col.commit_shas, strict=True):
                shas[run] = sha
            med, q1, q3, ns, smallest, largest = _column_stats(col, list(range(len(col.counts))))
            bench = col.benchmark
            gate = gate_of(bench)
            if gate is not None:
                med = gate_value(gate, smallest, largest)
            key = (bench.key, hist.machine)
            new = _Stats(bench, np.asarray(col.runs), list(col.versions), np.asarray(med), np.asarray(q1),
                         np.asarray(q3), np.asarray(ns), col)
            old = series.get(key)
            if old is not None and cache is not None:
                if old.benchmark != bench:
                    raise _Stale
                new = _Stats(bench, np.concatenate([old.runs, new.runs]), old.versions + new.versions,
                             np.concatenate([old.values, new.values]), np.concatenate([old.q1, new.q1]),
                             np.concatenate([old.q3, new.q3]), np.concatenate([old.ns, new.ns]), None)
            series[key] = new
    return series, runs, run_shas


def _from_columns(store: ColumnStore, position: dict[str, int], branch: str | None,
                  cache: ColumnsCache | None = None) -> tuple[_Built, ColumnsCache]:
    """The series from the store's columnar read (`series_columns`: a series' samples are one
    float64 array) and its runs' environments, with medians and IQR per series in numpy, without a
    `Result` per result (they were ~10 of the 18 s of a render after one new commit at 1,000
    commits x 500 series, 2026-12-02). The change points come from the store's kept states, so the
    raw results are built only for a series with several runs of one commit (its levels pool them,
    `ci.verdicts.commit_levels`).

    With `cache` (the previous render's `ColumnsCache`), only the runs after it are read from the
    store; the snapshot is the same as from a full read (`tests/dashboard/test_store.py`), and any
    doubt (the store's earlier runs differ, a series needs its samples) falls back to the full read.
    Also returns the cache for the next render."""
    if cache is not None:
        try:
            return _store_built(store, position, branch, cache)
        except _Stale:
            pass
    return _store_built(store, position, branch, None)


def _store_built(store: ColumnStore, position: dict[str, int], branch: str | None,
                 cache: ColumnsCache | None) -> tuple[_Built, ColumnsCache]:
    rules: tuple[tuple[str, str], ...] = getattr(store, "direction_rules", tuple)()
    definitions: str = getattr(store, "series_definitions", str)()
    if cache is not None and (cache.directions != rules or cache.definitions != definitions):
        raise _Stale
    hists = store.series_columns(runs_after={m: len(rs) for m, rs in cache.runs.items()} if cache else None)
    stats, runs, run_shas = _read_columns(hists, cache)
    by_key = store.run_environments()
    envs = {m: [by_key.get(run_key, ()) for run_key, _ in rs] for m, rs in runs.items()}
    built = _columns_built(stats, runs, run_shas, envs, position, branch, every_raw=False)
    kept = ColumnsCache(runs, run_shas, {k: _Stats(st.benchmark, st.runs, st.versions, st.values, st.q1, st.q3, st.ns,
                                                   None) for k, st in stats.items()}, rules, definitions)
    return built, kept


def _from_result_columns(store: StoreReader, position: dict[str, int], branch: str | None) -> _Built:
    """The series of a store without a columnar read: its `results()` as the columns a
    `ci.store.Store` serves (`ci.site.columns.result_columns`), through the same builder; every
    timing series' raw results come too, since its change points are computed from them."""
    cols = result_columns(store)
    stats, runs, run_shas = _read_columns(cols.histories, None)
    return _columns_built(stats, runs, run_shas, cols.environments, position, branch, every_raw=True)


def _columns_built(stats: dict[tuple[str, str], _Stats], runs: dict[str, list[tuple[str, str]]],
                   run_shas: dict[str, list[str]], envs: dict[str, list[Env]], position: dict[str, int],
                   branch: str | None, *, every_raw: bool) -> _Built:
    """(series by key, raw results by key, environments by commit and run) from every series' `_Stats`,
    the machines' runs, each run's commit and environment (`envs`, per machine in run order); the raw
    results of every timing series with `every_raw`, else only of one with several runs of a commit."""
    by_series: dict[tuple[str, str], Series] = {}
    raw: dict[tuple[str, str], list[Result]] = {}
    environments: dict[str, dict[tuple[str, str], Env]] = defaultdict(dict)
    by_machine: dict[str, list[tuple[str, _Stats]]] = defaultdict(list)
    for (key, machine), st in stats.items():
        by_machine[machine].append((key, st))
    # Every branch's results: the current version is that of the series' newest result in the
    # history shown, results on other branches' commits count first.
    for machine in sorted(by_machine):
        shas_of = run_shas[machine]
        pos_of = np.array([position.get(sha, -1) for sha in shas_of], dtype=np.int64)  # per run
        used: list[np.ndarray] = []  # each series' runs shown, for the environments
        for _, st in sorted(by_machine[machine], key=lambda t: t[0]):
            bench = st.benchmark
            at = pos_of[st.runs]
            keep = np.arange(at.size)
            if branch is not None and at.size and at.min() < 0:
                keep = np.argsort(at, kind="stable")
            # `current_version`'s rule: the newest version's results (and unknown ones), in history order
            _, current = current_versions([st.versions[i] for i in keep.tolist()])
            if current is not None:
                keep = np.array([i for i in keep.tolist() if st.versions[i] in current], dtype=np.int64)
            missing = np.flatnonzero(at[keep] < 0)
            if missing.size and branch is None:
                sha = shas_of[int(st.runs[keep[missing[0]]])]
                raise ValueError(f"result for {bench.key!r} on {machine!r} names commit {sha!r}, "
                                 "which the store's commit history does not contain")
            if missing.size:
                keep = keep[at[keep] >= 0]  # a result on another branch's commit
            if not keep.size:
                continue
            runs_kept = st.runs[keep]
            shas = [shas_of[r] for r in runs_kept.tolist()]
            s = by_series[(bench.key, machine)] = Series(bench, machine)
            s.set_runs(at[keep], shas, st.values[keep], st.q1[keep], st.q3[keep], st.ns[keep])
            if bench.kind != Kind.CORRECTNESS and (every_raw or len(set(shas)) != len(shas)):
                if st.col is None:
                    raise _Stale  # its levels pool the samples, which the cache does not hold
                raw[(bench.key, machine)] = _column_results(st.col, keep.tolist(), position)
            used.append(runs_kept)
        # The runs with a result shown, each once, in the order the series first show them.
        for run in dict.fromkeys(np.concatenate(used).tolist() if used else []):
            run_key = runs[machine][run][0]
            environments[shas_of[run]][(machine, run_key)] = envs[machine][run]
    return by_series, raw, environments


def _column_stats(col: SeriesColumns, keep: list[int]) -> tuple[list[float], list[float], list[float], list[int],
                                                                 list[float], list[float]]:
    """`median_iqr` of the results `keep` of a series read as columns, as six columns; for a result
    of one sample, the quartiles and sample count asv recorded of it where it did
    (`SeriesColumns.spreads`: most CI histories keep one value a point, and its spread is there)."""
    counts = np.asarray(col.counts, dtype=np.int64)
    samples = np.frombuffer(col.samples, dtype=np.float64) if len(col.samples) else np.zeros(0)
    k = int(counts[0]) if counts.size else 0
    if k >= 2 and (counts == k).all():  # every result has k samples: one matrix
        return median_iqr_columns(samples.reshape(-1, k)[keep])
    ends = np.cumsum(counts).tolist()
    starts = [0, *ends[:-1]]
    rows = median_iqr_all([tuple(samples[starts[i]:ends[i]].tolist()) for i in keep])
    med, q1, q3, ns, smallest, largest = map(list, zip(*rows, strict=True)) if rows else ([], [], [], [], [], [])
    if len(col.spreads):
        lo, hi, reps = np.frombuffer(col.spreads, dtype=np.float64).reshape(-1, 3)[keep].T
        value = np.asarray(med, dtype=float)
        with np.errstate(invalid="ignore"):  # NaN where asv recorded none: compares False
            # asv's quartiles of the samples its one kept value is the median of (asv writes them to 5
            # significant digits: 3 of uxarray's 8,520 medians lie that little outside them)
            slack = RECORDED_ROUNDING * np.maximum(np.abs(lo), np.abs(hi))
            one = ((counts[keep] == 1) & np.isfinite(lo) & np.isfinite(hi) & (lo - slack <= value)
                   & (value <= hi + slack))
            counted = one & np.isfinite(reps) & (reps >= 1) & (reps == np.floor(reps))
        for j in np.flatnonzero(one).tolist():
            q1[j], q3[j] = float(lo[j]), float(hi[j])
            if counted[j]:
                ns[j] = int(reps[j])
    return med, q1, q3, ns, smallest, largest


def _column_results(col: SeriesColumns, keep: list[int], position: dict[str, int]) -> list[Result]:
    """The results `keep` of a series read as columns, as records with their samples (what
    `commit_levels` reads), oldest commit first."""
    ends = np.cumsum(np.asarray(col.counts, dtype=np.int64)).tolist()
    starts = [0, *ends[:-1]]
    out = [Result(col.benchmark, col.commit_shas[i], col.machine, tuple(col.samples[starts[i]:ends[i]]))
           for i in keep]
    out.sort(key=lambda r: position[r.commit_sha])
    return out


def load_snapshot(store: StoreReader, *, branch: str | None = None, baseline_sha: str | None = None,
                  columns: ColumnsCache | None = None, tracks: dict[str, SuspectTrack] | None = None,
                  floor_for: Callable[[str], float] | None = None) -> Snapshot:
    """Read the whole history once and arrange it by series and by commit.

    Args:
        store: any `StoreReader`.
        branch: only this branch's commits (and the results on them); None for all.
        baseline_sha: the commit to compare against on the overview (full sha or unique prefix);
            None means each series' first run.
        columns: the previous snapshot's `Snapshot.columns` (of the same `branch`), so that only the
            store's runs after it are read; the snapshot is the same without it.
        tracks: the previous snapshot's `Snapshot.tracks`, so that each series' suspicions and
            thresholds are judged for its new commits only; the snapshot is the same without them.
        floor_for: each series' threshold from the project (`ci.project.ProjectSettings.floor_for`):
            smaller steps and suspicions are not shown, as the A/B verdicts call them unchanged.
            None: every step the detector finds.

    Returns:
        The snapshot the pages are rendered from.

    Raises:
        ValueError: a result names a commit the store does not list, or `baseline_sha` is unknown.
    """
    commits = store.commits(branch)
    position = {c.sha: i for i, c in enumerate(commits)}
    if baseline_sha is not None:
        baseline_sha = resolve_sha(commits, baseline_sha)
    machines = sorted(store.machines(), key=lambda m: m.name)

    columnar = store if isinstance(store, ColumnStore) else None
    stored = _stored_change_points(columnar, branch, floor_for) if columnar is not None else None
    kept = None
    if columnar is not None:  # a ci.store.Store: its results as columns, no record per result
        (by_series, raw, environments), kept = _from_columns(columnar, position, branch, columns)
    else:
        by_series, raw, environments = _from_result_columns(store, position, branch)
    series = sorted(by_series.values(), key=lambda s: (s.benchmark.suite, s.benchmark.key, s.machine))

    acks = {(a.benchmark_key, a.commit_sha): a for a in store.acknowledgements()}
    verdicts = store.verdicts()
    judged = {v.benchmark.key for v in verdicts}
    machines_at: dict[tuple[str, str], list[str]] = defaultdict(list)  # (series key, sha) -> machines measured
    for s in series:
        key = s.benchmark.key
        if key not in judged:
            continue  # only the series a verdict is about (500,000 runs otherwise)
        for sha in s.shas:
            ms = machines_at[(key, sha)]
            if not ms or ms[-1] != s.machine:
                ms.append(s.machine)

    # A benchmark that failed to run at a verdict's head and measured again at a later commit ran there:
    # the failure is fixed, not open for good (a real history's transient failure stayed an open
    # regression on the overview once someone compared its commit, 2026-12-07).
    crashed = {v.benchmark.key for v in verdicts if _crashed(v)}
    ran_at: dict[str, list[tuple[str, list[str]]]] = defaultdict(list)  # series key -> (machine, shas)
    for s in series:
        if s.benchmark.key in crashed:
            ran_at[s.benchmark.key].append((s.machine, s.shas))

    def ran_again(v: Verdict) -> str:
        own = verdict_machines(v)
        later = [sha for machine, shas in ran_at.get(v.benchmark.key, []) if not own or machine in own
                 for sha in shas if position.get(sha, -1) > position[v.head_sha]]
        return min(later, key=position.__getitem__, default="")

    # A regression a comparison found is fixed where its series' level came back (within RETURNED of the
    # step from the base, on a log scale, as a change point's regression closes, `ci.site.judge.recovery`):
    # stingray's 10 series x10 slower at one commit and back at the next stayed "10 open regressions" once
    # both pairs were compared (2026-12-07).
    regressed = {v.benchmark.key for v in verdicts if v.outcome == Outcome.REGRESSED}
    levels_of: dict[str, list[tuple[str, list[str], np.ndarray]]] = defaultdict(list)
    for s in series:
        if s.benchmark.key in regressed:
            levels_of[s.benchmark.key].append((s.machine, s.shas, s.values))

    def level_back(v: Verdict) -> str:
        if not (v.base_value > 0 and v.head_value > 0) or v.head_value == v.base_value:
            return ""
        step = math.log(v.head_value / v.base_value)
        own = verdict_machines(v)
        found = []
        for machine, shas, values in levels_of.get(v.benchmark.key, []):
            if own and machine not in own:
                continue
            later = [(sha, float(x)) for sha, x in zip(shas, values.tolist(), strict=True)
                     if position.get(sha, -1) > position[v.head_sha] and math.isfinite(x) and x > 0]
            # Two commits in a row back within a quarter of the step from the base (one is an outlier's).
            found += [a for (a, x), (_, y) in zip(later, later[1:], strict=False)
                      if math.log(statistics.median((x, y)) / v.base_value) / step <= RETURNED]
        return min(found, key=position.__getitem__, default="")

    runs_order = _runs_order(environments, position)
    before_on = {(m, b): a for m, shas in runs_order[0].items() for a, b in zip(shas, shas[1:], strict=False)}
    verdicts_by_sha: dict[str, list[Verdict]] = defaultdict(list)
    regressions: list[Regression] = []
    for v in verdicts:
        if v.head_sha not in position:
            continue  # an A/B verdict about a commit outside this history (another branch)
        verdicts_by_sha[v.head_sha].append(v)
        if v.outcome == Outcome.REGRESSED and v.benchmark.kind != Kind.CORRECTNESS and \
                math.isfinite(v.base_value) and math.isfinite(v.head_value) and \
                not is_worse_step(v.benchmark.direction, v.base_value, v.head_value):
            # Decided under another direction than the series is read with now (asv.conf.json's
            # `regressions_directions` changed since: a compare's "regressed" stayed an open regression
            # after the project said the move was for the better, 2026-12-07). The commit page keeps it.
            continue
        if v.outcome in (Outcome.REGRESSED, Outcome.FAILED):
            on = machines_at.get((v.benchmark.key, v.head_sha), [])
            if v.machine:
                # Runners share the history: a verdict judged one machine's series, not its siblings'.
                own = verdict_machines(v)
                on = [m for m in on if m in own]
            if v.outcome == Outcome.REGRESSED and v.base_sha and on and \
                    not any(before_on.get((m, v.head_sha)) == v.base_sha for m in on):
                # A comparison across a range of commits (base not the commit its machine measured before
                # head): its change may have come at any of them, so it is no regression of head's. A
                # `ci compare` of 97cffd28 -> 8303ca0b put 4 regressions "at this commit" on PlasmaPy's
                # 8303ca0b, flat against its parent (2026-12-07). The commit page still lists the verdict,
                # with its base.
                continue
            regressions.append(Regression(
                benchmark=v.benchmark, sha=v.head_sha, outcome=v.outcome, ratio=v.ratio, base_value=v.base_value,
                head_value=v.head_value, source="verdict", machines=tuple(on), base_sha=v.base_sha,
                p_value=v.p_value, reason=v.reason, ack=acks.get((v.benchmark.key, v.head_sha)),
                fixed_by=ran_again(v) if _crashed(v) else level_back(v) if v.outcome == Outcome.REGRESSED else ""))

    failures_by_sha: dict[str, list[tuple[Benchmark, str, str]]] = defaultdict(list)
    failures = getattr(store, "failures", None)
    if callable(failures):
        for f in failures():
            if f.commit_sha in position:
                failures_by_sha[f.commit_sha].append((f.benchmark, f.machine, f.status))
    failed: dict[tuple[str, str], set[str]] = defaultdict(set)
    for sha, fails in failures_by_sha.items():
        for bench, machine, status in fails:
            if status == "failed":
                failed[(bench.key, machine)].add(sha)
    kept_tracks, groups = add_history_verdicts(series, raw, acks, regressions, stored, tracks, runs_order, floor_for,
                                               failed)
    seen: set[tuple[str, str, str, tuple[str, ...]]] = set()
    unique = []
    for reg in regressions:
        k = (reg.benchmark.key, reg.sha, reg.source, reg.machines)
        if k not in seen:
            seen.add(k)
            unique.append(reg)
    unique.sort(key=lambda g: (-position[g.sha], g.benchmark.key))
    measured = {m: set(shas) for m, shas in runs_order[0].items()}
    for sha, fails in failures_by_sha.items():  # a run whose every point failed is a run too
        for _bench, machine, _status in fails:
            measured.setdefault(machine, set()).add(sha)
    # Jobs kept apart by their speed alone (`ci.ingest.speed`) come when the runner lands on that host:
    # intermittent by nature, never "stopped".
    by_speed = {m.name for m in machines if m.speed}
    quiet = quiet_machines({m: sorted(shas, key=position.__getitem__) for m, shas in measured.items()}, position,
                           skip=by_speed)
    labels = machine_labels(machines)
    for s in series:
        if s.machine in quiet and s.suspects:
            last, after, at, _ = quiet[s.machine]
            s.suspects = expire_quiet(s.suspects, labels.get(s.machine, s.machine), last, after, at)
    return Snapshot(machines=machines, commits=commits, position=position, series=series,
                    verdicts_by_sha=dict(verdicts_by_sha), regressions=unique, acks=acks,
                    environments=dict(environments), baseline_sha=baseline_sha, failures_by_sha=dict(failures_by_sha),
                    columns=kept, tracks=kept_tracks, groups=groups,
                    quiet={m: (last, newer) for m, (last, _, _, newer) in quiet.items()})


def _stored_change_points(store: HistoryStore, branch: str | None, floor_for: Callable[[str], float] | None = None
                          ) -> dict[tuple[str, str], list[ChangePoint]]:
    """Every series' change points from `ci.verdicts.detect_all` over a store that keeps the
    detector's states (`ci.records.HistoryStore`, i.e. `ci.store.Store`: a `ColumnStore`), by (series
    key, machine); a store without them is not asked (each series is then computed from its results).

    `detect_all` reads only the runs after its stored states and saves the extended states back, so a
    render after one new commit examines that commit's tail of each series, not 1,000 commits of 500
    series; its answer is exactly that of `change_points` over the series' current-version results
    (ci.verdicts.history; `tests/dashboard/test_store.py` compares the two through the dashboard).
    """
    out: dict[tuple[str, str], list[ChangePoint]] = defaultdict(list)
    for cp in detect_all(store, branch=branch, floor_for=floor_for):
        out[(cp.benchmark.key, cp.machine)].append(cp)
    return out


QUIET_AFTER = 12  # newer commits measured elsewhere (and 3 of the machine's usual gaps) before it counts as stopped


def quiet_machines(order: dict[str, list[str]], position: dict[str, int], skip: set[str] | frozenset[str] = frozenset()
                   ) -> dict[str, tuple[str, int, str, int]]:
    """Machines that stopped measuring while the others went on: a machine none of whose runs is at the
    `QUIET_AFTER` newest commits the store's machines measured after its last one, nor within three of
    its own usual gaps (a nightly runner measures every tenth commit of a per-commit one). Their open
    suspicions would otherwise wait for a next commit of theirs for ever, and their series' latest
    values pass for current.

    Args:
        order: machine -> the commits it measured, history order.
        position: commit sha -> its place in the history.
        skip: machines never called stopped (their commits still count as the others' newer ones).

    Returns:
        machine -> (its last measured commit, the count of newer measured commits that made it stopped,
        the commit at which it did, how many newer commits were measured in all); machines still
        measuring are absent.
    """
    measured = sorted({sha for shas in order.values() for sha in shas}, key=position.__getitem__)
    index = {sha: i for i, sha in enumerate(measured)}
    out: dict[str, tuple[str, int, str, int]] = {}
    for machine, shas in order.items():
        at = [index[sha] for sha in shas]
        if not at or machine in skip:
            continue
        gaps = np.diff(at)
        after = max(QUIET_AFTER, int(math.ceil(3 * float(np.median(gaps))))) if gaps.size else QUIET_AFTER
        newer = len(measured) - 1 - at[-1]
        if newer >= after:
            out[machine] = (shas[-1], after, measured[at[-1] + after], newer)
    return out


def _runs_order(environments: dict[str, dict[tuple[str, str], tuple[tuple[str, str], ...]]],
                position: dict[str, int]) -> tuple[dict[str, list[str]], dict[tuple[str, str], dict[str, str]]]:
    """Each machine's measured commits in history order, and the environment its run recorded at
    each (the first run's, where a commit has several): what alert groups are read against."""
    order: dict[str, list[str]] = defaultdict(list)
    envs: dict[tuple[str, str], dict[str, str]] = {}
    for sha in sorted(environments, key=position.__getitem__):
        for machine, _run in environments[sha]:
            if (machine, sha) not in envs:
                order[machine].append(sha)
                envs[(machine, sha)] = dict(environments[sha][(machine, _run)])
    return dict(order), envs


def _crashed(v: Verdict) -> bool:
    """A verdict of a benchmark that did not run on head (no value), not of a correctness gate whose
    value failed its limit: a later commit's value fixes only the former."""
    return v.outcome == Outcome.FAILED and v.benchmark.kind != Kind.CORRECTNESS and not math.isfinite(v.head_value)
