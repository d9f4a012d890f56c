"""Rendering from the real SQLAlchemy store (SQLite file) gives the same site as from memory."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from ci.site import render_site
from tools.fixtures import ingest_commits, next_commit, synthetic_store, to_sqlite

store_mod = pytest.importorskip("ci.store")


def test_render_from_sqlite_store_matches_memory(tmp_path: Path) -> None:
    mem = synthetic_store(n_commits=24, n_series=6, machines=2)
    db = tmp_path / "history.sqlite"
    store = to_sqlite(mem, str(db))
    try:
        from_db = render_site(store, tmp_path / "db")
        from_mem = render_site(mem, tmp_path / "mem")
        assert (from_db.series, from_db.commits) == (from_mem.series, from_mem.commits) == (12, 24)
        assert from_db.pages_written == from_mem.pages_written
        # Everything derived from results, verdicts and acknowledgements is identical; commit pages
        # may differ only in how the store orders a run's environment entries.
        for rel in ["index.html", "regressions.html", "correctness.html", "commits.html",
                    *(str(p.relative_to(tmp_path / "mem")) for p in (tmp_path / "mem" / "series").iterdir()),
                    *(str(p.relative_to(tmp_path / "mem")) for p in (tmp_path / "mem" / "data").rglob("*.js"))]:
            assert (tmp_path / "db" / rel).read_text() == (tmp_path / "mem" / rel).read_text(), rel
        assert "expected: bigger tile for accuracy" in (tmp_path / "db" / "regressions.html").read_text()
        crashed = (tmp_path / "db" / "commit" / f"{mem.commit_list[19].sha}.html").read_text()
        assert "correctness check did not run" in crashed  # from Store.failures()

        # One more commit through the real ingest path: an incremental re-render.
        new = next_commit(mem)
        ingest_commits(store, mem, [new.sha])
        again = render_site(store, tmp_path / "db")
        assert (tmp_path / "db" / "commit" / f"{new.sha}.html").is_file()
        # Each series' page and data, the new commit's page, its parent's, the lists and commits.js.
        assert 0 < again.pages_written <= 2 * again.series + 10
        assert again.pages_unchanged >= 24 - 4 + 5  # old commit pages, assets
    finally:
        store.close()


def test_nothing_new_reads_no_results(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from datetime import UTC, datetime

    mem = synthetic_store(n_commits=12, n_series=4)
    store = to_sqlite(mem, str(tmp_path / "history.sqlite"))
    try:
        first = render_site(store, tmp_path / "site")

        def refuse(**_: object) -> None:
            raise AssertionError("read results although nothing changed")

        with monkeypatch.context() as m:
            m.setattr(store, "results", refuse)
            again = render_site(store, tmp_path / "site")
        assert (again.pages_written, again.pages_unchanged) == (0, first.pages_written)
        assert (again.series, again.commits) == (first.series, first.commits)

        # A page damaged on disk, an acknowledgement, a new option: each needs a real render.
        (tmp_path / "site" / "regressions.html").write_text("truncated")
        assert render_site(store, tmp_path / "site").pages_written == 1
        store.acknowledge(mem.benchmark_list[2].key, mem.commit_list[6].sha, "me", "expected",
                          datetime(2026, 12, 1, tzinfo=UTC))
        acked = render_site(store, tmp_path / "site")
        assert acked.pages_written > 0 and "expected" in (tmp_path / "site" / "regressions.html").read_text()
        pages = len(list((tmp_path / "site").rglob("*.html")))  # the title is on every page, not in the data
        assert render_site(store, tmp_path / "site", title="Other").pages_written == pages
    finally:
        store.close()


def test_change_points_come_from_the_stores_kept_states(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A render from a `ci.store.Store` takes its change points from `detect_all`'s kept states (a
    render after one commit extends them by that commit) and shows what the per-series computation
    over the results shows, on a history with steps on two machines."""
    import ci.site.judge as judge
    import ci.site.model as model
    import ci.site.snapshot as snapshot
    from ci.verdicts import HistorySettings

    mem = synthetic_store(n_commits=40, n_series=6, machines=2)
    store = to_sqlite(mem, str(tmp_path / "history.sqlite"))
    try:
        def marks(snap: model.Snapshot) -> dict[tuple[str, str], list[model.ChangeMark]]:
            return {(s.benchmark.key, s.machine): s.changes for s in snap.series}

        from_mem = marks(model.load_snapshot(mem))
        from_db = marks(model.load_snapshot(store))
        assert from_db == from_mem
        assert sum(len(c) for c in from_db.values()) >= 4  # series 2 and 3 step on both machines
        assert store.change_point_states("", HistorySettings().fingerprint)  # the render kept them

        new = next_commit(mem, slower=1.5)
        ingest_commits(store, mem, [new.sha])
        seen: list[int] = []
        real = snapshot.detect_all

        def counting(source: object, **kw: object) -> object:
            seen.append(1)
            return real(source, **kw)

        def refuse(*_: object, **__: object) -> None:
            raise AssertionError("a series' change points computed from its results, not the kept states")

        with monkeypatch.context() as m:
            m.setattr(judge, "change_points", refuse)  # the series are judged in ci.site.judge
            m.setattr(snapshot, "detect_all", counting)  # the stored change points are read in ci.site.snapshot
            after = marks(model.load_snapshot(store))
        assert seen == [1]
        assert after == marks(model.load_snapshot(mem))
    finally:
        store.close()


