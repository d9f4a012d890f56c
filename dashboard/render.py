"""Render the static site from a `StoreReader`: overview, one page per series and per commit,
regressions, correctness gates, a commit list, and the charts' data.

Layout of the output folder (all links relative unless `base_url` is given, so the site opens
from disk and from any static host):

    index.html  regressions.html  correctness.html  commits.html  style.css  chart.js
    (correctness.html, and its tab, only for a suite with correctness benchmarks)
    series/<hash of benchmark key and machine>.html   commit/<sha>.html
    data/commits.js  data/series/<series hash>.js  data/params/<benchmark hash>.js   (dashboard.data)
    vendor/uPlot.iife.min.js  vendor/uPlot.min.css  vendor/uPlot-LICENSE.txt       (uPlot 1.6.32, MIT)

Every page renders its tables on the server; the series charts are drawn in the browser by
`chart.js` (on uPlot) from the data files, loaded when a page is viewed. A series page lists its
newest RUNS_SHOWN runs (the chart holds them all); a commit page lists the series whose change at
that commit passed their noise, not every series, so that a page stays a few kilobytes at 500
series (the site was 375 MB at 1,000 commits x 500 series when each page listed everything).

A render whose inputs (the store's commits, runs, verdicts and acknowledgements, the options and
this code) are those of the previous one rewrites nothing and reads no results. After new runs, a
render reads only those from the store (the columns the last render read are kept in the folder's
bookkeeping, `.dashboard-cache/`, checked by a digest in the manifest; `dashboard.model.ColumnsCache`)
and takes the unchanged rows of a series page's table from the page it wrote before.
"""

from __future__ import annotations

import contextlib
import hashlib
import html
import itertools
import math
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

from ci.forking import fork_map, fork_workers
from ci.format import display_scale
from ci.records import Benchmark, Direction, Kind, Outcome, Project, StoreReader, machine_labels
from ci.store.reads import paused_gc
from ci.verdicts import AlertGroup, Suspect, SuspectState, SuspectTrack, VerdictSettings, passes_gate
from ci.verdicts.exact import DENSE, LAUNCH_UNIT, SPILL_UNIT, measure, series_label
from ci.verdicts.exact import show as fmt_exact
from dashboard import data, fmt
from dashboard.model import (
    ColumnsCache,
    NotReporting,
    Point,
    Regression,
    Series,
    Snapshot,
    commit_slug,
    gate_ok,
    is_worse,
    load_snapshot,
    series_slug,
    verdict_machines,
)
from dashboard.staging import site_folder, staged
from dashboard.svg import Mark, history_chart, sparkline
from dashboard.writer import PagePart, PageWriter, fingerprint

