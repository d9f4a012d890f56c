"""Adjacent pairs (the package docstring's cross-job A/B): `compare_commits` and asv compare's rule
on consecutive commits of one machine, as measured and with a step injected into one series."""

from __future__ import annotations

import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from asv.commands.compare import _is_result_better  # asv compare's rule: factor, then its statistics

from ci.records import Direction, Kind, Outcome, Result
from ci.verdicts import compare_commits
from tools.eval_history.series import AB_STEP, ASV_FACTOR, AsvPoint, step_factor
from tools.eval_history.trials import fork_map


class MachineReader:
    """The reads `compare_commits` makes of one machine, served from one read of its results and
    failures (the store's own records, history order kept): each comparison reads the machine's
    whole history for its between-job drift, and forked workers must not share the store's
    connections. Every call returns a fresh list (callers append to it)."""

    def __init__(self, store: Any, machine: str) -> None:
        self.machine = machine
        self._results = store.results(machine=machine)
        self._failures = store.failures(machine=machine)
        # Its machine alone: a comparison here reads no other machine's history (a series without a noise
        # model of its own is withheld, not judged on a twin environment's, `compare_commits`).
        self._machines = [m for m in store.machines() if m.name == machine]

    def machines(self) -> list[Any]:
        return list(self._machines)

    @staticmethod
    def _pick(rows: list[Any], benchmark_key: str | None, commit_sha: str | None) -> list[Any]:
        return [r for r in rows if (benchmark_key is None or r.benchmark.key == benchmark_key)
                and (commit_sha is None or r.commit_sha == commit_sha)]

    def results(self, *, benchmark_key: str | None = None, machine: str | None = None,
                commit_sha: str | None = None) -> list[Result]:
        if machine != self.machine:
            raise ValueError(f"this reader holds machine {self.machine!r} only, not {machine!r}")
        return self._pick(self._results, benchmark_key, commit_sha)

    def failures(self, *, benchmark_key: str | None = None, machine: str | None = None,
                 commit_sha: str | None = None) -> list[Any]:
        if machine != self.machine:
            raise ValueError(f"this reader holds machine {self.machine!r} only, not {machine!r}")
        return self._pick(self._failures, benchmark_key, commit_sha)


class InjectedReader:
    """A reader whose one series at one commit on one machine reads `factor` times its samples and
    asv's statistics of them (`Result.scaled`), as asv's side reads the point scaled (`AsvPoint.scaled`)."""

    def __init__(self, inner: Any, key: str, sha: str, machine: str, factor: float) -> None:
        self._inner, self._target, self._factor = inner, (key, sha, machine), factor

    def results(self, **kw: Any) -> list[Result]:
        f = self._factor
        return [r.scaled(f) if (r.benchmark.key, r.commit_sha, r.machine) == self._target else r
                for r in self._inner.results(**kw)]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def asv_mark(a: AsvPoint, b: AsvPoint) -> str:
    """asv compare's mark for base `a` and head `b`: "-" better, "+" worse, " " neither."""
    if _is_result_better(b.value, a.value, b.compare_stats, a.compare_stats, ASV_FACTOR):
        return "-"
    if _is_result_better(a.value, b.value, a.compare_stats, b.compare_stats, ASV_FACTOR):
        return "+"
    return " "


@dataclass
class PairOutcome:
    """One adjacent pair: whether each rule called a regression, and the injected series' fate."""

    together: bool
    service_regressed: bool
    asv_worse: bool
    # ...on a series the history does not step at the head (neither the service's change points nor asv's
    # listed regressions of the un-injected series): a false alarm, where the others may be real steps.
    service_regressed_null: bool = False
    asv_worse_null: bool = False
    injected: bool = False
    service_found: bool = False
    asv_found: bool = False


