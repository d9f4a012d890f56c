"""Render the static site from a `StoreReader`: overview, one page per series and per commit,
regressions, correctness gates, a commit list, and the charts' data.

Layout of the output folder (all links relative unless `base_url` is given, so the site opens
from disk and from any static host):

    index.html  regressions.html  correctness.html  commits.html  style.css  chart.js
    (correctness.html, and its tab, only for a suite with correctness benchmarks)
    series/<hash of benchmark key and machine>.html   commit/<sha>.html
    data/commits.js  data/series/<series hash>.js  data/params/<benchmark hash>.js   (ci.site.data)
    vendor/uPlot.iife.min.js  vendor/uPlot.min.css  vendor/uPlot-LICENSE.txt       (uPlot 1.6.32, MIT)

Every page renders its tables on the server; the series charts are drawn in the browser by
`chart.js` (on uPlot) from the data files, loaded when a page is viewed. A series page lists its
newest RUNS_SHOWN runs (the chart holds them all); a commit page lists the series whose change at
that commit passed their noise, not every series, so that a page stays a few kilobytes at 500
series (the site was 375 MB at 1,000 commits x 500 series when each page listed everything).

A render whose inputs (the store's commits, runs, verdicts and acknowledgements, the options and
this code) are those of the previous one rewrites nothing and reads no results. After new runs, a
render reads only those from the store (the columns the last render read are kept in the folder's
bookkeeping, `.dashboard-cache/`, checked by a digest in the manifest; `ci.site.model.ColumnsCache`)
and takes the unchanged rows of a series page's table from the page it wrote before.

This module is the render itself: the staging folder, the kept columns and suspicion tracks, which
process renders which pages, and the static assets. The pages are built in `ci.site.pages` (its
docstring lists them), one module per kind of page over the `Site` they share.
"""

from __future__ import annotations

import contextlib
import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ci.forking import fork_map, fork_workers
from ci.records import Project, StoreReader, machine_labels
from ci.site.model import ColumnsCache, load_snapshot
from ci.site.pages.commits import CommitPages
from ci.site.pages.markup import environment
from ci.site.pages.overview import SummaryPages
from ci.site.pages.series import SeriesPages
from ci.site.pages.structure import StructurePage
from ci.site.staging import site_folder, staged
from ci.site.writer import PagePart, PageWriter, constant, fingerprint
from ci.store.reads import paused_gc
from ci.verdicts import SuspectTrack, VerdictSettings

# The bookkeeping file (ci.site.writer.CACHE_DIR) with the store's columns as the last render read them.
COLUMNS_CACHE = "columns.npz"
# The bookkeeping file with each series' suspicion test as the last render left it (`ci.verdicts.SuspectTrack`).
TRACKS_CACHE = "suspects.bin"
_PKG_DIR = Path(__file__).resolve().parent  # ci/site: the site's own code and its templates
_ROOT = _PKG_DIR.parents[1]  # the folder that holds the `ci` package
# Besides the site's own code, what its pages are computed with: the verdicts and the formatter.
_CODE = ("ci/verdicts", "ci/format.py", "ci/records")
VENDOR = {  # site path -> file under ci/site/templates/vendor/
    "vendor/uPlot.iife.min.js": "uPlot.iife.min.js",
    "vendor/uPlot.min.css": "uPlot.min.css",
    "vendor/uPlot-LICENSE.txt": "uPlot-LICENSE.txt",
}


@dataclass(frozen=True)
class RenderStats:
    """What one render did."""

    pages_written: int
    pages_unchanged: int
    pages_removed: int
    bytes_written: int
    seconds: float
    series: int
    commits: int


def _code_salt() -> str:
    """A hash of the templates, the site's code and the verdict code: a new version re-renders every page."""
    h = hashlib.blake2b(digest_size=16)
    files = [*_PKG_DIR.rglob("*.py"), *(_PKG_DIR / "templates").rglob("*")]
    for rel in _CODE:
        path = _ROOT / rel
        files += sorted(path.glob("*.py")) if path.is_dir() else [path]
    for path in sorted(p for p in files if p.is_file()):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()