def test_snapshot_from_columns_equals_snapshot_from_results(tmp_path: Path) -> None:
    """A `ci.store.Store` is read as columns (no record per result); the snapshot, hence the site,
    is what a store without that read gives (its results built into the same columns,
    `ci.site.columns`, for the one builder), on a history with a benchmark version change, NaN and
    missing samples, uneven sample counts, two runs of one commit and another branch's commits."""
    import dataclasses

    import ci.site.model as model

    mem = synthetic_store(n_commits=30, n_series=5, machines=2)
    b0, b1, b2 = mem.benchmark_list[0], mem.benchmark_list[1], mem.benchmark_list[2]
    side = {c.sha for c in mem.commit_list[20:23]}
    mem.commit_list = [dataclasses.replace(c, branch="side") if c.sha in side else c for c in mem.commit_list]
    order = {c.sha: i for i, c in enumerate(mem.commit_list)}
    for i, r in enumerate(mem.result_list):
        at = order[r.commit_sha]
        if r.benchmark == b0:  # a new benchmark version from commit 12 on (and one unknown)
            version = None if at == 5 else ("v2" if at >= 12 else "v1")
            mem.result_list[i] = dataclasses.replace(r, benchmark_version=version)
        elif r.benchmark == b1 and at % 4 == 0:  # fewer samples, one NaN among them
            mem.result_list[i] = dataclasses.replace(r, samples=(*r.samples[:3], math.nan))
        elif r.benchmark == b2 and at % 7 == 0:
            mem.result_list[i] = dataclasses.replace(r, samples=r.samples[:1])
    db = tmp_path / "history.sqlite"
    store = to_sqlite(mem, str(db))
    try:
        _second_run(store, mem, 9, "runner-0", 1.2)  # a second run of commit 9, later the same day
        c9 = mem.commit_list[9]

        class Reader:  # the StoreReader protocol only: the per-result read
            def __getattr__(self, name: str) -> object:
                if name in ("series_columns", "change_point_states", "save_change_point_states"):
                    raise AttributeError(name)
                return getattr(store, name)

        for branch in (None, "main"):
            columns = model.load_snapshot(store, branch=branch)
            results = model.load_snapshot(Reader(), branch=branch)  # type: ignore[arg-type]
            assert repr(columns) == repr(results), branch
            by_key = {(s.benchmark.key, s.machine): s for s in columns.series}
            # v2 from commit 12 and the one of unknown version; three of those are the side branch's
            assert len(by_key[(b0.key, "runner-0")].points) == (19 if branch is None else 16)
            assert any(p.n == 1 for p in by_key[(b2.key, "runner-1")].points)
            assert columns.environments[c9.sha][("runner-0", f"runner-0/{c9.sha}/env2")] == (("python", "3.12"),)
            assert sum(p.sha == c9.sha for p in by_key[(b1.key, "runner-0")].points) == 2
    finally:
        store.close()


