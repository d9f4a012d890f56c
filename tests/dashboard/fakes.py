"""Test-only histories for the dashboard tests, on top of `tools.fixtures`: `hostile_store` puts
markup in every user-controlled text field; `nan_result` is a run that measured nothing."""

from __future__ import annotations

import math

from ci.records import Acknowledgement, Benchmark, Commit, Direction, Kind, Machine, Outcome, Result, Verdict
from tools.fixtures import T0, MemoryStore, synthetic_store

SCRIPT = '<script>alert("x")</script>'


def hostile_store() -> MemoryStore:
    """A small history whose every user-controlled text holds markup."""
    store = synthetic_store(n_commits=6, n_series=4)
    bad_bench = Benchmark(f"bench_{SCRIPT}.Evil.time_x", (("p", SCRIPT),), unit="seconds")
    bad_unit = Benchmark("bench_evil.Unit.track_x", unit=SCRIPT, direction=Direction.HIGHER, kind=Kind.THROUGHPUT)
    store.benchmark_list += [bad_bench, bad_unit]
    store.machine_list.append(Machine(name=f"m{SCRIPT}", gpu=f"gpu{SCRIPT}", extra=(("k", SCRIPT),)))
    sha = store.commit_list[-1].sha
    store.commit_list[-1] = Commit(sha=sha, parents=store.commit_list[-1].parents, branch=f"b{SCRIPT}",
                                   time=store.commit_list[-1].time, subject=f"fix {SCRIPT} & <b>bold</b>")
    for c in store.commit_list:
        store.result_list.append(Result(benchmark=bad_bench, commit_sha=c.sha, machine=f"m{SCRIPT}",
                                        samples=(1e-5, 1.1e-5), environment=(("note", SCRIPT),)))
        store.result_list.append(Result(benchmark=bad_unit, commit_sha=c.sha, machine="runner-0", samples=(3.0, 4.0)))
    store.verdict_list.append(Verdict(benchmark=bad_bench, outcome=Outcome.REGRESSED, base_value=1e-5,
                                      head_value=2e-5, ratio=2.0, head_sha=sha, reason=SCRIPT))
    store.ack_list.append(Acknowledgement(benchmark_key=bad_bench.key, commit_sha=sha, who=SCRIPT,
                                          why=f"because {SCRIPT}", when=T0))
    # Results on commits are ordered by history; keep the store's list in that order too.
    order = {c.sha: i for i, c in enumerate(store.commit_list)}
    store.result_list.sort(key=lambda r: order[r.commit_sha])
    return store


def nan_result(bench: Benchmark, sha: str, machine: str) -> Result:
    """A run that measured nothing (every sample NaN), as a failed benchmark leaves it."""
    return Result(benchmark=bench, commit_sha=sha, machine=machine, samples=(math.nan,))
