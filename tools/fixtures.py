"""An in-memory `StoreReader` and synthetic histories, for the render benchmark
(`tools.bench_render`) and the dashboard's tests.

`MemoryStore` follows the protocol in `ci/records/reader.py` literally (filters, history order) so the
dashboard is tested against the contract, not against one implementation. `synthetic_store`
builds a deterministic multi-machine history with steps, regressions, acknowledgements and
correctness gates; `next_commit` appends one more commit; `to_sqlite` and `ingest_commits` copy a
history into a real `ci.store.Store` through its write side.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TypeVar

from ci.records import (
    Acknowledgement,
    Benchmark,
    Commit,
    Direction,
    Kind,
    Machine,
    Outcome,
    Project,
    Result,
    Verdict,
)


@dataclass(frozen=True)
class Failure:
    """Same fields as `ci.store.FailedPoint`."""

    benchmark: Benchmark
    commit_sha: str
    machine: str
    status: str
    run_id: str = ""


_Holds = TypeVar("_Holds", Result, Verdict, Failure)


@dataclass
class MemoryStore:
    """A `StoreReader` over plain lists; `results` stay in commit history order."""

    machine_list: list[Machine] = field(default_factory=list)
    commit_list: list[Commit] = field(default_factory=list)
    benchmark_list: list[Benchmark] = field(default_factory=list)
    result_list: list[Result] = field(default_factory=list)
    verdict_list: list[Verdict] = field(default_factory=list)
    ack_list: list[Acknowledgement] = field(default_factory=list)
    failure_list: list[Failure] = field(default_factory=list)
    project_conf: Project | None = None

    def _resolved(self, bench: Benchmark) -> Benchmark:
        """`bench` as `ci.store.Store` reads it: its direction by the project's `regressions_directions`
        where it declares none (`ci.records.Project.resolve`); the lists keep what was given, so a
        project set or changed later is read so at once."""
        return self.project_conf.resolve(bench) if self.project_conf is not None else bench

    def _with_resolved(self, record: _Holds) -> _Holds:
        """A result, verdict or failure whose benchmark `_resolved` reads."""
        bench = self._resolved(record.benchmark)
        return record if bench is record.benchmark else replace(record, benchmark=bench)

    def machines(self) -> list[Machine]:
        return list(self.machine_list)

    def commits(self, branch: str | None = None) -> list[Commit]:
        return [c for c in self.commit_list if branch is None or c.branch == branch]

    def benchmarks(self) -> list[Benchmark]:
        return [self._resolved(b) for b in self.benchmark_list]

    def results(
        self,
        *,
        benchmark_key: str | None = None,
        machine: str | None = None,
        commit_sha: str | None = None,
    ) -> list[Result]:
        order = {c.sha: i for i, c in enumerate(self.commit_list)}
        picked = [
            r
            for r in self.result_list
            if (benchmark_key is None or r.benchmark.key == benchmark_key)
            and (machine is None or r.machine == machine)
            and (commit_sha is None or r.commit_sha == commit_sha)
        ]
        picked.sort(key=lambda r: order.get(r.commit_sha, len(order)))
        return [self._with_resolved(r) for r in picked]

    def verdicts(self, *, head_sha: str | None = None) -> list[Verdict]:
        return [self._with_resolved(v) for v in self.verdict_list if head_sha is None or v.head_sha == head_sha]

    def acknowledgements(self) -> list[Acknowledgement]:
        return list(self.ack_list)

    def project(self) -> Project | None:
        return self.project_conf

    def failures(self) -> list[Failure]:
        """Like `ci.store.Store.failures`: points asv recorded as failed or skipped (not in StoreReader)."""
        return [self._with_resolved(f) for f in self.failure_list]

    def add_commit(self, commit: Commit, results: Iterable[Result], verdicts: Iterable[Verdict] = ()) -> None:
        """Append one new commit with its results (what a runner does after each push)."""
        self.commit_list.append(commit)
        self.result_list.extend(results)
        self.verdict_list.extend(verdicts)


T0 = datetime(2026, 1, 1, tzinfo=UTC)
GPUS = ("NVIDIA H200", "NVIDIA A100-SXM4-80GB")


def _sha(i: int) -> str:
    """A deterministic 40-hex sha for commit number `i`."""
    return hashlib.sha1(f"commit-{i}".encode()).hexdigest()


def make_benchmarks(n_series: int) -> list[Benchmark]:
    """`n_series` benchmarks spread over suites: mostly latency, some throughput, 2 correctness."""
    out = [
        Benchmark("bench_correctness.Logits.track_max_abs_diff", (("model", "deit_small"),),
                  unit="max abs diff", direction=Direction.LOWER, kind=Kind.CORRECTNESS),
        Benchmark("bench_correctness.Logits.track_top1_agreement", (("model", "deit_small"),),
                  unit="top-1 agreement", direction=Direction.HIGHER, kind=Kind.CORRECTNESS),
    ]
    i = 0
    while len(out) < n_series:
        if i % 5 == 4:
            out.append(Benchmark("bench_e2e.Throughput.track_images_per_s",
                                 (("model", f"deit_{i}"), ("batch", str(1 << (i % 6)))),
                                 unit="images/s", direction=Direction.HIGHER, kind=Kind.THROUGHPUT))
        else:
            suite = ("bench_attention", "bench_pack", "bench_pruners")[i % 3]
            out.append(Benchmark(f"{suite}.GPUTime.time_gpu",
                                 (("backend", ("triton", "fa2_varlen", "padded_sdpa")[i % 3]),
                                  ("shape", f"B{1 << (i % 6)}-N{197 + i}")),
                                 unit="seconds", direction=Direction.LOWER, kind=Kind.LATENCY))
        i += 1
    return out


def synthetic_store(
    n_commits: int = 40,
    n_series: int = 12,
    *,
    machines: int = 1,
    samples: int = 5,
    seed: int = 0,
) -> MemoryStore:
    """A deterministic history: every series measured on every commit and machine.

    Series 2 (a latency series) regresses by 30 % at commit n_commits // 2 with a stored
    REGRESSED verdict (open); series 3 regresses at n_commits // 3 with an acknowledged verdict;
    the max-abs-diff gate fails (0.006 > 0.004) on commit n_commits - 3 with a FAILED verdict;
    the top-1 check crashed (asv "failed", no value) on runner-0 at commit n_commits - 5.
    """
    rng = random.Random(seed)
    store = MemoryStore()
    store.machine_list = [
        Machine(name=f"runner-{m}", gpu=GPUS[m % len(GPUS)], driver="560.35", cuda="12.6",
                torch="2.14.1", triton="3.8.0", cpu="Xeon")
        for m in range(machines)
    ]
    store.benchmark_list = make_benchmarks(n_series)
    benches = store.benchmark_list
    step_open, step_ack, gate_fail = n_commits // 2, n_commits // 3, n_commits - 3
    base = [1e-5 * (1 + (i % 7)) if b.unit == "seconds" else 1000.0 + 37 * i for i, b in enumerate(benches)]
    for c in range(n_commits):
        sha = _sha(c)
        store.commit_list.append(Commit(sha=sha, parents=(_sha(c - 1),) if c else (), branch="main",
                                        time=T0 + timedelta(hours=c), subject=f"commit number {c}"))
        for m, machine in enumerate(store.machine_list):
            env = (("gpu", machine.gpu), ("torch", "2.14.1"), ("python", "3.11"))
            for i, b in enumerate(benches):
                if b.unit == "max abs diff":
                    centre = 0.006 if c == gate_fail else 0.0025
                    vals = tuple(centre * (1 + 0.01 * rng.random()) for _ in range(samples))
                elif b.unit == "top-1 agreement":
                    vals = tuple(1.0 for _ in range(samples))
                else:
                    centre = base[i] * (1 + 0.05 * m)
                    if (i == 2 and c >= step_open) or (i == 3 and c >= step_ack):
                        centre *= 1.3
                    vals = tuple(centre * (1 + 0.02 * rng.gauss(0, 1)) for _ in range(samples))
                store.result_list.append(Result(benchmark=b, commit_sha=sha, machine=machine.name, samples=vals,
                                                run_id=f"{sha[:8]}-{machine.name}",
                                                started_at=T0 + timedelta(hours=c), environment=env))
    for i, c in ((2, step_open), (3, step_ack)):
        if i < len(benches) and c > 0:
            store.verdict_list.append(Verdict(benchmark=benches[i], outcome=Outcome.REGRESSED,
                                              base_value=base[i], head_value=base[i] * 1.3, ratio=1.3,
                                              p_value=1e-4, threshold=0.05, base_sha=_sha(c - 1),
                                              head_sha=_sha(c), reason="median up 30%"))
    if len(benches) > 3 and step_ack > 0:
        store.ack_list.append(Acknowledgement(benchmark_key=benches[3].key, commit_sha=_sha(step_ack),
                                              who="maintainer", why="expected: bigger tile for accuracy",
                                              when=T0 + timedelta(days=30)))
    # The top-1 check crashed on runner-0 at commit n - 5: asv recorded a failure, no value.
    crashed = n_commits - 5
    if crashed >= 0 and len(benches) > 1:
        store.result_list = [r for r in store.result_list if not (
            r.benchmark == benches[1] and r.commit_sha == _sha(crashed) and r.machine == "runner-0")]
        store.failure_list.append(Failure(benches[1], _sha(crashed), "runner-0", "failed", f"{_sha(crashed)[:8]}-r0"))
    if gate_fail > 0:
        store.verdict_list.append(Verdict(benchmark=benches[0], outcome=Outcome.FAILED, base_value=0.0025,
                                          head_value=0.006, ratio=2.4, base_sha=_sha(gate_fail - 1),
                                          head_sha=_sha(gate_fail), reason="max |logit diff| 0.006 >= 0.004"))
    return store


def next_commit(store: MemoryStore, *, slower: float = 1.0) -> Commit:
    """Append one new commit measuring every series again (its last values times `slower`).

    Returns:
        The new commit.
    """
    last = store.commit_list[-1]
    n = len(store.commit_list)
    new = Commit(sha=_sha(n), parents=(last.sha,), branch=last.branch,
                 time=(last.time or T0) + timedelta(hours=1), subject=f"commit number {n}")
    fresh = [Result(benchmark=r.benchmark, commit_sha=new.sha, machine=r.machine,
                    samples=tuple(s * slower for s in r.samples), run_id=f"{new.sha[:8]}-{r.machine}",
                    started_at=new.time, environment=r.environment)
             for r in store.result_list if r.commit_sha == last.sha]
    store.add_commit(new, fresh)
    return new


def to_sqlite(mem: MemoryStore, db: str):
    """Copy `mem` into a real `ci.store.Store` at `db` (one asv run per commit and machine).

    Returns:
        The open Store; the caller closes it.
    """
    from ci.store import Store

    store = Store(db)
    store.upsert_commits(mem.commit_list)
    ingest_commits(store, mem, [c.sha for c in mem.commit_list])
    store.save_verdicts(mem.verdict_list)
    for a in mem.ack_list:
        store.acknowledge(a.benchmark_key, a.commit_sha, a.who, a.why, a.when)
    return store


def ingest_commits(store, mem: MemoryStore, shas: list[str]) -> None:
    """Ingest `mem`'s results of the commits `shas` into a `ci.store.Store`, as asv runs."""
    from ci.records import ParsedPoint, ParsedRun

    wanted = set(shas)
    machines = {m.name: m for m in mem.machine_list}
    commits = {c.sha: c for c in mem.commit_list}
    by_run: dict[tuple[str, str], list[Result]] = {}
    for r in mem.result_list:
        if r.commit_sha in wanted:
            by_run.setdefault((r.commit_sha, r.machine), []).append(r)
    failed: dict[tuple[str, str], list[Failure]] = {}
    for f in mem.failure_list:
        if f.commit_sha in wanted:
            failed.setdefault((f.commit_sha, f.machine), []).append(f)
    for (sha, machine), results in by_run.items():
        points = tuple(ParsedPoint(benchmark=r.benchmark, status="ok", samples=r.samples, has_raw_samples=True,
                                   value=r.value, stats={}, benchmark_version=r.benchmark_version,
                                   started_at=r.started_at, duration=1.0) for r in results)
        points += tuple(ParsedPoint(benchmark=f.benchmark, status=f.status, samples=(), has_raw_samples=False,
                                    value=None, stats={}, benchmark_version=None, started_at=None, duration=None)
                        for f in failed.get((sha, machine), []))
        run = ParsedRun(path=Path(f"{machine}/{sha}.json"), run_key=f"{machine}/{sha}/env",
                        digest=hashlib.sha256(repr((machine, sha, points)).encode()).hexdigest(), machine=machine,
                        commit_hash=sha, commit_time=commits[sha].time, env_name="env",
                        started_at=results[0].started_at, environment=results[0].environment, points=points,
                        skipped_unknown=(), skipped_stale=())
        store.ingest_run(run, machines.get(machine, Machine(name=machine)), commits[sha])
