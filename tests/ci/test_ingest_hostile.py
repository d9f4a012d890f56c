"""Ingest against hostile or broken input, on the recorded H200 files (benchmarks/recorded/): one
bad file is always "FILE: reason" and every other file still goes in; irregular files are refused
unread; non-finite and absurd numbers are malformed; two copies of one run never flip; file names
cannot forge output lines; what the store cannot hold is refused alike on SQLite and PostgreSQL.
Every test taking `store_url` runs on both."""

from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path

import pytest

from ci.cli import main
from ci.ingest import ingest_results_dir
from ci.ingest.results_dir import NO_REPO_NOTE
from ci.store import Store

RECORDED = Path(__file__).resolve().parents[2] / "benchmarks" / "recorded" / "h200-2026-11-29"
FIRST = "bench_attention.AttentionKernelsPR.time_gpu"  # every recorded file holds it: 6 points, 10 samples
COLUMN = {name: i for i, name in enumerate(
    ["result", "params", "version", "started_at", "duration", "stats_ci_99_a", "stats_ci_99_b", "stats_q_25",
     "stats_q_75", "stats_number", "stats_repeat", "samples"])}


@pytest.fixture
def recorded(tmp_path: Path) -> Path:
    """A copy of the recorded H200 results directory: 10 result files of one machine."""
    root = tmp_path / "results"
    shutil.copytree(RECORDED, root)
    return root


def _err_lines(err: str) -> list[str]:
    """An ingest's stderr lines less the note every ingest without --repo prints (`NO_REPO_NOTE`)."""
    return [line for line in err.splitlines() if line != NO_REPO_NOTE]


def _files(root: Path, machine: str = "h200") -> list[Path]:
    return sorted((root / machine).glob("*-virtualenv-py3.12.json"))


