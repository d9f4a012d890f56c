"""Ingest with its forked parsers gives what ingest in one process gives: the same outcome for every
file (hostile, irregular, a second copy of a run, bytes stored before) and the same store, read
back bit for bit; a parsed run comes back from a parser equal to the run parsed here, its packed
columns those the store would pack; an interrupt leaves no parser running and loses no committed
batch. The forked path is forced here whatever the machine's CPUs (`PARALLEL_MIN_FILES`)."""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import pickle
import shutil
import signal
from pathlib import Path

import pytest

from ci.ingest import FileOutcome, IngestProgress, ingest_results_dir, reading
from ci.ingest.asv_files import load_benchmarks_json, load_machine_json
from ci.store import Store
from ci.store.codec import pack_block
from tests.ci.test_ingest_fast_paths import ODD_ROWS
from tests.ci.test_ingest_hostile import CASES, RECORDED, _edit, _files

pytestmark = pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs fork")


def _forked(monkeypatch, on: bool, parsers: int = 2) -> None:
    monkeypatch.setattr(reading, "PARALLEL_MIN_FILES", 1 if on else 10**9)
    monkeypatch.setattr(reading, "fork_workers", lambda items, least: parsers if items >= least else 1)
    monkeypatch.setattr(reading, "_TASK_FILES", 3)  # several tasks for 10-20 files


def _store_dump(url: str) -> tuple[object, ...]:
    """Everything a reader sees, in a comparable form: results bit for bit, runs, commits, machines."""
    with Store(url) as store:
        results = sorted(
            (r.benchmark.key, r.benchmark.unit, str(r.benchmark.direction), r.commit_sha, r.machine, r.run_id,
             tuple(s.hex() for s in r.samples), r.started_at, r.environment, r.benchmark_version)
            for r in store.results()
        )  # fmt: skip
        commits = sorted((c.sha, c.time, c.parents) for c in store.commits())
        return store.counts(), results, commits, sorted(m.name for m in store.machines())


def _both(tmp_path: Path, monkeypatch, root: Path) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
    """(outcomes, store) of `root` ingested twice into fresh stores: in one process, then forked."""
    out = []
    for on in (False, True):
        _forked(monkeypatch, on)
        url = str(tmp_path / f"forked-{on}.sqlite")
        with Store(url) as store:
            report = ingest_results_dir(store, root)
        outcomes = [(f.path, f.status, f.points, f.message, f.skipped) for f in report.files]
        out.append((outcomes, _store_dump(url)))
    return out[0], out[1]


@pytest.fixture
def twenty(tmp_path: Path) -> Path:
    """The 10 recorded H200 files and 10 more: copies of them under other commits (new runs)."""
    root = tmp_path / "results"
    shutil.copytree(RECORDED, root)
    for i, path in enumerate(_files(root)):
        sha = f"{i:02x}" + "ab" * 19
        copy = path.with_name(f"{sha[:8]}-virtualenv-py3.12.json")
        copy.write_text(path.read_text())
        _edit(copy, lambda d, sha=sha: d.__setitem__("commit_hash", sha))
    return root


def test_forked_parsers_give_the_outcomes_and_store_of_one_process(tmp_path, monkeypatch, twenty):
    inline, forked = _both(tmp_path, monkeypatch, twenty)
    assert [s for _, s, *_ in inline[0]] == ["inserted"] * 20
    assert forked == inline