class _Site(SummaryPages, SeriesPages, CommitPages, StructurePage):
    """The whole site: every page (`ci.site.pages`), the static assets, and which process renders
    the series pages."""

    def series_pages(self, meanwhile: Callable[[], None] = lambda: None) -> None:
        """Every series' page and data file, split across forked workers when there are many (each
        writes its files and hands back their manifest entries; `PageWriter.part`), while this
        process renders the pages `meanwhile` emits: after one new commit every one of 500 pages and
        data files is rewritten, half of such a render, and each page is independent of the others.
        Without fork, or for few series, all here, then `meanwhile`."""
        series = self.snap.series
        workers = fork_workers(len(series), PARALLEL_MIN_PAGES)
        if workers == 1:
            for s in series:
                self.series_page(s)
            meanwhile()
            return
        global _FORK_SITE
        _FORK_SITE = self
        try:  # forked here: the site as it is now
            parts = fork_map(_series_chunk, [range(i, len(series), workers) for i in range(workers)], workers,
                             names=lambda chunk: (f"{series[i].benchmark.key} on {series[i].machine}" for i in chunk),
                             lost="series pages not rendered", meanwhile=meanwhile)
        finally:
            _FORK_SITE = None
        for part in parts:
            self.writer.merge(part)

    def assets(self) -> None:
        for name in ("style.css", "chart.js"):
            text = (_PKG_DIR / "templates" / name).read_text(encoding="utf-8")
            self.writer.page(name, text, constant(text))
        for rel, name in VENDOR.items():
            text = (_PKG_DIR / "templates" / "vendor" / name).read_text(encoding="utf-8")
            self.writer.page(rel, text, constant(text))


# From this many series on, `_Site.series_pages` forks workers (starting them costs ~0.1 s).
PARALLEL_MIN_PAGES = 64
_FORK_SITE: _Site | None = None  # what the forked workers render from (inherited, nothing pickled on the way in)


def _series_chunk(indices: range) -> PagePart:
    site = _FORK_SITE
    assert site is not None
    with site.writer.part() as part:
        for i in indices:
            site.series_page(site.snap.series[i])
    return part


def _store_state(store: StoreReader, branch: str | None, options: object) -> str:
    """A fingerprint of everything a render reads, without reading results: "" when the store
    cannot tell cheaply whether its results changed (no `run_digests`, e.g. an in-memory store).

    `ci.store.Store.run_digests` lists the sha256 of every ingested result file: a new, replaced or
    removed run changes it, and a run's results are written with it in one transaction.
    """
    digests = getattr(store, "run_digests", None)
    if not callable(digests):
        return ""
    definitions = getattr(store, "series_definitions", str)()  # series renamed (`ci ingest --redefine`)
    return fingerprint(options, sorted(digests().items()), store.commits(branch), store.machines(),
                       store.verdicts(), store.acknowledgements(), definitions)


def render_site(
    store: StoreReader,
    out_dir: str | Path,
    *,
    title: str | None = None,
    base_url: str = "",
    baseline_sha: str | None = None,
    branch: str | None = None,
    project: Project | None = None,
) -> RenderStats:
    """Render the whole dashboard from `store` into `out_dir`, rewriting only pages that changed.

    Args:
        store: any `StoreReader` (the SQLAlchemy `ci.store.Store`, or an in-memory one).
        out_dir: output folder, created when missing; files this function did not write are left alone.
            The site is rendered into a staging folder beside it, which replaces it only once complete
            (`ci.site.staging`): on any error `out_dir` is left as it was, and no staging folder stays.
        title: shown in every page's header; None: the project's (`ci.records.Project.title`).
        base_url: absolute prefix for links (e.g. "https://example.org/perf/"); "" for relative
            links, so the site also opens from disk.
        baseline_sha: commit the overview's "vs baseline" column compares against (full sha or a
            unique prefix); None means each series' first run.
        branch: only this branch's history; None for every commit in the store.
        project: the project's name and commit links (asv.conf.json); None: what the store holds
            (`StoreReader.project`), else none.

    Returns:
        RenderStats: pages written / unchanged / removed, bytes written, seconds taken.

    Raises:
        TypeError: `out_dir`, `title` or `base_url` has the wrong type.
        ValueError: `out_dir` is an existing file or a mount point, `baseline_sha` names no commit (or
            several), or a result names a commit missing from the history.
    """
    if not isinstance(out_dir, str | Path):
        raise TypeError(f"out_dir must be a str or Path, got {type(out_dir).__name__}")
    if not (title is None or isinstance(title, str)) or not isinstance(base_url, str):
        raise TypeError("title and base_url must be strings")
    if project is not None and not isinstance(project, Project):
        raise TypeError(f"project must be a ci.records.Project, got {type(project).__name__}")
    if base_url and not base_url.startswith(("http://", "https://", "/")):
        raise ValueError(f"base_url must be absolute (http://, https:// or /...), got {base_url!r}")
    t0 = time.perf_counter()
    out = site_folder(Path(out_dir))
    # Every read of the render from one state of the store (`ci.store.Store.snapshot`): read in
    # separate transactions, an ingest committed between the commit list and the results made a
    # render fail ("names commit ..., which the store's commit history does not contain").
    snapshot = getattr(store, "snapshot", None)
    with snapshot() if callable(snapshot) else contextlib.nullcontext():
        return _render(store, out, title, base_url, baseline_sha, branch, project, t0)


