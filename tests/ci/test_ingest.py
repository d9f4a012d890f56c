"""Ingest of asv result files: values as asv wrote them, idempotence, atomicity, malformed input,
sidecars, git metadata, and several writers at once on SQLite. Every test taking `store_url` runs
on SQLite and on PostgreSQL alike."""

from __future__ import annotations

import json
import math
import multiprocessing as mp
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ci.ingest import ingest_results_dir
from ci.ingest.asv_files import AsvFormatError, load_benchmarks_json
from ci.ingest.parse import parse_result_file
from ci.ingest.results_dir import NO_REPO_NOTE
from ci.records import JOB_KEY, Direction, Kind
from ci.store import Store
from tests.ci.conftest import BENCHMARKS, ENV_NAME, MACHINE, sha_for, write_results

REPO_ROOT = Path(__file__).resolve().parents[2]


def _noisy(name: str, j: int, c: int) -> list[float]:
    import random

    rng = random.Random(hash((name, j, c)) & 0xFFFF)
    return [(j + 1) * 1e-4 * rng.uniform(0.9, 1.1) for _ in range(7)]


def test_values_match_what_asv_loads(asv_dir, store_url):
    """Every stored sample is what asv's own loader reads from the same files, point by point."""
    from asv.results import Results

    root = asv_dir([sha_for(i) for i in range(3)], samples=_noisy)
    benches = {b["name"]: b for b in BENCHMARKS}
    with Store(store_url) as store:
        report = ingest_results_dir(store, root)
        assert report.ok and report.count("inserted") == 3
        stored = {(r.commit_sha, r.benchmark.key): r for r in store.results()}
    assert len(stored) == 3 * 7
    info = load_benchmarks_json(root)
    checked = 0
    for path in sorted((root / MACHINE).glob("0000*.json")):
        asv = Results.load(str(path), machine_name=MACHINE)
        ours = parse_result_file(path, info, {"machine": MACHINE})
        for name in asv.get_all_result_keys():
            asv_samples = asv.get_result_samples(name, benches[name]["params"])
            asv_values = asv.get_result_value(name, benches[name]["params"])
            points = [p for p in ours.all_points() if p.benchmark.name == name]
            assert len(points) == len(asv_samples)
            for point, samples, value in zip(points, asv_samples, asv_values, strict=True):
                assert point.value == value
                assert list(stored[(asv.commit_hash, point.benchmark.key)].samples) == samples
                checked += 1
    assert checked == 21


def test_param_grid_order_and_kinds(asv_dir, store_url):
    """Grid points follow itertools.product order (last parameter fastest); kinds come from type+unit."""

    def marked(name: str, j: int, c: int) -> list[float]:
        return [float(j + 1)] * 3  # sample value = grid index + 1 (a time of 0 is refused)

    root = asv_dir([sha_for(0)], samples=marked)
    with Store(store_url) as store:
        ingest_results_dir(store, root)
        got = {r.benchmark.key: r.samples[0] for r in store.results()}
        kinds = {b.name: (b.direction, b.kind, b.unit) for b in store.benchmarks()}
    # params [['fp16','bf16'], ['1','8']] -> (fp16,1)=0, (fp16,8)=1, (bf16,1)=2, (bf16,8)=3
    assert got["bench_attention.GPUTime.time_gpu(dtype=fp16, batch=1)"] == 1.0
    assert got["bench_attention.GPUTime.time_gpu(dtype=fp16, batch=8)"] == 2.0
    assert got["bench_attention.GPUTime.time_gpu(dtype=bf16, batch=1)"] == 3.0
    assert got["bench_attention.GPUTime.time_gpu(dtype=bf16, batch=8)"] == 4.0
    assert got["bench_correctness.Logits.track_max_abs_diff(backend=padded_sdpa)"] == 2.0
    assert kinds["bench_attention.GPUTime.time_gpu"] == (Direction.LOWER, Kind.LATENCY, "seconds")
    assert kinds["bench_model.Throughput.track_images_per_s"] == (Direction.HIGHER, Kind.THROUGHPUT, "images/s")
    assert kinds["bench_correctness.Logits.track_max_abs_diff"] == (Direction.LOWER, Kind.CORRECTNESS, "max abs diff")


def test_failed_points_are_marked_never_valued(asv_dir, store_url):
    def some_fail(name: str, j: int, c: int) -> list[float] | None:
        return None if ("time_gpu" in name and j == 1) else [1.0, 2.0, 3.0]

    root = asv_dir([sha_for(0)], samples=some_fail)
    with Store(store_url) as store:
        ingest_results_dir(store, root)
        results = store.results()
        failures = store.failures()
    assert len(results) == 6
    assert [(f.benchmark.key, f.status) for f in failures] == [
        ("bench_attention.GPUTime.time_gpu(dtype=fp16, batch=8)", "failed")
    ]
    assert all(r.benchmark.key != failures[0].benchmark.key for r in results)