def test_result_columns_are_the_store_columns(tmp_path: Path) -> None:
    """A store without a columnar read is read as the columns a `ci.store.Store` serves of the same
    history (`ci.site.columns.result_columns`): the same runs and commits, series, samples, counts and
    versions, and each run's environment (`run_environments`); only the run keys are the store's own."""
    from ci.site.columns import result_columns

    mem = synthetic_store(n_commits=12, n_series=4, machines=2)
    store = to_sqlite(mem, str(tmp_path / "history.sqlite"))
    try:
        got, want = result_columns(mem), store.series_columns()
        by_key = store.run_environments()
        assert [h.machine for h in got.histories] == [h.machine for h in want]
        for g, w in zip(got.histories, want, strict=True):
            assert len(g.runs) == len(w.runs)
            # as its results recorded it (the store keeps it sorted by name)
            assert [tuple(sorted(e)) for e in got.environments[g.machine]] == [by_key[k] for k, _ in w.runs]
            assert [(c.benchmark, c.machine, c.commit_shas, c.runs, c.counts, c.samples, c.versions, c.spreads)
                    for c in g.series] == [(c.benchmark, c.machine, c.commit_shas, c.runs, c.counts, c.samples,
                                            c.versions, c.spreads) for c in w.series]
    finally:
        store.close()


def test_rerender_after_new_commits_equals_a_render_from_scratch(tmp_path: Path) -> None:
    """A re-render after new commits, from the previous render's manifest, data files, pages and kept
    columns and the store's kept change-point states, writes the site a render into an empty folder
    writes, byte for byte; a data file is extended with the new runs, a series page's table formats
    only the new row, and only the new runs are read from the store. A page, a data file or the kept
    columns changed on disk cost a full computation of what they held, never a stale page."""
    import ci.site.data as data
    import ci.site.fmt as dfmt
    from ci.site.writer import CACHE_DIR

    mem = synthetic_store(n_commits=20, n_series=5, machines=2)
    store = to_sqlite(mem, str(tmp_path / "history.sqlite"))
    site = tmp_path / "kept"
    try:
        render_site(store, site)
        formatted: list[int] = []
        ranges: list[str] = []
        reads = _column_reads(store)
        real_numbers, real_range = data._numbers, dfmt.fmt_range

        def counting(values: list[float], div: float) -> str:
            formatted.append(len(values))
            return real_numbers(values, div)

        def ranging(low: float, high: float, unit: str) -> str:
            ranges.append(unit)
            return real_range(low, high, unit)

        for step, slower in enumerate((1.0, 1.6, 1.0)):  # an ordinary commit, a step, then an ordinary one
            new = next_commit(mem, slower=slower)
            ingest_commits(store, mem, [new.sha])
            damaged_data = damaged_page = None
            if step == 1:  # a data file and a series page changed on disk, same size: formatted anew
                damaged_data = next((site / "data" / "series").iterdir())
                damaged_data.write_text(damaged_data.read_text().replace(",", ";", 3))
                damaged_page = next((site / "series").iterdir())
                damaged_page.write_text(damaged_page.read_text().replace("<td>", "<th>", 3))
            if step == 2:  # the kept columns changed on disk, same size: the store is read in full
                kept = site / CACHE_DIR / "columns.npz"
                raw = bytearray(kept.read_bytes())
                raw[len(raw) // 2] ^= 0xFF
                kept.write_bytes(bytes(raw))
            formatted.clear()
            ranges.clear()
            reads.clear()
            with pytest.MonkeyPatch.context() as m:
                m.setattr(data, "_numbers", counting)
                m.setattr(dfmt, "fmt_range", ranging)
                again = render_site(store, site)
            # each series' data file: only the new run's value, low and high are formatted
            fresh = 1 if damaged_data else 0
            assert sorted(formatted) == [1] * 3 * (again.series - fresh) + [len(mem.commit_list)] * 3 * fresh
            # each series page's table: only the new row (the damaged page: all its rows)
            assert len(ranges) == again.series + (len(mem.commit_list) - 1 if damaged_page else 0)
            # only the new runs were read, except when the kept columns were damaged
            assert reads == ([None] if step == 2 else [{"runner-0": len(mem.commit_list) - 1,
                                                        "runner-1": len(mem.commit_list) - 1}])
        # An older commit measured again: its point changes, so its series' files are formatted anew.
        _second_run(store, mem, 8, "runner-1", 1.3)
        render_site(store, site)
        with to_sqlite(mem, str(tmp_path / "fresh.sqlite")) as fresh_store:  # no kept states, no manifest
            _second_run(fresh_store, mem, 8, "runner-1", 1.3)
            render_site(fresh_store, tmp_path / "scratch")

        def files(root: Path) -> dict[str, bytes]:
            return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*")
                    if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts)}

        kept_files, scratch = files(site), files(tmp_path / "scratch")
        assert sorted(kept_files) == sorted(scratch)
        assert [rel for rel in kept_files if kept_files[rel] != scratch[rel]] == []
        step_sha = mem.commit_list[-2].sha
        assert 'class="worse"' in kept_files[f"commit/{step_sha}.html"].decode()  # the step is on its commit's page
        assert (site / CACHE_DIR / "columns.npz").is_file()
    finally:
        store.close()