def _render(store: StoreReader, out: Path, title: str | None, base_url: str, baseline_sha: str | None,
            branch: str | None, project: Project | None, t0: float) -> RenderStats:
    project = project or store.project() or Project()
    title = project.title if title is None else title
    salt = _code_salt()
    state = _store_state(store, branch, (salt, title, base_url, baseline_sha, branch, project))
    writer = PageWriter(out, "")
    if state and state == writer.previous_state and writer.keep_all():
        kept = writer.pages()
        return RenderStats(pages_written=0, pages_unchanged=writer.unchanged, pages_removed=0, bytes_written=0,
                           seconds=time.perf_counter() - t0, series=sum(r.startswith("series/") for r in kept),
                           commits=sum(r.startswith("commit/") for r in kept))
    # Cyclic garbage collection off while the snapshot's 500,000 runs and the pages are built: they hold no
    # cycles, and its passes over every live object as they accumulate cost ~1.1 s CPU of `load_snapshot`
    # after one new commit (2.45 -> 1.3-1.5 s, 2026-12-02); refcounting still frees them, and a collection
    # runs when it is back on. The site is rendered into a staging copy and replaces `out` only when whole.
    with paused_gc(), staged(out) as stage:
        writer = PageWriter(stage, "")
        # The store's columns as the previous render read them (same code, same branch): only later runs are read.
        columns_key = fingerprint(salt, branch)
        columns = writer.previous_blob(COLUMNS_CACHE, columns_key)
        tracks = writer.previous_blob(TRACKS_CACHE, columns_key)
        snap = load_snapshot(store, branch=branch, baseline_sha=baseline_sha,
                             columns=ColumnsCache.from_bytes(columns) if columns is not None else None,
                             tracks=SuspectTrack.unpack(tracks) if tracks is not None else None,
                             floor_for=VerdictSettings.for_project(project).floor_for)
        if snap.columns is not None:
            writer.blob(COLUMNS_CACHE, columns_key, snap.columns.to_bytes())
        writer.blob(TRACKS_CACHE, columns_key, SuspectTrack.pack(snap.tracks))
        writer.salt = f"{salt}|{title}|{base_url}|{project!r}|{sorted(machine_labels(snap.machines).items())}|" \
                      f"{[(m.name, m.gpu) for m in snap.machines]}"
        writer.state = state
        site = _Site(snap, writer, environment(), title, base_url, project)
        site.assets()
        site.data_files()

        def the_other_pages() -> None:
            site.overview()
            site.regressions_page()
            if site.has_correctness:
                site.correctness_page()
            if site.n_exact:
                site.structure_page()
            site.commit_index()
            site.commit_pages()

        site.series_pages(meanwhile=the_other_pages)
        writer.finish()
    return RenderStats(pages_written=writer.written, pages_unchanged=writer.unchanged, pages_removed=writer.removed,
                       bytes_written=writer.bytes_written, seconds=time.perf_counter() - t0,
                       series=len(snap.series), commits=len(snap.commits))