# The overview lists at most this many open regressions in its banner; the rest are one click away.
BANNER_LIMIT = 20
# A series page's table lists this many of the newest runs (the chart draws every run): 1,000 rows
# made a page ~470 KB and the site 375 MB at 1,000 commits x 500 series (2026-11-29).
RUNS_SHOWN = 100
# The bookkeeping file (dashboard.writer.CACHE_DIR) with the store's columns as the last render read them.
COLUMNS_CACHE = "columns.npz"
# The bookkeeping file with each series' suspicion test as the last render left it (`ci.verdicts.SuspectTrack`).
TRACKS_CACHE = "suspects.bin"
# The regressions page lists at most this many resolved suspicions (newest first).
RESOLVED_SHOWN = 200
_PKG_DIR = Path(__file__).resolve().parent
_ROOT = _PKG_DIR.parent
# Besides the site's own code, what its pages are computed with: the verdicts and the formatter.
_CODE = ("ci/verdicts", "ci/format.py", "ci/records.py")
VENDOR = {  # site path -> file under dashboard/templates/vendor/
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


def _environment() -> Environment:
    env = Environment(
        loader=PackageLoader("dashboard", "templates"),
        autoescape=True,  # every value from the store is text; markup only via `Markup` from svg.py
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    return env


def _code_salt() -> str:
    """A hash of the templates, the site's code and the verdict code: a new version re-renders every page."""
    h = hashlib.blake2b(digest_size=16)
    files = [*_PKG_DIR.glob("*.py"), *(_PKG_DIR / "templates").rglob("*")]
    for rel in _CODE:
        path = _ROOT / rel
        files += sorted(path.glob("*.py")) if path.is_dir() else [path]
    for path in sorted(p for p in files if p.is_file()):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def _cls(worse: bool | None) -> str:
    return "" if worse is None else ("worse" if worse else "better")


def _pct(threshold: float) -> str:
    return f"±{threshold * 100:.1f}%" if math.isfinite(threshold) else "not known yet"


class _Site:
    """Builds each page's context from the snapshot and hands it to the writer."""

    def __init__(self, snap: Snapshot, writer: PageWriter, env: Environment, title: str, base_url: str,
                 project: Project) -> None:
        self.snap = snap
        self.writer = writer
        self.env = env
        self.title = title
        self.project = project
        self.base_url = base_url.rstrip("/") + "/" if base_url else ""
        self.commit_by_sha = {c.sha: c for c in snap.commits}
        self.gpu_of = {m.name: m.gpu for m in snap.machines}
        # What a reader sees of a machine (its environment named where one asv machine has several;
        # `ci.records.machine_labels`): shown in every table and in the filter, whose choice it is.
        self.labels = machine_labels(snap.machines)
        filters = [("m:" + self.ml(m.name), self.ml(m.name) + (f" ({m.gpu})" if m.gpu else ""))
                   for m in snap.machines]
        gpus = sorted({m.gpu for m in snap.machines if m.gpu})
        filters += [("g:" + g, "GPU: " + g) for g in gpus]
        self.filters = filters
        # (series key, sha, machine) -> outcomes; machine "" for verdicts stored without one, which
        # show on every machine's series.
        self.verdict_outcomes: dict[tuple[str, str, str], list[Outcome]] = defaultdict(list)
        for sha, vs in snap.verdicts_by_sha.items():
            for v in vs:
                for m in verdict_machines(v) or ("",):
                    self.verdict_outcomes[(v.benchmark.key, sha, m)].append(v.outcome)
        self.regs_by_series: dict[tuple[str, str], list[Regression]] = defaultdict(list)
        for reg in snap.regressions:
            for m in reg.machines:
                self.regs_by_series[(reg.benchmark.key, m)].append(reg)
        self.open_suspects = snap.open_suspects
        self.suspected_series = {(x.benchmark.key, x.machine) for x in self.open_suspects}
        self.axis = {id(s): display_scale(s.benchmark.unit, _typical(s.values)) for s in snap.series}
        self.series_keys = {(s.benchmark.key, s.machine) for s in snap.series}
        self.series_by_key: dict[str, list[Series]] = defaultdict(list)
        for s in snap.series:
            self.series_by_key[s.benchmark.key].append(s)
        # Per commit, computed once: slug, short sha, time, escaped subject.
        self.cinfo = {c.sha: (commit_slug(c.sha), _esc(c.sha[:10]), fmt.fmt_time(c.time), _esc(c.subject))
                      for c in snap.commits}
        self.cbytes = {sha: ("\0".join(info) + "\0").encode() for sha, info in self.cinfo.items()}
        self.steps = {id(s): _steps(s) for s in snap.series}
        self.counts: Counter[str] = Counter()  # results per commit
        for s in snap.series:
            self.counts.update(s.shas)
        # A page, and its tab, only where its data exist: a suite without correctness benchmarks
        # (another project's, most often) has no correctness page.
        self.has_correctness = any(s.benchmark.kind == Kind.CORRECTNESS for s in snap.series) or any(
            b.kind == Kind.CORRECTNESS for fails in snap.failures_by_sha.values() for b, _, _ in fails)
        self.n_exact = sum(s.benchmark.kind == Kind.EXACT for s in snap.series)
        self.tabs = [("overview", "index.html", "Overview"), ("regressions", "regressions.html", "Regressions"),
                     *([("correctness", "correctness.html", "Correctness")] if self.has_correctness else []),
                     *([("structure", "structure.html", "Structure")] if self.n_exact else []),
                     ("commits", "commits.html", "Commits")]

    # -- helpers ------------------------------------------------------------------------------
    def root(self, depth: int) -> str:
        return self.base_url or "../" * depth

    def commit_href(self, sha: str, depth: int) -> str:
        info = self.cinfo.get(sha)
        return f"{self.root(depth)}commit/{info[0] if info else commit_slug(sha)}.html"

    def ml(self, machine: str) -> str:
        """A machine key as the reader knows it (a verdict's comma-joined or "" machine as it is)."""
        return self.labels.get(machine, machine)

    def series_href(self, key: str, machine: str, depth: int) -> str:
        return f"{self.root(depth)}series/{series_slug(key, machine)}.html"

    def emit(self, rel: str, template: str, ctx: dict[str, Any], inputs: object = None, late: Any = None,
             note: object = None) -> None:
        """Write page `rel`; `late()` adds expensive context (charts) only when it is rendered; `note`
        is kept for the next render (`PageWriter.previous`)."""
        depth = rel.count("/")
        ctx = {"title": self.title, "root": self.root(depth), "filters": self.filters, "tabs": self.tabs, **ctx}

        def produce() -> str:
            full = {**ctx, **late()} if late is not None else ctx
            return self.env.get_template(template).render(full)

        self.writer.page(rel, (ctx, inputs), produce, note=note)

    def reg_row(self, reg: Regression, depth: int) -> dict[str, Any]:
        c = self.commit_by_sha.get(reg.sha)
        unit = reg.benchmark.unit
        links = [(self.ml(m), self.series_href(reg.benchmark.key, m, depth)) for m in reg.machines]
        if not links:
            links = [(self.ml(s.machine), self.series_href(s.benchmark.key, s.machine, depth))
                     for s in self.series_by_key.get(reg.benchmark.key, [])]
        ack = reg.ack
        return {
            "name": reg.benchmark.name, "params": reg.benchmark.params_label, "links": links,
            "machine": self.ml(reg.machines[0]) if len(reg.machines) == 1 else "",
            "gpu": self.gpu_of.get(reg.machines[0], "") if len(reg.machines) == 1 else "",
            "sha": reg.sha[:10], "commit_href": self.commit_href(reg.sha, depth),
            "subject": c.subject if c else "", "when": fmt.fmt_time(c.time) if c else "",
            "outcome": reg.outcome.value, "source": reg.source,
            # a failed gate or a crash has no A/B ratio (a gate's is worst/limit)
            "change": "—" if reg.outcome == Outcome.FAILED else fmt.fmt_change(reg.ratio),
            "base": fmt.fmt_value(reg.base_value, unit), "head": fmt.fmt_value(reg.head_value, unit),
            "base_href": self.commit_href(reg.base_sha, depth) if reg.base_sha in self.commit_by_sha else "",
            "p": fmt.fmt_number(reg.p_value, 2), "reason": reg.reason,
            "ack_who": ack.who if ack else "", "ack_why": ack.why if ack else "",
            "ack_when": fmt.fmt_time(ack.when) if ack else "",
            "fixed_sha": reg.fixed_by[:10], "fixed_href": self.commit_href(reg.fixed_by, depth) if reg.fixed_by else "",
        }

    def suspect_row(self, x: Suspect, depth: int) -> dict[str, Any]:
        c = self.commit_by_sha.get(x.commit_sha)
        unit = x.benchmark.unit
        return {
            "name": x.benchmark.name, "params": x.benchmark.params_label, "machine": self.ml(x.machine),
            "gpu": self.gpu_of.get(x.machine, ""), "href": self.series_href(x.benchmark.key, x.machine, depth),
            "sha": x.commit_sha[:10], "commit_href": self.commit_href(x.commit_sha, depth),
            "subject": c.subject if c else "", "state": x.state.value,
            "change": fmt.fmt_change(x.ratio), "before": fmt.fmt_value(x.before, unit),
            "after": fmt.fmt_value(x.after, unit), "sure": fmt.fmt_percent(x.confidence),
            # Only an open suspicion counts the commits since (a resolved one's page must not change with every commit).
            "threshold": _pct(x.threshold), "since": x.commits_since if x.state == SuspectState.SUSPECTED else "",
            "reason": x.reason,
            "resolved_sha": x.resolved_sha[:10],
            "resolved_href": self.commit_href(x.resolved_sha, depth) if x.resolved_sha else "",
        }

    def group_row(self, g: AlertGroup) -> dict[str, Any]:
        """A crowd of series stepping at one commit: one alert (overview)."""
        c = self.commit_by_sha.get(g.commit_sha)
        movers = [{"name": cp.benchmark.name, "params": cp.benchmark.params_label, "change": fmt.fmt_change(cp.ratio),
                   "outcome": cp.outcome.value, "href": self.series_href(cp.benchmark.key, cp.machine, 0)}
                  for cp in g.members[:3]]
        return {"headline": g.headline().split(":", 1)[0], "environment": "; ".join(g.environment),
                "labelled": g.environment_change, "machine": self.ml(g.machine), "gpu": self.gpu_of.get(g.machine, ""),
                "sha": g.commit_sha[:10], "commit_href": self.commit_href(g.commit_sha, 0),
                "subject": c.subject if c else "", "movers": movers, "more": len(g.members) - len(movers)}

    def not_reporting_row(self, x: NotReporting) -> dict[str, Any]:
        """A series failing, or no longer reporting, at its machine's newest commit (overview)."""
        c = self.commit_by_sha.get(x.since)
        known = (x.benchmark.key, x.machine) in self.series_keys
        return {
            "name": x.benchmark.name, "params": x.benchmark.params_label, "machine": self.ml(x.machine),
            "gpu": self.gpu_of.get(x.machine, ""),
            "href": self.series_href(x.benchmark.key, x.machine, 0) if known else "",
            "sha": x.since[:10], "commit_href": self.commit_href(x.since, 0), "subject": c.subject if c else "",
            "latest": x.latest[:10], "latest_href": self.commit_href(x.latest, 0),
        }

    def marks(self, s: Series) -> list[Mark]:
        out = [Mark(c.sha, "cp", f"change point {c.sha[:8]}: {fmt.fmt_change(c.ratio)} ({c.outcome.value})")
               for c in s.changes]
        for reg in self.regs_by_series.get((s.benchmark.key, s.machine), []):
            if reg.ack is not None:
                out.append(Mark(reg.sha, "ack", f"acknowledged {reg.outcome.value} at {reg.sha[:8]} "
                                                f"({fmt.fmt_change(reg.ratio)}) by {reg.ack.who}: {reg.ack.why}"))
            elif reg.fixed_by:
                label = f"{reg.outcome.value} at {reg.sha[:8]} ({fmt.fmt_change(reg.ratio)})"
                out.append(Mark(reg.sha, "fixed", f"{label}, level restored at {reg.fixed_by[:8]}"))
            else:
                out.append(Mark(reg.sha, "reg", f"open {reg.outcome.value} at {reg.sha[:8]} "
                                                f"({fmt.fmt_change(reg.ratio)}): {reg.reason}"))
        for x in s.suspects:
            kind = {SuspectState.SUSPECTED: "suspect", SuspectState.WITHDRAWN: "withdrawn",
                    SuspectState.EXPIRED: "withdrawn"}.get(x.state, "confirmed")
            out.append(Mark(x.commit_sha, kind, f"{x.state.value} regression at {x.commit_sha[:8]} "
                                                f"({fmt.fmt_change(x.ratio)}, {fmt.fmt_percent(x.confidence)} sure "
                                                f"when flagged): {x.reason}"))
        return out

    # -- pages --------------------------------------------------------------------------------
    def overview(self) -> None:
        snap = self.snap
        open_regs = [r for r in snap.regressions if r.is_open]
        suites: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for s in snap.series:
            if s.benchmark.kind == Kind.EXACT:
                continue  # the structure page's (thousands of series, each a count that moves on purpose)
            fin = np.flatnonzero(np.isfinite(s.values)).tolist()  # the runs with a value
            latest = s.point(fin[-1]) if fin else None
            prev = s.point(fin[-2]) if len(fin) > 1 else None
            base = self._baseline_point(s, fin)
            r_prev = fmt.ratio(latest.value, prev.value) if latest and prev else math.nan
            r_base = fmt.ratio(latest.value, base.value) if latest and base else math.nan
            thr_latest = s.thresholds.get(latest.sha, math.nan) if latest else math.nan
            open_here = [r.outcome for r in self.regs_by_series.get((s.benchmark.key, s.machine), []) if r.is_open]
            flagged = "failed" if Outcome.FAILED in open_here else "regressed" if open_here else ""
            suspected = not flagged and (s.benchmark.key, s.machine) in self.suspected_series
            latest_gate = gate_ok(latest.value, s.gate) if latest else None
            suites[s.benchmark.suite].append({
                "name": s.benchmark.name.split(".", 1)[-1], "params": s.benchmark.params_label,
                "machine": self.ml(s.machine), "gpu": self.gpu_of.get(s.machine, ""),
                "href": self.series_href(s.benchmark.key, s.machine, 0),
                "latest": fmt.fmt_value(latest.value, s.benchmark.unit) if latest else "—",
                "latest_sha": latest.sha[:8] if latest else "",
                "prev": fmt.fmt_change(r_prev), "prev_cls": _cls(is_worse(s.benchmark.direction, r_prev, thr_latest)),
                "prev_thr": _pct(thr_latest),
                "base": fmt.fmt_change(r_base), "base_cls": _cls(is_worse(s.benchmark.direction, r_base, s.threshold)),
                "base_thr": _pct(s.threshold),
                "spark": sparkline(s.values[fin].tolist(), bad=bool(flagged) or latest_gate is False),
                "flagged": flagged, "suspected": suspected, "gate_failed": latest_gate is False, "runs": len(s),
            })
        head = snap.commits[-1] if snap.commits else None
        # An asv machine name measured in several environments (or on several hosts): each is its own
        # series, and the reader is told so and where to choose one.
        by_name: dict[str, list[str]] = defaultdict(list)
        for m in snap.machines:
            by_name[m.machine_name].append(self.ml(m.name))
        several = [(name, labels) for name, labels in sorted(by_name.items()) if len(labels) > 1]
        failing, stopped = snap.not_reporting()
        groups = [self.group_row(g) for g in snap.groups[:BANNER_LIMIT]]
        ctx = {
            "groups": groups, "n_groups": len(snap.groups),
            "page": "overview", "suites": sorted(suites.items()), "several": several,
            "failing": [self.not_reporting_row(x) for x in failing[:BANNER_LIMIT]], "n_failing": len(failing),
            "stopped": [self.not_reporting_row(x) for x in stopped[:BANNER_LIMIT]], "n_stopped": len(stopped),
            "open_regs": [self.reg_row(r, 0) for r in open_regs[:BANNER_LIMIT]], "n_open": len(open_regs),
            "suspects": [self.suspect_row(x, 0) for x in self.open_suspects[:BANNER_LIMIT]],
            "n_suspected": len(self.open_suspects),
            "resolved": [self.suspect_row(x, 0) for x in snap.resolved_suspects(recent_only=True)[:BANNER_LIMIT]],
            "n_series": len(snap.series), "n_commits": len(snap.commits), "n_exact": self.n_exact,
            "head": {"sha": head.sha[:10], "href": self.commit_href(head.sha, 0), "subject": head.subject,
                     "when": fmt.fmt_time(head.time)} if head else None,
            "baseline": snap.baseline_sha[:10] if snap.baseline_sha else "",
        }
        self.emit("index.html", "overview.html", ctx)

    def _baseline_point(self, s: Series, fin: list[int]) -> Point | None:
        if self.snap.baseline_sha is None:
            return s.point(fin[0]) if fin else None
        return next((s.point(i) for i in fin if s.shas[i] == self.snap.baseline_sha), None)

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

    def series_page(self, s: Series) -> None:
        b = s.benchmark
        unit = b.unit
        cinfo = self.cinfo
        steps = self.steps[id(s)]
        n = len(s)
        first = max(n - RUNS_SHOWN, 0)
        rel = f"series/{s.slug}.html"
        order = range(n - 1, first - 1, -1)
        # A row's text is a function of these numbers and strings: its digest names the row, so that a
        # row the previous render wrote is taken from its page instead of formatted again (a re-render
        # after one new commit formats one row per series, not 100: 150,000 values, 2026-12-02).
        nums = np.column_stack([
            s.values[first:], s.lows[first:], s.highs[first:], s.ns[first:],
            steps.ratio[first:], steps.code[first:], steps.threshold[first:], steps.failed[first:]]).astype(float)
        digests, texts = [], []
        tail = f"\0{unit}".encode()
        cbytes = self.cbytes
        for i in order:
            sha = s.shas[i]
            outcomes = self.verdict_outcomes.get((b.key, sha, ""), []) + self.verdict_outcomes.get(
                (b.key, sha, s.machine), [])
            verdict = _esc(", ".join(o.value for o in outcomes)) if outcomes else ""
            texts.append((cinfo[sha], verdict))
            # The digest of the row's numbers and "\0".join((*cinfo[sha], verdict, unit)).
            digests.append(hashlib.blake2b(nums[i - first].tobytes() + cbytes[sha] + verdict.encode() + tail,
                                           digest_size=8).hexdigest())
        old = _previous_rows(self.writer.previous(rel))
        rows = []
        for i, digest, ((slug, short, when, subject), verdict) in zip(order, digests, texts, strict=True):
            kept = old.get(digest)
            if kept is not None:
                rows.append(kept)
                continue
            p = s.point(i)
            fail = bool(steps.failed[i])
            change, cls, thr = fmt.fmt_change(float(steps.ratio[i])), steps.cls(i), float(steps.threshold[i])
            iqr = _esc(fmt.fmt_range(p.low, p.high, unit)) if p.n > 1 else ""
            title = f' title="noise threshold {_pct(thr)}"' if cls else ""
            # Built here, not in a jinja loop: a table row costs ~25 template fragments in jinja,
            # several times the cost of one f-string (docs/performance.md "Dashboard render").
            rows.append(
                f'<tr{_FLAG if fail else ""}><td><a class="sha" href="../commit/{slug}.html">{short}</a></td>'
                f"<td>{when}</td><td>{subject}</td><td>{_esc(fmt.fmt_value(p.value, unit))}</td><td>{iqr}</td>"
                f'<td>{p.n}</td><td class="{cls}"{title}>{change}</td>'
                f'<td>{verdict}{_FAIL_BADGE if fail else ""}</td></tr>')
        regs = [self.reg_row(r, 1) for r in self.regs_by_series.get((b.key, s.machine), [])]
        siblings = [(self.ml(o.machine), self.series_href(b.key, o.machine, 1)) for o in self.series_by_key[b.key]
                    if o.machine != s.machine]
        div, label = self.axis[id(s)]
        ctx = {
            "page": "series", "name": b.name, "params": b.params_label, "machine": self.ml(s.machine),
            "gpu": self.gpu_of.get(s.machine, ""), "unit": unit, "direction": b.direction.value,
            "kind": b.kind.value, "axis_label": label, "regs": regs,
            "suspects": [self.suspect_row(x, 1) for x in reversed(s.suspects)],
            "siblings": siblings, "slug": s.slug, "params_slug": data.params_slug(b.name, s.machine),
            "gate": fmt.fmt_value(s.gate[0], unit) if s.gate else "",
            "value_label": "Worst sample per run (what the gate judges)" if s.gate else "Median per run",
            "threshold": _pct(s.threshold) if b.kind != Kind.CORRECTNESS else "",
            "n_runs": n, "n_shown": n - first,
        }
        # The rows' digests name their text: the page's inputs without hashing 100 rows of markup.
        self.emit(rel, "series.html", ctx, inputs=digests, late=lambda: {"rows": Markup("".join(rows))},
                  note={"rows": digests})
        # The chart's data.
        # Several runs of one commit (adjacent, the runs are in history order): the chart draws the last.
        last = np.flatnonzero(np.append(s.at[1:] != s.at[:-1], True)) if n else s.at
        position = self.snap.position
        marks = [(position[m.sha], m.kind, m.label) for m in self.marks(s) if m.sha in position]
        meta = {"name": b.name, "params": b.params_label, "machine": self.ml(s.machine), "unit": unit, "label": label,
                "direction": b.direction.value, "value": "worst sample" if s.gate else "median",
                "gate": [s.gate[0] / div, s.gate[1]] if s.gate else None,
                "threshold": s.threshold if math.isfinite(s.threshold) else None}
        rel = f"data/series/{s.slug}.js"
        x, values, lows, highs = s.at[last], s.values[last], s.lows[last], s.highs[last]
        arrays, note = self._series_arrays(rel, x, values, lows, highs, div)
        counts = s.ns[last].tolist()

        def body() -> str:
            return data.wrap_json(s.slug, data.series_json(meta=meta, x=x, values=values, lows=lows, highs=highs,
                                                           counts=counts, div=div, marks=marks, arrays=arrays))

        # The arrays' digest (the note) stands for their 4,000 numbers among the file's inputs.
        self.writer.page(rel, (s.slug, meta, div, counts, marks, note), body, note=note)

    def _series_arrays(self, rel: str, x: np.ndarray, values: np.ndarray, lows: np.ndarray, highs: np.ndarray,
                       div: float) -> tuple[tuple[str, str, str, str], dict[str, Any]]:
        """A data file's arrays, and the note that lets the next render reuse them: the file the
        previous render wrote is extended when its runs are the first of these (a digest of their
        numbers and the divisor says so), instead of formatting 4,000 numbers of a 1,000-commit series
        again (a quarter of a render after one new commit at 500 series, 2026-12-02)."""
        cols = np.array([x, values, lows, highs], dtype=float)

        def digest(k: int) -> str:
            return hashlib.blake2b(repr(div).encode() + cols[:, :k].tobytes(), digest_size=16).hexdigest()

        kept = None
        got = self.writer.previous(rel)
        if got is not None:
            note, text = got
            k = note.get("runs") if isinstance(note, dict) else None
            if isinstance(k, int) and 0 < k <= len(x) and note.get("digest") == digest(k):
                old = data.arrays_of(text)
                kept = (old, k) if old is not None else None
        return data.series_arrays(x, values, lows, highs, div, kept=kept), {"runs": len(x), "digest": digest(len(x))}

    def data_files(self) -> None:
        snap = self.snap
        times = [self.cinfo[c.sha][2] for c in snap.commits]
        commits = data.wrap("commits", data.commits_payload(snap.commits, [self.cinfo[c.sha][0] for c in snap.commits],
                                                            times))
        self.writer.page("data/commits.js", commits, lambda: commits)
        groups: dict[tuple[str, str], list[Series]] = defaultdict(list)
        for s in snap.series:
            groups[(s.benchmark.name, s.machine)].append(s)
        for (name, machine), members in sorted(groups.items()):
            slug = data.params_slug(name, machine)
            text = data.wrap(slug, {"name": name, "machine": self.ml(machine), "series": [
                [s.slug, s.benchmark.params_label, list(s.benchmark.params)] for s in members]})
            self.writer.page(f"data/params/{slug}.js", text, lambda t=text: t)

    def commit_pages(self) -> None:
        snap = self.snap
        # sha -> (sort key, suite, the row's facts): the rows that moved past their series' noise at
        # that commit, formatted only for the pages rendered (after one new commit: two of 1,001).
        moved: dict[str, list[tuple[float, str, _Moved]]] = defaultdict(list)
        heads: dict[str, tuple[str, str, str, str]] = {}  # series slug -> its cells and unit
        for s in snap.series:
            b = s.benchmark
            steps = self.steps[id(s)]
            rows = np.flatnonzero((steps.code != 0) | steps.failed)  # the runs that moved past their noise
            if not rows.size:
                continue
            where = _esc(self.ml(s.machine))
            heads[s.slug] = (f'<td><a href="../series/{s.slug}.html">{_esc(b.name.split(".", 1)[-1])}'
                             f'</a> <span class="params">{_esc(b.params_label)}</span>', f"<td>{where}</td>",
                             f' data-machine="{where}"', b.unit)
            for i, fail, code, r, prev, value, thr in zip(
                    rows.tolist(), steps.failed[rows].tolist(), steps.code[rows].tolist(), steps.ratio[rows].tolist(),
                    steps.prev[rows].tolist(), s.values[rows].tolist(), steps.threshold[rows].tolist(), strict=True):
                cls = _CLASS[code]
                size = abs(math.log(r)) if math.isfinite(r) and r > 0 else 0.0
                moved[s.shas[i]].append((-(size + (10.0 if cls == "worse" or fail else 0.0)), b.suite,
                                         (s.slug, fail, cls, r, prev, value, thr if cls else math.nan)))

        def moved_rows(rows: list[tuple[float, str, _Moved]]) -> str:
            out = []
            for _, _, (slug, fail, cls, r, prev, value, thr) in rows:
                head, machine, attr, unit = heads[slug]
                out.append(f'<tr{attr}{_FLAG if fail else ""}>{head}{_FAIL_BADGE if fail else ""}</td>{machine}'
                           f'<td>{_esc(fmt.fmt_value(prev, unit))}</td><td>{_esc(fmt.fmt_value(value, unit))}</td>'
                           f'<td class="{cls}">{fmt.fmt_change(r)}</td><td>{_pct(thr) if cls else ""}</td></tr>')
            return "".join(out)
        measured = self.counts
        regs_at: dict[str, list[Regression]] = defaultdict(list)
        for reg in snap.regressions:
            regs_at[reg.sha].append(reg)
        suspects_at: dict[str, list[Suspect]] = defaultdict(list)
        for s in snap.series:
            for x in s.suspects:
                suspects_at[x.commit_sha].append(x)
        machines = {m.name: m for m in snap.machines}
        for i, c in enumerate(snap.commits):
            verdicts = [(v.benchmark.name, v.benchmark.params_label, self.ml(v.machine), v.outcome.value,
                         fmt.fmt_change(v.ratio),
                         v.base_sha[:10], commit_slug(v.base_sha) if v.base_sha in self.commit_by_sha else "",
                         fmt.fmt_number(v.p_value, 2), v.reason,
                         snap.acks.get((v.benchmark.key, c.sha)) is not None)
                        for v in snap.verdicts_by_sha.get(c.sha, [])]
            envs = []
            for (machine, run_id), env in sorted(snap.environments.get(c.sha, {}).items()):
                m = machines.get(machine)
                fields = [("gpu", m.gpu), ("driver", m.driver), ("cuda", m.cuda), ("torch", m.torch),
                          ("triton", m.triton), ("cpu", m.cpu), *m.extra] if m else []
                envs.append((self.ml(machine), run_id, [(k, v) for k, v in fields if v], list(env)))
            rows = sorted(moved.get(c.sha, []), key=lambda t: (t[0], t[1]))
            ctx = {
                "page": "commit", "sha": c.sha, "branch": c.branch, "when": fmt.fmt_time(c.time),
                # asv.conf.json's show_commit_url: the commit's own page (a project's, on any host)
                "commit_link": self.project.commit_url + c.sha if self.project.commit_url else "",
                "subject": c.subject,
                "parents": [(p[:10], commit_slug(p) if p in self.commit_by_sha else "") for p in c.parents],
                "prev": commit_slug(snap.commits[i - 1].sha) if i > 0 else "",
                "next": commit_slug(snap.commits[i + 1].sha) if i + 1 < len(snap.commits) else "",
                "verdicts": verdicts, "envs": envs,
                "n_moved": len(rows),
                "n_measured": measured.get(c.sha, 0),
                "regs": [self.reg_row(r, 1) for r in regs_at.get(c.sha, [])],
                "suspects": [self.suspect_row(x, 1) for x in suspects_at.get(c.sha, [])],
                "failures": [(b.name, b.params_label, m, status, b.kind == Kind.CORRECTNESS,
                              self.series_href(b.key, m, 1) if (b.key, m) in self.series_keys else "")
                             for b, m, status in snap.failures_by_sha.get(c.sha, [])],
            }
            # The moved rows' facts (and their series' cells, `heads`) name their text.
            facts = [f for _, _, f in rows]
            self.emit(f"commit/{commit_slug(c.sha)}.html", "commit.html", ctx,
                      inputs=(facts, sorted({heads[f[0]] for f in facts})),
                      late=lambda rows=rows: {"moved": Markup(moved_rows(rows))})

    def commit_index(self) -> None:
        counts = self.counts
        bad: dict[str, int] = defaultdict(int)
        for reg in self.snap.regressions:
            bad[reg.sha] += reg.is_open
        suspected: dict[str, int] = defaultdict(int)
        for x in self.open_suspects:
            suspected[x.commit_sha] += 1
        rows = [(c.sha[:10], commit_slug(c.sha), fmt.fmt_time(c.time), c.branch, c.subject, counts[c.sha], bad[c.sha],
                 suspected[c.sha]) for c in reversed(self.snap.commits)]
        self.emit("commits.html", "commits.html", {"page": "commits", "rows": rows})

    def regressions_page(self) -> None:
        regs = self.snap.regressions
        resolved = self.snap.resolved_suspects(recent_only=False)
        ctx = {"page": "regressions",
               "open": [self.reg_row(r, 0) for r in regs if r.is_open],
               "suspects": [self.suspect_row(x, 0) for x in self.open_suspects],
               "resolved": [self.suspect_row(x, 0) for x in resolved[:RESOLVED_SHOWN]],
               "n_resolved": len(resolved),
               "acked": [self.reg_row(r, 0) for r in regs if r.ack is not None],
               "fixed": [self.reg_row(r, 0) for r in regs if r.ack is None and r.fixed_by]}
        self.emit("regressions.html", "regressions.html", ctx)

    def correctness_page(self) -> None:
        gated = [s for s in self.snap.series if s.benchmark.kind == Kind.CORRECTNESS]
        charts_in = []
        failures = []
        for s in gated:
            unit = s.benchmark.unit
            pts = [p for p in s.points if math.isfinite(p.value)]
            fails = [p for p in pts if gate_ok(p.value, s.gate) is False]
            worst = (max if s.benchmark.direction.value == "lower" else min)((p.value for p in pts), default=math.nan)
            latest = pts[-1] if pts else None
            charts_in.append((s, {
                "name": s.benchmark.name, "params": s.benchmark.params_label, "machine": self.ml(s.machine),
                "gpu": self.gpu_of.get(s.machine, ""), "href": self.series_href(s.benchmark.key, s.machine, 0),
                "unit": unit, "gate": fmt.fmt_value(s.gate[0], unit) if s.gate else "no gate",
                "latest": fmt.fmt_value(latest.value, unit) if latest else "—",
                "latest_ok": gate_ok(latest.value, s.gate) if latest else None,
                "worst": fmt.fmt_value(worst, unit), "n_fail": len(fails), "runs": len(pts),
            }))
            for p in fails:
                c = self.commit_by_sha[p.sha]
                failures.append((self.snap.position[p.sha], s.benchmark.name, s.benchmark.params_label,
                                 self.ml(s.machine),
                                 p.sha[:10], self.commit_href(p.sha, 0), c.subject,
                                 fmt.fmt_value(p.value, unit), fmt.fmt_value(s.gate[0], unit) if s.gate else ""))
        failed_verdicts = [self.reg_row(r, 0) for r in self.snap.regressions if r.outcome == Outcome.FAILED]
        # ci.verdicts.gates: a correctness check that produced no value is not a pass.
        not_run = [(self.snap.position[sha], b.name, b.params_label, self.ml(m), sha[:10], self.commit_href(sha, 0),
                    self.commit_by_sha[sha].subject, status)
                   for sha, fails in self.snap.failures_by_sha.items() for b, m, status in fails
                   if b.kind == Kind.CORRECTNESS]
        not_run.sort(key=lambda f: -f[0])
        failures.sort(key=lambda f: -f[0])
        ctx = {"page": "correctness", "series": [info for _, info in charts_in],
               "failures": [f[1:] for f in failures], "failed_verdicts": failed_verdicts,
               "not_run": [f[1:] for f in not_run]}

        def late() -> dict[str, Any]:
            charts = []
            for s, _ in charts_in:
                div, label = self.axis[id(s)]
                unit = s.benchmark.unit
                charts.append(history_chart(
                    s.points, fmt_axis=lambda v, d=div: f"{v / d:.4g}", href=lambda sha: self.commit_href(sha, 0),
                    title=lambda p, u=unit: f"{p.sha[:8]}: {fmt.fmt_value(p.value, u)} fails the gate",
                    marks=self.marks(s), gate=s.gate, linked=False, height=220, y_label=label,
                    label=f"{s.benchmark.key} on {self.ml(s.machine)} against its gate"))
            return {"charts": charts}

        self.emit("correctness.html", "correctness.html", ctx, inputs=[s.points for s in gated], late=late)

    def structure_page(self) -> None:
        """The exact tier (`ci.records.Kind.EXACT`): every commit where an exact series moved, newest first,
        with each move's before -> after; and, at the newest commit, what its gates look at (kernels that
        spill, forwards that launch more than dense)."""
        snap = self.snap
        exact = [s for s in snap.series if s.benchmark.kind == Kind.EXACT]
        moves: dict[str, list[tuple[str, ...]]] = defaultdict(list)
        spilling, over_dense = [], []
        latest_by_key: dict[tuple[str, str], float] = {}
        for s in exact:
            b, steps = s.benchmark, self.steps[id(s)]
            label, what = series_label(b), measure(b)
            href = self.series_href(b.key, s.machine, 0)
            for i in np.flatnonzero(steps.code != 0).tolist():
                moves[s.shas[i]].append((label, what, self.ml(s.machine), href, fmt_exact(steps.prev[i]),
                                         fmt_exact(s.values[i]), b.unit, steps.cls(i)))
            fin = np.flatnonzero(np.isfinite(s.values))
            if fin.size:
                latest = float(s.values[fin[-1]])
                latest_by_key[(b.key, s.machine)] = latest
                if b.unit == SPILL_UNIT and latest > 0:
                    spilling.append((label, self.ml(s.machine), href, fmt_exact(latest)))
        for s in exact:
            b = s.benchmark
            if b.unit != LAUNCH_UNIT or (b.key, s.machine) not in latest_by_key:
                continue
            for i, (name, value) in enumerate(b.params):
                if value == DENSE:
                    break
                dense = Benchmark(b.name, (*b.params[:i], (name, DENSE), *b.params[i + 1:]), b.unit, b.direction,
                                  b.kind).key
                if (dense, s.machine) in latest_by_key:
                    extra = latest_by_key[(b.key, s.machine)] - latest_by_key[(dense, s.machine)]
                    if extra > 0:
                        over_dense.append((series_label(b), self.ml(s.machine),
                                           self.series_href(b.key, s.machine, 0),
                                           fmt_exact(latest_by_key[(b.key, s.machine)]), fmt_exact(extra)))
                    break
        commits = []
        for c in reversed(snap.commits):
            rows = moves.get(c.sha)
            if rows:
                commits.append((c.sha[:10], self.commit_href(c.sha, 0), c.subject, sorted(rows)))
        ctx = {"page": "structure", "n_exact": len(exact), "n_commits": len(snap.commits), "commits": commits,
               "spilling": sorted(spilling), "over_dense": sorted(over_dense)}
        self.emit("structure.html", "structure.html", ctx)

    def assets(self) -> None:
        for name in ("style.css", "chart.js"):
            text = (_PKG_DIR / "templates" / name).read_text(encoding="utf-8")
            self.writer.page(name, text, lambda t=text: t)
        for rel, name in VENDOR.items():
            text = (_PKG_DIR / "templates" / "vendor" / name).read_text(encoding="utf-8")
            self.writer.page(rel, text, lambda t=text: t)


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


_FLAG = ' class="flagged"'
_FAIL_BADGE = ' <span class="badge failed">gate failed</span>'
_RUNS_TABLE = '<table class="runs series-runs">'


def _previous_rows(previous: tuple[object, str] | None) -> dict[str, str]:
    """The rows of a series page's runs table as the previous render wrote them, by the digest its
    note gives each (`_Site.series_page`); empty when the page or its note is not one of ours."""
    if previous is None:
        return {}
    note, text = previous
    digests = note.get("rows") if isinstance(note, dict) else None
    at = text.find(_RUNS_TABLE)
    start = text.find("<tbody>", at) if at >= 0 else -1
    end = text.find("</tbody>", start) if start >= 0 else -1
    if not isinstance(digests, list) or end < 0:
        return {}
    parts = text[start + len("<tbody>"):end].split("</tr>")
    rows = [part + "</tr>" for part in parts[:-1]]
    if parts[-1] or len(rows) != len(digests) or not all(r.startswith("<tr") for r in rows):
        return {}
    return {d: r for d, r in zip(digests, rows, strict=True) if isinstance(d, str)}


def _esc(text: str) -> str:
    """HTML-escape text (quotes too) for rows built outside jinja; html.escape is ~5x cheaper than
    markupsafe.escape, which wraps every result in a Markup object."""
    return html.escape(text, quote=True)


@dataclass(frozen=True)
class _Steps:
    """Per run of a series: the ratio to the run before (the last one with a value) and that run's value, the change's
    colour class code (1 worse, -1 better, 2 past the threshold but of unknown direction, so never
    coloured; 0 inside the series' noise threshold at that commit), that threshold, and whether the
    run failed its correctness gate."""

    ratio: np.ndarray
    prev: np.ndarray
    code: np.ndarray
    threshold: np.ndarray
    failed: np.ndarray

    def cls(self, i: int) -> str:
        return _CLASS[int(self.code[i])]


_CLASS = {0: "", 1: "worse", -1: "better", 2: "moved"}
# A run that moved past its series' noise, as a commit page lists it: series slug, failed its gate,
# colour class, ratio to the run before, that run's value, its value, the noise threshold (NaN when not coloured).
_Moved = tuple[str, bool, str, float, float, float, float]


def _steps(s: Series) -> _Steps:
    """The changes of every run of `s` at once (numpy: 500,000 runs in a full render)."""
    n = len(s)
    values = s.values
    thr = np.fromiter(map(s.thresholds.get, s.shas, itertools.repeat(math.nan, n)), dtype=float, count=n)
    finite = np.isfinite(values)
    last = np.maximum.accumulate(np.where(finite, np.arange(n), -1))  # last run with a value, up to i
    before = np.concatenate(([-1], last[:-1])) if n else last
    with np.errstate(divide="ignore", invalid="ignore"):
        prev = np.where(before >= 0, values[np.maximum(before, 0)], np.nan)
        ratio = np.where((prev != 0) & finite, values / prev, np.nan)
        size = np.abs(np.log(ratio))
        beyond = np.isfinite(size) & np.isfinite(thr) & (size > np.log1p(thr))
    worse = (ratio > 1) == (s.benchmark.direction == Direction.LOWER)
    if s.benchmark.kind == Kind.EXACT:  # any change is a change (ci.verdicts.exact), also to or from zero
        beyond = finite & (before >= 0) & (values != prev)
        worse = (values > prev) == (s.benchmark.direction == Direction.LOWER)
    # A series of unknown direction: a change past its noise is listed (code 2), never coloured either way.
    judged = np.where(worse, 1, -1) if s.benchmark.direction != Direction.UNKNOWN else 2
    code = np.where(beyond, judged, 0)
    failed = np.zeros(n, dtype=bool)
    if s.gate is not None:
        # as `gate_ok`: a value that is not finite neither passes nor fails
        failed = finite & ~passes_gate(values, s.gate)
    return _Steps(ratio, prev, code, thr, failed)


def _typical(values: np.ndarray) -> float:
    vals = np.sort(values[np.isfinite(values)], kind="stable")
    return float(vals[len(vals) // 2]) if vals.size else math.nan


def _store_state(store: StoreReader, branch: str | None, options: object) -> str:
    """A fingerprint of everything a render reads, without reading results: "" when the store
    cannot tell cheaply whether its results changed (no `run_digests`, e.g. an in-memory store).

    `ci.store.Store.run_digests` lists the sha256 of every ingested result file: a new, replaced or
    removed run changes it, and a run's results are written with it in one transaction.
    """
    digests = getattr(store, "run_digests", None)
    if not callable(digests):
        return ""
    return fingerprint(options, sorted(digests().items()), store.commits(branch), store.machines(),
                       store.verdicts(), store.acknowledgements())


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
            (`dashboard.staging`): on any error `out_dir` is left as it was, and no staging folder stays.
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
        kept = writer.previous_blob(COLUMNS_CACHE, columns_key)
        tracks = writer.previous_blob(TRACKS_CACHE, columns_key)
        snap = load_snapshot(store, branch=branch, baseline_sha=baseline_sha,
                             columns=ColumnsCache.from_bytes(kept) if kept is not None else None,
                             tracks=SuspectTrack.unpack(tracks) if tracks is not None else None,
                             floor_for=VerdictSettings.for_project(project).floor_for)
        if snap.columns is not None:
            writer.blob(COLUMNS_CACHE, columns_key, snap.columns.to_bytes())
        writer.blob(TRACKS_CACHE, columns_key, SuspectTrack.pack(snap.tracks))
        writer.salt = f"{salt}|{title}|{base_url}|{project!r}|{sorted(machine_labels(snap.machines).items())}|" \
                      f"{[(m.name, m.gpu) for m in snap.machines]}"
        writer.state = state
        site = _Site(snap, writer, _environment(), title, base_url, project)
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
