"""Atomic publish: a render that fails (out of disk, a store that cannot be read, a kill) leaves the
previous site byte for byte and no staging folder; a complete one replaces it, pages it did not
change kept as the same files."""

from __future__ import annotations

import errno
import fcntl
import json
import multiprocessing
import os
import signal
from pathlib import Path
from typing import Any

import pytest

import ci.site.render as render
from ci.site import render_site, staging
from ci.site.writer import PageWriter
from tools.fixtures import MemoryStore, next_commit, synthetic_store


def _tree(root: Path) -> dict[str, bytes | str]:
    """Every file under `root` (bookkeeping dot-files too) by relative path: its bytes, or a symlink's target."""
    out: dict[str, bytes | str] = {}
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        if p.is_symlink():
            out[rel] = os.readlink(p)
        elif p.is_file():
            out[rel] = p.read_bytes()
    return out


def _beside(out: Path) -> list[str]:
    return sorted(p.name for p in out.parent.iterdir())


@pytest.fixture
def published(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[MemoryStore, Path, dict[str, bytes | str]]:
    """A store, the site rendered from it into tmp_path/parent/site, and that site's files; then one more
    commit in the store, so the next render has pages to write. Pages are rendered in this process
    (a forked worker's failure takes the same way out: `fork_map` raises it here)."""
    monkeypatch.setattr(render, "PARALLEL_MIN_PAGES", 10**9)
    store = synthetic_store(n_commits=10, n_series=6)
    out = tmp_path / "parent" / "site"
    render_site(store, out)
    (out / "CNAME").write_text("perf.example.org\n")  # a file the render did not write
    before = _tree(out)
    assert "index.html" in before and ".dashboard-manifest.json" in before
    next_commit(store, slower=1.2)
    return store, out, before


@pytest.mark.parametrize("after", [0, 20, -1], ids=["first-page", "midway", "every-page-then-finish"])
def test_a_render_out_of_disk_leaves_the_previous_site_byte_identical(published, monkeypatch, after: int) -> None:
    """ENOSPC at the first page, midway, or once every page is written (in the manifest's write):
    the published site is the previous one, byte for byte, and nothing is left beside it. Before, the
    render wrote into the site as it went: pages of the new render and no index.html."""
    store, out, before = published
    written = []
    real_page, real_finish = PageWriter.page, PageWriter.finish

    def full_disk() -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def page(self: PageWriter, rel: str, *args: Any, **kw: Any) -> None:
        if after >= 0 and len(written) >= after:
            full_disk()
        written.append(rel)
        real_page(self, rel, *args, **kw)

    def finish(self: PageWriter) -> None:
        if after < 0:
            full_disk()
        real_finish(self)

    monkeypatch.setattr(PageWriter, "page", page)
    monkeypatch.setattr(PageWriter, "finish", finish)
    with pytest.raises(OSError, match="No space left on device"):
        render_site(store, out)
    assert len(written) == (after if after >= 0 else len(json.loads(before[".dashboard-manifest.json"])["pages"]) + 1)
    assert _tree(out) == before
    assert _beside(out) == ["site"]


def test_a_store_that_cannot_be_read_leaves_the_site_and_creates_no_folder(published, monkeypatch) -> None:
    """A store read error: the previous site stays byte for byte; into a folder that did not exist, no
    folder is made (before: an empty one, which the workflow then published)."""
    store, out, before = published

    def broken(*args: Any, **kw: Any) -> Any:
        raise OSError(errno.EIO, "disk I/O error")

    monkeypatch.setattr(store, "results", broken)
    with pytest.raises(OSError, match="disk I/O error"):
        render_site(store, out)
    assert _tree(out) == before and _beside(out) == ["site"]
    fresh = out.parent / "fresh"
    with pytest.raises(OSError, match="disk I/O error"):
        render_site(store, fresh)
    assert not fresh.exists() and _beside(out) == ["site"]


def test_a_render_killed_midway_leaves_the_previous_site_whole(published, monkeypatch) -> None:
    """SIGKILL halfway through the pages (the render in a forked process): the site is the previous one
    byte for byte, never a mix; the next render removes the killed one's staging folder and publishes
    the same site as a render from scratch."""
    if "fork" not in multiprocessing.get_all_start_methods():
        pytest.skip("needs fork")
    store, out, before = published
    real_page = PageWriter.page
    written = []

    def dies(self: PageWriter, rel: str, *args: Any, **kw: Any) -> None:
        if len(written) == 20:
            os.kill(os.getpid(), signal.SIGKILL)
        written.append(rel)
        real_page(self, rel, *args, **kw)

    monkeypatch.setattr(PageWriter, "page", dies)
    child = multiprocessing.get_context("fork").Process(target=render_site, args=(store, out))
    child.start()
    child.join(60)
    assert child.exitcode == -signal.SIGKILL
    assert _tree(out) == before
    leftovers = [name for name in _beside(out) if name != "site"]
    assert len(leftovers) == 1 and leftovers[0].startswith(".site.staging-")  # what SIGKILL leaves
    monkeypatch.setattr(PageWriter, "page", real_page)
    stats = render_site(store, out)
    assert stats.pages_unchanged > 0 and _beside(out) == ["site"]
    scratch = out.parent / "scratch"
    render_site(store, scratch)
    ours = {k: v for k, v in _tree(out).items() if not k.startswith(".") and k != "CNAME"}
    assert ours == {k: v for k, v in _tree(scratch).items() if not k.startswith(".")}


def test_a_complete_render_replaces_the_site_keeping_unchanged_files(published) -> None:
    """The new site replaces the old one whole; a page the render did not change is the same file
    (inode and mtime: a static host re-uploads nothing), and a file it did not write stays."""
    store, out, before = published
    kept = {rel: os.stat(out / rel) for rel in ("vendor/uPlot.iife.min.js", "style.css", "CNAME")}
    stats = render_site(store, out)
    after = _tree(out)
    assert stats.pages_unchanged > 0 and stats.pages_written > 0
    assert after["index.html"] != before["index.html"] and after["CNAME"] == before["CNAME"]
    for rel, st in kept.items():
        now = os.stat(out / rel)
        assert (now.st_ino, now.st_mtime_ns) == (st.st_ino, st.st_mtime_ns), rel
    assert _beside(out) == ["site"]
    again = render_site(store, out)  # nothing new: nothing written, nothing staged
    assert again.pages_written == 0 and _tree(out) == after and _beside(out) == ["site"]


def test_without_an_atomic_exchange_the_site_is_still_replaced_whole(published, monkeypatch) -> None:
    """Where renameat2's exchange is missing (not Linux, an old C library) two renames swap the folders."""
    store, out, before = published
    monkeypatch.setattr(staging, "_exchange", lambda a, b: False)
    render_site(store, out)
    assert _tree(out)["index.html"] != before["index.html"] and _beside(out) == ["site"]


def test_a_symlinked_output_folder_is_published_where_it_points(tmp_path: Path) -> None:
    store = synthetic_store(n_commits=6, n_series=3)
    real = tmp_path / "real"
    link = tmp_path / "link"
    link.symlink_to(real, target_is_directory=True)
    render_site(store, link)
    next_commit(store)
    render_site(store, link)
    assert link.is_symlink() and (real / "index.html").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link", "real"]


def test_an_output_path_that_cannot_be_swapped_is_refused_before_anything(tmp_path: Path, monkeypatch) -> None:
    store = synthetic_store(n_commits=6, n_series=3)
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="exists and is not a folder"):
        render_site(store, tmp_path / "file")
    (tmp_path / "mnt").mkdir()
    monkeypatch.setattr(staging.os.path, "ismount", lambda p: str(p).endswith("mnt"))
    with pytest.raises(ValueError, match="is a mount point"):
        render_site(store, tmp_path / "mnt")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "mnt"] and not any((tmp_path / "mnt").iterdir())