def test_skipped_point_nan_is_marked_skipped(tmp_path, store_url):
    root = tmp_path / "res"
    write_results(root, [sha_for(0)])
    path = next((root / MACHINE).glob("0000*.json"))
    data = json.loads(path.read_text())
    row = data["results"]["bench_model.Throughput.track_images_per_s"]
    row[0] = [float("nan")]  # asv writes NaN for a point whose setup raised NotImplementedError
    path.write_text(json.dumps(data))
    with Store(store_url) as store:
        ingest_results_dir(store, root)
        skipped = [f for f in store.failures() if f.status == "skipped"]
        assert [f.benchmark.key for f in skipped] == ["bench_model.Throughput.track_images_per_s"]
        assert not store.results(benchmark_key="bench_model.Throughput.track_images_per_s")


def test_negative_values_are_valid_only_for_track_benchmarks(tmp_path, store_url):
    """A track benchmark may return any finite number; a time or memory one can never be negative."""
    peakmem = {"name": "bench_mem.Peak.peakmem_forward", "type": "peakmem", "unit": "bytes", "params": [],
               "param_names": [], "version": "v-mem-1"}  # fmt: skip

    def signed(name: str, j: int, c: int) -> list[float]:
        if "track_images_per_s" in name:
            return [-3.0, -2.0, -1.0]
        return [-1024.0] * 3 if ("peakmem" in name and c == 1) else [1024.0 + j] * 3

    root = tmp_path / "res"
    write_results(root, [sha_for(0), sha_for(1)], benchmarks=[*BENCHMARKS, peakmem], samples=signed)
    with Store(store_url) as store:
        report = ingest_results_dir(store, root)
        assert report.count("inserted") == 1
        (error,) = report.errors
        assert error.path.endswith(f"{sha_for(1)[:8]}-{ENV_NAME}.json")
        assert "'bench_mem.Peak.peakmem_forward' point 0 result is negative (-1024.0)" in error.message
        (track,) = store.results(benchmark_key="bench_model.Throughput.track_images_per_s")
        assert track.value == -2.0 and track.samples == (-3.0, -2.0, -1.0)
        assert {r.commit_sha for r in store.results()} == {sha_for(0)}  # nothing of the bad file


def test_without_record_samples_the_value_is_the_only_sample(asv_dir, store_url):
    root = asv_dir([sha_for(0)], samples=_noisy, record_samples=False)
    with Store(store_url) as store:
        ingest_results_dir(store, root)
        r = store.results(benchmark_key="bench_model.Throughput.track_images_per_s")[0]
    assert len(r.samples) == 1 and math.isfinite(r.samples[0]) and r.value == r.samples[0]


def test_idempotent(asv_dir, store_url):
    root = asv_dir([sha_for(i) for i in range(4)])
    with Store(store_url) as store:
        first = ingest_results_dir(store, root)
        before = (store.counts(), store.results(), store.commits(), store.machines())
        second = ingest_results_dir(store, root)
        after = (store.counts(), store.results(), store.commits(), store.machines())
    assert first.count("inserted") == 4
    assert second.count("unchanged") == 4 and second.count("inserted") == 0
    assert before == after


def test_rewritten_file_replaces_its_run(asv_dir, store_url):
    """asv rewrites a result file in place (e.g. --append-samples): the run is replaced, not doubled."""
    root = asv_dir([sha_for(0)])
    with Store(store_url) as store:
        ingest_results_dir(store, root)
        write_results(root, [sha_for(0)], samples=lambda n, j, c: [5.0, 5.0, 5.0, 5.0])
        report = ingest_results_dir(store, root)
        assert report.count("replaced") == 1
        assert store.counts()["runs"] == 1 and store.counts()["results"] == 7
        assert {r.samples for r in store.results()} == {(5.0, 5.0, 5.0, 5.0)}


