"""The exact tier in words: how a structural series is named and a change of it is told ("DeiT-S ATS graph
B1: 164 -> 167 launches"), and the "Structure" section that opens the PR comment, the CLI table's lines and
the dashboard's structure page read.

An exact series (`ci.records.Kind.EXACT`) is told by its parameter values joined by spaces (the suite names
them to read well: model, forward, mode, batch; kernel slot, architecture), then, unless its unit says it
already, the measure (the benchmark method's name without `track_`), then base -> head and the unit.

Everything a PR's benchmark code controls (names, parameter values, units) reaches the comment as inline
code or escaped text, as in `ci.outputs.comment`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence

from ci.records import Outcome, Result, Verdict
from ci.verdicts.exact import is_exact, measure, moved_text, series_label, show

# The markers around the comment's Structure section: a job that measures only the exact tier (a fork's PR
# on a GitHub-hosted runner) replaces this part of the sticky comment and keeps the rest.
SECTION_START = "<!-- ragged-vit-structure -->"
SECTION_END = "<!-- /ragged-vit-structure -->"
# The commit a section's figures are of, on the line after SECTION_START: a job that left the exact tier to
# another workflow keeps the section only while it is of the head that job measured (`keep_section`).
SECTION_HEAD = "<!-- ragged-vit-structure-head: {sha} -->"
# The commit a whole comment's timings are of, on its last line: the exact job puts its section
# into the sticky comment only while that comment is of the head it measured (`merge_section`).
COMMENT_HEAD = "<!-- ragged-vit-comment-head: {sha} -->"
# What a comment without a Structure section leaves free for one (`ci.outputs.comment.render_comment`'s
# `section_room`): the pending section is 450 characters, an exact job's section cut to its gist
# (`_fit`) about as much; twice the larger, for long shas and counts.
SECTION_ROOM = 1_200
_HEX = "[0-9a-f]{7,64}"
_START_RE = re.compile(f"^{re.escape(SECTION_START)}$", re.M)
_END_RE = re.compile(f"^{re.escape(SECTION_END)}$", re.M)


def _mark(template: str, head: str | None) -> list[str]:
    """`template`'s line for `head` (SECTION_HEAD, COMMENT_HEAD); none for anything but a lower-case hex
    commit id (a section or comment without one is never carried over or merged into)."""
    return [template.format(sha=head)] if head is not None and re.fullmatch(_HEX, head) else []


def _marked(template: str, line: str) -> str | None:
    """The commit `line` names when it is `template`'s line, else None."""
    found = re.fullmatch(re.escape(template).replace(re.escape("{sha}"), f"({_HEX})"), line)
    return found.group(1) if found else None


def change_text(v: Verdict) -> str:
    """"[measure ]base -> head unit" of an exact verdict (the measure left out where the unit names it)."""
    what = measure(v.benchmark)
    unit = v.benchmark.unit
    prefix = "" if what.lower() == unit.lower() else f"{what} "
    if not math.isfinite(v.base_value):
        return f"{prefix}{show(v.head_value)} {unit} (new)"
    if not math.isfinite(v.head_value):
        return f"{prefix}{show(v.base_value)} {unit} -> not measured"
    change = moved_text(v.base_value, v.head_value, unit)
    note = v.reason.removeprefix(change) if v.outcome == Outcome.CHANGED and v.reason.startswith(change) else ""
    return f"{prefix}{change}{note}"


def exact_only(verdicts: Sequence[Verdict]) -> list[Verdict]:
    """The verdicts about exact series."""
    return [v for v in verdicts if is_exact(v.benchmark)]


def structure_counts(verdicts: Sequence[Verdict]) -> dict[str, int]:
    """{"exact_failed": gates failed (or crashed), "exact_changed": series that moved, "exact": compared}."""
    exact = exact_only(verdicts)
    return {"exact_failed": sum(v.outcome == Outcome.FAILED for v in exact),
            "exact_changed": sum(v.outcome == Outcome.CHANGED for v in exact), "exact": len(exact)}


def _rank(v: Verdict) -> tuple[int, str, str]:
    return (0 if v.outcome == Outcome.FAILED else 1, series_label(v.benchmark), v.benchmark.name)


def moved(verdicts: Sequence[Verdict]) -> list[Verdict]:
    """The exact verdicts a reader must see: failed gates and crashes first, then every change."""
    return sorted((v for v in exact_only(verdicts) if v.outcome in (Outcome.FAILED, Outcome.CHANGED)), key=_rank)