def test_kept_columns_give_the_snapshot_of_a_full_read(tmp_path: Path) -> None:
    """`load_snapshot` with the previous snapshot's columns reads only the later runs and gives the
    snapshot of a full read (a benchmark version change among the new runs, NaN and fewer samples, a
    new series); with columns that no longer match the store (an older commit measured again, a
    series whose levels pool two runs' samples) it reads everything and gives the same."""
    import dataclasses

    import ci.site.model as model
    from ci.store import Store

    mem = synthetic_store(n_commits=30, n_series=5, machines=2)
    b0, b1 = mem.benchmark_list[0], mem.benchmark_list[1]
    order = {c.sha: i for i, c in enumerate(mem.commit_list)}
    late = mem.benchmark_list[4]
    for i, r in enumerate(mem.result_list):
        at = order[r.commit_sha]
        if r.benchmark == b0:  # a new benchmark version from commit 26 on: the older results drop out
            mem.result_list[i] = dataclasses.replace(r, benchmark_version="v2" if at >= 26 else "v1")
        elif r.benchmark == b1 and at % 4 == 0:
            mem.result_list[i] = dataclasses.replace(r, samples=(*r.samples[:3], math.nan))
    mem.result_list = [r for r in mem.result_list if r.benchmark != late or order[r.commit_sha] >= 25]
    store = Store(str(tmp_path / "history.sqlite"))
    try:
        store.upsert_commits(mem.commit_list[:24])
        ingest_commits(store, mem, [c.sha for c in mem.commit_list[:24]])
        before = model.load_snapshot(store)
        assert before.columns is not None
        store.upsert_commits(mem.commit_list)
        ingest_commits(store, mem, [c.sha for c in mem.commit_list[24:]])
        reads = _column_reads(store)
        kept = model.ColumnsCache.from_bytes(before.columns.to_bytes())
        got = model.load_snapshot(store, columns=kept)
        assert reads == [{"runner-0": 24, "runner-1": 24}]  # only the later runs
        reads.clear()
        want = model.load_snapshot(store)
        assert repr(got) == repr(want)
        assert got.columns is not None and want.columns is not None
        assert got.columns.to_bytes() == want.columns.to_bytes()
        by_key = {(s.benchmark.key, s.machine): s for s in got.series}
        assert len(by_key[(b0.key, "runner-0")].points) == 4 and len(by_key[(late.key, "runner-1")].points) == 5

        _second_run(store, mem, 9, "runner-0", 1.2)  # an older commit measured again
        reads.clear()
        again = model.load_snapshot(store, columns=model.ColumnsCache.from_bytes(got.columns.to_bytes()))
        assert reads == [{"runner-0": 24 + 6, "runner-1": 24 + 6}, None]  # the runs differ: read in full
        assert repr(again) == repr(model.load_snapshot(store))

        # Two runs of the newest commit: its levels pool both runs' samples, which the cache does not hold.
        assert again.columns is not None
        kept = model.ColumnsCache.from_bytes(again.columns.to_bytes())
        _second_run(store, mem, 29, "runner-1", 1.1)
        reads.clear()
        pooled = model.load_snapshot(store, columns=kept)
        assert reads[0] == {"runner-0": 31, "runner-1": 30} and reads[-1] is None
        assert repr(pooled) == repr(model.load_snapshot(store))
    finally:
        store.close()