def test_a_rewritten_file_without_some_benchmarks_says_their_points_went(tmp_path, store_url, capsys):
    """asv rewrites a commit's file without a benchmark it dropped (removed from the suite, or of a new
    version): the stored run is replaced and that benchmark's points at the commit go with it. That
    happened without a word (2026-12-06); ingest now warns, naming what went."""
    from ci.cli import main

    root = tmp_path / "results"
    write_results(root, [sha_for(0), sha_for(1)])
    assert main(["ingest", "--db", store_url, str(root)]) == 0
    write_results(root, [sha_for(1)], benchmarks=BENCHMARKS[:2], first_commit=1)
    capsys.readouterr()
    assert main(["ingest", "--db", store_url, str(root)]) == 0
    out, err = capsys.readouterr()
    assert "1 replaced" in out
    (line,) = [ln for ln in err.splitlines() if "rewritten without" in ln]
    assert line.startswith("warning: ") and "rewritten without 1 benchmark(s) the stored run held" in line, line
    assert "'bench_correctness.Logits.track_max_abs_diff'" in line
    with Store(store_url) as store:
        names = {r.benchmark.name for r in store.results(commit_sha=sha_for(1))}
        assert names == {b["name"] for b in BENCHMARKS[:2]}
        assert len(store.replacements()) == 1
    # a rewrite with every benchmark it held says nothing of the kind
    write_results(root, [sha_for(1)], benchmarks=BENCHMARKS[:2], first_commit=1,
                  samples=lambda n, j, c: [5.0] * 4)
    assert main(["ingest", "--db", store_url, str(root)]) == 0
    assert "rewritten without" not in capsys.readouterr().err


def test_result_files_dating_one_commit_differently_are_warned_of(tmp_path, store_url, capsys):
    """Without a checkout asv's `date` orders the commits; two environments' files of one commit that
    disagree on it (a file rewritten by hand, or forged) left the commit at the first date, silently
    (2026-12-06). Ingest warns, naming the file and both dates."""
    from ci.cli import main

    root = tmp_path / "results"
    write_results(root, [sha_for(0), sha_for(1)])
    (other,) = write_results(root, [sha_for(1)], env_name="virtualenv-py3.12-other", first_commit=1)
    assert main(["ingest", "--db", store_url, str(root)]) == 0
    assert "dated differently" not in capsys.readouterr().err, "files that agree say nothing"
    data = json.loads(other.read_text())
    data["date"] += 40 * 86_400_000  # 40 days later, in asv's milliseconds
    other.write_text(json.dumps(data))
    assert main(["ingest", "--db", store_url, str(root)]) == 0
    (line,) = [ln for ln in capsys.readouterr().err.splitlines() if "dated differently" in ln]
    assert line.startswith(f"warning: 1 commits are dated differently by their result files (e.g. {sha_for(1)[:12]}: ")
    assert f" in {other}, stored as " in line and "--repo CHECKOUT" in line


def test_a_run_from_another_results_folder_is_refused_unless_replace(tmp_path, store_url, capsys):
    """Another results folder's file of a stored (machine, environment, commit) with other contents
    replaced the stored run with exit 0 ("1 replaced"). It is now an error naming both files, the
    stored run kept, every time; `--replace` lets it in and the store records the replacement."""
    from ci.cli import main

    first, other = tmp_path / "runner-a", tmp_path / "runner-b"
    write_results(first, [sha_for(0), sha_for(1)])
    write_results(other, [sha_for(1)], samples=lambda n, j, c: [5.0] * 4, first_commit=1)
    (stored_file,) = (first / MACHINE).glob(f"{sha_for(1)[:8]}-*.json")
    (other_file,) = (other / MACHINE).glob(f"{sha_for(1)[:8]}-*.json")
    assert main(["ingest", "--db", store_url, str(first)]) == 0
    with Store(store_url) as store:
        before = store.results(commit_sha=sha_for(1))
    for _ in range(2):
        assert main(["ingest", "--db", store_url, str(other)]) == 2
        captured = capsys.readouterr()
        assert "0 replaced" in captured.out and "1 errors" in captured.out
        (line,) = [ln for ln in captured.err.splitlines() if ln.startswith("error:")]
        assert line.startswith(f"error: {other_file}: a different run of ") and f"ingested from {stored_file}" in line
        assert "--replace" in line
        with Store(store_url) as store:
            assert store.results(commit_sha=sha_for(1)) == before and store.replacements() == []
    assert main(["ingest", "--db", store_url, "--replace", str(other)]) == 0
    captured = capsys.readouterr()
    assert "1 replaced" in captured.out and "replaced the stored run" in captured.err
    with Store(store_url) as store:
        assert {r.samples for r in store.results(commit_sha=sha_for(1))} == {(5.0,) * 4}
        assert store.counts()["runs"] == 2
        (record,) = store.replacements()
        assert (record.old_source, record.new_source, record.forced) == (str(stored_file), str(other_file), True)
        assert record.run_key == f"{MACHINE}/{sha_for(1)}/{ENV_NAME}" and record.old_digest != record.new_digest
    # The first folder's file is now the other run of it: refused in turn, and nothing flips back.
    assert main(["ingest", "--db", store_url, str(first)]) == 2
    assert f"ingested from {other_file}" in capsys.readouterr().err