def evaluate_pair(reader: MachineReader, asv: dict[tuple[str, str], AsvPoint], base: str, head: str,
                  seed: int, verdicts: Any = None, steps: frozenset[tuple[str, str, str]] = frozenset()
                  ) -> PairOutcome:
    """Both rules on one adjacent pair, then on it with AB_STEP injected into one seeded series. `steps`:
    (machine, series key, commit) where the un-injected history steps (`PairOutcome`'s null counts)."""
    m = reader.machine
    got = compare_commits(reader, base, head, m, settings=verdicts)
    b_pts = {r.benchmark.key: (r, asv.get((r.run_id, r.benchmark.key))) for r in got.base if r.samples}
    h_pts = {r.benchmark.key: (r, asv.get((r.run_id, r.benchmark.key))) for r in got.head if r.samples}
    both = sorted(key for key in b_pts.keys() & h_pts.keys()
                  if b_pts[key][0].benchmark.kind != Kind.CORRECTNESS and b_pts[key][1] and h_pts[key][1])
    ours = {v.benchmark.key for v in got.verdicts if v.outcome == Outcome.REGRESSED}
    theirs = {key for key in both if asv_mark(b_pts[key][1], h_pts[key][1]) == "+"}  # type: ignore[arg-type]
    out = PairOutcome(got.jobs.together, bool(ours), bool(theirs), any((m, key, head) not in steps for key in ours),
                      any((m, key, head) not in steps for key in theirs))
    judged = [key for key in both if h_pts[key][0].benchmark.direction != Direction.UNKNOWN]
    if not judged:
        return out
    rng = np.random.default_rng([seed, zlib.crc32(f"{m}\0{base}\0{head}".encode())])
    key = judged[int(rng.integers(len(judged)))]
    f = step_factor(h_pts[key][0].benchmark.direction, AB_STEP)
    again = compare_commits(InjectedReader(reader, key, head, m, f), base, head, m, settings=verdicts)
    out.injected = True
    out.service_found = any(v.benchmark.key == key and v.outcome == Outcome.REGRESSED for v in again.verdicts)
    mark = asv_mark(b_pts[key][1], h_pts[key][1].scaled(f))  # type: ignore[union-attr, arg-type]
    out.asv_found = mark == ("+" if f > 1 else "-")
    return out


@dataclass
class PairsOutcome:
    pairs: int = 0
    together: int = 0  # pairs whose two commits carry one job marker (in-job statistics)
    service_regressed: int = 0
    asv_worse: int = 0
    service_regressed_null: int = 0
    asv_worse_null: int = 0
    injected: int = 0
    service_found: int = 0
    asv_found: int = 0
    seconds: float = 0.0


def _pair(item: tuple[MachineReader, dict[tuple[str, str], AsvPoint], str, str, int, Any,
                      frozenset[tuple[str, str, str]]]) -> PairOutcome:
    return evaluate_pair(*item)


def evaluate_pairs(store: Any, machines: Sequence[str], asv: dict[tuple[str, str], AsvPoint], *, pairs: int,
                   seed: int, verdicts: Any = None, steps: frozenset[tuple[str, str, str]] = frozenset()
                   ) -> PairsOutcome:
    """Cross-job A/B on up to `pairs` seeded adjacent commit pairs of `machines` (the package docstring);
    `steps` as `evaluate_pair` takes them."""
    t0 = time.perf_counter()
    order = {c.sha: i for i, c in enumerate(store.commits())}
    readers = {m: MachineReader(store, m) for m in machines}
    candidates = []
    for m in machines:
        shas = sorted({r.commit_sha for r in readers[m].results(machine=m)}, key=order.__getitem__)
        candidates += [(m, a, b) for a, b in zip(shas, shas[1:], strict=False)]
    if not candidates:
        return PairsOutcome(seconds=time.perf_counter() - t0)
    rng = np.random.default_rng([seed, 0xAB])
    picked = sorted(rng.choice(len(candidates), min(pairs, len(candidates)), replace=False).tolist())
    items = [(readers[m], asv, a, b, seed, verdicts, steps) for m, a, b in (candidates[i] for i in picked)]
    got = fork_map(_pair, items, "pairs")
    out = PairsOutcome(pairs=len(got))
    for name in ("together", "service_regressed", "asv_worse", "service_regressed_null", "asv_worse_null", "injected",
                 "service_found", "asv_found"):
        setattr(out, name, sum(getattr(g, name) for g in got))
    out.seconds = time.perf_counter() - t0
    return out