def structure_lines(verdicts: Sequence[Verdict], code: Callable[[object], str], text: Callable[[object], str],
                    machine: Callable[[Verdict], str] | None = None) -> list[str]:
    """One markdown list item per exact series that moved or failed (`moved`), e.g.
    "- `DeiT-S ATS graph B1`: 164 -> 167 launches", a failed gate with ❌ and its reason.

    Args:
        verdicts: the comparison's verdicts (others than exact are ignored).
        code: renders contributor text as inline code (`ci.outputs.comment`'s rule).
        text: renders contributor text as escaped plain text.
        machine: where several machines were compared, each row's machine label; None: not shown.
    """
    out = []
    for v in moved(verdicts):
        where = f" on {code(machine(v))}" if machine is not None else ""
        line = f"- {code(series_label(v.benchmark))}{where}: {text(change_text(v))}"
        if v.outcome == Outcome.FAILED:
            line = f"- ❌ {line[2:]} — **{text(v.reason)}**"
        out.append(line)
    return out


def structure_block(lines: Sequence[str], limit: int, counts: dict[str, int], head: str | None = None) -> list[str]:
    """The comment's Structure section: a heading, one sentence of counts, the first `limit` lines and an
    "N more" line, between the section markers (with `head`, the commit the figures are of, marked after
    the first); [] when no exact series was compared."""
    if not counts.get("exact"):
        return []
    n, changed, failed = counts["exact"], counts["exact_changed"], counts["exact_failed"]
    if changed or failed:
        gist = (("❌ " if failed else "") + f"{changed} of {n} exact series changed"
                + (f"; {failed} gate(s) failed" if failed else "")
                + " (exact: measured without a GPU, no noise, any change is a change).")
    else:
        gist = f"All {n} exact series unchanged (launches per forward, kernel resources, kept tokens, FLOPs)."
    body = [SECTION_START, *_mark(SECTION_HEAD, head), "### Structure", "", gist]
    shown = list(lines[:limit])
    if shown:
        body += ["", *shown]
    if len(lines) > len(shown):
        body += ["", f"_… and {len(lines) - len(shown)} more (see the dashboard or the job log)._"]
    return [*body, SECTION_END]


def comment_head_mark(head: str) -> list[str]:
    """The comment's last line, naming the commit its timings are of (`COMMENT_HEAD`); none for anything
    but a lower-case hex commit id."""
    return _mark(COMMENT_HEAD, head)


def comment_head(body: str) -> str | None:
    """The commit a comment body is of: its last line, when that is a `COMMENT_HEAD` (contributor text
    never ends the comment: the environment table or the dashboard link comes before the mark); None when
    it has none, as comments posted before the mark existed."""
    lines = body.rstrip().splitlines()
    return _marked(COMMENT_HEAD, lines[-1]) if lines else None


def _span(body: str) -> tuple[int, int] | None:
    # Markers count only as whole lines: contributor text (a parameter value in a table cell, a list item)
    # starts its line with "|" or "- ", so it can neither open nor close a section.
    start = _START_RE.search(body)
    end = _END_RE.search(body, start.end()) if start else None
    return (start.start(), end.end()) if start and end else None


def section_of(body: str) -> str | None:
    """The Structure section of a comment body, its marker lines included; None when it has none."""
    span = _span(body)
    return body[span[0] : span[1]] if span else None


def section_head(section: str) -> str | None:
    """The commit a Structure section's figures are of: the `SECTION_HEAD` line right after its start
    marker; None when it names none, as sections posted before the mark existed."""
    lines = section.splitlines()
    return _marked(SECTION_HEAD, lines[1]) if len(lines) > 1 else None


def pending_block(head: str) -> list[str]:
    """The Structure section of a job that left the exact tier to the `exact` workflow, for `head` (full sha),
    until that workflow posts its own: a check that has not run yet is said to be pending, never passed."""
    return [SECTION_START, *_mark(SECTION_HEAD, head), "### Structure", "",
            "⏳ Not measured in this job: the `exact` workflow measures the exact tier (launches, kernel resources, "
            f"kept tokens, FLOPs) of `{head[:12]}` on a CPU runner and puts its figures here. Until it does, no "
            "structural change of this head has been checked.", SECTION_END]


def _fit(body: str, section: str, limit: int) -> str:
    """`body`, which holds `section`, cut to `limit` characters by dropping the section's last list lines
    for an "N more" line (the exact workflow's job summary has them all)."""
    if len(body) <= limit:
        return body
    lines = section.splitlines()
    top = next((i for i, ln in enumerate(lines) if ln == "### Structure"), 0) + 3  # marks, heading, gap, gist
    items = [ln for ln in lines[top:-1] if ln and not ln.startswith("_… and ")]
    room = limit - (len(body) - len(section))
    for keep in range(len(items), -1, -1):
        rest = len(items) - keep
        more = [f"_… and {rest} more (see the `exact` workflow's job summary)._"] if rest else []
        cut = "\n".join([*lines[:top], *([""] + items[:keep] if keep else []), *([""] + more if more else []),
                         lines[-1]])
        if len(cut) <= room:
            return body.replace(section, cut, 1)
    raise ValueError(f"the comment is {len(body)} characters with its Structure section; GitHub takes {limit}")