def test_asv_rewriting_its_own_file_still_replaces_the_run_however_the_folder_is_named(tmp_path, store_url,
                                                                                       monkeypatch):
    """asv rewrites a stored run's own file (`--append-samples`): a replacement, recorded as not
    forced, whether ingest names the folder by a relative path, an absolute one or through a link."""
    root = tmp_path / "results"
    write_results(root, [sha_for(0)])
    link = tmp_path / "linked"
    link.symlink_to(root)
    monkeypatch.chdir(tmp_path)
    with Store(store_url) as store:
        assert ingest_results_dir(store, "results").count("inserted") == 1
        for n, where in enumerate([root, link, Path("results")], start=1):
            write_results(root, [sha_for(0)], samples=lambda name, j, c, n=n: [float(n)] * 4)
            report = ingest_results_dir(store, where)
            assert report.count("replaced") == 1 and report.ok, report.files
            assert {r.samples for r in store.results()} == {(float(n),) * 4}
        records = store.replacements()
    (stored,) = (root / MACHINE).glob("*-*.json")
    assert [(r.old_source, r.new_source, r.forced) for r in records] == [(str(stored), str(stored), False)] * 3


def test_the_store_refuses_another_file_s_run_of_a_stored_one_itself(tmp_path, store_url):
    """The rule is the store's (`Store.ingest_run`), whoever calls it: a different run of a stored key
    from another file raises `ReplacementRefused` unless `replace=True`."""
    from ci.ingest.asv_files import load_machine_json
    from ci.records import Commit, Machine
    from ci.store import ReplacementRefused

    first, other = tmp_path / "a", tmp_path / "b"
    write_results(first, [sha_for(0)])
    write_results(other, [sha_for(0)], samples=lambda n, j, c: [3.0] * 4)
    benchmarks = load_benchmarks_json(first)
    runs = [parse_result_file(next((d / MACHINE).glob("*-*.json")), benchmarks, load_machine_json(d / MACHINE))
            for d in (first, other)]  # fmt: skip
    with Store(store_url) as store:

        def args(run):
            return run, Machine(name=MACHINE, asv_name=MACHINE, env_name=run.env_name), Commit(run.commit_hash)

        assert store.ingest_run(*args(runs[0])) == "inserted"
        with pytest.raises(ReplacementRefused, match="is stored, ingested from"):
            store.ingest_run(*args(runs[1]))
        assert isinstance(store.ingest_runs([args(runs[1])])[0], ReplacementRefused)
        assert store.ingest_run(*args(runs[1]), replace=True) == "replaced from another source"
        assert [r.forced for r in store.replacements()] == [True]


def test_crash_mid_file_leaves_no_partial_run(asv_dir, store_url, monkeypatch):
    root = asv_dir([sha_for(0), sha_for(1)])
    store = Store(store_url)
    real = Store._insert_results
    calls = {"n": 0}

    def explode(self, conn, rows, blocks):
        calls["n"] += 1
        if calls["n"] == 2:
            real(self, conn, rows[:3], blocks[:1])  # half the rows are in when the crash comes
            raise RuntimeError("power cut")
        real(self, conn, rows, blocks)

    monkeypatch.setattr(Store, "_insert_results", explode)
    report = ingest_results_dir(store, root)
    assert report.count("inserted") == 1 and len(report.errors) == 1
    assert "power cut" in report.errors[0].message
    counts = store.counts()
    assert counts["runs"] == 1 and counts["results"] == 7
    monkeypatch.setattr(Store, "_insert_results", real)
    assert ingest_results_dir(store, root).count("inserted") == 1  # the failed file goes in on retry
    assert store.counts()["results"] == 14
    store.close()


_KILL_SCRIPT = """
import os, sys
sys.path.insert(0, {root!r})
from ci.store import Store
from ci.ingest import ingest_results_dir
real = Store._insert_results
calls = [0]
def die(self, conn, rows, blocks):
    real(self, conn, rows, blocks)
    calls[0] += 1
    if calls[0] == {die_at}:
        os._exit(9)  # the process dies inside the transaction, after every row was written
Store._insert_results = die
ingest_results_dir(Store({db!r}), {res!r}, batch_size={batch})
"""


def test_killed_process_leaves_no_partial_run(asv_dir, store_url):
    """A real crash (the process exits inside the transaction): SQLite rolls the file back."""
    root = asv_dir([sha_for(0)])
    script = _KILL_SCRIPT.format(root=str(REPO_ROOT), db=str(store_url), res=str(root), die_at=1, batch=50)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 9, proc.stderr
    with Store(store_url) as store:
        counts = store.counts()
        assert counts["runs"] == 0 and counts["results"] == 0
        assert ingest_results_dir(store, root).count("inserted") == 1


