"""Rendering from the real SQLAlchemy store (SQLite file) gives the same site as from memory."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from dashboard import render_site
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
    import dashboard.model as model
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
        real = model.detect_all

        def counting(source: object, **kw: object) -> object:
            seen.append(1)
            return real(source, **kw)

        def refuse(*_: object, **__: object) -> None:
            raise AssertionError("a series' change points computed from its results, not the kept states")

        with monkeypatch.context() as m:
            m.setattr(model, "change_points", refuse)
            m.setattr(model, "detect_all", counting)
            after = marks(model.load_snapshot(store))
        assert seen == [1]
        assert after == marks(model.load_snapshot(mem))
    finally:
        store.close()


def test_snapshot_from_columns_equals_snapshot_from_results(tmp_path: Path) -> None:
    """A `ci.store.Store` is read as columns (no record per result); the snapshot, hence the site,
    is what the per-result read gives, on a history with a benchmark version change, NaN and
    missing samples, uneven sample counts, two runs of one commit and another branch's commits."""
    import dataclasses

    import dashboard.model as model

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


def test_rerender_after_new_commits_equals_a_render_from_scratch(tmp_path: Path) -> None:
    """A re-render after new commits, from the previous render's manifest and data files and the
    store's kept change-point states, writes the site a render into an empty folder writes, byte for
    byte; a data file is extended with the new runs, not formatted again."""
    mem = synthetic_store(n_commits=20, n_series=5, machines=2)
    store = to_sqlite(mem, str(tmp_path / "history.sqlite"))
    try:
        import dashboard.data as data

        render_site(store, tmp_path / "kept")
        formatted: list[int] = []
        real = data._numbers

        def counting(values: list[float], div: float) -> str:
            formatted.append(len(values))
            return real(values, div)

        for slower in (1.0, 1.6):  # an ordinary commit, then a step
            new = next_commit(mem, slower=slower)
            ingest_commits(store, mem, [new.sha])
            if slower > 1:  # a data file changed on disk, same size: formatted anew, not extended
                damaged = next((tmp_path / "kept" / "data" / "series").iterdir())
                damaged.write_text(damaged.read_text().replace(",", ";", 3))
            formatted.clear()
            with pytest.MonkeyPatch.context() as m:
                m.setattr(data, "_numbers", counting)
                again = render_site(store, tmp_path / "kept")
            # each series' data file: only the new run's value, low and high are formatted
            fresh = 0 if slower == 1 else 1
            assert sorted(formatted) == [1] * 3 * (again.series - fresh) + [len(mem.commit_list)] * 3 * fresh
        # An older commit measured again: its point changes, so its series' files are formatted anew.
        _second_run(store, mem, 8, "runner-1", 1.3)
        render_site(store, tmp_path / "kept")
        with to_sqlite(mem, str(tmp_path / "fresh.sqlite")) as fresh:  # no kept states, no manifest
            _second_run(fresh, mem, 8, "runner-1", 1.3)
            render_site(fresh, tmp_path / "scratch")

        def files(root: Path) -> dict[str, bytes]:
            return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*")
                    if p.is_file() and not p.name.startswith(".")}

        kept, scratch = files(tmp_path / "kept"), files(tmp_path / "scratch")
        assert sorted(kept) == sorted(scratch)
        assert [rel for rel in kept if kept[rel] != scratch[rel]] == []
        assert 'class="worse"' in kept[f"commit/{new.sha}.html"].decode()  # the step is on its commit's page
    finally:
        store.close()


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
