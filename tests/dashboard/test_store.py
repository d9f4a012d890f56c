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
                    *(str(p.relative_to(tmp_path / "mem")) for p in (tmp_path / "mem" / "series").iterdir())]:
            assert (tmp_path / "db" / rel).read_text() == (tmp_path / "mem" / rel).read_text(), rel
        assert "expected: bigger tile for accuracy" in (tmp_path / "db" / "regressions.html").read_text()
        crashed = (tmp_path / "db" / "commit" / f"{mem.commit_list[19].sha}.html").read_text()
        assert "correctness check did not run" in crashed  # from Store.failures()

        # One more commit through the real ingest path: an incremental re-render.
        new = next_commit(mem)
        ingest_commits(store, mem, [new.sha])
        again = render_site(store, tmp_path / "db")
        assert (tmp_path / "db" / "commit" / f"{new.sha}.html").is_file()
        assert 0 < again.pages_written < again.pages_unchanged
    finally:
        store.close()