@pytest.mark.parametrize("case", list(CASES) + list(ODD_ROWS) + ["same-run-other-contents", "stored-before"])
def test_every_kind_of_file_is_placed_alike_forked(tmp_path, monkeypatch, twenty, case):
    files = _files(twenty)
    target = files[4]
    if case in CASES:
        CASES[case][0](target)
    elif case in ODD_ROWS:
        _edit(target, ODD_ROWS[case])
    elif case == "same-run-other-contents":  # a later file (path order) holds the run of an earlier one
        target.with_name("zz" + target.name).write_text(target.read_text() + " ")
    else:  # half the files were ingested before: their bytes are known, the rest are new
        for on in (False, True):
            _forked(monkeypatch, False)
            partial = tmp_path / f"partial-{on}"
            shutil.copytree(twenty, partial)
            for path in _files(partial)[::2]:
                path.unlink()
            with Store(str(tmp_path / f"forked-{on}.sqlite")) as store:
                assert ingest_results_dir(store, partial).ok
    inline, forked = _both(tmp_path, monkeypatch, twenty)
    assert forked == inline
    statuses = {s for _, s, *_ in inline[0]}
    if case in CASES or case == "same-run-other-contents":
        assert "error" in statuses
    if case == "stored-before":
        assert statuses == {"inserted", "unchanged"}


def test_a_sidecar_that_cannot_be_read_is_its_files_error_alike_forked(tmp_path, monkeypatch, twenty):
    sha = _files(twenty)[2].name[:8]
    (twenty / "h200" / f"gpu-env-{sha}.json").write_text("{not json")
    inline, forked = _both(tmp_path, monkeypatch, twenty)
    assert forked == inline
    assert [m for _, s, _, m, _ in inline[0] if s == "error"], inline[0]


def test_a_parsed_run_crosses_back_equal_with_the_stores_packed_columns(twenty, monkeypatch):
    """`_wire` / `_unwire` through pickle, as a parser's results travel: the same runs and
    sidecars, each block's packed columns what `pack_block` makes of its fields."""
    benchmarks = load_benchmarks_json(twenty)
    info = load_machine_json(twenty / "h200")
    files = _files(twenty)
    _edit(files[1], ODD_ROWS["failed-and-skipped-points"])
    _edit(files[2], ODD_ROWS["no-samples-at-all"])
    CASES["nan-duration"][0](files[3])
    items = [reading._read_one(p, benchmarks, info, {}) for p in files]
    back = reading._unwire(pickle.loads(pickle.dumps(reading._wire(items))))
    assert back == items
    assert isinstance(items[3], FileOutcome)
    blocks = [b for item in back if isinstance(item, tuple) for b in item[0].blocks]
    assert len(blocks) >= 10 and all(b.packed == pack_block(b.values, b.samples, b.stats) for b in blocks)
    assert any(not b.has_raw_samples for b in blocks) and any(b.has_raw_samples for b in blocks)


def test_an_interrupted_forked_ingest_leaves_no_parser_and_keeps_its_batches(tmp_path, monkeypatch, twenty):
    _forked(monkeypatch, True)
    url = str(tmp_path / "interrupted.sqlite")

    def stop(progress: IngestProgress) -> None:
        raise KeyboardInterrupt

    with Store(url) as store, pytest.raises(KeyboardInterrupt):
        ingest_results_dir(store, twenty, batch_size=7, progress=stop)
    assert multiprocessing.active_children() == []
    with Store(url) as store:
        assert store.counts()["runs"] == 7  # the first batch committed, nothing of the second
        report = ingest_results_dir(store, twenty)
    assert (report.count("unchanged"), report.count("inserted")) == (7, 13)
    _forked(monkeypatch, False)
    with Store(str(tmp_path / "whole.sqlite")) as store:
        assert ingest_results_dir(store, twenty).ok
    assert _store_dump(url)[1] == _store_dump(str(tmp_path / "whole.sqlite"))[1]


