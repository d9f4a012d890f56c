"""Ingest's fast paths give what the plain paths give: orjson against the standard json (the same
values, the same errors, for valid and hostile text alike), and a benchmark's points checked column
by column against the per-point checks (the same points, the same "FILE: reason" messages), on the
recorded H200 files and on every hostile case of test_ingest_hostile."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest

from ci.ingest import asv_files, parse
from ci.ingest.asv_files import AsvFormatError, load_benchmarks_json, load_machine_json, parse_json
from ci.ingest.parse import parse_result_file
from ci.records import ParsedRun
from tests.ci.test_ingest_hostile import CASES, FIRST, RECORDED, _edit, _set

pytest.importorskip("orjson")

TEXTS = {
    "plain": b'{"a": [1, 2.5, -0.0, 1e-320, 0.00012345678901234567], "b": {"c": null, "d": true}}',
    "int64-bounds": b"[9223372036854775807, -9223372036854775808, 18446744073709551615]",
    "int-beyond-64-bits": b'{"version": 18446744073709551616, "n": -9223372036854775809}',
    "int-beyond-64-bits-top-level": b"123456789012345678901234567890",
    "long-digits-in-a-string": b'["x 12345678901234567890123", "12345678901234567890"]',
    "long-fraction": b"[0.1234567890123456789012345, 1234567890123456789012.5]",
    "5000-digit-integer": b"[" + b"9" * 5000 + b"]",
    "float-overflow": b"[1e400, -1e400]",
    "nan-and-infinity": b"[NaN, Infinity, -Infinity]",
    "byte-order-mark": b"\xef\xbb\xbf[1]",
    "utf-16": '{"a": 1}'.encode("utf-16"),
    "lone-surrogate": b'["\\ud800"]',
    "invalid-utf8": b'["h\xff200"]',
    "duplicate-keys": b'{"a": 1, "a": 2}',
    "trailing-data": b"[1] x",
    "truncated": b'{"a": [1, 2',
    "empty": b"",
    "deep-nesting": b"[" * 100_000,
    "deep-balanced": b"[" * 5000 + b"]" * 5000,
}


def _decode(raw: bytes) -> tuple[str, str]:
    """What parse_json gives: ("ok", repr of the value with its types) or ("error", the message)."""
    try:
        return "ok", repr(parse_json(raw, Path("f.json")))
    except AsvFormatError as exc:
        return "error", str(exc)


@pytest.mark.parametrize("name", list(TEXTS))
def test_orjson_gives_what_json_gives(monkeypatch, name):
    fast = _decode(TEXTS[name])
    monkeypatch.setattr(asv_files, "_orjson", None)
    assert fast == _decode(TEXTS[name])


def test_orjson_is_what_decodes_a_plain_file(monkeypatch):
    """The fast path is taken: with json.loads broken, a plain result file still decodes."""
    def broken(*_args, **_kwargs):
        raise AssertionError("json.loads called")

    monkeypatch.setattr(asv_files.json, "loads", broken)
    raw = next(RECORDED.glob("h200/*-virtualenv-py3.12.json")).read_bytes()
    assert parse_json(raw, Path("f.json"))["version"] == 2


def _canonical(run: ParsedRun) -> ParsedRun:
    """`run` with its points all as `ParsedPoint`s, in grid order (the fast path gives blocks)."""
    return dataclasses.replace(run, points=tuple(sorted(run.all_points(), key=lambda p: p.key)), blocks=())


def _parse_both(root: Path, monkeypatch) -> list[tuple[str, object]]:
    """Every result file of `root` parsed with the fast paths, then without them: (status, run or message) pairs."""
    benchmarks = load_benchmarks_json(root)
    out = []
    for fast in (True, False):
        if not fast:
            monkeypatch.setattr(parse, "_fast_points", lambda *_args: None)
            monkeypatch.setattr(parse, "_plain_stats", lambda *_args: False)
            monkeypatch.setattr(asv_files, "_orjson", None)
        got = []
        for path in sorted(root.glob("h200/*-virtualenv-py3.12.json")):
            try:
                got.append(("ok", _canonical(parse_result_file(path, benchmarks, load_machine_json(path.parent)))))
            except AsvFormatError as exc:
                got.append(("error", str(exc)))
        out.append(got)
    return out


def _copy(tmp_path: Path) -> Path:
    root = tmp_path / "results"
    shutil.copytree(RECORDED, root)
    return root


def test_column_checks_give_the_per_point_records(tmp_path, monkeypatch):
    fast, slow = _parse_both(_copy(tmp_path), monkeypatch)
    assert [s for s, _ in fast] == ["ok"] * 10
    assert fast == slow


# Rows the fast path must hand to the per-point checks: an int sample, points without samples next
# to points with them, a missing statistic, a failed (null) and a skipped (NaN) point.
ODD_ROWS = {
    "int-samples": lambda d: _set("samples", [1, 2, 3])(d) or _set("result", 2.0)(d),
    "some-points-without-samples": lambda d: d["results"][FIRST][11].__setitem__(0, None),
    "no-samples-at-all": _set("samples", None),
    "a-missing-statistic": lambda d: d["results"][FIRST][7].__setitem__(2, None),
    "failed-and-skipped-points": lambda d: d["results"][FIRST][0].__setitem__(slice(0, 2), [None, float("nan")]),
}


@pytest.mark.parametrize("case", list(CASES) + list(ODD_ROWS))
def test_hostile_and_odd_rows_parse_alike_on_both_paths(tmp_path, monkeypatch, case):
    root = _copy(tmp_path)
    target = sorted(root.glob("h200/*-virtualenv-py3.12.json"))[3]
    if case in CASES:
        CASES[case][0](target)
    else:
        _edit(target, ODD_ROWS[case])
    fast, slow = _parse_both(root, monkeypatch)
    assert fast == slow
    if case in CASES:
        assert fast[3][0] == "error" and CASES[case][1] in fast[3][1]



@pytest.mark.slow
def test_a_batch_looks_its_series_up_once_not_per_file(tmp_path, store_url, monkeypatch):
    """The ids a batch's transaction found or created serve its later files: the 10 recorded files in
    one batch look the series up once (before 2026-12-02: once per file, 10), and store the same.
    (The files' writes are counted, not the check for jobs of another speed after them.)"""
    from sqlalchemy import event

    from ci.ingest import ingest_results_dir
    from ci.store import Store
    from tests.ci.conftest import outside_speed_check

    root = _copy(tmp_path)
    lookups: list[str] = []
    in_check = outside_speed_check(monkeypatch)

    def count(_conn, _cursor, statement, *_args) -> None:
        if statement.lstrip().upper().startswith("SELECT") and "FROM benchmarks" in statement and not in_check:
            lookups.append(statement)

    stored = []
    for batch_size in (50, 1):
        url = store_url if batch_size == 50 else str(tmp_path / f"plain-{batch_size}.sqlite")
        with Store(url) as store:
            event.listen(store.engine, "before_cursor_execute", count)
            lookups.clear()
            assert ingest_results_dir(store, root, batch_size=batch_size).count("inserted") == 10
            if batch_size == 50:
                assert len(lookups) <= 2, lookups  # looked up, then read back after the insert
            stored.append(sorted((r.benchmark.key, r.commit_sha, r.run_id, r.samples) for r in store.results()))
    assert stored[0] == stored[1]


def test_plain_rows_parse_into_column_blocks_not_points(tmp_path):
    """The recorded files' benchmarks are all the common case: each becomes one `PointBlock` of
    columns (no per-point records), standing for as many points as the plain path gives."""
    root = _copy(tmp_path)
    benchmarks = load_benchmarks_json(root)
    for path in sorted(root.glob("h200/*-virtualenv-py3.12.json")):
        run = parse_result_file(path, benchmarks, load_machine_json(path.parent))
        assert run.points == () and run.blocks
        assert run.n_points == len(run.all_points()) == sum(len(b.benches) for b in run.blocks)


@pytest.mark.parametrize("lists", [
    [[1.0, 2.5e-05, 3], [0.1, 0.2, 0.3]],
    [[float("nan"), 1.0], [float("inf"), -float("inf")]],
    [[-0.0, 5e-324], [1.0], []],
    [],
], ids=["ints", "nan-inf", "ragged", "none"])  # fmt: skip
def test_a_blocks_samples_cut_back_into_the_bytes_of_each_point(lists):
    """A block's samples column, cut by its lengths, gives each point's `pack_samples` bytes."""
    from ci.store.codec import int64s, pack_block, pack_samples, split_samples

    values = [1.0] * len(lists)
    stats = [[None] * len(lists)] * 6
    _value, samples, lengths, _stats = pack_block(values, lists, stats)
    assert split_samples(samples, int64s(lengths)) == [pack_samples(x) for x in lists]


@pytest.mark.slow
def test_a_grid_of_committed_series_is_not_looked_up_again(tmp_path, store_url):
    """Once a grid's series are committed rows, a later file's block of that grid takes their ids
    packed as they were (`Store._grid_ids`): with one file a transaction, the files after the second
    ask for no series of their blocks, and the store holds what one transaction of all six holds.
    (Series of undeclared direction are looked up each time, so that a declaration is seen.)"""
    from ci.ingest import ingest_results_dir
    from ci.store import Store
    from tools.bench_ingest import MACHINE, write_results

    root = tmp_path / "generated"
    write_results(root, n_commits=6, n_series=50, n_samples=3)  # series of declared direction
    asked: list[set[str]] = []
    stored = []
    for batch_size in (1, 50):
        url = store_url if batch_size == 1 else str(tmp_path / "one-batch.sqlite")
        with Store(url) as store:
            real = store._benchmark_ids

            def spy(conn, pending, wanted, real=real):
                asked.append(set(wanted))
                return real(conn, pending, wanted)

            store._benchmark_ids = spy
            asked.clear()
            assert ingest_results_dir(store, root, batch_size=batch_size).count("inserted") == 6
            if batch_size == 1:
                point_keys = set()
                for path in sorted((root / MACHINE).glob("*-existing*.json")):
                    run = parse_result_file(path, load_benchmarks_json(root), load_machine_json(path.parent))
                    point_keys |= {p.key for p in run.points}
                # the first file creates the series; the second finds them committed and keeps their ids
                assert len(asked[0]) == len(asked[1]) == 50 and all(keys <= point_keys for keys in asked[2:]), asked
            stored.append(sorted((r.benchmark.key, r.commit_sha, r.run_id, r.samples) for r in store.results()))
    assert stored[0] == stored[1]
