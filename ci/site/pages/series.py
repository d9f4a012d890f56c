"""A series' page (its newest runs as a table, the chart drawn in the browser) and the chart's data
file, and the parameter lists the charts' pickers read (`data/params/`)."""

from __future__ import annotations

import hashlib
import math
from collections import defaultdict
from typing import Any

import numpy as np
from markupsafe import Markup

from ci.records import Kind
from ci.site import data, fmt
from ci.site.model import Series
from ci.site.pages.markup import FAIL_BADGE, FLAG, esc, threshold_text
from ci.site.pages.site import Site
from ci.site.writer import constant
from ci.text import redact_variable
from ci.verdicts.absolute import RUN as ABSOLUTE_RUN

# A series page's table lists this many of the newest runs (the chart draws every run): 1,000 rows
# made a page ~470 KB and the site 375 MB at 1,000 commits x 500 series (2026-11-29).
RUNS_SHOWN = 100
_RUNS_TABLE = '<table class="runs series-runs">'


class SeriesPages(Site):
    """series/<slug>.html, data/series/<slug>.js, data/params/<slug>.js and data/commits.js."""

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
            steps.ratio[first:], steps.code[first:], steps.threshold[first:], steps.failed[first:],
            steps.prev[first:], np.full(n - first, float(s.by_difference))]).astype(float)
        digests, texts = [], []
        tail = f"\0{unit}".encode()
        cbytes = self.cbytes
        for i in order:
            sha = s.shas[i]
            outcomes = self.verdict_outcomes.get((b.key, sha, ""), []) + self.verdict_outcomes.get(
                (b.key, sha, s.machine), [])
            verdict = esc(", ".join(outcomes)) if outcomes else ""
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
            change = fmt.fmt_step(float(steps.ratio[i]), float(steps.prev[i]), p.value)
            cls, thr = steps.cls(i), float(steps.threshold[i])
            iqr = esc(fmt.fmt_range(p.low, p.high, unit)) if p.n > 1 else ""
            title = f' title="noise threshold {threshold_text(thr, s.by_difference)}"' if cls else ""
            # Built here, not in a jinja loop: a table row costs ~25 template fragments in jinja,
            # several times the cost of one f-string (docs/performance.md "Dashboard render").
            rows.append(
                f'<tr{FLAG if fail else ""}><td><a class="sha" href="../commit/{slug}.html">{short}</a></td>'
                f"<td>{when}</td><td>{subject}</td><td>{esc(fmt.fmt_value(p.value, unit))}</td><td>{iqr}</td>"
                f'<td>{p.n}</td><td class="{cls}"{title}>{change}</td>'
                f'<td>{verdict}{FAIL_BADGE if fail else ""}</td></tr>')
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
            "threshold": threshold_text(s.threshold, s.by_difference) if b.kind != Kind.CORRECTNESS else "",
            "n_runs": n, "n_shown": n - first,
            # The detector and the thresholds read ratios: a run at or below zero has none. From RUN
            # such runs on, the series' steps are judged by difference (`ci.verdicts.absolute`); fewer
            # are left out as failed runs are. The page says which rather than show the series as quiet.
            "not_analysed": (below := int(np.count_nonzero(s.values <= 0))),
            "by_difference": s.by_difference or below >= ABSOLUTE_RUN,
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
            if isinstance(note, dict) and isinstance(k, int) and 0 < k <= len(x) and note.get("digest") == digest(k):
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
            # Each parameter as a (name, value) pair: a value is hidden where its name says it holds a
            # credential (`redact_variable`: "password", "token"), which the label's "name=value" shape shows.
            text = data.wrap(slug, {"name": name, "machine": self.ml(machine), "series": [
                [s.slug, s.benchmark.params_label, [[k, redact_variable(k, v)] for k, v in s.benchmark.params]]
                for s in members]})
            self.writer.page(f"data/params/{slug}.js", text, constant(text))


def _previous_rows(previous: tuple[object, str] | None) -> dict[str, str]:
    """The rows of a series page's runs table as the previous render wrote them, by the digest its
    note gives each (`SeriesPages.series_page`); empty when the page or its note is not one of ours."""
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