def test_a_kill_keeps_the_batches_committed_before_it(asv_dir, db_path):
    """As `ingest --help` says: files commit in batches, each file all or nothing; a kill in the
    third batch (of one file each) keeps the first two files, loses nothing half-written, and the
    next ingest writes the rest."""
    root = asv_dir([sha_for(i) for i in range(4)])
    script = _KILL_SCRIPT.format(root=str(REPO_ROOT), db=str(db_path), res=str(root), die_at=3, batch=1)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 9, proc.stderr
    with Store(db_path) as store:
        assert store.counts()["runs"] == 2 and store.counts()["results"] == 14
        again = ingest_results_dir(store, root)
        assert (again.count("unchanged"), again.count("inserted")) == (2, 2)
        assert store.counts()["results"] == 28


def _edit(text: str, change) -> str:
    data = json.loads(text)
    change(data)
    return json.dumps(data)


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda t: t[: len(t) // 2], "truncated or corrupt"),
        (lambda t: "", "truncated or corrupt"),
        (lambda t: t.replace('"version": 2', '"version": 1'), "format version"),
        (lambda t: t.replace('"commit_hash"', '"commit_hsh"'), "missing key 'commit_hash'"),
        (lambda t: t.replace('"commit_hash": "', '"commit_hash": "zz'), "not a hex commit id"),
        (lambda t: t.replace('"machine": "h200-runner"', '"machine": "other"'), "does not match machine.json"),
        (
            lambda t: _edit(t, lambda d: d["results"]["bench_attention.GPUTime.time_gpu"][0].__setitem__(0, "fast")),
            "not a number",
        ),
        (
            lambda t: _edit(t, lambda d: d["results"]["bench_attention.GPUTime.time_gpu"][0].pop()),
            "should list 4 points",
        ),
        (
            lambda t: _edit(t, lambda d: d["results"]["bench_attention.GPUTime.time_gpu"][11][0].__setitem__(1, True)),
            "samples must all be numbers",
        ),
        # Python's json reads (and asv's json writes) Infinity, -Infinity and NaN literals.
        (
            lambda t: _edit(t, lambda d: d["results"]["bench_attention.GPUTime.time_gpu"][0].__setitem__(2, math.inf)),
            "'bench_attention.GPUTime.time_gpu' point 2 result is not a finite number: inf",
        ),
        (
            lambda t: _edit(
                t, lambda d: d["results"]["bench_model.Throughput.track_images_per_s"].__setitem__(0, [-math.inf])
            ),
            "'bench_model.Throughput.track_images_per_s' point 0 result is not a finite number: -inf",
        ),
        (
            lambda t: _edit(
                t, lambda d: d["results"]["bench_attention.GPUTime.time_gpu"][11][1].__setitem__(3, math.inf)
            ),
            "'bench_attention.GPUTime.time_gpu' point 1 sample is not a finite number: inf",
        ),
        (
            lambda t: _edit(
                t, lambda d: d["results"]["bench_correctness.Logits.track_max_abs_diff"][11][0].__setitem__(0, math.nan)
            ),
            "'bench_correctness.Logits.track_max_abs_diff' point 0 sample is not a finite number: nan",
        ),
        (
            lambda t: _edit(t, lambda d: d["results"]["bench_attention.GPUTime.time_gpu"][0].__setitem__(0, -1e-4)),
            "'bench_attention.GPUTime.time_gpu' point 0 result is negative (-0.0001), impossible for a 'time'",
        ),
        (
            lambda t: _edit(t, lambda d: d["results"]["bench_attention.GPUTime.time_gpu"][11][3].__setitem__(5, -2e-4)),
            "'bench_attention.GPUTime.time_gpu' point 3 sample is negative (-0.0002), impossible for a 'time'",
        ),
        (  # a timer that did not advance: a comparison read it as a 100% speed-up (2026-12-07)
            lambda t: _edit(t, lambda d: (d["results"]["bench_attention.GPUTime.time_gpu"][0].__setitem__(0, 0.0),
                                          d["results"]["bench_attention.GPUTime.time_gpu"][11].__setitem__(0, None))),
            "'bench_attention.GPUTime.time_gpu' point 0 result is zero (0.0), impossible for a 'time'",
        ),
    ],
    ids=[
        "truncated",
        "empty",
        "old-format",
        "missing-key",
        "bad-sha",
        "wrong-machine",
        "string-value",
        "short-grid",
        "bool-sample",
        "inf-result",
        "minus-inf-track-result",
        "inf-sample",
        "nan-sample",
        "negative-time-result",
        "negative-time-sample",
        "zero-time-result",
    ],
)
def test_malformed_file_is_reported_and_others_still_go_in(asv_dir, store_url, damage, message):
    root = asv_dir([sha_for(0), sha_for(1), sha_for(2)])
    bad = sorted((root / MACHINE).glob("00000001-*.json"))[0]
    bad.write_text(damage(bad.read_text()))
    with Store(store_url) as store:
        report = ingest_results_dir(store, root)
        assert report.count("inserted") == 2
        assert [e.path for e in report.errors] == [str(bad)]
        assert message in report.errors[0].message and str(bad) in report.errors[0].message
        assert {c.sha for c in store.commits()} == {sha_for(0), sha_for(2)}


