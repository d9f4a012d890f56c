"""What the dashboard shows, read once from a `StoreReader` into plain records: the public face of
the snapshot, whose parts live beside it.

- `ci.site.series`: the records (`Series`, `Point`, `Regression`, `ChangeMark`, `NotReporting`);
  the correctness gates (`GATES`) are `ci.verdicts.gates`', a change's "worse" (`is_worse`) `ci.records`';
- `ci.site.stats`: `median_iqr` and the page slugs (`series_slug`, `commit_slug`);
- `ci.site.snapshot`: `load_snapshot`, `Snapshot`, the store's two read paths and `ColumnsCache`;
- `ci.site.judge`: each series' change points, suspicions and thresholds (forked workers for
  many series), `recovery` and `gate_ok`.

The pages and tools import these names from here.
"""

from __future__ import annotations

from ci.records import is_worse
from ci.site.judge import gate_ok, recovery, track_name
from ci.site.series import (
    RECENT_COMMITS,
    ChangeMark,
    NotReporting,
    Point,
    Regression,
    Series,
    verdict_machines,
)
from ci.site.snapshot import ColumnsCache, Snapshot, load_snapshot, resolve_sha
from ci.site.stats import commit_slug, median_iqr, median_iqr_all, series_slug
from ci.verdicts import GATES

__all__ = [
    "GATES",
    "RECENT_COMMITS",
    "ChangeMark",
    "ColumnsCache",
    "NotReporting",
    "Point",
    "Regression",
    "Series",
    "Snapshot",
    "commit_slug",
    "gate_ok",
    "is_worse",
    "load_snapshot",
    "median_iqr",
    "median_iqr_all",
    "recovery",
    "resolve_sha",
    "series_slug",
    "track_name",
    "verdict_machines",
]
