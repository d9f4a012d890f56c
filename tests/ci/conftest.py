"""Fixtures for the store, ingest and CLI tests.

- `asv_dir`: writes real asv results directories with asv's own machinery
  (`asv.results.Results.save`, `asv.machine.Machine`'s file format, `asv.util.write_json`).
- `pg_url`: a fresh PostgreSQL database per test on TEST_POSTGRES_URL's server, or on a
  throwaway cluster started here with initdb/pg_ctl when the variable is unset;
- `store_url`: a fresh store on SQLite and, as a second case, on PostgreSQL.
"""

from __future__ import annotations

import datetime as dt
import glob
import hashlib
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import requires

MACHINE = "h200-runner"
ENV_NAME = "existing-py_usr_bin_python3.11"

# benchmarks.json entries as asv writes them (param values are reprs).
BENCHMARKS: list[dict[str, Any]] = [
    {
        "name": "bench_attention.GPUTime.time_gpu",
        "type": "time",
        "unit": "seconds",
        "params": [["'fp16'", "'bf16'"], ["1", "8"]],
        "param_names": ["dtype", "batch"],
        "version": "v-attn-1",
    },
    {
        "name": "bench_model.Throughput.track_images_per_s",
        "type": "track",
        "unit": "images/s",
        "params": [],
        "param_names": [],
        "version": "v-model-1",
    },
    {
        "name": "bench_correctness.Logits.track_max_abs_diff",
        "type": "track",
        "unit": "max abs diff",
        "params": [["'triton'", "'padded_sdpa'"]],
        "param_names": ["backend"],
        "version": "v-corr-1",
    },
]


def sha_for(i: int) -> str:
    """A deterministic 40-hex commit id for commit number i."""
    return f"{i:08x}" + "ab" * 16


HISTORIES = Path(__file__).with_name("data")


def load_history(url: str, revision: str) -> dict[str, Any]:
    """Load the stored history `tests/ci/data/history-<revision>.sql`, written at that schema
    revision by an older tree's code (`make_history_fixtures.py`), into the empty database at
    `url` without migrating it; returns what that older code read back from it (its JSON).

    SQLite gets the dump as it is; PostgreSQL gets the schema from our migrations at `revision`
    and the dump's rows copied table by table (ids kept, sequences moved past them).
    """
    import json
    import sqlite3

    from sqlalchemy import MetaData, create_engine, text

    from ci.store import migrate_schema

    dump = (HISTORIES / f"history-{revision}.sql").read_text()
    expected = json.loads((HISTORIES / f"history-{revision}.json").read_text())
    if url.startswith("sqlite:///"):
        conn = sqlite3.connect(url[len("sqlite:///"):])
        conn.executescript(dump)
        conn.close()
        return expected
    source = create_engine("sqlite://")
    with source.begin() as conn:
        conn.connection.dbapi_connection.executescript(dump)  # type: ignore[union-attr]
        old = MetaData()
        old.reflect(conn)
        rows = {name: [dict(r._mapping) for r in conn.execute(t.select())] for name, t in old.tables.items()}
    source.dispose()
    engine = create_engine(url)
    migrate_schema(engine, revision)
    new = MetaData()
    new.reflect(engine)
    with engine.begin() as conn:
        conn.execute(text("SET TIME ZONE 'UTC'"))  # the dump's datetimes are UTC without a zone
        for table in new.sorted_tables:
            if table.name != "alembic_version" and rows.get(table.name):
                conn.execute(table.insert(), rows[table.name])
                if "id" in table.c:
                    conn.execute(text(f"SELECT setval(pg_get_serial_sequence('{table.name}', 'id'), "
                                      f"(SELECT max(id) FROM {table.name}))"))  # fmt: skip
    engine.dispose()
    return expected


def _points(bench: dict[str, Any]) -> int:
    n = 1
    for p in bench["params"]:
        n *= len(p)
    return n


