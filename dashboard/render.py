"""Render the static site from a `StoreReader`: overview, one page per series and per commit,
regressions, correctness gates and a commit list.

Layout of the output folder (all links relative unless `base_url` is given, so the site opens
from disk and from any static host):

    index.html  regressions.html  correctness.html  commits.html  style.css
    series/<hash of benchmark key and machine>.html   commit/<sha>.html
"""

from __future__ import annotations

import hashlib
import html
import math
import time
from array import array
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

from ci.records import Kind, Outcome, StoreReader
from dashboard import fmt
from dashboard.model import (
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
from dashboard.svg import Mark, history_chart, sparkline
from dashboard.writer import PageWriter

DEFAULT_TITLE = "ragged-vit performance"
# The overview lists at most this many open regressions in its banner; the rest are one click away.
BANNER_LIMIT = 20
_PKG_DIR = Path(__file__).resolve().parent


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
    """A hash of the templates and this package's code: a new version re-renders every page."""
    h = hashlib.blake2b(digest_size=16)
    for path in sorted([*_PKG_DIR.glob("*.py"), *(_PKG_DIR / "templates").glob("*")]):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def _cls(worse: bool | None) -> str:
    return "" if worse is None else ("worse" if worse else "better")


class _Site:
    """Builds each page's context from the snapshot and hands it to the writer."""

    def __init__(self, snap: Snapshot, writer: PageWriter, env: Environment, title: str, base_url: str) -> None:
        self.snap = snap
        self.writer = writer
        self.env = env
        self.title = title
        self.base_url = base_url.rstrip("/") + "/" if base_url else ""
        self.commit_by_sha = {c.sha: c for c in snap.commits}
        self.gpu_of = {m.name: m.gpu for m in snap.machines}
        filters = [("m:" + m.name, m.name + (f" ({m.gpu})" if m.gpu else "")) for m in snap.machines]
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
        self.scales = {id(s): fmt.display_scale(s.benchmark.unit, _typical(s.points)) for s in snap.series}
        self.series_keys = {(s.benchmark.key, s.machine) for s in snap.series}
        self.series_by_key: dict[str, list[Series]] = defaultdict(list)
        for s in snap.series:
            self.series_by_key[s.benchmark.key].append(s)
        # Per commit, computed once: slug, short sha, time, escaped subject.
        self.cinfo = {c.sha: (commit_slug(c.sha), _esc(c.sha[:10]), fmt.fmt_time(c.time), _esc(c.subject))
                      for c in snap.commits}
        self.cells = {id(s): self._cells(s) for s in snap.series}

    def _cells(self, s: Series) -> list[tuple[str, str, str, str, bool]]:
        """Each run's table cells, formatted once for the series page and the commit pages alike:
        (value, IQR, change vs the previous run, its CSS class, gate failed), escaped."""
        div, label = self.scales[id(s)]
        safe = (div, _esc(label))  # numbers need no escaping; the unit (from the store) is escaped once
        direction = s.benchmark.direction
        gate = s.gate
        out = []
        prev = math.nan
        for p in s.points:
            r = fmt.ratio(p.value, prev)
            out.append((fmt.fmt_value(p.value, safe), _iqr(p, safe), fmt.fmt_change(r),
                        _cls(is_worse(r, direction)), gate is not None and gate_ok(p.value, gate) is False))
            if math.isfinite(p.value):
                prev = p.value
        return out

    # -- helpers ------------------------------------------------------------------------------
    def root(self, depth: int) -> str:
        return self.base_url or "../" * depth

    def commit_href(self, sha: str, depth: int) -> str:
        info = self.cinfo.get(sha)
        return f"{self.root(depth)}commit/{info[0] if info else commit_slug(sha)}.html"

    def series_href(self, key: str, machine: str, depth: int) -> str:
        return f"{self.root(depth)}series/{series_slug(key, machine)}.html"

    def emit(self, rel: str, template: str, ctx: dict[str, Any], inputs: object = None, late: Any = None) -> None:
        """Write page `rel`; `late()` adds expensive context (charts) only when it is rendered."""
        depth = rel.count("/")
        ctx = {"title": self.title, "root": self.root(depth), "filters": self.filters, **ctx}

        def produce() -> str:
            full = {**ctx, **late()} if late is not None else ctx
            return self.env.get_template(template).render(full)

        self.writer.page(rel, (ctx, inputs), produce)

    def reg_row(self, reg: Regression, depth: int) -> dict[str, Any]:
        c = self.commit_by_sha.get(reg.sha)
        scale = fmt.display_scale(reg.benchmark.unit, reg.base_value)
        links = [(m, self.series_href(reg.benchmark.key, m, depth)) for m in reg.machines]
        if not links:
            links = [(s.machine, self.series_href(s.benchmark.key, s.machine, depth))
                     for s in self.series_by_key.get(reg.benchmark.key, [])]
        ack = reg.ack
        return {
            "name": reg.benchmark.name, "params": reg.benchmark.params_label, "links": links,
            "machine": reg.machines[0] if len(reg.machines) == 1 else "",
            "gpu": self.gpu_of.get(reg.machines[0], "") if len(reg.machines) == 1 else "",
            "sha": reg.sha[:10], "commit_href": self.commit_href(reg.sha, depth),
            "subject": c.subject if c else "", "when": fmt.fmt_time(c.time) if c else "",
            "outcome": reg.outcome.value, "source": reg.source,
            # a failed gate or a crash has no A/B ratio (a gate's is worst/limit)
            "change": "—" if reg.outcome == Outcome.FAILED else fmt.fmt_change(reg.ratio),
            "base": fmt.fmt_value(reg.base_value, scale), "head": fmt.fmt_value(reg.head_value, scale),
            "base_href": self.commit_href(reg.base_sha, depth) if reg.base_sha in self.commit_by_sha else "",
            "p": fmt.fmt_number(reg.p_value, 2), "reason": reg.reason,
            "ack_who": ack.who if ack else "", "ack_why": ack.why if ack else "",
            "ack_when": fmt.fmt_time(ack.when) if ack else "",
            "fixed_sha": reg.fixed_by[:10], "fixed_href": self.commit_href(reg.fixed_by, depth) if reg.fixed_by else "",
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
        return out

    # -- pages --------------------------------------------------------------------------------
    def overview(self) -> None:
        snap = self.snap
        open_regs = [r for r in snap.regressions if r.is_open]
        suites: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for s in snap.series:
            pts = [p for p in s.points if math.isfinite(p.value)]
            scale = self.scales[id(s)]
            latest = pts[-1] if pts else None
            prev = pts[-2] if len(pts) > 1 else None
            base = self._baseline_point(s, pts)
            r_prev = fmt.ratio(latest.value, prev.value) if latest and prev else math.nan
            r_base = fmt.ratio(latest.value, base.value) if latest and base else math.nan
            open_here = [r.outcome for r in self.regs_by_series.get((s.benchmark.key, s.machine), []) if r.is_open]
            flagged = "failed" if Outcome.FAILED in open_here else "regressed" if open_here else ""
            latest_gate = gate_ok(latest.value, s.gate) if latest else None
            suites[s.benchmark.suite].append({
                "name": s.benchmark.name.split(".", 1)[-1], "params": s.benchmark.params_label,
                "machine": s.machine, "gpu": self.gpu_of.get(s.machine, ""),
                "href": self.series_href(s.benchmark.key, s.machine, 0),
                "latest": fmt.fmt_value(latest.value, scale) if latest else "—",
                "latest_sha": latest.sha[:8] if latest else "",
                "prev": fmt.fmt_change(r_prev), "prev_cls": _cls(is_worse(r_prev, s.benchmark.direction)),
                "base": fmt.fmt_change(r_base), "base_cls": _cls(is_worse(r_base, s.benchmark.direction)),
                "spark": sparkline([p.value for p in pts], bad=bool(flagged) or latest_gate is False),
                "flagged": flagged, "gate_failed": latest_gate is False, "runs": len(s.points),
            })
        head = snap.commits[-1] if snap.commits else None
        ctx = {
            "page": "overview", "suites": sorted(suites.items()),
            "open_regs": [self.reg_row(r, 0) for r in open_regs[:BANNER_LIMIT]], "n_open": len(open_regs),
            "n_series": len(snap.series), "n_commits": len(snap.commits),
            "head": {"sha": head.sha[:10], "href": self.commit_href(head.sha, 0), "subject": head.subject,
                     "when": fmt.fmt_time(head.time)} if head else None,
            "baseline": snap.baseline_sha[:10] if snap.baseline_sha else "",
        }
        self.emit("index.html", "overview.html", ctx)

    def _baseline_point(self, s: Series, pts: list[Point]) -> Point | None:
        if self.snap.baseline_sha is None:
            return pts[0] if pts else None
        return next((p for p in pts if p.sha == self.snap.baseline_sha), None)

    def series_page(self, s: Series) -> None:
        scale = self.scales[id(s)]
        b = s.benchmark
        rows = []
        cinfo = self.cinfo
        for p, (value, iqr, change, cls, fail) in zip(s.points, self.cells[id(s)], strict=True):
            slug, short, when, subject = cinfo[p.sha]
            outcomes = self.verdict_outcomes.get((b.key, p.sha, ""), []) + self.verdict_outcomes.get(
                (b.key, p.sha, s.machine), [])
            verdict = _esc(", ".join(o.value for o in outcomes)) if outcomes else ""
            # Built here, not in a jinja loop: a 1,000-run table costs ~25 template fragments per
            # row, several times the cost of one f-string (docs/performance.md "Dashboard render").
            rows.append(
                f'<tr{_FLAG if fail else ""}><td><a class="sha" href="../commit/{slug}.html">{short}</a></td>'
                f"<td>{when}</td><td>{subject}</td><td>{value}</td><td>{iqr}</td><td>{p.n}</td>"
                f'<td class="{cls}">{change}</td><td>{verdict}{_FAIL_BADGE if fail else ""}</td></tr>')
        rows.reverse()
        marks = self.marks(s)
        regs = [self.reg_row(r, 1) for r in self.regs_by_series.get((b.key, s.machine), [])]
        siblings = [(o.machine, self.series_href(b.key, o.machine, 1)) for o in self.series_by_key[b.key]
                    if o.machine != s.machine]
        div, label = scale
        ctx = {
            "page": "series", "name": b.name, "params": b.params_label, "machine": s.machine,
            "gpu": self.gpu_of.get(s.machine, ""), "unit": b.unit, "direction": b.direction.value,
            "kind": b.kind.value, "scale_label": label, "rows": Markup("".join(rows)), "regs": regs,
            "siblings": siblings,
            "gate": fmt.fmt_value(s.gate[0], scale) if s.gate else "",
            "value_label": "Worst sample per run (what the gate judges)" if s.gate else "Median per run",
            "marks": [(m.kind, m.label) for m in marks],
        }

        def late() -> dict[str, Any]:
            chart = history_chart(
                s.points, fmt_axis=lambda v: f"{v / div:.4g}", href=lambda sha: self.commit_href(sha, 1),
                title=lambda p: f"{p.sha[:8]}: {fmt.fmt_value(p.value, scale)} ({self.cinfo[p.sha][2]})",
                marks=marks, gate=s.gate, label=f"history of {b.key} on {s.machine}")
            return {"chart": chart}

        self.emit(f"series/{s.slug}.html", "series.html", ctx, inputs=_digest(s.points), late=late)

    def commit_pages(self) -> None:
        snap = self.snap
        per_commit: dict[str, list[tuple[str, str]]] = defaultdict(list)
        for s in snap.series:
            b = s.benchmark
            # The series' cells that are the same on every commit page, escaped once.
            head = (f'<td><a href="../series/{series_slug(b.key, s.machine)}.html">{_esc(b.name.split(".", 1)[-1])}'
                    f'</a> <span class="params">{_esc(b.params_label)}</span>')
            machine = f"<td>{_esc(s.machine)}</td>"
            attr = f' data-machine="{_esc(s.machine)}"'
            for p, (value, iqr, change, cls, fail) in zip(s.points, self.cells[id(s)], strict=True):
                per_commit[p.sha].append((b.suite, (
                    f'<tr{attr}{_FLAG if fail else ""}>{head}{_FAIL_BADGE if fail else ""}</td>{machine}'
                    f'<td>{value}</td><td>{iqr}</td><td>{p.n}</td><td class="{cls}">{change}</td></tr>')))
        regs_at: dict[str, list[Regression]] = defaultdict(list)
        for reg in snap.regressions:
            regs_at[reg.sha].append(reg)
        machines = {m.name: m for m in snap.machines}
        for i, c in enumerate(snap.commits):
            verdicts = [(v.benchmark.name, v.benchmark.params_label, v.machine, v.outcome.value,
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
                envs.append((machine, run_id, [(k, v) for k, v in fields if v], list(env)))
            groups: dict[str, list[str]] = defaultdict(list)
            for suite, row in per_commit.get(c.sha, []):
                groups[suite].append(row)
            ctx = {
                "page": "commit", "sha": c.sha, "branch": c.branch, "when": fmt.fmt_time(c.time),
                "subject": c.subject,
                "parents": [(p[:10], commit_slug(p) if p in self.commit_by_sha else "") for p in c.parents],
                "prev": commit_slug(snap.commits[i - 1].sha) if i > 0 else "",
                "next": commit_slug(snap.commits[i + 1].sha) if i + 1 < len(snap.commits) else "",
                "verdicts": verdicts, "envs": envs,
                "groups": [(suite, Markup("".join(rows))) for suite, rows in sorted(groups.items())],
                "regs": [self.reg_row(r, 1) for r in regs_at.get(c.sha, [])],
                "failures": [(b.name, b.params_label, m, status, b.kind == Kind.CORRECTNESS,
                              self.series_href(b.key, m, 1) if (b.key, m) in self.series_keys else "")
                             for b, m, status in snap.failures_by_sha.get(c.sha, [])],
            }
            self.emit(f"commit/{commit_slug(c.sha)}.html", "commit.html", ctx)

    def commit_index(self) -> None:
        counts: dict[str, int] = defaultdict(int)
        for s in self.snap.series:
            for p in s.points:
                counts[p.sha] += 1
        bad: dict[str, int] = defaultdict(int)
        for reg in self.snap.regressions:
            bad[reg.sha] += reg.is_open
        rows = [(c.sha[:10], commit_slug(c.sha), fmt.fmt_time(c.time), c.branch, c.subject, counts[c.sha], bad[c.sha])
                for c in reversed(self.snap.commits)]
        self.emit("commits.html", "commits.html", {"page": "commits", "rows": rows})

    def regressions_page(self) -> None:
        regs = self.snap.regressions
        ctx = {"page": "regressions",
               "open": [self.reg_row(r, 0) for r in regs if r.is_open],
               "acked": [self.reg_row(r, 0) for r in regs if r.ack is not None],
               "fixed": [self.reg_row(r, 0) for r in regs if r.ack is None and r.fixed_by]}
        self.emit("regressions.html", "regressions.html", ctx)

    def correctness_page(self) -> None:
        gated = [s for s in self.snap.series if s.benchmark.kind == Kind.CORRECTNESS]
        charts_in = []
        failures = []
        for s in gated:
            scale = self.scales[id(s)]
            pts = [p for p in s.points if math.isfinite(p.value)]
            fails = [p for p in pts if gate_ok(p.value, s.gate) is False]
            worst = (max if s.benchmark.direction.value == "lower" else min)((p.value for p in pts), default=math.nan)
            latest = pts[-1] if pts else None
            charts_in.append((s, {
                "name": s.benchmark.name, "params": s.benchmark.params_label, "machine": s.machine,
                "gpu": self.gpu_of.get(s.machine, ""), "href": self.series_href(s.benchmark.key, s.machine, 0),
                "unit": s.benchmark.unit, "gate": fmt.fmt_value(s.gate[0], scale) if s.gate else "no gate",
                "latest": fmt.fmt_value(latest.value, scale) if latest else "—",
                "latest_ok": gate_ok(latest.value, s.gate) if latest else None,
                "worst": fmt.fmt_value(worst, scale), "n_fail": len(fails), "runs": len(pts),
            }))
            for p in fails:
                c = self.commit_by_sha[p.sha]
                failures.append((self.snap.position[p.sha], s.benchmark.name, s.benchmark.params_label, s.machine,
                                 p.sha[:10], self.commit_href(p.sha, 0), c.subject,
                                 fmt.fmt_value(p.value, scale), fmt.fmt_value(s.gate[0], scale) if s.gate else ""))
        failed_verdicts = [self.reg_row(r, 0) for r in self.snap.regressions if r.outcome == Outcome.FAILED]
        # ci.verdicts.gates: a correctness check that produced no value is not a pass.
        not_run = [(self.snap.position[sha], b.name, b.params_label, m, sha[:10], self.commit_href(sha, 0),
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
                scale = self.scales[id(s)]
                charts.append(history_chart(
                    s.points, fmt_axis=lambda v, d=scale[0]: f"{v / d:.4g}", href=lambda sha: self.commit_href(sha, 0),
                    title=lambda p, sc=scale: f"{p.sha[:8]}: {fmt.fmt_value(p.value, sc)} fails the gate",
                    marks=self.marks(s), gate=s.gate, linked=False, height=220,
                    label=f"{s.benchmark.key} on {s.machine} against its gate"))
            return {"charts": charts}

        self.emit("correctness.html", "correctness.html", ctx, inputs=[s.points for s in gated], late=late)

    def assets(self) -> None:
        css = (_PKG_DIR / "templates" / "style.css").read_text(encoding="utf-8")
        self.writer.page("style.css", css, lambda: css)


_FLAG = ' class="flagged"'
_FAIL_BADGE = ' <span class="badge failed">gate failed</span>'


def _esc(text: str) -> str:
    """HTML-escape text (quotes too) for rows built outside jinja; html.escape is ~5x cheaper than
    markupsafe.escape, which wraps every result in a Markup object."""
    return html.escape(text, quote=True)


def _digest(points: list[Point]) -> str:
    """A cheap fingerprint of a series' points (what its chart is drawn from)."""
    h = hashlib.blake2b(digest_size=16)
    h.update(array("d", [x for p in points for x in (p.value, p.low, p.high, p.n)]).tobytes())
    h.update("".join(p.sha for p in points).encode())
    return h.hexdigest()


def _iqr(p: Point, scale: tuple[float, str]) -> str:
    if p.n < 2:
        return ""
    low = fmt.fmt_number(p.low / scale[0]) if math.isfinite(p.low) else "—"
    return f"{low} – {fmt.fmt_value(p.high, scale)}"


def _typical(points: list[Point]) -> float:
    vals = sorted(p.value for p in points if math.isfinite(p.value))
    return vals[len(vals) // 2] if vals else math.nan


def render_site(
    store: StoreReader,
    out_dir: str | Path,
    *,
    title: str = DEFAULT_TITLE,
    base_url: str = "",
    baseline_sha: str | None = None,
    branch: str | None = None,
) -> RenderStats:
    """Render the whole dashboard from `store` into `out_dir`, rewriting only pages that changed.

    Args:
        store: any `StoreReader` (the SQLAlchemy `ci.store.Store`, or an in-memory one).
        out_dir: output folder, created when missing; files this function did not write are left alone.
        title: shown in every page's header.
        base_url: absolute prefix for links (e.g. "https://example.org/perf/"); "" for relative
            links, so the site also opens from disk.
        baseline_sha: commit the overview's "vs baseline" column compares against (full sha or a
            unique prefix); None means each series' first run.
        branch: only this branch's history; None for every commit in the store.

    Returns:
        RenderStats: pages written / unchanged / removed, bytes written, seconds taken.

    Raises:
        TypeError: `out_dir`, `title` or `base_url` has the wrong type.
        ValueError: `out_dir` is an existing file, `baseline_sha` names no commit (or several),
            or a result names a commit missing from the history.
    """
    if not isinstance(out_dir, str | Path):
        raise TypeError(f"out_dir must be a str or Path, got {type(out_dir).__name__}")
    if not isinstance(title, str) or not isinstance(base_url, str):
        raise TypeError("title and base_url must be strings")
    if base_url and not base_url.startswith(("http://", "https://", "/")):
        raise ValueError(f"base_url must be absolute (http://, https:// or /...), got {base_url!r}")
    t0 = time.perf_counter()
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ValueError(f"output path {str(out)!r} exists and is not a folder")
    out.mkdir(parents=True, exist_ok=True)
    snap = load_snapshot(store, branch=branch, baseline_sha=baseline_sha)
    salt = f"{_code_salt()}|{title}|{base_url}|{[(m.name, m.gpu) for m in snap.machines]}"
    writer = PageWriter(out, salt)
    site = _Site(snap, writer, _environment(), title, base_url)
    site.assets()
    site.overview()
    site.regressions_page()
    site.correctness_page()
    site.commit_index()
    for s in snap.series:
        site.series_page(s)
    site.commit_pages()
    writer.finish()
    return RenderStats(pages_written=writer.written, pages_unchanged=writer.unchanged, pages_removed=writer.removed,
                       bytes_written=writer.bytes_written, seconds=time.perf_counter() - t0,
                       series=len(snap.series), commits=len(snap.commits))