def test_a_few_files_are_parsed_here_and_many_by_forked_parsers(monkeypatch, twenty):
    """A commit's ingest forks nothing; a history's does, where there is more than one CPU; a
    history's folder with one new file parses that one here."""
    started = []
    real = reading.multiprocessing.get_context

    def spy(method: str):
        started.append(method)
        return real(method)

    monkeypatch.setattr(reading.multiprocessing, "get_context", spy)
    monkeypatch.setattr(reading, "fork_workers", lambda items, least: 2 if items >= least else 1)
    benchmarks = load_benchmarks_json(twenty)
    infos = {twenty / "h200": load_machine_json(twenty / "h200")}
    few = _files(twenty)
    assert len(list(reading.read_all(few, benchmarks, infos, {}))) == 20
    assert started == []
    monkeypatch.setattr(reading, "PARALLEL_MIN_FILES", 20)
    assert len(list(reading.read_all(few, benchmarks, infos, {}))) == 20
    assert started == ["fork"]
    # Files stored before are known from their hash and are not parsed: they do not count.
    known = {hashlib.sha256(p.read_bytes()).hexdigest(): ("sha", f"run-{i}") for i, p in enumerate(few[1:])}
    monkeypatch.setattr(reading, "PARALLEL_MIN_FILES", 2)
    got = list(reading.read_all(few, benchmarks, infos, known))
    assert started == ["fork"]  # no second fork
    assert [type(g).__name__ for g in got] == ["tuple"] + ["Known"] * 19


def test_a_parser_killed_mid_ingest_is_an_error_not_a_hang(tmp_path, monkeypatch, twenty):
    """A parser that dies (the kernel's OOM killer, say) fails the ingest with a message instead of
    leaving it waiting for that task forever; the batches stored before stay, and ingest again
    completes the store."""
    _forked(monkeypatch, True)
    parent = os.getpid()
    victim = _files(twenty)[12]
    real = reading._read_one

    def dies(path, *args):
        if path == victim and os.getpid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)
        return real(path, *args)

    monkeypatch.setattr(reading, "_read_one", dies)
    url = str(tmp_path / "killed.sqlite")
    with Store(url) as store, pytest.raises(RuntimeError, match="a forked parser stopped .* were parsed; the batches"):
        ingest_results_dir(store, twenty, batch_size=5)
    assert multiprocessing.active_children() == []
    monkeypatch.setattr(reading, "_read_one", real)
    with Store(url) as store:
        kept = store.counts()["runs"]
        assert kept >= 5 and kept % 5 == 0 and kept <= 10  # whole batches, none after the dead task
        report = ingest_results_dir(store, twenty)
    assert report.ok and report.count("unchanged") == kept and report.count("inserted") == 20 - kept


_WORKER_SCRIPT = """
import os, sys, time
from ci.forking import fork_map

def slow(chunk):
    with open(os.path.join(sys.argv[1], str(os.getpid())), "w"):
        pass
    time.sleep(60)
    return chunk

fork_map(slow, [1, 2], 2, names=lambda c: [str(c)], lost="chunks")
"""


@pytest.mark.skipif(not os.sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_workers_of_a_killed_parent_do_not_outlive_it(tmp_path):
    """The parent alone killed (SIGKILL: the OOM killer; SIGTERM to its pid): its forked workers end
    with it instead of blocking forever on their pipe, holding the job's stdout and the store open
    (`ci.forking.die_with_parent`; ingest's parsers start the same way)."""
    import subprocess
    import sys
    import time

    pids = tmp_path / "pids"
    pids.mkdir()
    proc = subprocess.Popen([sys.executable, "-c", _WORKER_SCRIPT, str(pids)],
                            cwd=Path(__file__).resolve().parents[2], env={**os.environ, "PYTHONPATH": "."})
    try:
        deadline = time.monotonic() + 30
        while len(list(pids.iterdir())) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        workers = [int(p.name) for p in pids.iterdir()]
        assert len(workers) == 2
    finally:
        proc.kill()
        proc.wait()

    def alive(pid: int) -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        try:  # a zombie (dead, not yet reaped by init) counts as gone
            return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
        except OSError:
            return False

    deadline = time.monotonic() + 10
    while any(alive(p) for p in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = [p for p in workers if alive(p)]
    for p in left:
        os.kill(p, signal.SIGKILL)
    assert not left