def write_results(
    root: Path,
    commits: Sequence[str],
    *,
    machine: str = MACHINE,
    benchmarks: Sequence[dict[str, Any]] = BENCHMARKS,
    samples: Callable[[str, int, int], list[float] | None] | None = None,
    record_samples: bool = True,
    env_name: str = ENV_NAME,
    sidecar: dict[str, str] | None = None,
    job: str | None = None,
    host: dict[str, str] | None = None,
    first_commit: int = 0,
) -> list[Path]:
    """Write an asv results directory with asv's own code; returns the result file paths.

    `samples(bench_name, point_index, commit_index)` gives a point's raw samples, or None for a
    failed point (asv records null). `job`: the marker of the asv call that wrote every commit's
    result file, recorded in its sidecar with the file's digest as the runner records it
    (`ci.ingest.asv_files.with_calls`), as for commits measured together in one asv call. `host`:
    machine fields that replace the default host's (cpu, ram, ...), in machine.json and in every
    result file, as `asv machine` on another host writes them. `first_commit`: the commit index of
    `commits[0]` (dates and `samples`' commit index count from it).
    """
    from asv import util
    from asv.results import Results
    from asv.runner import BenchmarkResult

    from ci.ingest.asv_files import with_calls

    def default_samples(name: str, j: int, c: int) -> list[float]:
        base = 1e-4 * (j + 1) if "time_" in name else 100.0 + j
        return [base * (1 + 0.01 * k) for k in range(6)]

    samples = samples or default_samples
    util.write_json(str(root / "benchmarks.json"), {b["name"]: b for b in benchmarks}, api_version=2)
    info = {"machine": machine, "os": "Linux 6.8", "arch": "x86_64", "cpu": "Xeon 8480", "num_cpu": "16", "ram": "128G",
            **(host or {})}
    util.write_json(str(root / machine / "machine.json"), info, api_version=1)
    paths = []
    for c, sha in enumerate(commits, start=first_commit):
        res = Results(
            info, {"torch": "2.14.1"}, sha, 1_700_000_000_000 + c * 3_600_000, "3.11", env_name, {"CUDA_VISIBLE": "0"}
        )
        for bench in benchmarks:
            n = _points(bench)
            raw = [samples(bench["name"], j, c) for j in range(n)]
            result = BenchmarkResult(
                result=[None if s is None else float(sorted(s)[len(s) // 2]) for s in raw],
                samples=raw,
                number=[None if s is None else 1 for s in raw],
                errcode=0,
                stderr="",
                profile=None,
            )
            started = dt.datetime(2026, 11, 1, tzinfo=dt.UTC) + dt.timedelta(hours=c)
            res.add_result(bench, result, started_at=started, duration=1.5, record_samples=record_samples)
        res.save(str(root))
        paths.append(root / res._filename)
        if sidecar is not None or job is not None:
            side = root / machine / f"gpu-env-{sha[:8]}.json"
            # Another environment's file of this commit keeps its record (one sidecar per commit).
            marked = {**(util.load_json(str(side)) if side.exists() else {}), **(sidecar or {})}
            if job is not None:
                path = root / res._filename
                marked = with_calls(marked, job, {path.name: hashlib.sha256(path.read_bytes()).hexdigest()})
            util.write_json(str(root / machine / f"gpu-env-{sha[:8]}.json"), marked)
    return paths


@pytest.fixture
def asv_dir(tmp_path: Path) -> Callable[..., Path]:
    """Factory: `asv_dir(commits, **write_results_options) -> results_dir`."""

    def make(commits: Sequence[str], name: str = "results", **kwargs: Any) -> Path:
        root = tmp_path / name
        root.mkdir(exist_ok=True)
        write_results(root, commits, **kwargs)
        return root

    return make


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "history.sqlite"


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh store's `--db`, once on SQLite and once on PostgreSQL (`pg_url`): a test taking it
    asserts the same outcome on both."""
    if request.param == "sqlite":
        return str(tmp_path / "history.sqlite")
    return request.getfixturevalue("pg_url")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def pg_server() -> Iterator[str | None]:
    """The URL of a PostgreSQL server (its maintenance database), or None when none can run."""
    url = os.environ.get("TEST_POSTGRES_URL")
    if url:
        yield url
        return
    initdbs = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not initdbs:
        yield None
        return
    bindir = Path(initdbs[-1]).parent
    tmp = Path(tempfile.mkdtemp(prefix="ci-pg-"))
    port = _free_port()
    as_root = os.geteuid() == 0
    if as_root:
        shutil.chown(tmp, "postgres")

    def run(cmd: str) -> subprocess.CompletedProcess[str]:
        argv = ["su", "postgres", "-s", "/bin/sh", "-c", cmd] if as_root else ["sh", "-c", cmd]
        return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)

    data = tmp / "data"
    started = False
    try:
        if run(f"{bindir}/initdb -D {data} -U postgres -A trust").returncode == 0:
            opts = f"-p {port} -k {tmp} -c listen_addresses=127.0.0.1 -c fsync=off"
            started = run(f"{bindir}/pg_ctl -D {data} -o '{opts}' -l {tmp}/log -w start").returncode == 0
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres" if started else None
    finally:
        if started:
            run(f"{bindir}/pg_ctl -D {data} -m immediate stop")
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture
def pg_url(pg_server: str | None) -> Iterator[str]:
    """A fresh, empty PostgreSQL database for one test (dropped afterwards)."""
    requires(pg_server is not None, "PostgreSQL server")
    assert pg_server is not None
    try:
        import psycopg  # noqa: F401
    except ImportError:
        requires(False, "psycopg")
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    name = f"ci_test_{uuid.uuid4().hex[:12]}"
    admin = create_engine(pg_server, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
    except Exception as exc:  # server unreachable: a missing component, not a test failure
        admin.dispose()
        requires(False, f"PostgreSQL server at {pg_server} ({exc.__class__.__name__})")
    yield make_url(pg_server).set(database=name).render_as_string(hide_password=False)
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


class _Flag:
    """True while the wrapped call runs (`outside_speed_check`)."""

    def __init__(self) -> None:
        self.on = False

    def __bool__(self) -> bool:
        return self.on


def outside_speed_check(monkeypatch: pytest.MonkeyPatch) -> _Flag:
    """A flag that is true while ingest's check for jobs of another speed runs (`ci.ingest.speed`,
    called after a directory's files are written), for tests that count the writes' own queries."""
    import ci.ingest.results_dir as results_dir

    flag = _Flag()
    real = results_dir.split_off_speed_jobs

    def wrapped(store):
        flag.on = True
        try:
            return real(store)
        finally:
            flag.on = False

    monkeypatch.setattr(results_dir, "split_off_speed_jobs", wrapped)
    return flag
