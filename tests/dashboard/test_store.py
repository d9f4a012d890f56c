"""Rendering from the real SQLAlchemy store (SQLite file) gives the same site as from memory."""

from __future__ import annotations

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