def _edit(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def _set(column: str, value) -> callable:
    """Set one column of the FIRST benchmark's row (every point, for a per-point column)."""
    def change(data: dict) -> None:
        row = data["results"][FIRST]
        old = row[COLUMN[column]]
        row[COLUMN[column]] = [value] * len(old) if isinstance(old, list) and column != "params" else value
    return change


def _more_grids(count: int, params: list) -> callable:
    """Add `count` rows, each a copy of the FIRST benchmark's with the parameter grid `params`: the
    file's points past `MAX_FILE_POINTS` while each grid stays under `MAX_GRID_POINTS`."""
    def change(data: dict) -> None:
        for i in range(count):
            row = list(data["results"][FIRST])
            row[COLUMN["params"]] = params
            data["results"][f"{FIRST}_{i}"] = row
    return change


def _ingest(store_url: str, root: Path):
    with Store(store_url) as store:
        return ingest_results_dir(store, root), {c.sha for c in store.commits()}


def _one_bad_file(store_url: str, root: Path, bad: Path, reason: str) -> None:
    """The issue's bar: 9 of 10 files stored, the bad one reported as "FILE: reason", nothing of it kept."""
    report, shas = _ingest(store_url, root)
    assert report.count("inserted") == 9, report.summary()
    (error,) = report.errors
    assert error.path == str(bad)
    assert error.message.startswith(f"{bad}: "), error.message
    assert reason in error.message, error.message
    assert bad.name[:8] not in {s[:8] for s in shas}


def _text(path: Path, change) -> None:
    path.write_text(change(path.read_text()))


# Each case is one class of input the issue found stopping the whole ingest (exit 2, 0 of 10 stored,
# the file unnamed) or storing a wrong number, in the form it was found; the boundary is general.
CASES = {
    "date-1e300-overflow": (lambda p: _edit(p, lambda d: d.__setitem__("date", 1e300)),
                            "date is 1e+300, not a millisecond timestamp between 1970 and 2100"),
    "date-minus-1e18": (lambda p: _edit(p, lambda d: d.__setitem__("date", -1e18)), "date is -1e+18"),
    "started_at-1e20": (lambda p: _edit(p, _set("started_at", 1e20)), "started_at is 1e+20"),
    "started_at-string": (lambda p: _edit(p, _set("started_at", "yesterday")), "must be a JavaScript millisecond"),
    "5000-digit-integer": (lambda p: _text(p, lambda t: t.replace('"date": ', '"date": ' + "9" * 5000 + ', "x": ', 1)),
                           "not valid JSON (Exceeds the limit (4300 digits)"),
    "100k-nested-brackets": (lambda p: p.write_text("[" * 100_000), "not valid JSON: nested too deeply"),
    "nested-object-in-results": (lambda p: _text(p, lambda t: t.replace('"results": {', '"results": {"deep": '
                                                                      + "[" * 50_000 + "]" * 50_000 + ", ", 1)),
                                 "not valid JSON: nested too deeply"),
    "invalid-utf8": (lambda p: p.write_bytes(p.read_bytes().replace(b'"h200"', b'"h\xff200"', 1)),
                     "not valid JSON, truncated or corrupt"),
    "billion-point-grid": (lambda p: _edit(p, _set("params", [[f"'{i}'" for i in range(1000)]] * 3)),
                           "1,000,000,000 points in one file, over the limit of 100,000"),
    "a-40000-point-grid": (lambda p: _edit(p, _set("params", [[f"'{i}'" for i in range(200)]] * 2)),
                           "a parameter grid of 40,000 points, over the limit of 20,000"),
    "six-more-grids-of-19600-points": (lambda p: _edit(p, _more_grids(6, [[f"'{i}'" for i in range(140)]] * 2)),
                                       "117,606 points in one file, over the limit of 100,000"),
    # Non-finite statistics and durations (stored as ok before, later an inf ratio):
    "inf-stats_q_25": (lambda p: _edit(p, _set("stats_q_25", math.inf)), "stats_q_25 is not a finite number: inf"),
    "nan-stats_ci_99_a": (lambda p: _edit(p, _set("stats_ci_99_a", math.nan)), "stats_ci_99_a is not a finite"),
    "wrong-sided-inf-ci": (lambda p: _edit(p, _set("stats_ci_99_b", -math.inf)), "stats_ci_99_b is not a finite"),
    "zero-stats_number": (lambda p: _edit(p, _set("stats_number", 0)), "stats_number is 0, not a positive count"),
    "nan-duration": (lambda p: _edit(p, _set("duration", math.nan)), "duration is not a finite number: nan"),
    "inf-duration": (lambda p: _edit(p, _set("duration", math.inf)), "duration is not a finite number: inf"),
    "negative-duration": (lambda p: _edit(p, _set("duration", -1.0)), "duration is -1.0 s, not between 0"),
    # Absurd values: 1e308-second results (an inf ratio later), a result its samples do not contain.
    "1e308-second-results": (lambda p: _edit(p, lambda d: d["results"][FIRST].__setitem__(
        COLUMN["samples"], [[1e308] * 10] * 6) or d["results"][FIRST].__setitem__(COLUMN["result"], [1e308] * 6)),
        "result is 1e+308, beyond any plausible measurement (limit 1e+06 s)"),
    "result-outside-its-samples": (lambda p: _edit(p, _set("result", 1.0)), "lies outside its samples' range"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_one_bad_file_is_named_skipped_and_the_others_go_in(store_url, recorded, case):
    damage, reason = CASES[case]
    bad = _files(recorded)[3]
    damage(bad)
    _one_bad_file(store_url, recorded, bad, reason)


def test_the_cli_names_the_file_and_exits_2(tmp_path, recorded, capsys):
    bad = _files(recorded)[0]
    CASES["date-1e300-overflow"][0](bad)
    assert main(["ingest", "--db", str(tmp_path / "h.sqlite"), str(recorded)]) == 2
    captured = capsys.readouterr()
    assert _err_lines(captured.err) == [f"error: {bad}: date is 1e+300, not a millisecond timestamp between 1970 "
                                         "and 2100"]
    assert "9 inserted" in captured.out and "1 errors" in captured.out


def test_a_database_that_fails_as_a_whole_is_one_error_naming_it(tmp_path, recorded, capsys, monkeypatch):
    """A read-only (or full, or locked) database is the database's failure, not each file's: one line
    that names it and exit 2, where every result file printed its own "database error" line."""
    import sqlite3

    from sqlalchemy.exc import OperationalError

    from ci.store.ingest_writes import IngestWrites

    def read_only(self, items, replace=False):
        raise OperationalError("INSERT", {}, sqlite3.OperationalError("attempt to write a readonly database"))

    monkeypatch.setattr(IngestWrites, "ingest_runs", read_only)
    db = tmp_path / "h.sqlite"
    assert main(["ingest", "--db", str(db), str(recorded)]) == 2
    lines = _err_lines(capsys.readouterr().err)
    assert len(lines) == 1 and "attempt to write a readonly database" in lines[0], lines
    assert str(db) in lines[0] and str(recorded) not in lines[0], lines


def test_a_database_that_turns_read_only_mid_ingest_is_not_blamed_on_each_file(tmp_path, recorded):
    """Past the write probe (a database that fails after the ingest began): the file's savepoint does not
    turn the database's failure into that file's error, and every file after it the same; it stops the
    ingest as one error (the real read-only path printed one line per file, 2026-12-07)."""
    from sqlalchemy.exc import OperationalError

    db = tmp_path / "h.sqlite"
    with Store(db):
        pass
    with Store(f"sqlite:///file:{db}?mode=ro&uri=true", create=False) as store, \
            pytest.raises(OperationalError, match="readonly database"):
        ingest_results_dir(store, recorded)


def test_an_unforeseen_failure_is_still_one_files_error(store_url, recorded, monkeypatch):
    """The boundary catches what no check foresaw: any exception while reading one file (here a
    bug planted in the parser) is that file's error, never the whole ingest's."""
    import ci.ingest.reading as reading

    real = reading.parse_result_file
    bad = _files(recorded)[5]

    def flaky(path, *args, **kwargs):
        if Path(path) == bad:
            raise MemoryError("out of memory while parsing")
        return real(path, *args, **kwargs)

    monkeypatch.setattr(reading, "parse_result_file", flaky)
    _one_bad_file(store_url, recorded, bad, "cannot be ingested (MemoryError: out of memory while parsing)")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", ["fifo", "symlink-to-dev-zero", "symlink-to-fifo", "directory", "dangling-symlink"])
def test_irregular_files_are_refused_unread(store_url, recorded, kind):
    """A FIFO named *.json hung ingest forever; a symlink to /dev/zero ran it out of memory."""
    odd = recorded / "h200" / "0badf11e-virtualenv-py3.12.json"
    if kind == "fifo":
        os.mkfifo(odd)
    elif kind == "symlink-to-dev-zero":
        odd.symlink_to("/dev/zero")
    elif kind == "symlink-to-fifo":
        os.mkfifo(recorded / "pipe")
        odd.symlink_to(recorded / "pipe")
    elif kind == "directory":
        odd.mkdir()
    else:
        odd.symlink_to(recorded / "nowhere.json")
    report, _ = _ingest(store_url, recorded)
    assert report.count("inserted") == 10
    (error,) = report.errors
    expected = {"fifo": "not a regular file (a FIFO); refused unread", "symlink-to-fifo": "(a FIFO)",
                "symlink-to-dev-zero": "not a regular file (a character device); refused unread",
                "directory": "not a regular file (a directory)", "dangling-symlink": "file not found"}[kind]
    assert error.message.startswith(f"{odd}: ") and expected in error.message, error.message


@pytest.mark.timeout(60)
@pytest.mark.parametrize("which", ["machine.json", "sidecar"])
def test_an_irregular_machine_file_fails_only_its_files(store_url, recorded, which):
    other = recorded / "h200-b"
    shutil.copytree(recorded / "h200", other)
    _edit(other / "machine.json", lambda d: d.__setitem__("machine", "h200-b"))
    for f in _files(recorded, "h200-b"):
        _edit(f, lambda d: d["params"].__setitem__("machine", "h200-b"))
    target = other / ("machine.json" if which == "machine.json" else f"gpu-env-{_files(recorded)[0].name[:8]}.json")
    target.unlink()
    os.mkfifo(target)
    report, _ = _ingest(store_url, recorded)
    assert report.count("inserted") == (10 if which == "machine.json" else 19)
    assert len(report.errors) == (10 if which == "machine.json" else 1)
    assert f"{target}: not a regular file (a FIFO)" in report.errors[0].message


@pytest.mark.timeout(60)
def test_an_irregular_benchmarks_json_is_one_line_naming_it(tmp_path, recorded, capsys):
    """Every result file needs benchmarks.json: a FIFO in its place is refused unread, named in
    one "error: FILE: reason" line like any other file, and nothing is stored."""
    target = recorded / "benchmarks.json"
    target.unlink()
    os.mkfifo(target)
    db = tmp_path / "h.sqlite"
    assert main(["ingest", "--db", str(db), str(recorded)]) == 2
    captured = capsys.readouterr()
    assert _err_lines(captured.err) == [f"error: {target}: not a regular file (a FIFO); refused unread"]
    with Store(str(db)) as store:
        assert store.commits() == []


def test_an_oversized_file_is_refused_unread(store_url, recorded):
    big = _files(recorded)[2]
    with big.open("r+b") as fh:  # sparse: 65 MiB on paper, nothing on disk
        fh.truncate(65 * 2**20)
    _one_bad_file(store_url, recorded, big, "68,157,440 bytes, over the 67,108,864-byte limit for this file")


def test_asv_infinite_interval_of_a_single_sample_is_accepted(store_url, asv_dir):
    """asv writes (-inf, +inf) as the 99% interval of a point measured once: that is its own
    marker, not a corrupt number, and the file goes in."""
    from tests.ci.conftest import MACHINE, sha_for

    root = asv_dir([sha_for(0)], samples=lambda n, j, c: [1e-4 * (j + 1)])
    path = next((root / MACHINE).glob(f"{sha_for(0)[:8]}-*.json"))
    data = json.loads(path.read_text())
    cols = data["result_columns"]
    row = dict(zip(cols, data["results"]["bench_attention.GPUTime.time_gpu"], strict=False))
    assert row["stats_ci_99_a"][0] == -math.inf and row["stats_ci_99_b"][0] == math.inf  # as asv wrote it
    report, _ = _ingest(store_url, root)
    assert report.ok and report.count("inserted") == 1


@pytest.mark.parametrize(("value", "ok"), [(1e200, False), (-1e101, False), (1e99, True), (-3.5, True)])
def test_a_tracked_value_of_absurd_magnitude_is_malformed(store_url, asv_dir, value, ok):
    """A `track` benchmark may return any finite number of its unit, up to 1e100 either way: beyond
    it, squares and ratios of the values overflow in the verdicts' statistics."""
    from tests.ci.conftest import sha_for

    def samples(name: str, j: int, c: int) -> list[float]:
        return [value] * 3 if ("images_per_s" in name and c == 1) else [1.0 + j] * 3

    root = asv_dir([sha_for(0), sha_for(1)], samples=samples)
    report, _ = _ingest(store_url, root)
    assert report.count("inserted") == (2 if ok else 1)
    if not ok:
        (error,) = report.errors
        assert "beyond any plausible measurement (limit 1e+100 images/s)" in error.message, error.message


# --- two copies of one run (item: a copied machine folder flipped on every ingest) ---


def test_two_copies_of_one_run_never_flip(store_url, recorded):
    """Two machine folders naming the same machine, commit and environment with different contents
    replaced each other on every ingest. The first in path order is stored; the copy is an error,
    the same on every ingest, and nothing is rewritten."""
    shutil.copytree(recorded / "h200", recorded / "h200-copy")
    original = _files(recorded)[4]
    copy = recorded / "h200-copy" / original.name
    _edit(copy, lambda d: d["results"][FIRST][COLUMN["samples"]][0].__setitem__(0, 9.9e-6))
    reports, stored = [], []
    with Store(store_url) as store:
        for _ in range(3):
            reports.append(ingest_results_dir(store, recorded))
            stored.append(store.results(benchmark_key=store.benchmarks()[0].key))
    first, *later = reports
    assert first.count("inserted") == 10 and first.count("unchanged") == 9 and first.count("replaced") == 0
    for report in (first, *later):
        (error,) = report.errors
        assert error.path == str(copy)
        assert error.message.startswith(f"{copy}: holds the same run as {original} (machine/commit/environment "
                                        f"'h200/")
        assert "only the first in path order is stored" in error.message
    assert all(r.count("replaced") == 0 and r.count("inserted") == 0 for r in later)
    assert stored[0] == stored[1] == stored[2]


def test_a_copy_that_came_first_later_does_not_flip_either(store_url, recorded):
    """The stored run came from the later folder (ingested alone first). The copy that comes first in
    path order holds another run of it from another file: refused, naming both files, and the stored
    run (its file unchanged) stays; every ingest says the same. With --replace the copy replaces it
    once, and from then on the file it replaced is the stale copy, every time."""
    shutil.move(recorded / "h200", recorded / "h200-z")
    stored, copy = None, None
    with Store(store_url) as store:
        assert ingest_results_dir(store, recorded).count("inserted") == 10
        shutil.copytree(recorded / "h200-z", recorded / "h200-a")
        stored, copy = _files(recorded, "h200-z")[0], _files(recorded, "h200-a")[0]
        _edit(copy, lambda d: d.__setitem__("python", "3.12 (copy)"))
        refused = [ingest_results_dir(store, recorded) for _ in range(3)]
        replaced = ingest_results_dir(store, recorded, replace=True)
        later = [ingest_results_dir(store, recorded, replace=flag) for flag in (False, True)]
        assert [(r.old_source, r.new_source, r.forced) for r in store.replacements()] == [
            (str(stored), str(copy), True)]
    for report in refused:
        assert report.count("replaced") == 0 and report.count("unchanged") == 19
        (error,) = report.errors
        assert error.path == str(copy) and f"is stored, ingested from {stored}; not replaced" in error.message
        assert "--replace" in error.message
    assert replaced.count("replaced") == 1 and [e.path for e in replaced.errors] == [str(stored)]
    assert any("replaced the stored run" in note and "--replace" in note for note in replaced.notes)
    for report in later:
        assert report.count("replaced") == 0 and [e.path for e in report.errors] == [str(stored)]
        assert "holds the same run as" in report.errors[0].message


# --- output: a file name or a value can never forge a line ---


@pytest.mark.parametrize("name", ["x\nerror: forged line.json", "x\rerror: forged.json", "\x1b[2K\x1b[1Gok.json",
                                  "a\u2028b.json", 'q"uote.json'], ids=["lf", "cr", "ansi", "line-sep", "quote"])
def test_file_names_cannot_forge_output_lines(tmp_path, recorded, capsys, name):
    (recorded / "h200" / name).write_text("{")
    assert main(["ingest", "--db", str(tmp_path / "h.sqlite"), str(recorded)]) == 2
    captured = capsys.readouterr()
    (line,) = _err_lines(captured.err)
    assert line.startswith('error: "') and line.endswith("not valid JSON, truncated or corrupt (Expecting property "
                                                          "name enclosed in double quotes: line 1 column 2 (char 1))")
    assert all(ch.isprintable() for ch in line)


def test_benchmark_names_in_warnings_cannot_forge_lines(tmp_path, recorded, capsys):
    _edit(_files(recorded)[0], lambda d: d["results"].__setitem__("evil\nerror: forged", d["results"][FIRST]))
    assert main(["ingest", "--db", str(tmp_path / "h.sqlite"), str(recorded)]) == 0
    (line,) = _err_lines(capsys.readouterr().err)
    assert line.startswith("warning: ") and "'evil\\nerror: forged'" in line


# --- what the store can hold: one rule, the same outcome on SQLite and PostgreSQL ---

LONG = "x" * 1100


def _rename_first(data: dict, new: str) -> None:
    data["results"][new] = data["results"].pop(FIRST)


def _bench_json_rename(root: Path, new: str, **fields) -> None:
    def change(d: dict) -> None:
        d[new] = {**d.pop(FIRST), "name": new, **fields}
    _edit(root / "benchmarks.json", change)


@pytest.mark.parametrize(("case", "reason"), [pytest.param(*p, id=p[0]) for p in [
    ("name-over-512", "benchmark name 'bench." + "n" * 74 + "…' is 600 characters long; the store holds at most 512"),
    ("key-over-1024", "series key is 1,"),
    ("nul-in-name", "benchmark name 'bench\\x00evil' holds a NUL character, which the store does not accept"),
    ("nul-in-param", "series key holds a NUL character"),
    ("lone-surrogate-in-name", "is not valid Unicode"),
    ("unit-over-64", "unit is 65 characters long; the store holds at most 64"),
    ("nul-in-env-name", "environment name holds a NUL character"),
    ("nul-in-machine-cpu", "machine cpu holds a NUL character"),
]])
def test_what_the_store_cannot_hold_is_refused_alike_on_both_engines(store_url, recorded, case, reason):
    """A series key over 1,024 characters, a name over 512 or a NUL lost the commit's whole run on
    PostgreSQL while SQLite stored it. Now one rule (ci.store.limits) holds on both: a value of one
    benchmark leaves that benchmark out of the file, by name and why, and the file's other points go in
    (before 2026-12-06 it refused the file, and one such benchmark in every file lost the whole history);
    a value of the whole run (its environment, its machine) refuses the file, and every other file goes in."""
    files = _files(recorded)
    bad = files[6]
    left_out = None  # the benchmark the store cannot hold, left out of the files that have it
    if case in ("name-over-512", "nul-in-name", "lone-surrogate-in-name", "unit-over-64"):
        new = {"name-over-512": "bench." + "n" * 594, "nul-in-name": "bench\x00evil",
               "lone-surrogate-in-name": "bench\ud800evil", "unit-over-64": FIRST}[case]
        left_out = new
        if case == "unit-over-64":
            _edit(recorded / "benchmarks.json", lambda d: d[FIRST].__setitem__("unit", "u" * 65))
            bad = None  # every file holds the benchmark: it is left out of all ten
        else:
            _bench_json_rename(recorded, new)
            _edit(bad, lambda d: _rename_first(d, new))
    elif case in ("key-over-1024", "nul-in-param"):
        value = f"'{LONG}'" if case == "key-over-1024" else "'a\x00b'"
        left_out = FIRST
        _edit(recorded / "benchmarks.json", lambda d: d[FIRST]["params"][1].append(value))
        _edit(bad, lambda d: (d["results"][FIRST][COLUMN["params"]][1].append(value),
                              [d["results"][FIRST][COLUMN[c]].extend(d["results"][FIRST][COLUMN[c]][:3])
                               for c in ("result", "stats_ci_99_a", "stats_ci_99_b", "stats_q_25", "stats_q_75",
                                         "stats_number", "stats_repeat", "samples")]))
    elif case == "nul-in-env-name":
        _edit(bad, lambda d: d.__setitem__("env_name", "virtualenv\x00py3.12"))
    else:
        _edit(recorded / "h200" / "machine.json", lambda d: d.__setitem__("cpu", "Xeon\x00"))
        bad = None
    report, shas = _ingest(store_url, recorded)
    if left_out is not None:
        assert report.count("inserted") == 10 and not report.errors, report.summary()
        hit = [f for f in report.files if "left out benchmark" in f.message]
        assert [f.path for f in hit] == ([str(bad)] if bad is not None else [str(f) for f in files])
        assert all(f"left out benchmark {left_out[:80]!r}"[:40] in f.message and reason in f.message for f in hit), \
            hit[0].message
        with Store(store_url) as store:
            keys = {b.key for b in store.benchmarks()}
            runs = len(store.run_index())
            points = store.counts()["results"]
        assert runs == 10  # every file went in (these files hold one benchmark: the others' points are kept)
        assert (points > 0) == (case in ("key-over-1024", "nul-in-param"))
        assert not any(k.startswith(left_out) and (left_out != FIRST or LONG in k or "\x00" in k) for k in keys)
        return
    if bad is None:
        assert report.count("inserted") == 0 and len(report.errors) == 10
        assert all(reason in e.message for e in report.errors), report.errors[0].message
        return
    assert report.count("inserted") == 9, report.summary()
    (error,) = report.errors
    assert error.path == str(bad) and error.message.startswith(f"{bad}: ")
    assert reason in error.message and "database error" not in error.message, error.message
    assert bad.name[:8] not in {s[:8] for s in shas}


def test_an_environment_name_past_its_column_is_stored_shortened(store_url, recorded):
    """asv keeps a conda environment's whole name in its result files (only the file name is hashed): a name of
    300 characters stores every file under a shortened name with a hash of the whole, one warning per file."""
    long_env = "conda-py3.12-" + "-".join(f"package{i}1.2.3" for i in range(20))
    assert len(long_env) > 255
    for f in _files(recorded):
        _edit(f, lambda d: d.__setitem__("env_name", long_env))
    report, _ = _ingest(store_url, recorded)
    assert report.count("inserted") == 10 and not report.errors, report.summary()
    assert all("environment name of" in f.message and "stored as" in f.message for f in report.files)
    with Store(store_url) as store:
        envs = {key.split("/", 2)[2] for _, key in store.run_index().values()}
        assert store.results()  # every file's points went in
    (env,) = envs
    assert len(env) == 255 and env.startswith(long_env[:200]) and "…" in env


def test_an_acknowledgement_the_store_cannot_hold_is_refused_alike(store_url, recorded):
    from ci.store import StoreLimitError

    with Store(store_url) as store:
        ingest_results_dir(store, recorded)
        key, sha = store.benchmarks()[0].key, store.commits()[0].sha
        with pytest.raises(StoreLimitError, match="who is 300 characters long; the store holds at most 255"):
            store.acknowledge(key, sha, "w" * 300, "why")
        with pytest.raises(StoreLimitError, match="why holds a NUL character"):
            store.acknowledge(key, sha, "me", "because\x00")
        assert store.acknowledgements() == []


# --- error labels ---


def test_only_database_errors_are_called_database_errors(store_url, recorded, monkeypatch):
    from sqlalchemy.exc import OperationalError

    real = Store._insert_results
    crash = {"n": 0}

    def explode(self, conn, rows, blocks):
        crash["n"] += 1
        if crash["n"] == 2:
            raise RuntimeError("a bug in the writer")
        if crash["n"] == 4:
            raise OperationalError("INSERT", {}, Exception("too many SQL variables"))  # this statement's
        real(self, conn, rows, blocks)

    monkeypatch.setattr(Store, "_insert_results", explode)
    report, _ = _ingest(store_url, recorded)
    reasons = sorted(e.message.removeprefix(f"{e.path}: ") for e in report.errors)
    assert reasons == ["database error: too many SQL variables", "not stored (RuntimeError: a bug in the writer)"]


# --- a commit named in capitals ---


def test_a_commit_named_in_capitals_is_found_however_it_is_typed(store_url, recorded):
    """A result file may name its commit in capitals (hand-edited, or another tool's; asv writes lower
    case). On PostgreSQL, whose LIKE minds case, no spelling of it found the commit. The store keeps it
    in git's lower case (since 2026-12-06; as written before), found by any spelling of any prefix, on
    both backends."""
    original = _files(recorded)[0]
    sha = json.loads(original.read_text())["commit_hash"]
    _edit(original, lambda d: d.update(commit_hash=sha.upper()))
    report, shas = _ingest(store_url, recorded)
    assert report.count("inserted") == 10 and not report.errors, report.summary()
    assert sha in shas and sha.upper() not in shas
    with Store(store_url) as store:
        for typed in (sha, sha[:12], sha[:12].upper(), sha.upper()):
            assert store.resolve_commit(typed) == sha, typed


def test_a_commit_named_in_capitals_is_the_same_commit_and_an_abbreviation_is_warned_of(tmp_path, recorded, capsys):
    """git's names are lower case: a file naming its commit in capitals (another environment's run of it) adds
    no commit. Without --repo an abbreviated name cannot be resolved: it is stored as it is, with a warning
    that says how to store it under its full sha (with --repo, git resolves it: tests/ci/test_ingest_git.py)."""
    files = _files(recorded)
    twin = files[0].with_name(files[0].name.replace("virtualenv-py3.12", "virtualenv-py3.13"))
    shutil.copy(files[0], twin)
    _edit(twin, lambda d: (d.__setitem__("commit_hash", d["commit_hash"].upper()),
                           d.__setitem__("env_name", "virtualenv-py3.13")))
    short = json.loads(files[1].read_text())["commit_hash"][:7]
    _edit(files[1], lambda d: d.__setitem__("commit_hash", short))
    db = str(tmp_path / "h.sqlite")
    assert main(["ingest", "--db", db, str(recorded)]) == 0
    err = _err_lines(capsys.readouterr().err)
    assert [line for line in err if "abbreviation" in line] == [
        f"warning: commit {short}: named by an abbreviation (asv writes the full sha), so it is stored under it and "
        "is not the commit a file naming it in full holds; ingest with --repo CHECKOUT to store it under its full sha"]
    with Store(db) as store:
        shas = [c.sha for c in store.commits()]
    assert len(shas) == 10 and all(s == s.lower() for s in shas) and short in shas


@pytest.mark.parametrize("how", ["missing", "another version"])
def test_a_benchmark_skipped_once_is_read_when_benchmarks_json_knows_it(store_url, recorded, how):
    """A file is known by its bytes: one ingested while benchmarks.json lacked its benchmark (or held another
    version of it) stayed "unchanged" on every later ingest, and the benchmark's points never went in, even
    after benchmarks.json was fixed (`--replace` did not help either). Such a file is now read again once
    benchmarks.json knows what it skipped: the points go in beside the stored ones, as a fresh ingest has them."""
    bj = recorded / "benchmarks.json"
    good = bj.read_text()
    if how == "missing":
        _edit(bj, lambda d: d.pop(FIRST))
    else:
        _edit(bj, lambda d: d[FIRST].__setitem__("version", "0" * 64))
    first, _ = _ingest(store_url, recorded)
    assert first.count("inserted") == 10 and first.points_written == 0
    again, _ = _ingest(store_url, recorded)  # still unknown: not read again
    assert again.count("unchanged") == 10 and again.points_written == 0
    bj.write_text(good)
    fixed, _ = _ingest(store_url, recorded)
    assert fixed.count("read again") == 10 and not fixed.errors, fixed.summary()
    assert fixed.points_written == 60 and "10 read again" in fixed.summary()
    assert all("read again: 6 points" in f.message for f in fixed.files)
    last, _ = _ingest(store_url, recorded)
    assert last.count("unchanged") == 10 and last.points_written == 0
    with Store(store_url) as store:
        assert store.counts()["results"] == 60 and not store.run_skips()


def test_a_store_from_before_skips_were_recorded_reads_each_file_once_more(store_url, recorded):
    """Runs written before 2026-12-06 have no record of what their files skipped (NULL): each file is read
    once more, adds nothing it already stored, and is known by its bytes from then on."""
    from sqlalchemy import update

    from ci.store.models import RunRow

    _ingest(store_url, recorded)
    with Store(store_url) as store:
        with store.engine.begin() as conn:
            conn.execute(update(RunRow).values(skipped=None))
        assert len(store.run_skips()) == 10
    once, _ = _ingest(store_url, recorded)
    assert once.count("unchanged") == 10 and once.points_written == 0, once.summary()
    with Store(store_url) as store:
        assert not store.run_skips() and store.counts()["results"] == 60


@pytest.mark.parametrize("how", ["no date", "date 0", "date in seconds", "one date"])
def test_commits_without_a_usable_date_are_warned_of(tmp_path, recorded, capsys, how):
    """Without --repo the history's order is asv's `date` (milliseconds since the epoch): files without one
    sorted by sha, and a date of 0 or in seconds put the newest commit in 1970, at the start of the history,
    without a word. Ingest now says so, and how to order them by git."""
    files = _files(recorded)
    if how == "no date":
        for f in files:
            _edit(f, lambda d: d.pop("date", None))
    elif how == "one date":  # scripted commits, or a stack whose dates were reset: the files' order decides
        for f in files[-3:]:
            _edit(f, lambda d: d.__setitem__("date", 1_790_000_000_000))
    else:
        _edit(files[-1], lambda d: d.__setitem__("date", 0 if how == "date 0" else d["date"] // 1000))
    assert main(["ingest", "--db", str(tmp_path / "h.sqlite"), str(recorded)]) == 0
    warned = [line for line in _err_lines(capsys.readouterr().err) if line.startswith("warning:")]
    if how == "no date":
        assert len(warned) == 1 and warned[0].startswith("warning: 10 commits have no date in their result files")
    elif how == "one date":
        assert len(warned) == 1 and warned[0].startswith("warning: 3 commits share their date with another")
    else:
        assert len(warned) == 1 and warned[0].startswith("warning: 1 commits are dated before 2000 or after today")
        assert " at 1970-01-" in warned[0]
    assert "--repo CHECKOUT" in warned[0]


def test_a_jobs_credentials_among_its_env_vars_are_neither_stored_nor_shown(tmp_path, recorded, capsys):
    """asv records a job's `env_vars` in its result files: a variable named like a credential
    (GITHUB_TOKEN, DB_PASSWORD) or holding a token-shaped value is stored as ***, and the dashboard's
    commit page shows *** for it (also for a store ingested before this was done)."""
    from ci.site import render_site

    token = "ghp_" + "S3cret" * 5
    path = sorted(recorded.glob("*/*.json"))[0]
    if path.name == "machine.json":
        path = sorted(p for p in recorded.glob("*/*.json") if p.name != "machine.json")[0]
    data = json.loads(path.read_text())
    data["env_vars"] = {"GITHUB_TOKEN": token, "DB_PASSWORD": "hunter2", "NOTE": f"bearer {token}",
                        "OMP_NUM_THREADS": "4", "PIP_INDEX_URL": "https://ci:pa55word@mirror.internal/simple",
                        "PLAIN": "AKIAIOSFODNN7EXAMPLE", "HOOK": "xoxb-123456789012-abcdefghijkl"}
    data["requirements"] = {"torch": "2.14.1", "y": "git+https://oauth2:glpat-SECRETSECRETSECRET12@gitlab.com/x/y.git"}
    path.write_text(json.dumps(data))
    db = tmp_path / "h.sqlite"
    assert main(["ingest", "--db", str(db), str(recorded)]) == 0
    with Store(db) as store:
        stored = {k: v for r in store.results() for k, v in r.environment if k[:4] in ("env:", "req:")}
        assert stored == {"env:GITHUB_TOKEN": "***", "env:DB_PASSWORD": "***", "env:NOTE": "***",
                          "env:OMP_NUM_THREADS": "4", "env:PIP_INDEX_URL": "https://ci:***@mirror.internal/simple",
                          "env:PLAIN": "***", "env:HOOK": "***", "req:torch": "2.14.1",
                          "req:y": "git+https://oauth2:***@gitlab.com/x/y.git"}
        render_site(store, tmp_path / "site")
    site = "".join(p.read_text(encoding="utf-8", errors="replace") for p in (tmp_path / "site").rglob("*.html"))
    assert "OMP_NUM_THREADS" in site and "mirror.internal/simple" in site and token not in site
    for secret in ("hunter2", "pa55word", "AKIAIOSFODNN7EXAMPLE", "xoxb-", "glpat-"):
        assert secret not in site, secret
    assert token not in capsys.readouterr().err


@pytest.mark.parametrize("case", ["values-that-read-the-same", "a-name-like-a-parameterised-series"])
def test_two_points_of_one_series_in_a_file_leave_that_benchmark_out(store_url, recorded, case):
    """A grid whose values differ only in quoting ('triton' and triton: one series key), or a benchmark
    named like another's parameterised series ("X(preset=...)", which asv's names never are): the
    store refused the whole file with a raw "UNIQUE constraint failed", or mixed two benchmarks in one
    series. Now that benchmark is left out with a message and the file goes in."""
    files = _files(recorded)
    bad = files[6]
    if case == "values-that-read-the-same":
        _edit(bad, lambda d: d["results"][FIRST][COLUMN["params"]][1].__setitem__(1, "triton"))
        left_out, reason = FIRST, "is 2 points of this file"
    else:
        fake = f"{FIRST}(preset=deitb224-b8-keep0.5, backend=triton)"
        _edit(recorded / "benchmarks.json", lambda d: d.__setitem__(fake, {**d[FIRST], "name": fake,
                                                                          "params": [], "param_names": []}))
        _edit(bad, lambda d: d["results"].__setitem__(fake, [[1.0], [], *d["results"][FIRST][2:3]]))
        left_out, reason = fake, "a name with parentheses"
    report, _ = _ingest(store_url, recorded)
    assert report.count("inserted") == 10 and not report.errors, report.summary()
    (hit,) = [f for f in report.files if "left out benchmark" in f.message]
    assert hit.path == str(bad) and reason in hit.message and "UNIQUE" not in hit.message, hit.message
    with Store(store_url) as store:
        names = {b.name for b in store.benchmarks()}
        mixed = [r for r in store.results() if r.commit_sha.startswith(bad.stem[:8]) and r.benchmark.name == left_out]
    assert FIRST in names and not mixed


# --- a benchmarks.json that redefines a stored series ---


def test_a_benchmarks_json_that_redefines_a_stored_series_leaves_that_benchmark_out(store_url, asv_dir):
    """A foreign benchmarks.json that declared a stored time benchmark a track in images/s put its values,
    negative ones too, into the seconds history, and a +339% step read "inconclusive" (2026-12-07). The
    file goes in less that benchmark, which is named with both definitions; the stored one is never
    rewritten by a file, at a new benchmark version neither (one folder of a newer suite flipped every
    machine's direction), and a file that agrees with it goes in whole."""
    import copy

    from ci.records import Direction
    from tests.ci.conftest import BENCHMARKS, sha_for

    name = "bench_attention.GPUTime.time_gpu"
    retyped = copy.deepcopy(BENCHMARKS)
    for b in retyped:
        if b["name"] == name:
            b.update(type="track", unit="images/s")
    report, _ = _ingest(store_url, asv_dir([sha_for(0), sha_for(1)]))
    assert report.count("inserted") == 2
    with Store(store_url) as store:
        held = len([r for r in store.results() if r.benchmark.name == name])
    for version, folder, first in ((None, "foreign", 2), ("v-attn-2", "changed", 4)):
        if version:
            for b in retyped:
                if b["name"] == name:
                    b["version"] = version
        report, _ = _ingest(store_url, asv_dir([sha_for(first), sha_for(first + 1)], name=folder, benchmarks=retyped))
        assert report.count("inserted") == 2 and not report.errors, report.summary()
        notes = [f.message for f in report.files if "left out benchmark" in f.message]
        assert len(notes) == 2 and all("declares it in 'images/s' (higher is better), but the store holds its series "
                                       "in 'seconds' (lower is better)" in m for m in notes), notes
    with Store(store_url) as store:
        assert {(b.unit, b.direction) for b in store.benchmarks() if b.name == name} == {("seconds", Direction.LOWER)}
        assert len([r for r in store.results() if r.benchmark.name == name]) == held
        assert {r.commit_sha for r in store.results()} >= {sha_for(i) for i in range(6)}  # the rest went in
    report, _ = _ingest(store_url, asv_dir([sha_for(6)], name="agrees"))
    assert report.count("inserted") == 1 and not [f for f in report.files if "left out" in f.message]


def test_a_benchmark_redefined_on_purpose_keeps_its_old_series_under_another_name(store_url, asv_dir, capsys):
    """A suite that changes a benchmark's unit on purpose (at the same asv version: asv's is a hash of the
    code) had that benchmark left out of every later file, for good, until renamed. `ci ingest --redefine
    NAME` keeps the old series, its results, acknowledgements and history, under "NAME [UNIT until DATE]";
    the files where the benchmark was left out are read again and start its new series; a file whose
    points the old series holds is not, so no value of the old unit lands in the new series."""
    import copy
    from datetime import UTC, datetime

    from ci.ingest import redefine_benchmarks
    from ci.records import Direction
    from tests.ci.conftest import BENCHMARKS, sha_for

    name = "bench_attention.GPUTime.time_gpu"
    retyped = copy.deepcopy(BENCHMARKS)
    for b in retyped:
        if b["name"] == name:
            b.update(type="track", unit="images/s")
    root = asv_dir([sha_for(0), sha_for(1)])
    _ingest(store_url, root)
    with Store(store_url) as store:
        old_keys = sorted(b.key for b in store.benchmarks() if b.name == name)
        store.acknowledge(old_keys[0], sha_for(1), "alice", "expected")
    asv_dir([sha_for(2), sha_for(3)], benchmarks=retyped)  # the same folder: a new benchmarks.json, two new files
    report, _ = _ingest(store_url, root)
    assert len([f for f in report.files if "--redefine" in f.message]) == 2, report.summary()
    from ci.site import render_site

    site = root.parent / "site"
    with Store(store_url) as store:
        render_site(store, site)
    when = datetime(2026, 12, 7, tzinfo=UTC)
    with Store(store_url) as store:
        with pytest.raises(ValueError, match=r"no such benchmark .* \(closest: 'bench_attention.GPUTime.time_gpu'"):
            redefine_benchmarks(store, root, ["bench_attention.GPUTime.time_gpus"], when)
        (note,) = redefine_benchmarks(store, root, [name, name], when)
        retired = f"{name} [seconds until 2026-12-07]"
        assert repr(retired) in note and "start new series" in note, note
        report = ingest_results_dir(store, root)
        assert report.count("read again") + report.count("inserted") == 2 and not report.errors, report.summary()
        assert not [f for f in report.files if "left out" in f.message]
        by_name: dict[str, set[tuple[str, str]]] = {}
        for r in store.results():
            if r.benchmark.name in (name, retired):
                by_name.setdefault(r.benchmark.name, set()).add((r.benchmark.unit, r.commit_sha))
        assert by_name[retired] == {("seconds", sha_for(c)) for c in (0, 1)}
        assert by_name[name] == {("images/s", sha_for(c)) for c in (2, 3)}
        assert {b.direction for b in store.benchmarks() if b.name == name} == {Direction.HIGHER}
        (ack,) = store.acknowledgements()
        assert ack.benchmark_key == old_keys[0].replace(name, retired, 1)
        assert ingest_results_dir(store, root).count("unchanged") == 4  # read again once, not at every ingest
        (again,) = redefine_benchmarks(store, root, [name], when)
        assert "changed nothing" in again
    assert main(["ingest", "--db", store_url, str(root), "--redefine", name]) == 0
    assert f"note: benchmark {name!r}: --redefine changed nothing" in capsys.readouterr().err
    # A second change, taken the same way: three series, each holding only its own unit's values, and
    # the dashboard rendered at once (nothing of a file changed, so its fingerprint had not).
    with Store(store_url) as store:  # no file changed: the renamed series still reach the site at once
        before = render_site(store, site)
    assert any(retired in p.read_text() for p in site.rglob("*.html"))
    for b in retyped:
        if b["name"] == name:
            b["unit"] = "kimages/s"
    asv_dir([sha_for(4), sha_for(5)], benchmarks=retyped, first_commit=4)
    assert main(["ingest", "--db", store_url, str(root), "--redefine", name, "--redefine", name]) == 0
    capsys.readouterr()
    with Store(store_url) as store:
        units: dict[str, set[tuple[str, int]]] = {}
        for r in store.results():
            if r.benchmark.name.startswith(name):
                units.setdefault(r.benchmark.name, set()).add((r.benchmark.unit, int(r.commit_sha[:8], 16)))
        after = render_site(store, site)
    assert units == {retired: {("seconds", 0), ("seconds", 1)},
                     f"{name} [images/s until {datetime.now(UTC):%Y-%m-%d}]": {("images/s", 2), ("images/s", 3)},
                     name: {("kimages/s", 4), ("kimages/s", 5)}}, units
    assert before.pages_written and after.pages_written and after.series == before.series + len(old_keys)
    assert any("kimages/s" in p.read_text() for p in site.rglob("*.html"))


def test_retired_series_are_known_by_the_names_given_not_by_their_shape(tmp_path, asv_dir):
    """A retired name was recognised by its shape ("NAME [UNIT until DATE]"), which a unit holding "]"
    or a benchmark name with a space broke: redefining another benchmark later read a file again and put
    the old unit's values into the new series (a review, 2026-12-07). The store keeps the names it gave.
    A change of direction alone names the direction."""
    import copy
    from datetime import UTC, datetime

    from ci.records import Direction
    from tests.ci.conftest import BENCHMARKS, sha_for

    a, b = "bench_attention.GPUTime.time_gpu", "bench_model.Throughput.track_images_per_s"

    def suite(changes):
        out = copy.deepcopy(BENCHMARKS)
        for bench in out:
            bench.update(changes.get(bench["name"], {}))
        return out

    root = asv_dir([sha_for(0), sha_for(1)], benchmarks=suite({b: {"unit": "time [s]", "direction": "lower"}}))
    with Store(str(tmp_path / "h.sqlite")) as store:
        ingest_results_dir(store, root)
        asv_dir([sha_for(2), sha_for(3)], benchmarks=suite({b: {"unit": "frames/s", "direction": "higher"}}),
                first_commit=2)
        ingest_results_dir(store, root, redefine=[b])
        asv_dir([sha_for(4), sha_for(5)], first_commit=4, benchmarks=suite({
            b: {"unit": "frames/s", "direction": "lower"}, a: {"type": "track", "unit": "images/s"}}))
        report = ingest_results_dir(store, root, redefine=[b, a])
        day = f"{datetime.now(UTC):%Y-%m-%d}"
        notes = "\n".join(report.notes)
        assert f"'{b} [frames/s, higher is better, until {day}]'" in notes, notes
        seen: dict[str, set[int]] = {}
        for r in store.results():
            if r.benchmark.name.startswith(b):
                seen.setdefault(f"{r.benchmark.name} {r.benchmark.unit}", set()).add(int(r.commit_sha[:8], 16))
        assert seen == {f"{b} [time [s] until {day}] time [s]": {0, 1},
                        f"{b} [frames/s, higher is better, until {day}] frames/s": {2, 3},
                        f"{b} frames/s": {4, 5}}, seen
        assert {x.direction for x in store.benchmarks() if x.name == b} == {Direction.LOWER}


def test_the_dashboard_shows_a_redefinition_at_once(tmp_path, asv_dir):
    """A render fingerprints what it reads by the files' digests, commits, machines, verdicts and
    acknowledgements, none of which `--redefine` changes: the render after it wrote no page, and the
    columns it kept still named the old series (a review, 2026-12-07)."""
    import copy

    from ci.site import render_site
    from tests.ci.conftest import BENCHMARKS, sha_for

    name = "bench_attention.GPUTime.time_gpu"
    retyped = copy.deepcopy(BENCHMARKS)
    for b in retyped:
        if b["name"] == name:
            b.update(type="track", unit="images/s")
    db, site = str(tmp_path / "h.sqlite"), tmp_path / "site"
    root = asv_dir([sha_for(0), sha_for(1)])
    with Store(db) as store:
        ingest_results_dir(store, root)
        asv_dir([sha_for(2), sha_for(3)], benchmarks=retyped, first_commit=2)
        ingest_results_dir(store, root)  # left out of commits 2 and 3
        render_site(store, site)
        ingest_results_dir(store, root, redefine=[name])
        stats = render_site(store, site)
    assert stats.pages_written and any("until" in p.read_text() and name in p.read_text() for p in site.rglob("*.html"))


def test_a_credential_in_a_benchmarks_parameters_is_shown_nowhere(tmp_path, asv_dir, capsys):
    """Only a job's environment variables and requirements were redacted: a token or a URL's password in
    a benchmark's parameter value (a benchmark parameterised from a DSN), which a pull request or a
    foreign results folder controls, went verbatim into compare's output, the PR comment and the
    dashboard's pages and data files (2026-12-07). Everything the service shows passes `printable`."""
    import copy

    from ci.site import render_site
    from tests.ci.conftest import BENCHMARKS, sha_for

    token, password = "ghp_" + "S3cret" * 6, "hunter2pw"
    benches = copy.deepcopy(BENCHMARKS)
    grid = next(b for b in benches if b["params"])
    grid["params"][0] = [f"'https://alice:{password}@db.example/x'", f"'{token}'"]
    gate = next(b for b in benches if b["name"].startswith("bench_correctness"))  # its charts' labels (svg.py)
    gate["params"][0] = ["'triton'", f"'{token}'"]
    root = asv_dir([sha_for(0), sha_for(1)], benchmarks=benches, job="gha-1.1-pr/1")
    db = str(tmp_path / "h.sqlite")
    assert main(["ingest", "--db", db, str(root)]) == 0
    out = tmp_path / "c.md"
    main(["compare", "--db", db, "--no-save", "--base", sha_for(0), "--head", sha_for(1)])
    main(["comment", "--db", db, "--no-save", "--base", sha_for(0), "--head", sha_for(1), "--out", str(out)])
    with Store(db) as store:
        render_site(store, tmp_path / "site")
    shown = capsys.readouterr()
    pages = (p for p in (tmp_path / "site").rglob("*") if p.suffix in (".html", ".js", ".svg"))
    site = "".join(p.read_text(encoding="utf-8") for p in pages)
    for where, text in (("stdout", shown.out), ("stderr", shown.err), ("comment", out.read_text()), ("site", site)):
        assert token not in text and password not in text, where
    assert "alice:***@db.example" in out.read_text() and "alice:***@db.example" in site