def test_missing_benchmarks_json_is_an_error(asv_dir, store_url):
    root = asv_dir([sha_for(0)])
    (root / "benchmarks.json").unlink()
    with Store(store_url) as store, pytest.raises(AsvFormatError, match="benchmarks.json: file not found"):
        ingest_results_dir(store, root)


def test_missing_machine_json_fails_only_that_machine(asv_dir, store_url):
    root = asv_dir([sha_for(0)])
    write_results(root, [sha_for(1)], machine="other-runner")
    (root / "other-runner" / "machine.json").unlink()
    with Store(store_url) as store:
        report = ingest_results_dir(store, root)
    assert report.count("inserted") == 1 and len(report.errors) == 1
    assert "machine.json: file not found" in report.errors[0].message


def test_corrupt_machine_json_is_reported_once(asv_dir, capsys):
    """Every file of the machine is an error (exit 2, nothing of it stored, nothing unaccounted for),
    but the machine.json message is printed once, and the other files are one line that points to the
    file that carries it (one line each was 58 near-identical lines on MetPy's history)."""
    from ci.cli import main

    root = asv_dir([sha_for(0)])
    bad_files = write_results(root, [sha_for(1), sha_for(2), sha_for(3)], machine="other-runner")
    (root / "other-runner" / "machine.json").write_text('{"version": 1, "machine": ')
    db = str(root.parent / "h.sqlite")
    assert main(["ingest", "--db", db, str(root)]) == 2
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line != NO_REPO_NOTE]
    assert sum("machine.json: not valid JSON" in line for line in lines) == 1
    assert lines[0].startswith(f"error: {root / 'other-runner' / 'machine.json'}: not valid JSON")
    assert lines[1:] == [
        f"error: 2 more result file(s) of that machine skipped, same machine.json error as {bad_files[0].name}"]
    assert "1 inserted" in captured.out and "3 errors" in captured.out
    with Store(db) as store:
        assert {c.sha for c in store.commits()} == {sha_for(0)}


def test_results_dir_must_exist(store_url, tmp_path):
    with Store(store_url) as store, pytest.raises(AsvFormatError, match="not a directory"):
        ingest_results_dir(store, tmp_path / "nope")
    with Store(store_url) as store, pytest.raises(TypeError, match="Store"):
        ingest_results_dir("sqlite:///x", tmp_path)  # type: ignore[arg-type]


def test_gpu_sidecar_goes_to_machine_and_environment(asv_dir, store_url):
    sidecar = {
        "gpu": "NVIDIA H200",
        "driver": "580.65",
        "cuda": "13.0",
        "torch": "2.14.1",
        "triton": "3.8.0",
        "sm_clock_mhz": "1980",
        "temperature_c": "41",
        "captured_at": "2026-11-29T10:00:00+00:00",
    }
    root = asv_dir([sha_for(0)], sidecar=sidecar)
    with Store(store_url) as store:
        ingest_results_dir(store, root)
        (machine,) = store.machines()
        env = dict(store.results()[0].environment)
    assert (machine.gpu, machine.driver, machine.cuda, machine.torch, machine.triton) == (
        "NVIDIA H200",
        "580.65",
        "13.0",
        "2.14.1",
        "3.8.0",
    )
    assert machine.cpu == "Xeon 8480" and dict(machine.extra)["num_cpu"] == "16"
    assert env["sm_clock_mhz"] == "1980" and env["temperature_c"] == "41" and env["env_name"].startswith("existing")
    assert "gpu" not in env


