"""The jinja environment and the HTML the pages build outside jinja (a table row costs ~25 template
fragments in jinja, several times the cost of one f-string: docs/performance.md "Dashboard render")."""

from __future__ import annotations

import html
import math

from jinja2 import Environment, PackageLoader, StrictUndefined

from ci.text import printable

# A table row of a run that failed its correctness gate, and the badge its verdict cell gets.
FLAG = ' class="flagged"'
FAIL_BADGE = ' <span class="badge failed">gate failed</span>'


def shown(value: object) -> object:
    """A value as a page shows it: text from the store with its controls (terminal escapes, bidirectional
    overrides that reorder what a reader sees, other non-printable characters) written as visible escapes
    (`ci.text.printable`); markup and other values as they are."""
    return printable(value) if type(value) is str else value


def environment() -> Environment:
    env = Environment(
        loader=PackageLoader("ci.site", "templates"),
        autoescape=True,  # every value from the store is text; markup only via `Markup` from svg.py
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=shown,
    )
    return env


def change_class(worse: bool | None) -> str:
    return "" if worse is None else ("worse" if worse else "better")


def pct(threshold: float) -> str:
    return f"±{threshold * 100:.1f}%" if math.isfinite(threshold) else "not known yet"


def threshold_text(threshold: float, by_difference: bool = False) -> str:
    """A noise threshold as a reader sees it: relative ("±4.0%"), or for a series judged by
    difference (at or through zero) in the series' unit ("±0.5 by difference")."""
    if by_difference and math.isfinite(threshold):
        return f"±{threshold:.4g} by difference"
    return pct(threshold)


def esc(text: str) -> str:
    """HTML-escape text (quotes too) for rows built outside jinja; html.escape is ~5x cheaper than
    markupsafe.escape, which wraps every result in a Markup object."""
    return html.escape(printable(text), quote=True)
