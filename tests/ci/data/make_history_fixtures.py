"""Write the stored histories that the migration tests upgrade: run with an older tree's code.

    git worktree add /tmp/old 1328fa13b19b1dc970019dee38ae8b7ec8a0579c   # schema 0003, JSON text samples
    PYTHONPATH=/tmp/old .venv/bin/python tests/ci/data/make_history_fixtures.py tests/ci/data

Writes, with that tree's own ingest and store code (never with today's):

- `history-0002.sql`: a store at revision 0002 (verdicts without a machine) with three commits and
  one REGRESSED verdict (ratio 1.3, reason "slower", commit 0 -> 1) inserted as 0002 did;
- `history-0003.sql`: a store at revision 0003 with two machines, failed and skipped points, a run
  that asv rewrote (re-ingested, so its results have the newest row ids), samples that JSON text
  spells oddly (5e-324, 1e300, integers), git metadata, verdicts with NaN fields, acknowledgements;
- `history-000N.json`: what that tree's `Store` reads back from each (after its own migration to
  its head), every float as `float.hex`, for the tests to compare today's reads with.

Each `.sql` is SQLite's own dump (`Connection.iterdump`), so a test can load it into a fresh file.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import shutil
import sqlite3
import sys
import tempfile
from pathlib import Path

from history_reads import reads  # this folder: on sys.path when run as a script


def _dump(db: Path, out: Path) -> None:
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA journal_mode = DELETE")  # no WAL side file: the dump is the whole database
    out.write_text("\n".join(conn.iterdump()) + "\n")
    conn.close()


def history_0002(tmp: Path, out: Path) -> None:
    from tests.ci.conftest import sha_for, store_at_0002_with_a_verdict, write_results

    results = tmp / "r2"
    write_results(results, [sha_for(i) for i in range(3)])
    db = tmp / "h2.sqlite"
    store_at_0002_with_a_verdict(f"sqlite:///{db}", results)
    _dump(db, out / "history-0002.sql")
    shutil.copy(db, tmp / "h2-read.sqlite")
    from ci.store import Store

    with Store(tmp / "h2-read.sqlite") as store:  # migrated by that tree to its head
        (out / "history-0002.json").write_text(json.dumps(reads(store), indent=1) + "\n")


def history_0003(tmp: Path, out: Path) -> None:
    from ci.ingest import ingest_results_dir
    from ci.records import Commit, Outcome, Verdict
    from ci.store import Store
    from tests.ci.conftest import BENCHMARKS, sha_for, write_results

    def odd_samples(name: str, j: int, c: int) -> list[float] | None:
        if "images_per_s" in name and c == 2:
            return None  # asv null: a failed point
        if "time_gpu" in name and j == 3:
            return [5e-324, 1e-300, 2.5e-5, 0.1 + 0.2, 1 / 3, 7e-5]
        if "images_per_s" in name:
            return [100 + c, 101 + c, 102, 99, 1e300, 100]  # ints, as a track benchmark returns them
        return [1e-4 * (j + 1) * (1 + 0.013 * k + 0.007 * c) for k in range(6)]

    h200, a100 = tmp / "h200", tmp / "a100"
    paths = write_results(h200, [sha_for(i) for i in range(4)], samples=odd_samples)
    write_results(a100, [sha_for(i) for i in (1, 3)], machine="a100-runner", record_samples=False,
                  sidecar={"gpu": "NVIDIA A100-SXM4-80GB", "driver": "550.54", "cuda": "12.4"})  # fmt: skip
    # A skipped point: asv writes NaN as the result of a point it did not run.
    data = json.loads(paths[1].read_text())
    data["results"]["bench_correctness.Logits.track_max_abs_diff"][0][1] = math.nan
    paths[1].write_text(json.dumps(data))
    db = tmp / "h3.sqlite"
    with Store(db) as store:
        ingest_results_dir(store, h200)
        ingest_results_dir(store, a100)
        # asv rewrote one file (--append-samples): re-ingested, its run replaced, its rows the newest.
        data = json.loads(paths[0].read_text())
        row = data["results"]["bench_attention.GPUTime.time_gpu"]
        col = data["result_columns"].index("samples")
        row[col] = [s + [s[0]] for s in row[col]]
        paths[0].write_text(json.dumps(data))
        ingest_results_dir(store, h200)
        store.upsert_commits([Commit(sha_for(i), parents=(sha_for(i - 1),) if i else (), branch="main",
                                     time=dt.datetime(2026, 11, 1, i, tzinfo=dt.UTC), subject=f"commit {i}")
                              for i in range(4)])  # fmt: skip
        benches = {b.key: b for b in store.benchmarks()}
        gpu = benches["bench_attention.GPUTime.time_gpu(dtype=fp16, batch=1)"]
        store.save_verdicts([
            Verdict(benchmark=gpu, outcome=Outcome.REGRESSED, base_value=1e-4, head_value=1.3e-4, ratio=1.3,
                    ci_low=1.2, ci_high=1.4, p_value=1e-6, threshold=0.025, base_sha=sha_for(2), head_sha=sha_for(3),
                    reason="slower", machine="h200-runner"),
            Verdict(benchmark=gpu, outcome=Outcome.INCONCLUSIVE, base_value=1e-4, head_value=math.nan, ratio=math.nan,
                    base_sha=sha_for(1), head_sha=sha_for(3),
                    reason="missing", machine="a100-runner"),
        ])  # fmt: skip
        store.acknowledge(gpu.key, sha_for(3)[:10], "ada", "expected: new tiling",
                          dt.datetime(2026, 11, 30, 12, 0, 0, 123456, tzinfo=dt.UTC))  # fmt: skip
        assert {b["name"] for b in BENCHMARKS} == {b.name for b in benches.values()}
        (out / "history-0003.json").write_text(json.dumps(reads(store), indent=1) + "\n")
    _dump(db, out / "history-0003.sql")


def main() -> int:
    import ci

    out = Path(sys.argv[1]).resolve()
    print(f"writing with the code at {Path(ci.__file__).parent.parent}", file=sys.stderr)
    from ci.store import head_revision

    if head_revision() != "0003":
        print(f"error: run this with a tree whose schema head is 0003 (this one: {head_revision()})", file=sys.stderr)
        return 2
    tmp = Path(tempfile.mkdtemp(prefix="history-fixtures-"))
    try:
        history_0002(tmp, out)
        history_0003(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
