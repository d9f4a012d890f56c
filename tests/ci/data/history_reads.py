"""What a store's read side returns, as JSON-ready values with every float exact (`float.hex`):
written by `make_history_fixtures.py` with an older tree's code, compared by the migration tests
with today's reads of the same history after the upgrade."""

from __future__ import annotations

import datetime as dt
from typing import Any

_MACHINE_FIELDS = ("name", "gpu", "driver", "cuda", "torch", "triton", "cpu", "extra")


def _float(x: float) -> str:
    return x.hex()


def _bench(b: Any) -> dict[str, Any]:
    return {"key": b.key, "name": b.name, "params": [list(p) for p in b.params], "unit": b.unit,
            "direction": str(b.direction), "kind": str(b.kind)}  # fmt: skip


def _dt(t: dt.datetime | None) -> str | None:
    return None if t is None else t.isoformat()


def reads(store: Any) -> dict[str, Any]:
    """Everything a store's read side returns, as JSON-ready values (floats exact)."""
    return {
        # The fields every revision's Machine had, as its repr wrote them (asv_name, env_name and
        # host came with revision 0006: tests/ci/test_machines.py checks those).
        "machines": ["Machine(" + ", ".join(f"{f}={getattr(m, f)!r}" for f in _MACHINE_FIELDS) + ")"
                     for m in store.machines()],
        "commits": [[c.sha, list(c.parents), c.branch, _dt(c.time), c.subject] for c in store.commits()],
        "benchmarks": [_bench(b) for b in store.benchmarks()],
        "results": [
            {"benchmark": r.benchmark.key, "commit": r.commit_sha, "machine": r.machine,
             "samples": [_float(s) for s in r.samples], "run_id": r.run_id, "started_at": _dt(r.started_at),
             "environment": [list(e) for e in r.environment], "benchmark_version": r.benchmark_version}
            for r in store.results()
        ],
        "failures": [[f.benchmark.key, f.commit_sha, f.machine, f.status, f.run_id] for f in store.failures()],
        "verdicts": [
            [v.benchmark.key, str(v.outcome), *(_float(x) for x in (v.base_value, v.head_value, v.ratio, v.ci_low,
             v.ci_high, v.p_value, v.threshold)), v.base_sha, v.head_sha, v.reason, v.machine]
            for v in store.verdicts()
        ],
        "acknowledgements": [[a.benchmark_key, a.commit_sha, a.who, a.why, _dt(a.when)]
                             for a in store.acknowledgements()],
        "counts": store.counts(),
    }  # fmt: skip