def test_a_job_marker_applies_only_to_the_bytes_it_was_recorded_for(asv_dir, store_url):
    """The sidecar records, per result file, the asv call that wrote it and the sha256 of what it
    wrote; a run carries the marker only while its file has those bytes. A file rewritten since (as a
    plain `asv run` of the commit rewrites it), a bare per-commit marker (the sidecars written before
    markers were bound to files), a malformed record and a plain `JOB_KEY` in the sidecar give none."""
    call = "gha-1.1-pr/3f9a0c5d2e71"
    shas = [sha_for(i) for i in range(5)]
    root = asv_dir(shas, job=call, sidecar={"gpu": "NVIDIA H200", "sm_clock_mhz": "1980"})
    machine_dir = root / MACHINE

    def sidecar_of(sha: str) -> Path:
        return machine_dir / f"gpu-env-{sha[:8]}.json"

    write_results(root, [shas[1]], samples=lambda n, j, c: [5.0, 5.0, 5.0, 5.0])  # rewritten, sidecar kept
    sidecar_of(shas[2]).write_text(json.dumps({"gpu": "NVIDIA H200", "job": call}))  # a legacy sidecar
    (name,) = [p.name for p in machine_dir.glob(f"{shas[3][:8]}-*.json")]
    sidecar_of(shas[3]).write_text(json.dumps({"asv_calls": {name: {"call": call, "sha256": 7}}}))  # malformed
    sidecar_of(shas[4]).write_text(json.dumps({"gpu": "NVIDIA H200", JOB_KEY: call}))
    with Store(store_url) as store:
        report = ingest_results_dir(store, root)
        envs = {r.commit_sha: dict(r.environment) for r in store.results()}
    assert report.ok and report.count("inserted") == 5, report.summary()
    assert envs[shas[0]][JOB_KEY] == call and envs[shas[0]]["sm_clock_mhz"] == "1980"
    for sha in shas[1:]:
        assert JOB_KEY not in envs[sha] and call not in envs[sha].values(), (sha, envs[sha])
    assert envs[shas[1]]["sm_clock_mhz"] == "1980", "the rest of the sidecar still applies"


def _git(repo: Path, *args: str, day: int = 1) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@x",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@x",
        "GIT_COMMITTER_DATE": f"2026-11-{day:02d}T10:00:00+00:00",
    }
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env
    ).stdout.strip()


def test_git_metadata_fills_commits(tmp_path, store_url):
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    shas = []
    for i in range(3):
        (repo / "f.txt").write_text(str(i))
        _git(repo, "add", "f.txt")
        _git(repo, "commit", "-q", "-m", f"change {i}", day=i + 1)
        shas.append(_git(repo, "rev-parse", "HEAD"))
    root = tmp_path / "res"
    write_results(root, shas[1:])
    with Store(store_url) as store:
        # First without git: sha and asv's date only; then with --repo the same commits get enriched.
        ingest_results_dir(store, root)
        assert all(c.subject == "" for c in store.commits())
        report = ingest_results_dir(store, root, repo=repo, branch="main")
        assert report.count("unchanged") == 2
        commits = store.commits(branch="main")
    assert [c.sha for c in commits] == shas[1:]
    assert [c.subject for c in commits] == ["change 1", "change 2"]
    assert commits[1].parents == (shas[1],)
    assert commits[0].time is not None and commits[0].time.tzinfo is not None


def test_branch_needs_repo(asv_dir, store_url):
    root = asv_dir([sha_for(0)])
    with Store(store_url) as store, pytest.raises(ValueError, match="--branch needs --repo"):
        ingest_results_dir(store, root, branch="main")


def _ingest_worker(db: str, root: str, start_at: float = 0.0) -> tuple[int, int, int]:
    """One runner: open the store, wait for the common start time (so the runners really race), ingest."""
    import time

    with Store(db) as store:
        time.sleep(max(0.0, start_at - time.time()))
        r = ingest_results_dir(store, root)
    return r.count("inserted"), r.count("unchanged"), len(r.errors)


@pytest.mark.parametrize("n_workers", [4])
def test_concurrent_writers_sqlite(tmp_path, n_workers):
    """Several runner processes ingest overlapping result sets into one SQLite file at once:
    no errors, no duplicates, every run exactly once."""
    dirs = overlapping_result_dirs(tmp_path, n_workers, n_commits=12)
    db = str(tmp_path / "shared.sqlite")
    ctx = mp.get_context("fork")  # fork: a spawned interpreter re-imports SQLAlchemy, ~2 s each on 2 cores
    with ctx.Pool(n_workers) as pool:
        start = time.time() + 1.0
        outcomes = pool.starmap(_ingest_worker, [(db, str(d), start) for d in dirs])
    assert all(errors == 0 for _, _, errors in outcomes), outcomes
    assert sum(i for i, _, _ in outcomes) == 12  # each run inserted once, by whichever runner came first
    with Store(db) as store:
        counts = store.counts()
    assert counts["runs"] == 12 and counts["results"] == 12 * 7 and counts["commits"] == 12
    assert counts["benchmarks"] == 7 and counts["machines"] == 1


