"""The summary pages, one per tab: the overview (every series' latest change, the open regressions,
suspicions and machines not reporting), the regressions, the correctness gates and the commit list."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import numpy as np

from ci.records import Kind, Outcome, is_worse_step
from ci.site import fmt
from ci.site.model import Point, Series, commit_slug, gate_ok, is_worse
from ci.site.pages.markup import change_class, threshold_text
from ci.site.pages.site import Site
from ci.site.svg import history_chart, sparkline
from ci.verdicts import SuspectSettings
from ci.verdicts.decide import UNKNOWN_DRIFT_FACTOR

# The overview lists at most this many open regressions in its banner; the rest are one click away.
BANNER_LIMIT = 20
# The regressions page lists at most this many resolved suspicions (newest first).
RESOLVED_SHOWN = 200



def _change(name: str, s: Series, old: Point | None, new: Point | None, ratio: float, threshold: float
            ) -> dict[str, str]:
    """A change's cells: `name`, its class and threshold (`name`_cls, `name`_thr). A series judged by
    difference (at or through zero: its thresholds are differences) shows "0 → 5" where there is no
    ratio, and is coloured past its threshold by difference."""
    if not s.by_difference:
        cls = change_class(is_worse(s.benchmark.direction, ratio, threshold))
        return {name: fmt.fmt_change(ratio), f"{name}_cls": cls, f"{name}_thr": threshold_text(threshold)}
    before = old.value if old else math.nan
    after = new.value if new else math.nan
    past = math.isfinite(threshold) and abs(after - before) > threshold  # NaN compares False
    cls = change_class(is_worse_step(s.benchmark.direction, before, after) if past else None)
    shown = ratio if before > 0 and after > 0 else math.nan
    return {name: fmt.fmt_step(shown, before, after), f"{name}_cls": cls,
            f"{name}_thr": threshold_text(threshold, by_difference=True)}

class SummaryPages(Site):
    """index.html, regressions.html, correctness.html and commits.html."""

    def overview(self) -> None:
        snap = self.snap
        open_regs = [r for r in snap.regressions if r.is_open]
        suites: dict[str, list[dict[str, Any]]] = defaultdict(list)
        # What the banner may say of the series measured at their newest commit: judged there (a known
        # direction and a noise threshold), too short a history for a threshold, or of unknown direction
        # (their changes are never called better or worse). "No open regressions" is said only of the
        # first: a 3-commit history, and one whose every series declares no direction, read as clean
        # (real histories, 2026-12-07).
        judged = short = undirected = unjudged = 0
        # Series past UNKNOWN_DRIFT_FACTOR worse than their first run with no open regression: too young for
        # a threshold, or stepped in their first commits, where no step can be judged (3 commits each side).
        # The banner names them rather than read "No open regressions" in green beside a red +15,840%
        # (stingray's environment stepped x165 at its second commit, 2026-12-07).
        far: list[tuple[str, str, str]] = []
        # Series whose newest value is past UNKNOWN_DRIFT_FACTOR worse than the run before it: one commit,
        # which neither a suspicion (two commits hold a step) nor a change point can judge yet, listed so
        # that the overview does not wait a commit to show it (conda's x6.7 at its newest commit showed only
        # on the PR comment, the series already holding an older open regression, 2026-12-07).
        jumped: list[tuple[str, str, str]] = []
        newest: dict[str, int] = {}  # each machine's newest commit with a value (a series that stopped is not listed)
        for s in snap.series:
            if s.shas:
                newest[s.machine] = max(newest.get(s.machine, -1), snap.position.get(s.shas[-1], -1))
        min_history = SuspectSettings().min_history
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
            if latest is not None and s.benchmark.kind != Kind.CORRECTNESS:
                if not s.benchmark.judged:
                    undirected += 1
                elif len(fin) <= min_history:  # a commit is judged once `min_history` commits come before it
                    short += 1
                elif math.isfinite(thr_latest):
                    judged += 1
                else:  # no threshold at its newest value: at or below zero, or too few positive values before it
                    unjudged += 1
            open_here = [r.outcome for r in self.regs_by_series.get((s.benchmark.key, s.machine), []) if r.is_open]
            if (prev is not None and latest is not None and s.benchmark.judged and s.benchmark.kind != Kind.CORRECTNESS
                    and snap.position.get(latest.sha, -2) == newest.get(s.machine)
                    and math.isfinite(r_prev) and r_prev > 0 and is_worse(s.benchmark.direction, r_prev)
                    and abs(math.log(r_prev)) > math.log(UNKNOWN_DRIFT_FACTOR)):
                jumped.append((_short_name(s), self.ml(s.machine), fmt.fmt_step(r_prev, prev.value, latest.value)))
            if latest is not None and s.benchmark.judged and s.benchmark.kind != Kind.CORRECTNESS and not open_here:
                first = s.point(fin[0]).value
                r_first = fmt.ratio(latest.value, first)
                if (math.isfinite(r_first) and r_first > 0 and is_worse(s.benchmark.direction, r_first)
                        and abs(math.log(r_first)) > math.log(UNKNOWN_DRIFT_FACTOR)):
                    far.append((_short_name(s), self.ml(s.machine), fmt.fmt_step(r_first, first, latest.value)))
            flagged = "failed" if Outcome.FAILED in open_here else "regressed" if open_here else ""
            suspected = not flagged and (s.benchmark.key, s.machine) in self.suspected_series
            latest_gate = gate_ok(latest.value, s.gate) if latest else None
            suites[s.benchmark.suite].append({
                "name": s.benchmark.name.split(".", 1)[-1], "params": s.benchmark.params_label,
                "machine": self.ml(s.machine), "gpu": self.gpu_of.get(s.machine, ""),
                "href": self.series_href(s.benchmark.key, s.machine, 0),
                "latest": fmt.fmt_value(latest.value, s.benchmark.unit) if latest else "—",
                "latest_sha": latest.sha[:8] if latest else "",
                **_change("prev", s, prev, latest, r_prev, thr_latest),
                **_change("base", s, base, latest, r_base, s.threshold),
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
        # Jobs that ingest kept apart by their speed alone (`ci.ingest.speed`): said, with how far they read.
        speed = [(self.ml(m.name), m.speed, m.speed_shift) for m in snap.machines if m.speed]
        failing, stopped = snap.not_reporting()
        # A failing series a maintainer acknowledged as known broken (`ci ack` at a commit of its streak of
        # failures, as compare honours it: `ci.verdicts.inputs.known_broken`) is listed apart, not as an alarm:
        # conda's page still read "1 series failing" and "Acknowledged (0)" after the ack (2026-12-07).
        acks_of: dict[str, list[Any]] = defaultdict(list)
        for (key, sha), ack in snap.acks.items():
            acks_of[key].append((sha, ack))

        def known_broken(x: Any) -> Any:
            # At a commit of its current streak of failures on this machine (a failed run of it there), as
            # compare's `not_run_since` reads an acknowledgement.
            lo, hi = snap.position.get(x.since, -1), snap.position.get(x.latest, -1)
            return next((ack for sha, ack in acks_of.get(x.benchmark.key, ())
                         if lo <= snap.position.get(sha, -2) <= hi
                         and (x.benchmark, x.machine, "failed") in snap.failures_by_sha.get(sha, ())), None)

        broken = [(x, ack) for x in failing if (ack := known_broken(x)) is not None]
        failing = [x for x in failing if all(x is not y for y, _ in broken)]
        groups = [self.group_row(g) for g in snap.groups[:BANNER_LIMIT]]
        crowds = snap.suspect_crowds()  # many series suspected at one commit: one alert each, listed first
        crowded = {id(x) for xs in crowds for x in xs}
        ctx = {
            "groups": groups, "n_groups": len(snap.groups),
            "page": "overview", "suites": sorted(suites.items()), "several": several, "speed": speed,
            "failing": [self.not_reporting_row(x) for x in failing[:BANNER_LIMIT]], "n_failing": len(failing),
            "broken": [{**self.not_reporting_row(x), "who": ack.who, "why": ack.why}
                       for x, ack in broken[:BANNER_LIMIT]],
            "n_broken": len(broken),
            "stopped": [self.not_reporting_row(x) for x in stopped[:BANNER_LIMIT]], "n_stopped": len(stopped),
            "quiet": [{"machine": self.ml(m), "gpu": self.gpu_of.get(m, ""), "sha": last[:10],
                       "href": self.commit_href(last, 0), "newer": newer,
                       "subject": c.subject if (c := self.commit_by_sha.get(last)) else ""}
                      for m, (last, newer) in sorted(snap.quiet.items())],
            "open_regs": [self.reg_row(r, 0) for r in open_regs[:BANNER_LIMIT]], "n_open": len(open_regs),
            "suspect_crowds": [self.suspect_crowd_row(xs) for xs in crowds[:BANNER_LIMIT]],
            "suspects": [self.suspect_row(x, 0) for x in self.open_suspects if id(x) not in crowded][:BANNER_LIMIT],
            "n_suspected": len(self.open_suspects),
            "resolved": [self.suspect_row(x, 0) for x in snap.resolved_suspects(recent_only=True)[:BANNER_LIMIT]],
            "n_series": len(snap.series), "n_commits": len(snap.commits), "n_exact": self.n_exact,
            "n_judged": judged, "n_short": short, "n_undirected": undirected, "n_unjudged": unjudged,
            "far": far[:3], "n_far": len(far), "far_factor": f"x{UNKNOWN_DRIFT_FACTOR:g}",
            "jumped": jumped[:3], "n_jumped": len(jumped),
            "min_history": min_history,
            "head": {"sha": head.sha[:10], "href": self.commit_href(head.sha, 0), "subject": head.subject,
                     "when": fmt.fmt_time(head.time)} if head else None,
            "baseline": snap.baseline_sha[:10] if snap.baseline_sha else "",
        }
        self.emit("index.html", "overview.html", ctx)

    def _baseline_point(self, s: Series, fin: list[int]) -> Point | None:
        if self.snap.baseline_sha is None:
            return s.point(fin[0]) if fin else None
        return next((s.point(i) for i in fin if s.shas[i] == self.snap.baseline_sha), None)


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
                    s.points, fmt_axis=_axis_tick(div), href=lambda sha: self.commit_href(sha, 0),
                    title=_fails_the_gate(unit),
                    marks=self.marks(s), gate=s.gate, linked=False, height=220, y_label=label,
                    label=f"{s.benchmark.key} on {self.ml(s.machine)} against its gate"))
            return {"charts": charts}

        self.emit("correctness.html", "correctness.html", ctx, inputs=[s.points for s in gated], late=late)


def _axis_tick(div: float) -> Callable[[float], str]:
    """A correctness chart's tick label: the value in the axis' unit (`ci.format.display_scale`)."""
    return lambda v: f"{v / div:.4g}"


def _fails_the_gate(unit: str) -> Callable[[Point], str]:
    """A correctness chart's tooltip of a run that failed its gate."""
    return lambda p: f"{p.sha[:8]}: {fmt.fmt_value(p.value, unit)} fails the gate"


def _short_name(s: Series) -> str:
    """A series as the banner's lines name it: its benchmark without the module, its parameters after."""
    name = s.benchmark.name.split(".", 1)[-1]
    return f"{name} ({s.benchmark.params_label})" if s.benchmark.params_label else name
