"""GitHub-flavoured markdown that renders as what it holds, for the PR comment: text a contributor
controls as an inert code span (`md_code`) or as escaped plain text (`md_text`: no link, mention,
issue reference, HTML or character reference), a link target that cannot end its link (`md_url`),
and a whole table cut to a number of rows (`md_table`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ci.text import printable

# `&` too: GitHub decodes character references in plain text (`&commat;`, `&#64;`, `&#x40;`, `&period;`)
# before it looks for mentions and links, so `&commat;octocat` mentioned @octocat (2026-12-05); escaped,
# the reference is shown as written.
_MD_PUNCTUATION = re.compile(r"([\\`*_{}\[\]()#+!<>|~&])")
# What GitHub turns into a link or a reference in plain text, and where a zero-width space breaks
# it: mentions (@user, team@org), issue references (#1, GH-1), bare URLs (any scheme://) and
# `www.` (cmark-gfm's autolink extension, which GitHub runs on comments).
_AUTOLINKS = re.compile(r"(@|#|:(?=//)|www(?=\.)|GH(?=-\d))", re.IGNORECASE)


def _one_line(text: object) -> str:
    """`text` on one line, its other controls (a bidirectional override reorders what a reader sees,
    also inside a code span) as visible escapes (`ci.text.printable`)."""
    return printable(str(text).replace("\r", " ").replace("\n", " "))


def md_code(text: object) -> str:
    """`text` as an inline code span that nothing inside can close: the fence is one backtick longer
    than the longest run in it. Pipes are escaped for the table (GitHub unescapes them in code)."""
    t = _one_line(text)
    if not t.strip():
        return "—"
    fence = "`" * (max((len(run) for run in re.findall(r"`+", t)), default=0) + 1)
    pad = " " if t.startswith("`") or t.endswith("`") else ""
    return f"{fence}{pad}{t}{pad}{fence}".replace("|", "\\|")


def md_text(text: object) -> str:
    """Plain text that renders as itself: markdown punctuation escaped (no link, image, emphasis,
    HTML, table break or character reference: `&commat;` stays those eight characters instead of
    becoming `@`), a zero-width space after `@`, `#`, the `:` of `://`, `www` before its dot and
    `GH` before `-1` (no mention, no issue reference, no autolinked URL)."""
    t = _MD_PUNCTUATION.sub(r"\\\1", _one_line(text))
    return _AUTOLINKS.sub("\\1\u200b", t)


def md_table(header: Sequence[str], rows: Sequence[Sequence[str]], limit: int) -> str:
    """A whole markdown table of the first `limit` rows (cells already rendered), then an "N more"
    line for the rest."""
    shown = rows[:limit]
    lines = []
    if shown:
        lines.append("| " + " | ".join(header) + " |")
        lines.append("|" + "|".join("---" for _ in header) + "|")
        lines.extend("| " + " | ".join(row) + " |" for row in shown)
    if len(rows) > len(shown):
        if shown:
            lines.append("")
        lines.append(f"_… and {len(rows) - len(shown)} more (see the dashboard or the job log)._")
    return "\n".join(lines)


def md_url(url: str) -> str:
    """A link target that cannot end the markdown link early or start another one."""
    return re.sub(r"[\s()\[\]<>`\"']", lambda m: f"%{ord(m.group()):02X}", url)
