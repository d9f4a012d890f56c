"""What every page of the site shares: `Site` holds the snapshot, the writer and the jinja
environment, and what several pages read of the snapshot, arranged once (links, machine labels,
verdicts and regressions by series, each series' steps), with the rows the regression and
suspicion tables share and the marks a chart points out. The pages are its subclasses
(`ci.site.pages.overview`, `.series`, `.commits`, `.structure`), composed by `ci.site.render`."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable
from typing import Any

from jinja2 import Environment

from ci.format import display_scale
from ci.records import Kind, Outcome, Project, machine_labels
from ci.site import fmt
from ci.site.model import (
    NotReporting,
    Regression,
    Series,
    Snapshot,
    commit_slug,
    series_slug,
    verdict_machines,
)
from ci.site.pages.markup import esc, threshold_text
from ci.site.pages.steps import steps_of, typical
from ci.site.svg import Mark
from ci.site.writer import PageWriter
from ci.verdicts import AlertGroup, Suspect, SuspectState


class Site:
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
        self.verdict_outcomes: dict[tuple[str, str, str], list[str]] = defaultdict(list)  # as shown (`Verdict.shown`)
        for sha, vs in snap.verdicts_by_sha.items():
            for v in vs:
                for m in verdict_machines(v) or ("",):
                    self.verdict_outcomes[(v.benchmark.key, sha, m)].append(v.shown)
        self.regs_by_series: dict[tuple[str, str], list[Regression]] = defaultdict(list)
        for reg in snap.regressions:
            for m in reg.machines:
                self.regs_by_series[(reg.benchmark.key, m)].append(reg)
        self.open_suspects = snap.open_suspects
        self.suspected_series = {(x.benchmark.key, x.machine) for x in self.open_suspects}
        self.axis = {id(s): display_scale(s.benchmark.unit, typical(s.values)) for s in snap.series}
        self.series_keys = {(s.benchmark.key, s.machine) for s in snap.series}
        self.series_by_key: dict[str, list[Series]] = defaultdict(list)
        for s in snap.series:
            self.series_by_key[s.benchmark.key].append(s)
        # Per commit, computed once: slug, short sha, time, escaped subject.
        self.cinfo = {c.sha: (commit_slug(c.sha), esc(c.sha[:10]), fmt.fmt_time(c.time), esc(c.subject))
                      for c in snap.commits}
        self.cbytes = {sha: ("\0".join(info) + "\0").encode() for sha, info in self.cinfo.items()}
        self.steps = {id(s): steps_of(s) for s in snap.series}
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

    def emit(self, rel: str, template: str, ctx: dict[str, Any], inputs: object = None,
             late: Callable[[], dict[str, Any]] | None = None, note: object = None) -> None:
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
            "change": "—" if reg.outcome == Outcome.FAILED else fmt.fmt_step(reg.ratio, reg.base_value, reg.head_value),
            "base": fmt.fmt_value(reg.base_value, unit), "head": fmt.fmt_value(reg.head_value, unit),
            "base_href": self.commit_href(reg.base_sha, depth) if reg.base_sha in self.commit_by_sha else "",
            "p": fmt.fmt_number(reg.p_value, 2), "reason": reg.reason,
            "ack_who": ack.who if ack else "", "ack_why": ack.why if ack else "",
            "ack_when": fmt.fmt_time(ack.when) if ack else "",
            "fixed_sha": reg.fixed_by[:10], "fixed_href": self.commit_href(reg.fixed_by, depth) if reg.fixed_by else "",
            "fixed_words": _fixed_words(reg),
        }

    def suspect_row(self, x: Suspect, depth: int) -> dict[str, Any]:
        c = self.commit_by_sha.get(x.commit_sha)
        unit = x.benchmark.unit
        return {
            "name": x.benchmark.name, "params": x.benchmark.params_label, "machine": self.ml(x.machine),
            "gpu": self.gpu_of.get(x.machine, ""), "href": self.series_href(x.benchmark.key, x.machine, depth),
            "sha": x.commit_sha[:10], "commit_href": self.commit_href(x.commit_sha, depth),
            "subject": c.subject if c else "", "state": x.state.value,
            "change": fmt.fmt_step(x.ratio, x.before, x.after), "before": fmt.fmt_value(x.before, unit),
            "after": fmt.fmt_value(x.after, unit), "sure": fmt.fmt_percent(x.confidence),
            # Only an open suspicion counts the commits since (a resolved one's page must not change with every commit).
            "threshold": threshold_text(x.threshold, x.by_difference),
            "since": x.commits_since if x.state == SuspectState.SUSPECTED else "",
            "reason": x.reason,
            "resolved_sha": x.resolved_sha[:10],
            "resolved_href": self.commit_href(x.resolved_sha, depth) if x.resolved_sha else "",
        }

    def suspect_crowd_row(self, xs: list[Suspect]) -> dict[str, Any]:
        """Open suspicions of many series at one commit of one machine: one alert (overview)."""
        first = xs[0]
        c = self.commit_by_sha.get(first.commit_sha)
        movers = [{"name": x.benchmark.name, "params": x.benchmark.params_label,
                   "change": fmt.fmt_step(x.ratio, x.before, x.after),
                   "href": self.series_href(x.benchmark.key, x.machine, 0)} for x in xs[:3]]
        return {"n": len(xs), "machine": self.ml(first.machine), "gpu": self.gpu_of.get(first.machine, ""),
                "sha": first.commit_sha[:10], "commit_href": self.commit_href(first.commit_sha, 0),
                "subject": c.subject if c else "", "job_move": first.job_move, "movers": movers,
                "more": len(xs) - len(movers)}

    def group_row(self, g: AlertGroup) -> dict[str, Any]:
        """A crowd of series stepping at one commit: one alert (overview)."""
        c = self.commit_by_sha.get(g.commit_sha)
        # A member the detector placed at the neighbouring commit says so: the crowd's commit is not its own.
        movers = [{"name": cp.benchmark.name, "params": cp.benchmark.params_label,
                   "change": fmt.fmt_step(cp.ratio, cp.before, cp.after)
                   + ("" if cp.commit_sha == g.commit_sha else f" at {cp.commit_sha[:10]}"),
                   "outcome": cp.outcome.value, "href": self.series_href(cp.benchmark.key, cp.machine, 0)}
                  for cp in g.members[:3]]
        # An alarm (red) only where some member is called worse or better: a crowd of series that declare no
        # direction is shown, never flagged (mujoco-warp's 18 were red above "Nothing here can be called a
        # regression", 2026-12-07).
        judged = any(cp.outcome in (Outcome.REGRESSED, Outcome.IMPROVED) for cp in g.members)
        return {"headline": g.headline().split(":", 1)[0], "environment": "; ".join(g.environment),
                "labelled": g.environment_change, "alarm": judged and not g.environment_change,
                "machine": self.ml(g.machine), "gpu": self.gpu_of.get(g.machine, ""),
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
                                                f"({fmt.fmt_step(reg.ratio, reg.base_value, reg.head_value)}) by "
                                                f"{reg.ack.who}: {reg.ack.why}"))
            elif reg.fixed_by:
                step = fmt.fmt_step(reg.ratio, reg.base_value, reg.head_value)
                label = f"{reg.outcome.value} at {reg.sha[:8]} ({step})"
                out.append(Mark(reg.sha, "fixed", f"{label}, {_fixed_words(reg)} {reg.fixed_by[:8]}"))
            else:
                step = fmt.fmt_step(reg.ratio, reg.base_value, reg.head_value)
                why = f": {reg.reason}" if reg.reason else ""
                out.append(Mark(reg.sha, "reg", f"open {reg.outcome.value} at {reg.sha[:8]} ({step}){why}"))
        for x in s.suspects:
            kind = {SuspectState.SUSPECTED: "suspect", SuspectState.WITHDRAWN: "withdrawn",
                    SuspectState.EXPIRED: "withdrawn"}.get(x.state, "confirmed")
            out.append(Mark(x.commit_sha, kind, f"{x.state.value} regression at {x.commit_sha[:8]} "
                                                f"({fmt.fmt_change(x.ratio)}, {fmt.fmt_percent(x.confidence)} sure "
                                                f"when flagged): {x.reason}"))
        return out


def _fixed_words(reg: Regression) -> str:
    """What undid a regression: its level came back, or the benchmark that failed ran again."""
    return "ran again at" if reg.outcome == Outcome.FAILED else "level restored at"
