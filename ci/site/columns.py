"""A store without a columnar read, read as columns: what `ci.store.Store.series_columns` and
`run_environments` give, built from `results()` (an in-memory store such as
`tools.fixtures.MemoryStore`, a test's fake), so that the snapshot has one builder
(`ci.site.snapshot`), whatever the store.

As the store defines them: a machine's runs are its (commit, run id) pairs, in history order (commit
order; runs of one commit in the order their results come); a series (benchmark key x machine) has
its results in history order, each with its run, sample count, samples, benchmark version and the
spread asv recorded of a one-value point; a run's environment is the one its (first) result recorded.
"""

from __future__ import annotations

import itertools
from array import array
from collections import defaultdict
from dataclasses import dataclass

from ci.records import MachineHistory, Result, ResultSource, SeriesColumns, recorded_spread

Env = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class ResultColumns:
    """A store's series as columns, per machine (`histories`: each run as (run id, commit sha)), and
    the environment of each machine's runs, in the order of its `MachineHistory.runs`."""

    histories: list[MachineHistory]
    environments: dict[str, list[Env]]


def result_columns(store: ResultSource) -> ResultColumns:
    """`store`'s results as `ci.store.Store.series_columns` serves them (every branch, no run left out),
    with its runs' environments (`run_environments`, by run rather than by run key: an in-memory
    store's run ids need not be unique across commits).

    A result whose commit the store's history does not list counts first (as the snapshot reads it:
    it is dropped with a branch, an error without)."""
    order = {c.sha: i for i, c in enumerate(store.commits())}
    results = store.results()
    first_env: dict[str, dict[tuple[str, str], Env]] = defaultdict(dict)  # machine -> run -> environment
    grouped: dict[tuple[str, str], list[Result]] = defaultdict(list)
    key_of: dict[int, str] = {}  # Benchmark.key rebuilds its text on every call; results share Benchmark objects
    for r in results:
        runs = first_env[r.machine]
        if (r.commit_sha, r.run_id) not in runs:
            runs[(r.commit_sha, r.run_id)] = r.environment
        key = key_of.get(id(r.benchmark))
        if key is None:
            key = key_of[id(r.benchmark)] = r.benchmark.key
        grouped[(key, r.machine)].append(r)
    index: dict[str, dict[tuple[str, str], int]] = {}
    environments: dict[str, list[Env]] = {}
    for machine, runs in first_env.items():
        ordered = sorted(runs, key=lambda run: order.get(run[0], -1))  # stable: a commit's runs as they came
        index[machine] = {run: i for i, run in enumerate(ordered)}
        environments[machine] = [runs[run] for run in ordered]
    series: dict[str, list[SeriesColumns]] = defaultdict(list)
    for bench_key, machine in sorted(grouped):
        rs = grouped[(bench_key, machine)]
        bench = rs[0].benchmark  # the first result's, as the series shows it
        # The protocol promises history order; sorting again is cheap and keeps a loose store honest.
        rs.sort(key=lambda r: order.get(r.commit_sha, -1))
        runs_of = index[machine]
        series[machine].append(SeriesColumns(
            bench, machine, tuple(r.commit_sha for r in rs),
            tuple(runs_of[(r.commit_sha, r.run_id)] for r in rs), tuple(len(r.samples) for r in rs),
            array("d", itertools.chain.from_iterable(r.samples for r in rs)),
            tuple(r.benchmark_version for r in rs),
            array("d", itertools.chain.from_iterable(recorded_spread(r.stats) for r in rs))
            if any(r.stats is not None for r in rs) else array("d")))
    histories = [MachineHistory(machine, tuple((run_id, sha) for sha, run_id in index[machine]), tuple(series[machine]))
                 for machine in sorted(index)]
    return ResultColumns(histories, environments)
