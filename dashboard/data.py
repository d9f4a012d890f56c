"""The charts' data: compact JSON per series beside the pages, read by `chart.js` when a page is viewed.

asv's published site keeps one JSON per benchmark and draws in the browser; so does this one, so a
series page stays a few kilobytes however long its history is. Each file is one JSON object
wrapped in a call, `raggedDashboard.put("<key>", {...});`, because a page opened from disk
(file://) may not `fetch` its neighbours but may load them as scripts. The JSON is the part between
the first "(" + key + "," and the final ");".

    data/commits.js                  every commit: sha, time, subject (index = position in history)
    data/series/<series slug>.js     one series: commit indices, medians, IQR, sample counts, marks
    data/params/<benchmark slug>.js  the series of one benchmark on one machine (the overlay list)

Numbers are in the series' axis unit (`div`, `label`) with 6 significant digits; user text stays
text (the script inserts it with `textContent`, never as markup).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Sequence
from typing import Any

from ci.records import Commit

PREFIX = "raggedDashboard.put("


def wrap(key: str, payload: Any) -> str:
    """The text of a data file: `payload` as compact JSON inside one registration call."""
    body = json.dumps(payload, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return f"{PREFIX}{json.dumps(key)},{body});\n"


def unwrap(text: str) -> tuple[str, Any]:
    """(key, payload) of a data file's text (tests and tools read them back with this)."""
    if not text.startswith(PREFIX) or not text.rstrip().endswith(");"):
        raise ValueError("not a dashboard data file")
    inner = text[len(PREFIX):text.rstrip().rindex(");")]
    key, end = json.JSONDecoder().raw_decode(inner)
    if inner[end] != ",":
        raise ValueError("not a dashboard data file")
    return key, json.loads(inner[end + 1:])


def num(x: float, div: float = 1.0) -> float | None:
    """x / div rounded to 6 significant digits (the JSON number), None when not finite."""
    if not math.isfinite(x):
        return None
    return float(f"{x / div:.6g}")


def params_slug(name: str, machine: str) -> str:
    """File-name-safe identity of one benchmark (all its parameter points) on one machine."""
    return hashlib.sha256(f"{name}\0{machine}".encode()).hexdigest()[:16]


def commits_payload(commits: Sequence[Commit], slugs: Sequence[str], times: Sequence[str]) -> dict[str, Any]:
    """Every commit of the history, by position.

    Args:
        commits: the history, oldest first.
        slugs: each commit's page stem (`commit_slug`).
        times: each commit's time as shown.

    Returns:
        {"sha": [...], "time": [...], "subject": [...], "page": {index: stem}} where `page` lists
        only stems that differ from the sha.
    """
    return {
        "sha": [c.sha for c in commits],
        "time": list(times),
        "subject": [c.subject for c in commits],
        "page": {str(i): slug for i, (c, slug) in enumerate(zip(commits, slugs, strict=True)) if slug != c.sha},
    }


def series_payload(
    *,
    meta: dict[str, Any],
    x: Iterable[int],
    values: Iterable[float],
    lows: Iterable[float],
    highs: Iterable[float],
    counts: Sequence[int],
    div: float,
    marks: Sequence[tuple[int, str, str]],
) -> dict[str, Any]:
    """One series' chart data.

    Args:
        meta: identity and display fields (name, params, machine, unit, label, direction, gate, ...).
        x: commit positions (index into commits.js), ascending.
        values, lows, highs: median and interquartile range per run, in the benchmark's unit.
        counts: samples per run (one number when all are equal).
        div: the axis divisor (values are written divided by it).
        marks: (commit position, kind, label) to point out.

    Returns:
        The JSON-ready object.
    """
    return {
        **meta,
        "div": div,
        "x": list(x),
        "v": [num(v, div) for v in values],
        "lo": [num(v, div) for v in lows],
        "hi": [num(v, div) for v in highs],
        "n": counts[0] if counts and all(c == counts[0] for c in counts) else list(counts),
        "marks": [list(m) for m in marks],
    }
