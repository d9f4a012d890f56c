"""A commit's page: its verdicts, regressions and suspicions, the runs' environments, the checks
that produced no value, and the series whose change at that commit passed their noise."""

from __future__ import annotations

import math
from collections import defaultdict
from functools import partial
from typing import Any

import numpy as np
from markupsafe import Markup

from ci.records import Kind
from ci.site import fmt
from ci.site.model import Regression, commit_slug
from ci.site.pages.markup import FAIL_BADGE, FLAG, esc, threshold_text
from ci.site.pages.site import Site
from ci.site.pages.steps import CLASS
from ci.text import redact_environment, redact_text
from ci.verdicts import Suspect

# A run that moved past its series' noise, as a commit page lists it: series slug, failed its gate,
# colour class, ratio to the run before, that run's value, its value, the noise threshold (NaN when not coloured).
_Moved = tuple[str, bool, str, float, float, float, float]


class CommitPages(Site):
    """commit/<sha>.html, one per commit."""

    def commit_pages(self) -> None:
        snap = self.snap
        # sha -> (sort key, suite, the row's facts): the rows that moved past their series' noise at
        # that commit, formatted only for the pages rendered (after one new commit: two of 1,001).
        moved: dict[str, list[tuple[float, str, _Moved]]] = defaultdict(list)
        heads: dict[str, tuple[str, str, str, str, bool]] = {}  # series slug -> its cells, unit, by difference
        # sha -> runs with a run before them but no noise threshold yet (a young series, a new environment):
        # not judged, which the page says instead of "every other one stayed within it" (geocat-comp's py3.10
        # import time -33% at a commit whose page listed its py3.13 twin alone, 2026-12-07).
        unjudged: dict[str, int] = defaultdict(int)
        for s in snap.series:
            b = s.benchmark
            steps = self.steps[id(s)]
            if b.kind not in (Kind.EXACT, Kind.CORRECTNESS):
                young = np.isfinite(s.values) & np.isfinite(steps.prev) & ~np.isfinite(steps.threshold)
                for i in np.flatnonzero(young).tolist():
                    unjudged[s.shas[i]] += 1
            runs = np.flatnonzero((steps.code != 0) | steps.failed)  # the runs that moved past their noise
            if not runs.size:
                continue
            where = esc(self.ml(s.machine))
            heads[s.slug] = (f'<td><a href="../series/{s.slug}.html">{esc(b.name.split(".", 1)[-1])}'
                             f'</a> <span class="params">{esc(b.params_label)}</span>', f"<td>{where}</td>",
                             f' data-machine="{where}"', b.unit, s.by_difference)
            for i, fail, code, r, prev, value, thr in zip(
                    runs.tolist(), steps.failed[runs].tolist(), steps.code[runs].tolist(), steps.ratio[runs].tolist(),
                    steps.prev[runs].tolist(), s.values[runs].tolist(), steps.threshold[runs].tolist(), strict=True):
                cls = CLASS[code]
                size = abs(math.log(r)) if math.isfinite(r) and r > 0 else 0.0
                moved[s.shas[i]].append((-(size + (10.0 if cls == "worse" or fail else 0.0)), b.suite,
                                         (s.slug, fail, cls, r, prev, value, thr if cls else math.nan)))

        def moved_rows(rows: list[tuple[float, str, _Moved]]) -> str:
            out = []
            for _, _, (slug, fail, cls, r, prev, value, thr) in rows:
                head, machine, attr, unit, by_difference = heads[slug]
                out.append(f'<tr{attr}{FLAG if fail else ""}>{head}{FAIL_BADGE if fail else ""}</td>{machine}'
                           f'<td>{esc(fmt.fmt_value(prev, unit))}</td><td>{esc(fmt.fmt_value(value, unit))}</td>'
                           f'<td class="{cls}">{fmt.fmt_step(r, prev, value)}</td>'
                           f'<td>{threshold_text(thr, by_difference) if cls else ""}</td></tr>')
            return "".join(out)

        def moved_context(rows: list[tuple[float, str, _Moved]]) -> dict[str, Any]:
            return {"moved": Markup(moved_rows(rows))}
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
            verdicts = [(v.benchmark.name, v.benchmark.params_label, self.ml(v.machine), v.shown,
                         fmt.fmt_step(v.ratio, v.base_value, v.head_value),
                         v.base_sha[:10], commit_slug(v.base_sha) if v.base_sha in self.commit_by_sha else "",
                         fmt.fmt_number(v.p_value, 2), v.reason,
                         snap.acks.get((v.benchmark.key, c.sha)) is not None)
                        for v in snap.verdicts_by_sha.get(c.sha, [])]
            envs = []
            for (machine, run_id), env in sorted(snap.environments.get(c.sha, {}).items()):
                m = machines.get(machine)
                fields = [("gpu", m.gpu), ("driver", m.driver), ("cuda", m.cuda), ("torch", m.torch),
                          ("triton", m.triton), ("cpu", m.cpu), *m.extra] if m else []
                # A store ingested before 2026-12-07 may hold a job's credentials among its env vars and
                # requirements (before 2026-12-06, any env var's).
                shown = [(redact_text(k), redact_environment(k, v)) for k, v in env]
                envs.append((self.ml(machine), run_id, [(k, v) for k, v in fields if v], shown))
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
                "n_moved": len(rows), "n_unjudged": unjudged.get(c.sha, 0),
                "n_measured": measured.get(c.sha, 0),
                "regs": [self.reg_row(r, 1) for r in regs_at.get(c.sha, [])],
                "suspects": [self.suspect_row(x, 1) for x in suspects_at.get(c.sha, [])],
                # The machine as the page's filter names it (`ml`): its raw key matched no filter option,
                # and choosing a machine hid every failed row (uxarray's 6,977, 2026-12-07).
                "failures": [(b.name, b.params_label, self.ml(m), status, b.kind == Kind.CORRECTNESS,
                              self.series_href(b.key, m, 1) if (b.key, m) in self.series_keys else "")
                             for b, m, status in snap.failures_by_sha.get(c.sha, [])],
            }
            # The moved rows' facts (and their series' cells, `heads`) name their text.
            facts = [f for _, _, f in rows]
            self.emit(f"commit/{commit_slug(c.sha)}.html", "commit.html", ctx,
                      inputs=(facts, sorted({heads[f[0]] for f in facts})),
                      late=partial(moved_context, rows))