def _insert(body: str, section: str) -> str:
    """`section` under `body`'s headline (its first `**...:**` line), or after the whole of it."""
    lines = body.splitlines()
    heading = next((i for i, ln in enumerate(lines) if ln.startswith("**") and ":**" in ln), None)
    if heading is None:
        return f"{body.rstrip()}\n\n{section}\n"
    return "\n".join([*lines[: heading + 1], "", section, *lines[heading + 1 :]]) + "\n"


def keep_section(existing: str, fresh: str, head: str, limit: int) -> str:
    """The sticky comment after a job that did not measure the exact tier (a pull request's GPU job; the
    `exact` workflow measures it): `fresh`, with the Structure section `existing` holds for the same
    `head` (posted by the exact job before this one finished), or else a pending one (`pending_block`).
    A section of another head, or one that names no head, is never carried over: its figures would sit
    beside timings of another commit.

    Args:
        existing: the body the sticky comment has now ("" where there is none).
        fresh: this job's rendering; returned as it is when it has a Structure section of its own.
        head: the commit this job measured (full sha).
        limit: the most characters the body may have (GitHub's limit); a kept section's last lines give
            way to an "N more" line.

    Returns:
        The body to post.
    """
    if section_of(fresh) is not None:
        return fresh
    old = section_of(existing)
    kept = old if old is not None and section_head(old) == head else "\n".join(pending_block(head))
    return _fit(_insert(fresh, kept), kept, limit)


def merge_section(existing: str, fresh: str, limit: int) -> str:
    """The sticky comment after a job that measured only the exact tier: `fresh`'s Structure section in
    place of `existing`'s (or under its headline), the rest of `existing` kept, when both are of the same
    head (`comment_head`); otherwise `fresh` whole: the timings there are of another commit (an older push,
    or one whose commit is not marked), and never sit beside this head's figures.

    Args:
        existing: the body the sticky comment has now ("" where there is none).
        fresh: the exact job's own rendering (with its section markers).
        limit: the most characters the body may have; the section's last lines give way to fit.

    Returns:
        The body to post.
    """
    section = section_of(fresh)
    if section is None or not existing.strip():
        return fresh
    head = comment_head(fresh)
    if head is None or comment_head(existing) != head:
        return fresh
    span = _span(existing)
    merged = existing[: span[0]] + section + existing[span[1] :] if span else _insert(existing, section)
    return _fit(merged, section, limit)


def head_summary(head: Sequence[Result], base: Sequence[Result] = ()) -> list[str]:
    """A plain-text table of one commit's measurements, the exact figures beside the timings: one row per
    benchmark method, with its series count, the range of its values and unit, and (given `base`, the
    parent's results) how many of its exact series changed. What `python -m ci demo` prints for HEAD.

    Args:
        head: the commit's results (one machine).
        base: its parent's results on the same machine ("" in the changed column where empty).

    Returns:
        The table's lines (none when `head` is empty).
    """
    base_values = {r.benchmark.key: r.value for r in base}
    groups: dict[tuple[bool, str], list[Result]] = {}
    for r in head:
        groups.setdefault((not is_exact(r.benchmark), r.benchmark.name), []).append(r)
    rows = []
    for (timed, name), rs in sorted(groups.items()):
        values = [r.value for r in rs if math.isfinite(r.value)]
        if not values:
            continue
        unit = rs[0].benchmark.unit
        lo, hi = min(values), max(values)
        shown = (show(lo) if lo == hi else f"{show(lo)}-{show(hi)}") if not timed else (
            f"{lo:.3g}" if lo == hi else f"{lo:.3g}-{hi:.3g}")
        changed = "" if timed or not base else str(sum(
            1 for r in rs if r.benchmark.key in base_values and base_values[r.benchmark.key] != r.value))
        rows.append(("timing (median)" if timed else "exact", name, str(len(rs)), f"{shown} {unit}", changed))
    if not rows:
        return []
    header = ("kind", "benchmark", "series", "values", "changed vs parent")
    widths = [max(len(x[i]) for x in (header, *rows)) for i in range(len(header))]
    line = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()  # noqa: E731
    return [line(header), line(tuple("-" * w for w in widths)), *(line(r) for r in rows)]
