"""The structure page: the exact tier's history (`ci.records.Kind.EXACT`: register spills, kernel
launches and the like, counts that move only when the code does)."""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from ci.records import Benchmark, Kind
from ci.site.pages.site import Site
from ci.verdicts.exact import DENSE, LAUNCH_UNIT, SPILL_UNIT, measure, series_label
from ci.verdicts.exact import show as fmt_exact


class StructurePage(Site):
    """structure.html, for a suite with exact series."""

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