def overlapping_result_dirs(tmp_path: Path, n_workers: int, n_commits: int) -> list[Path]:
    """Per-runner results directories holding overlapping halves of one set of identical files."""
    full = tmp_path / "all"
    files = write_results(full, [sha_for(i) for i in range(n_commits)])
    dirs = []
    for w in range(n_workers):
        d = tmp_path / f"res{w}"
        (d / MACHINE).mkdir(parents=True)
        shutil.copy(full / "benchmarks.json", d / "benchmarks.json")
        shutil.copy(full / MACHINE / "machine.json", d / MACHINE / "machine.json")
        for k in range(n_commits // 2):
            f = files[(w * n_commits // n_workers + k) % n_commits]
            shutil.copy(f, d / MACHINE / f.name)
        dirs.append(d)
    return dirs


def test_unknown_and_stale_benchmarks_are_skipped_and_reported(tmp_path, store_url):
    """As asv does: results of benchmarks absent from benchmarks.json, or of another benchmark
    version, are not comparable and are left out, but the report says so."""
    root = tmp_path / "res"
    write_results(root, [sha_for(0)])
    bench_json = json.loads((root / "benchmarks.json").read_text())
    bench_json["bench_attention.GPUTime.time_gpu"]["version"] = "v-attn-2"  # the benchmark changed since
    del bench_json["bench_model.Throughput.track_images_per_s"]
    (root / "benchmarks.json").write_text(json.dumps(bench_json))
    with Store(store_url) as store:
        report = ingest_results_dir(store, root)
        assert {b.name for b in store.benchmarks()} == {"bench_correctness.Logits.track_max_abs_diff"}
    (f,) = report.files
    assert f.status == "inserted" and f.skipped == 2 and f.points == 2
    assert "1 benchmarks missing from benchmarks.json and 1 of another benchmark version" in f.message
    assert "2 benchmarks skipped" in report.summary()


def test_files_that_skip_the_same_benchmarks_share_one_warning_line(tmp_path, store_url, capsys):
    """A benchmark asv's suite dropped is skipped in every file before it: one line for those files
    (naming how many and the first), not one per file (331 lines for uxarray's history)."""
    from ci.cli import main

    root = tmp_path / "res"
    write_results(root, [sha_for(i) for i in range(3)])
    bench_json = json.loads((root / "benchmarks.json").read_text())
    del bench_json["bench_model.Throughput.track_images_per_s"]
    (root / "benchmarks.json").write_text(json.dumps(bench_json))
    assert main(["ingest", "--db", store_url, str(root)]) == 0
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith("warning: 3 result files (the first ")
    assert "skipped 1 benchmarks missing from benchmarks.json" in warnings[0]
    assert "'bench_model.Throughput.track_images_per_s'" in warnings[0]


def test_an_ingest_that_stores_no_result_of_its_files_is_an_error(tmp_path, store_url, capsys):
    """A benchmarks.json of another suite skips every benchmark of every file: "3 inserted, 0 points
    written" with exit 0 read as a pass; it is an error, and the files are read again once
    benchmarks.json is right (nothing lost)."""
    from ci.cli import main

    root = tmp_path / "res"
    write_results(root, [sha_for(i) for i in range(3)])
    right = (root / "benchmarks.json").read_text()
    (root / "benchmarks.json").write_text(json.dumps({"version": 2}))  # no benchmark of these files
    assert main(["ingest", "--db", store_url, str(root)]) == 2
    err = capsys.readouterr().err
    assert "error: no result of the files under" in err and "was stored" in err
    (root / "benchmarks.json").write_text(right)
    assert main(["ingest", "--db", store_url, str(root)]) == 0
    with Store(store_url) as store:
        got = len(store.results())
    with Store(tmp_path / "fresh.sqlite") as fresh:
        ingest_results_dir(fresh, root)
        assert got == len(fresh.results()) > 0
    assert main(["ingest", "--db", store_url, str(root)]) == 0  # unchanged: nothing new, which is no error


def test_a_zero_sample_of_a_coarse_timer_goes_in_where_the_result_is_not_zero(asv_dir, store_url):
    """A result of 0 s is refused (a timer or probe that did not work); one sample of 0 among others,
    with a result above zero, is a coarse timer's and goes in with the file."""
    def samples(name: str, j: int, c: int) -> list[float]:
        base = [1e-4 * (1 + 0.01 * k) for k in range(6)]
        return [0.0, *base[1:]] if "time_gpu" in name and j == 0 else base

    root = asv_dir([sha_for(0)], samples=samples)
    with Store(store_url) as store:
        report = ingest_results_dir(store, root)
        assert report.ok and report.count("inserted") == 1, report.summary()
        got = next(r for r in store.results() if r.benchmark.name.endswith("time_gpu") and 0.0 in r.samples)
        assert got.value > 0