def test_damaged_kept_columns_are_not_read() -> None:
    """Bytes that are not a `ColumnsCache` (truncated, foreign, inconsistent) give None: a full read."""
    import ci.site.model as model
    import ci.site.snapshot as snapshot

    mem = synthetic_store(n_commits=8, n_series=2)
    st = snapshot._Stats(mem.benchmark_list[0], [0, 1], ["v1", None], [1.0, 2.0], [1.0, 2.0], [1.0, 2.0], [3, 3], None)
    good = model.ColumnsCache({"m": [("k0", "d0"), ("k1", "d1")]}, {"m": ["a" * 40, "b" * 40]},
                              {(st.benchmark.key, "m"): st}).to_bytes()
    back = model.ColumnsCache.from_bytes(good)
    assert back is not None and back.to_bytes() == good
    assert back.series[(st.benchmark.key, "m")].versions == ["v1", None]
    assert model.ColumnsCache.from_bytes(good[:len(good) // 2]) is None
    assert model.ColumnsCache.from_bytes(b"not a cache") is None
    bad = model.ColumnsCache({"m": [("k0", "d0")]}, {"m": ["a" * 40]}, {(st.benchmark.key, "m"): st})
    assert model.ColumnsCache.from_bytes(bad.to_bytes()) is None  # a result names a run it does not list


def _column_reads(store: Any) -> list[object]:
    """Record the `runs_after` of each of the dashboard's own `series_columns` reads of `store` from
    now on (`ci.verdicts.detect_all` passes machine and branch as well, and is not recorded)."""
    reads: list[object] = []
    real = store.series_columns

    def reading(**kw: object) -> object:
        if set(kw) == {"runs_after"}:
            reads.append(kw["runs_after"])
        return real(**kw)

    store.series_columns = reading
    return reads


def _second_run(store: object, mem: object, at: int, machine: str, factor: float) -> None:
    """Ingest another run of commit `at` on `machine` (30 minutes later, samples times `factor`)."""
    import hashlib
    from datetime import timedelta

    from ci.records import ParsedPoint, ParsedRun

    commit = mem.commit_list[at]  # type: ignore[attr-defined]
    again = [r for r in mem.result_list if r.commit_sha == commit.sha and r.machine == machine]  # type: ignore[attr-defined]
    points = tuple(ParsedPoint(benchmark=r.benchmark, status="ok", samples=tuple(s * factor for s in r.samples),
                               has_raw_samples=True, value=r.value * factor, stats={},
                               benchmark_version=r.benchmark_version, started_at=None, duration=1.0)
                   for r in again)
    when = (commit.time or mem.commit_list[0].time) + timedelta(minutes=30)  # type: ignore[attr-defined]
    run = ParsedRun(path=Path(f"{machine}/again.json"), run_key=f"{machine}/{commit.sha}/env2",
                    digest=hashlib.sha256(f"again {machine} {at}".encode()).hexdigest(), machine=machine,
                    commit_hash=commit.sha, commit_time=commit.time, env_name="env2", started_at=when,
                    environment=(("python", "3.12"),), points=points, skipped_unknown=(), skipped_stale=())
    store.ingest_run(run, next(m for m in mem.machine_list if m.name == machine), commit)  # type: ignore[attr-defined]


def test_kept_columns_of_another_code_version_or_branch_are_not_used(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The kept columns are keyed by the code version and the branch: after either changes, or with a
    hand-edited manifest, the render reads the store in full."""
    import json

    import ci.site.render as render
    from ci.site.writer import MANIFEST

    mem = synthetic_store(n_commits=12, n_series=3)
    store = to_sqlite(mem, str(tmp_path / "history.sqlite"))
    try:
        site = tmp_path / "site"
        render_site(store, site)
        reads = _column_reads(store)
        for change in ("branch", "manifest", "code"):
            ingest_commits(store, mem, [next_commit(mem).sha])
            reads.clear()
            if change == "branch":
                render_site(store, site, branch="main")
            elif change == "manifest":
                manifest = json.loads((site / MANIFEST).read_text())
                manifest["blobs"]["columns.npz"]["digest"] = "0" * 32
                (site / MANIFEST).write_text(json.dumps(manifest))
                render_site(store, site, branch="main")
            else:
                monkeypatch.setattr(render, "_code_salt", lambda: "another version")
                render_site(store, site, branch="main")
            assert reads == [None], change
        ingest_commits(store, mem, [next_commit(mem).sha])
        render_site(store, site, branch="main")  # same code, same branch again: only the new runs
        assert reads[-1] == {"runner-0": len(mem.commit_list) - 1}
    finally:
        store.close()


def test_rerender_as_new_commits_confirm_and_withdraw_suspicions_equals_a_render_from_scratch(
        tmp_path: Path) -> None:
    """The suspicions and thresholds a re-render judges from the previous render's tracks (only the
    new commits' windows) give the site of a render from scratch, byte for byte, after each commit:
    a two-commit excursion suspected, then withdrawn when the level comes back (and, as the later
    commits move its median, open again and withdrawn again); a step suspected, then confirmed by
    the change point once four commits hold it."""
    import ci.verdicts.suspects as suspects
    from ci.site.model import load_snapshot
    from ci.verdicts import SuspectSettings
    from ci.verdicts.segments import TRANSIENT_REACH

    mem = synthetic_store(n_commits=24, n_series=4)
    store = to_sqlite(mem, str(tmp_path / "history.sqlite"))
    site = tmp_path / "kept"
    windowed: list[int] = []
    real_windows = suspects._windows

    def windows(y: Any, settings: Any, **kw: Any) -> Any:
        windowed.append(y.size)
        return real_windows(y, settings, **kw)

    def files(root: Path) -> dict[str, bytes]:
        return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*")
                if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts)}

    try:
        render_site(store, site)
        steps = (1.5, 1.0, 1 / 1.5, 1.0, 1.6, 1.0, 1.0, 1.0)
        shas: list[str] = []
        states: list[set[tuple[int, str]]] = []
        for step, slower in enumerate(steps):
            new = next_commit(mem, slower=slower)
            shas.append(new.sha)
            ingest_commits(store, mem, [new.sha])
            windowed.clear()
            with pytest.MonkeyPatch.context() as m:
                m.setattr(suspects, "_windows", windows)
                render_site(store, site)
            # the new commit's windows only (and those of the `hold` commits before it, and the neighbourhoods of
            # their oldest commits: `TRANSIENT_REACH`)
            assert windowed and max(windowed) <= (SuspectSettings().window + SuspectSettings().hold + 2
                                                  + TRANSIENT_REACH), step
            with to_sqlite(mem, str(tmp_path / f"fresh-{step}.sqlite")) as fresh:
                render_site(fresh, tmp_path / f"scratch-{step}")
            kept, scratch = files(site), files(tmp_path / f"scratch-{step}")
            assert sorted(kept) == sorted(scratch)
            assert [rel for rel in kept if kept[rel] != scratch[rel]] == [], step
            snap = load_snapshot(store)
            states.append({(shas.index(x.commit_sha), x.state.value) for s in snap.series for x in s.suspects
                           if x.commit_sha in shas})
        assert states[0] == set()  # one commit past the threshold: not suspected until a second holds it
        assert (0, "suspected") in states[1] and (0, "withdrawn") in states[3]  # withdrawn: the level came back
        assert (0, "suspected") in states[4] and (0, "withdrawn") in states[5]  # open again, withdrawn again
        assert (4, "suspected") in states[6] and (4, "confirmed") in states[7]  # confirmed once 4 commits hold it
    finally:
        store.close()


def test_series_pages_from_forked_workers_equal_those_rendered_in_process(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Many series: their pages and data files are rendered by forked workers, which hand back their
    manifest entries. The site, the manifest's pages and the counts are those of a render in one
    process, in a full render and in a re-render after one new commit (the rows and arrays kept)."""
    import json
    import multiprocessing
    import os

    import ci.site.render as render
    from ci.site.writer import MANIFEST, PageWriter

    if "fork" not in multiprocessing.get_all_start_methods() or len(os.sched_getaffinity(0)) < 2:
        pytest.skip("no fork or one CPU: the pages are always rendered in one process")
    merged: list[int] = []
    real_merge = PageWriter.merge

    def merge(self: PageWriter, part: Any) -> None:
        merged.append(len(part.entries))
        real_merge(self, part)

    monkeypatch.setattr(PageWriter, "merge", merge)
    mem = synthetic_store(n_commits=14, n_series=6, machines=2)
    sites = {}
    for name, least in (("forked", 1), ("one process", 10**9)):
        monkeypatch.setattr(render, "PARALLEL_MIN_PAGES", least)
        with to_sqlite(mem, str(tmp_path / f"{name}.sqlite")) as store:
            full = render_site(store, tmp_path / name)
            ingest_commits(store, mem, [next_commit(mem).sha])
            again = render_site(store, tmp_path / name)
        mem.commit_list.pop()  # the next store gets the same history
        mem.result_list = [r for r in mem.result_list if r.commit_sha in {c.sha for c in mem.commit_list}]
        root = tmp_path / name
        sites[name] = ({str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()
                        and not any(part.startswith(".") for part in p.relative_to(root).parts)},
                       json.loads((root / MANIFEST).read_text())["pages"],
                       [(st.pages_written, st.pages_unchanged, st.bytes_written) for st in (full, again)])
    forked, alone = sites["forked"], sites["one process"]
    assert len(forked[0]) > 2 * 12 and forked[0] == alone[0]
    assert forked[1] == alone[1] and forked[2] == alone[2]
    assert forked[2][1][0] > 2 * 12  # the re-render rewrote each series' page and data file
    assert len(merged) >= 4 and sum(merged) == 2 * 2 * 12  # two renders, each from two or more workers

