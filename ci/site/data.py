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
text (the script inserts it with `textContent`, never as markup). After new commits a series' file
is the previous one's arrays (`arrays_of`) extended by the new runs (`series_arrays`' `kept`), when
the renderer has checked that its earlier runs are unchanged.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from ci.records import Commit
from ci.text import printable

PREFIX = "raggedDashboard.put("
# A column of a series' runs as the renderer holds it (a numpy array) or as a test writes it (a list).
Positions = Sequence[int] | np.ndarray
Numbers = Sequence[float] | np.ndarray


def _shown(value: Any) -> Any:
    """Text in a data file, with its controls as escapes (`ci.text.printable`), in lists and dicts too."""
    if type(value) is str:
        return printable(value)
    if isinstance(value, (list, tuple)):
        return [_shown(v) for v in value]
    if isinstance(value, dict):
        return {k: _shown(v) for k, v in value.items()}
    return value


def wrap(key: str, payload: Any) -> str:
    """The text of a data file: `payload` as compact JSON inside one registration call, its texts with
    their controls as escapes (`_shown`: the page inserts them with textContent, where a bidirectional
    override still reorders what a reader sees)."""
    return wrap_json(key, json.dumps(_shown(payload), ensure_ascii=False, separators=(",", ":"), allow_nan=False))


def unwrap(text: str) -> tuple[str, Any]:
    """(key, payload) of a data file's text (tests and tools read them back with this)."""
    if not text.startswith(PREFIX) or not text.rstrip().endswith(");"):
        raise ValueError("not a dashboard data file")
    inner = text[len(PREFIX):text.rstrip().rindex(");")]
    key, end = json.JSONDecoder().raw_decode(inner)
    if inner[end] != ",":
        raise ValueError("not a dashboard data file")
    return key, json.loads(inner[end + 1:])


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


def _numbers(values: Iterable[float], div: float) -> str:
    """A JSON array of values / div at 6 significant digits, null where not finite: written as text,
    since a full render writes 1.5 million of them (json.dumps of rounded floats cost ~3x more). A whole
    number shown in its own unit (`div` 1: a count, bytes in a unit of their own) is written whole: the
    tooltip read 3,189,770,000 beside the table's 3,189,768,192 (2026-12-07)."""
    if div == 1:
        return "[" + ",".join((str(int(v)) if v.is_integer() and abs(v) < _EXACT_INT else f"{v:.6g}")
                              if math.isfinite(v) else "null" for v in map(float, values)) + "]"
    return "[" + ",".join(f"{v / div:.6g}" if math.isfinite(v) else "null" for v in values) + "]"


_EXACT_INT = 2.0**53  # every whole number below it is a float exactly (and a JavaScript number)


def series_arrays(
    x: Positions, values: Numbers, lows: Numbers, highs: Numbers, div: float,
    *, kept: tuple[tuple[str, str, str, str], int] | None = None,
) -> tuple[str, str, str, str]:
    """The text inside the brackets of a series' "x", "v", "lo" and "hi" arrays.

    Args:
        x, values, lows, highs, div: as `series_json` takes them.
        kept: (the four texts of an earlier file, k): that file's arrays are those of the first k
            runs of these (the caller checked), so only the runs after them are formatted.

    Returns:
        The four texts, e.g. ("0,2,3", "1.5,null,2", ...).
    """
    start = 0 if kept is None else kept[1]

    def tail(a: Positions | Numbers) -> Sequence[Any]:  # numpy columns as Python numbers (faster to format)
        part = a[start:]
        return part.tolist() if isinstance(part, np.ndarray) else part

    new = (",".join(map(str, tail(x))), _numbers(tail(values), div)[1:-1], _numbers(tail(lows), div)[1:-1],
           _numbers(tail(highs), div)[1:-1])
    if kept is None or start == 0:
        return new
    xs, vs, lo, hi = (a + "," + b if a and b else a or b for a, b in zip(kept[0], new, strict=True))
    return xs, vs, lo, hi


_ARRAYS = (',"x":[', '],"v":[', '],"lo":[', '],"hi":[', '],"n":')


def arrays_of(text: str) -> tuple[str, str, str, str] | None:
    """The four array texts (`series_arrays`) of a data file written by `series_json`, None when
    it is not one. Meta strings are JSON, whose quotes are escaped, so the markers (each with a bare
    quote) occur only where `series_json` put them."""
    cuts, at = [], 0
    for marker in _ARRAYS:
        at = text.find(marker, at)
        if at < 0:
            return None
        cuts.append(at)
        at += len(marker)
    xs, vs, lo, hi = (text[cuts[i] + len(_ARRAYS[i]):cuts[i + 1]] for i in range(4))
    # Only numbers, null and commas: the folder (and so the file) may have been written by anyone.
    return (xs, vs, lo, hi) if all(_NUMBER_TEXT.fullmatch(part) for part in (xs, vs, lo, hi)) else None


_NUMBER_TEXT = re.compile(r"[0-9.e+\-,nul]*")


def series_json(
    *,
    meta: dict[str, Any],
    x: Positions,
    values: Numbers,
    lows: Numbers,
    highs: Numbers,
    counts: Sequence[int],
    div: float,
    marks: Sequence[tuple[int, str, str]],
    arrays: tuple[str, str, str, str] | None = None,
) -> str:
    """One series' chart data, as JSON text.

    Args:
        meta: identity and display fields (name, params, machine, unit, label, direction, gate, ...).
        x: commit positions (index into commits.js), ascending.
        values, lows, highs: median and interquartile range per run, in the benchmark's unit.
        counts: samples per run (one number when all are equal).
        div: the axis divisor (values are written divided by it).
        marks: (commit position, kind, label) to point out.
        arrays: `series_arrays` of x, values, lows, highs and div, when the caller has them.

    Returns:
        A JSON object: meta's fields, then "div", "x", "v", "lo", "hi", "n" and "marks".
    """
    n = counts[0] if counts and all(c == counts[0] for c in counts) else list(counts)
    # Names and labels are shown with textContent: their controls (bidirectional overrides) as escapes.
    meta = {k: _shown(v) for k, v in meta.items()}
    head = json.dumps({**meta, "div": div}, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    tail = json.dumps({"n": n, "marks": [[p, kind, printable(label)] for p, kind, label in marks]},
                      ensure_ascii=False, separators=(",", ":"))
    xs, vs, lo, hi = arrays if arrays is not None else series_arrays(x, values, lows, highs, div)
    return f'{head[:-1]},"x":[{xs}],"v":[{vs}],"lo":[{lo}],"hi":[{hi}],{tail[1:]}'


def wrap_json(key: str, body: str) -> str:
    """The text of a data file whose payload is already JSON text."""
    return f"{PREFIX}{json.dumps(key)},{body});\n"