def test_a_folder_where_no_staging_folder_can_be_made_is_an_error_that_says_why(published, monkeypatch) -> None:
    """A parent folder the render may not write (a web root whose site folder alone is writable, say)."""
    store, out, before = published
    real_mkdir = Path.mkdir

    def mkdir(self: Path, *args: Any, **kw: Any) -> None:
        if self.name.startswith(".site.staging-"):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(self))
        real_mkdir(self, *args, **kw)

    monkeypatch.setattr(Path, "mkdir", mkdir)
    with pytest.raises(PermissionError, match="rendered into a folder beside the output folder .* Permission denied"):
        render_site(store, out)
    assert _tree(out) == before and _beside(out) == ["site"]


def test_only_the_staging_folders_of_dead_renders_are_removed(tmp_path: Path) -> None:
    out = tmp_path / "site"
    dead = tmp_path / ".site.staging-0123456789ab"
    live = tmp_path / ".site.staging-ba9876543210"
    other = tmp_path / ".other.staging-0123456789ab"
    for d in (dead, live, other):
        (d / "series").mkdir(parents=True)
        (d / "series" / "x.html").write_text("x")
    fd = os.open(live, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a render in progress holds it
        assert staging.remove_leftovers(out) == [dead]
    finally:
        os.close(fd)
    assert live.is_dir() and other.is_dir() and not dead.exists()


def test_a_page_worker_out_of_disk_leaves_the_previous_site_byte_identical(published, monkeypatch) -> None:
    """ENOSPC in a forked page worker comes back to the render as the error it was (`fork_map`)."""
    if "fork" not in multiprocessing.get_all_start_methods():
        pytest.skip("needs fork")
    store, out, before = published
    monkeypatch.setattr(render, "PARALLEL_MIN_PAGES", 1)
    monkeypatch.setattr(render, "fork_workers", lambda items, least: 2)
    parent, real_page = os.getpid(), PageWriter.page

    def page(self: PageWriter, rel: str, *args: Any, **kw: Any) -> None:
        if os.getpid() != parent and rel.startswith("series/"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_page(self, rel, *args, **kw)

    monkeypatch.setattr(PageWriter, "page", page)
    with pytest.raises(OSError, match="No space left on device"):
        render_site(store, out)
    assert _tree(out) == before and _beside(out) == ["site"]
    assert multiprocessing.active_children() == []
