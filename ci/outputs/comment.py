"""The pull-request comment: GitHub-flavoured markdown built from verdicts and correctness gates.

Layout (after asv-perch's and conbench's PR comments):
a hidden sticky marker, the project's name (asv.conf.json's `project`), a one-line verdict, the
compared commits (links with their subjects: the GitHub job's commit pages, else the project's
`show_commit_url`), how they were measured (one job or not) with a link to the job's log, a loud
warning when no GPU ran the suite's CPU subset (series whose floor is a CPU override of
`regressions_thresholds`), an outcome count table, then, most important first: the correctness
gates that failed, benchmarks that failed to run on head, regressions, series not measured on head,
slowdowns past the threshold that the statistics could not confirm, series withheld because base
and head were not measured in one job, series whose benchmark declares no direction (their change
is shown, never judged), improvements; collapsed: the gates that passed, other inconclusive series
(unconfirmed speed-ups among them: a speed-up never raises the headline's alarm), new series,
unchanged series; the environment and a dashboard link. Every timing row shows each side's
median, half its interquartile range and its sample count. A section, or the line saying a suite's
correctness results are missing, appears only where its data exist.

GitHub rejects comment bodies over 65,536 characters, so tables are cut whole rows at a time,
lowest priority first, with an "N more" line; markdown is never cut mid-table.

Everything a contributor controls (benchmark names and parameters, units, machine and
environment values, reasons that quote them, commit subjects) is rendered inert: names and values
as code spans (any backticks in them fenced; GitHub links nothing inside a code span and decodes no
character reference there), other text with markdown's punctuation escaped (`&` included, so no
`&commat;` or `&#64;` decodes into an `@`) and a zero-width space wherever GitHub would otherwise
autolink or reference (after `@` and `#`, inside `://`, `www.` and `GH-1`), so it can neither close
a table, link, embed an image, nor mention anyone or reference an issue.

This module lays the comment out; what it says around its tables comes from `ci.outputs.context`,
the verdicts' groups and headline from `ci.outputs.groups`, inert markdown from `ci.outputs.markdown`.
"""

from __future__ import annotations

import math
import re
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence

from ci.format import format_value
from ci.outputs.context import CommentContext, comment_context, comment_environment, github_urls
from ci.outputs.groups import (
    GROUPS,
    group_counts,
    group_verdicts,
    headline,
    rule_clauses,
    rule_counts,
    unknown_direction,
)
from ci.outputs.markdown import md_code, md_table, md_text, md_url
from ci.outputs.structure import (
    comment_head_mark,
    exact_only,
    section_of,
    structure_block,
    structure_counts,
    structure_lines,
)
from ci.records import MISSING_MACHINE, Commit, Direction, Kind, Outcome, Verdict
from ci.text import redact_text, shows_credential
from ci.verdicts import JobRelation, Spread, VerdictSettings, spread_for, wide_text, wide_thresholds

# Its own public names, and those its importers take from here that now live beside it (context, groups).
__all__ = [
    "GITHUB_MAX_CHARS",
    "GROUPS",
    "MARKER",
    "CommentContext",
    "comment_context",
    "comment_environment",
    "cpu_subset",
    "github_urls",
    "group_verdicts",
    "headline",
    "render_comment",
    "side_text",
]

# The bot finds its previous comment by this marker (`ci.outputs.github.post_sticky_comment`): it
# stays the same whatever the project, or the bot would post a second comment instead of updating.
MARKER = "<!-- ragged-vit-bench -->"
GITHUB_MAX_CHARS = 65536

_ICON = {
    Outcome.FAILED: "❌",
    Outcome.REGRESSED: "🔴",
    Outcome.IMPROVED: "🟢",
    Outcome.INCONCLUSIVE: "🟡",
    Outcome.UNCHANGED: "⚪",
    Outcome.CHANGED: "🔷",
}
_PERF_HEADER = ("Benchmark", "Params", "Base", "Head", "Ratio", "Interval", "p", "Threshold")
_SUBJECT_CHARS = 72
_SHA_RE = re.compile(r"[0-9a-fA-F]{7,64}")
# A threshold override whose regex names the CPU (this project's `.*CPU\.`) is the floor of a suite's
# CPU subset: when no GPU ran the job, its series get the CPU banner (`cpu_subset`).
_NAMES_CPU = re.compile(r"cpu", re.IGNORECASE)


_GATE_HEADER = ("", "Benchmark", "Params", "Value", "Limit", "Result")
_NOTE_HEADER = ("Benchmark", "Params", "Base", "Why")


def side_text(value: float, spread: Spread | None, unit: str) -> str:
    """One side of a timing row: median ±half the IQR (relative) and the sample count (plain text)."""
    if spread is None:
        return format_value(value, unit)
    half = spread.half_iqr
    iqr = f" ±{half * 100:.1f}%" if math.isfinite(half) else ""
    return f"{format_value(spread.median, unit)}{iqr} n={spread.n}"


# The inconclusive rows of the outcome table, by the headline's groups (`ci.outputs.groups.GROUPS`);
# what is left ("inconclusive": too few samples, an interval both ways, a gate) keeps the plain name.
_INCONCLUSIVE_ROWS = (
    ("missing", "not measured on head"), ("not_run", "not compared (failed to run on base)"),
    ("unconfirmed", "unconfirmed slowdown"), ("withheld", "withheld (not measured in one job)"),
    ("unknown", "of unknown direction"), ("faster", "unconfirmed speed-up"),
)


def _side(value: float, spread: Spread | None, unit: str) -> str:
    return md_text(side_text(value, spread, unit))


def _ratio(v: Verdict) -> str:
    if not math.isfinite(v.ratio):
        if math.isfinite(v.base_value) and math.isfinite(v.head_value) and min(v.base_value, v.head_value) <= 0:
            return f"{v.head_value - v.base_value:+.4g} (difference)"  # no ratio at or below zero; a number: no markup
        return "n/a"
    # asv's "~": a change past the threshold that the statistics could not confirm (a series of
    # unknown direction is inconclusive for another reason: its own section says which).
    tilde = "~" if (v.outcome == Outcome.INCONCLUSIVE and abs(v.ratio - 1) > (v.threshold or 0)
                    and not unknown_direction(v)) else ""
    return f"{tilde}{v.ratio:.3f}×"


def _interval(v: Verdict) -> str:
    if not (math.isfinite(v.ci_low) and math.isfinite(v.ci_high)):
        return "n/a"
    return f"[{v.ci_low:.3f}, {v.ci_high:.3f}]"


def _params(v: Verdict) -> str:
    return md_code(v.benchmark.params_label) if v.benchmark.params_label else "—"


def _whole_machines(rows: Sequence[Verdict], ctx: CommentContext) -> list[str]:
    """Above the "not measured on head" table: the environments and hosts of which nothing was measured
    at head, each once, so that their rows do not read as benchmarks the head removed."""
    gone = Counter(v.machine for v in rows if v.reason == MISSING_MACHINE)
    if not gone:
        return []
    named = "; ".join(f"{md_code(ctx.machine_labels.get(m, m))} ({k} series)" for m, k in sorted(gone.items()))
    return [f"Nothing of {named} was measured at head: that environment or host did not run there (its setup or "
            "build failed, or the job no longer runs it), so none of its series could be compared.", ""]


def _perf_row(v: Verdict, sides: tuple[Spread | None, Spread | None] = (None, None)) -> tuple[str, ...]:
    b = v.benchmark
    return (
        md_code(b.name), _params(v), _side(v.base_value, sides[0], b.unit), _side(v.head_value, sides[1], b.unit),
        _ratio(v), _interval(v), f"{v.p_value:.2g}" if math.isfinite(v.p_value) else "n/a",
        f"±{v.threshold * 100:.1f}%" if math.isfinite(v.threshold) else "n/a",
    )


def _note_row(v: Verdict, sides: tuple[Spread | None, Spread | None] = (None, None)) -> tuple[str, ...]:
    """A series the statistics could not judge: what it was on base, and why."""
    b = v.benchmark
    return (md_code(b.name), _params(v), _side(v.base_value, sides[0], b.unit), md_text(v.reason))


def _gate_row(v: Verdict) -> tuple[str, ...]:
    b = v.benchmark
    if v.outcome == Outcome.FAILED:
        result = "**FAILED**: " + md_text(v.reason)
    elif v.outcome == Outcome.UNCHANGED:
        result = "pass"
    else:
        result = f"{v.outcome.value}: {md_text(v.reason)}"
    return (
        _ICON[v.outcome], md_code(b.name), _params(v),
        f"{v.head_value:.6g}" if math.isfinite(v.head_value) else "n/a",
        f"{v.threshold:g}" if math.isfinite(v.threshold) else "n/a", result,
    )


def _commit_line(ctx: CommentContext, base_sha: str, head_sha: str) -> str:
    """Base → head: each commit as a link (when the repository's URL is known) and its subject."""

    def one(label: str, sha: str, commit: Commit | None) -> str:
        short = f"`{sha[:12]}`" if _SHA_RE.fullmatch(sha) else md_code(sha[:12])
        if ctx.commit_url and _SHA_RE.fullmatch(sha):
            short = f"[{short}]({md_url(ctx.commit_url + sha)})"
        # Redacted before it is cut: a cut through a URL's "@" left its password's start on show (2026-12-07).
        subject = redact_text(commit.subject if commit is not None else "").strip()
        if len(subject) > _SUBJECT_CHARS:
            subject = subject[: _SUBJECT_CHARS - 1] + "…"
        return f"{label} {short}" + (f" “{md_text(subject)}”" if subject else "")

    return f"{one('Base', base_sha, ctx.base_commit)} → {one('head', head_sha, ctx.head_commit)}."


def _job_line(ctx: CommentContext, withheld: int, wide: Sequence[float] = ()) -> str:
    """How base and head were measured and which rule decided (in-job or cross-job); "one job" only
    when both sides' runs carry the marker of one asv call, verified against their result files.
    `wide`: the cross-job thresholds past the settings' `max_threshold` (a young or jumpy history's
    between-job drift; ±69% on 8 jobs of a real history, 2026-12-07), said with how far they go, since
    "unchanged" there only rules out a change past them."""
    jobs = ctx.jobs
    log = f" [Job log]({md_url(ctx.job_url)})." if ctx.job_url else ""
    if jobs is not None and jobs.relation == JobRelation.SAME:
        return (f"**In-job rule.** Measured in one job ({md_code(jobs.head)}): base and head in one asv call, rounds "
                f"interleaved, so drift over the job hits both alike.{log}")
    if jobs is not None and jobs.relation == JobRelation.DIFFERENT:
        why = f"**⚠️ Base and head were measured in different jobs** ({md_code(jobs.base)} and {md_code(jobs.head)})"
    else:
        why = ("**⚠️ Nothing records that base and head were measured in one job** (a side's results carry no "
               "verified job marker: measured outside the runner, rewritten since, or marked before markers were "
               "bound to their result files)")
    widened = (f"{ctx.drift_known} series' thresholds include their between-job drift measured on this machine's "
               "history" if ctx.drift_known else "this machine's history gives no series' between-job drift")
    held = f"; {withheld} series without it are withheld" if withheld else ""
    if wide:
        held += (f"; {wide_text(wide, ctx.settings.max_threshold)}, so a smaller change there cannot be told from "
                 "the drift: measure base and head in one job (`python -m ci continuous`) to judge them closely")
    return f"**Cross-job rule.** {why}: drift between jobs is not in either side's samples, so {widened}{held}.{log}"


MOVED_SHARE = 0.8  # of the series judged: this share moved the same way ...
MOVED_MIN_SERIES = 8  # ... of at least this many ...
MOVED_MIN_SHIFT = 0.03  # ... by a median of at least this much: the jobs, not the code, are the first suspect


def moved_together(verdicts: Sequence[Verdict]) -> tuple[int, int, float] | None:
    """Whether the series of a cross-job comparison moved together: (how many moved the way the median
    did, of how many judged series, the median change, + slower), or None.

    A runner of another speed moves every series of its job alike (a fifth of the jobs 15% slower on a
    synthetic shared-runner history: every series +13-14%); a change of the code moves the series that
    run it. Nothing is decided by it: the verdicts stand, and the comment says which is the first
    suspect. Series of unknown direction, correctness and exact series are not counted."""
    worse = [math.log(v.ratio) if v.benchmark.direction == Direction.LOWER else -math.log(v.ratio)
             for v in verdicts if v.benchmark.judged and math.isfinite(v.ratio) and v.ratio > 0]
    if len(worse) < MOVED_MIN_SERIES:
        return None
    mid = statistics.median(worse)
    # Moved alike: at least a third of the median's move, that way. Stingray's 17 of 20 series "moved the
    # same way" counting four at +0.0-0.6% beside +40-57%: a change of the code, read as a runner's (2026-12-07).
    same = sum(w * mid > 0 and abs(w) >= abs(mid) / 3 for w in worse)
    if abs(mid) < math.log1p(MOVED_MIN_SHIFT) or same < MOVED_SHARE * len(worse):
        return None
    return same, len(worse), math.expm1(mid)


def _moved_line(moved: tuple[int, int, float], base_sha: str, head_sha: str) -> str:
    same, n, shift = moved
    way = "slower" if shift > 0 else "faster"
    return (f"**⚠️ {same} of {n} series moved the same way between the two jobs** (median {abs(shift) * 100:.1f}% "
            f"{way}): a runner of another speed moves every series alike, a change of the code seldom does. "
            f"Benchmarked together by one asv call, base and head tell the two apart: "
            f"`python -m ci continuous {base_sha[:12]} {head_sha[:12]}`.")


def cpu_subset(verdicts: Sequence[Verdict], settings: VerdictSettings) -> dict[tuple[str, float], int]:
    """The suite's CPU subset among `verdicts`: series whose floor is set by a threshold override that
    names the CPU (`settings.override_for`), counted per override.

    Args:
        verdicts: the comparison's verdicts.
        settings: the settings that decided them.

    Returns:
        (regex, floor) of each such override -> how many of the series it sets; empty when none.
    """
    out: dict[tuple[str, float], int] = {}
    for v in verdicts:
        override = settings.override_for(v.benchmark.key)
        if override is not None and _NAMES_CPU.search(override[0]):
            out[override] = out.get(override, 0) + 1
    return out


def _pct(x: float) -> str:
    return f"{x * 100:.1f}".rstrip("0").rstrip(".") + "%"


def _cpu_warning(subset: Mapping[tuple[str, float], int], settings: VerdictSettings, n_other: int) -> list[str]:
    """The banner of a job that timed the suite's CPU subset without a GPU, worded from the settings."""
    floors = sorted({floor for _, floor in subset})
    past = f"±{_pct(floors[0])}" if len(floors) == 1 else f"±{_pct(floors[0])} to ±{_pct(floors[-1])}"
    rules = ", ".join(f"{md_code(pattern)} ±{_pct(floor)}" for pattern, floor in sorted(subset))
    n = sum(subset.values())
    others = f"; the other series need at least ±{_pct(settings.floor)}" if n_other else ""
    return [
        "> [!WARNING]",
        f"> **CPU only: these timings prove nothing about kernel speed.** No GPU ran this job: its {n} series of the "
        f"suite's CPU subset (`regressions_thresholds`: {rules}) were timed on a CPU, where the level of a series "
        f"moves between processes, so they are called changed only past {past}{others}. Judge kernel speed on a GPU "
        "runner.",
    ]


def _legend(settings: VerdictSettings, rules: Mapping[str, int]) -> str:
    """What the table's columns mean, for the rules that decided its rows (`rule_counts`)."""
    parts = ["Base and head: median ± half the interquartile range, n samples (asv's repeats and quartiles where it "
             "recorded one value a point). Ratio = head / base of the medians (their difference where a side is at "
             "or below zero)", *rule_clauses(settings, rules),
             f"threshold = the change a series must pass, at least ±{settings.floor * 100:g}% and adapted to its "
             "noise."]
    return "; ".join(parts)


def render_comment(
    verdicts: Sequence[Verdict],
    gates: Sequence[Verdict],
    *,
    base_sha: str,
    head_sha: str,
    environment: Mapping[str, str],
    dashboard_url: str | None,
    max_chars: int = GITHUB_MAX_CHARS,
    context: CommentContext | None = None,
    section_room: int = 0,
) -> str:
    """The sticky PR comment in GitHub markdown.

    Args:
        verdicts: A/B verdicts from `ci.verdicts.compare` (correctness verdicts in it join the gates).
        gates: verdicts from `ci.verdicts.gates.correctness_gates` (deduplicated against `verdicts` by key).
        base_sha: the base commit measured in the job.
        head_sha: the PR head commit.
        environment: what the job ran on (GPU, driver, CUDA, torch, triton, runner, ...), shown as a table.
        dashboard_url: link to the dashboard, or None.
        max_chars: the body's size limit (GitHub's is 65,536); tables are cut whole rows to fit.
        context: commits, job relation and log link, per-side spreads, CPU-only flag and settings
            (`CommentContext`); None says only what the verdicts hold (and that the job is unknown).
        section_room: characters a body without a Structure section of its own leaves free for the one
            another job puts in (`ci.outputs.structure.SECTION_ROOM`: a pending section, or the exact
            job's cut to its gist). Without it a comment whose tables filled `max_chars` could not take
            that section, and none was posted (2026-12-07, 2,000 series).

    Returns:
        Markdown starting with the hidden marker `<!-- ragged-vit-bench -->`, at most `max_chars` long.

    Raises:
        TypeError: verdicts/gates are not Verdict records, or environment is not a str mapping.
        ValueError: empty shas, or `max_chars` too small to hold even the headline and all-"N more" tables.
    """
    for name, seq in (("verdicts", verdicts), ("gates", gates)):
        if isinstance(seq, (str, bytes)) or not isinstance(seq, Sequence):
            raise TypeError(f"{name} must be a sequence of Verdict, got {type(seq).__name__}")
        for v in seq:
            if not isinstance(v, Verdict):
                raise TypeError(f"{name} must contain only Verdict records, got {type(v).__name__}")
    if not isinstance(environment, Mapping) or not all(
        isinstance(k, str) and isinstance(val, str) for k, val in environment.items()
    ):
        raise TypeError("environment must be a Mapping[str, str]")
    if not base_sha or not head_sha:
        raise ValueError("base_sha and head_sha must be non-empty commit ids")
    if dashboard_url is not None and not dashboard_url.startswith(("http://", "https://")):
        raise ValueError(f"dashboard_url must be an http(s) URL, got {redact_text(dashboard_url)!r}")
    if dashboard_url is not None and shows_credential(dashboard_url):
        # The comment is public: a link's password or token would be published with it (it was, verbatim).
        raise ValueError(f"dashboard_url must not hold a credential, got {redact_text(dashboard_url)!r}: the "
                         "comment is public; link the dashboard without one")
    ctx = context if context is not None else CommentContext()
    if not isinstance(ctx, CommentContext):
        raise TypeError(f"context must be a CommentContext, got {type(ctx).__name__}")
    for name, url in (("commit URL", ctx.commit_url), ("job URL", ctx.job_url)):
        if url and shows_credential(url):
            raise ValueError(f"the {name} must not hold a credential, got {redact_text(url)!r}: the comment is public")

    gate_by_key = {(v.benchmark.key, v.machine): v for v in verdicts if v.benchmark.kind == Kind.CORRECTNESS}
    gate_by_key.update({(v.benchmark.key, v.machine): v for v in gates})
    all_gates = sorted(gate_by_key.values(), key=lambda v: (v.benchmark.key, v.machine))
    gates_failed = [v for v in all_gates if v.outcome != Outcome.UNCHANGED]
    gates_passed = [v for v in all_gates if v.outcome == Outcome.UNCHANGED]
    exact = exact_only(verdicts)  # the Structure section's (ci.outputs.structure), never a timing group
    perf = [v for v in verdicts if v.benchmark.kind not in (Kind.CORRECTNESS, Kind.EXACT)]
    groups = group_verdicts(perf)
    n = group_counts(groups, len(gates_failed))
    n.update(structure_counts(exact))
    counts = {o: sum(v.outcome == o for v in perf) + sum(v.outcome == o for v in all_gates) for o in Outcome}
    rules = rule_counts(perf)
    # Series of several machines (environments of one asv machine): each row names its machine.
    several = len({v.machine for v in (*perf, *all_gates)}) > 1

    def cols(header: Sequence[str], at: int = 2) -> Sequence[str]:
        return (*header[:at], "Machine", *header[at:]) if several else header

    def where(row: tuple[str, ...], v: Verdict, at: int = 2) -> tuple[str, ...]:
        return (*row[:at], md_code(ctx.machine_labels.get(v.machine, v.machine)), *row[at:]) if several else row

    cpu = cpu_subset(perf, ctx.settings) if ctx.cpu_only else {}

    def perf_rows(name: str) -> list[tuple[str, ...]]:
        return [where(_perf_row(v, spread_for(ctx.spreads, v)), v) for v in groups[name]]

    def note_rows(name: str) -> list[tuple[str, ...]]:
        return [where(_note_row(v, spread_for(ctx.spreads, v)), v) for v in groups[name]]

    def gate_rows(rows: list[Verdict]) -> list[tuple[str, ...]]:
        return [where(_gate_row(v), v, 3) for v in rows]

    def new_row(v: Verdict) -> tuple[str, ...]:
        head_side = spread_for(ctx.spreads, v)[1]
        return where((md_code(v.benchmark.name), _params(v), _side(v.head_value, head_side, v.benchmark.unit)), v)

    perf_header, note_header, gate_header = cols(_PERF_HEADER), cols(_NOTE_HEADER), cols(_GATE_HEADER, 3)
    sections: dict[str, tuple[Sequence[str], list[tuple[str, ...]]]] = {
        "gates_failed": (gate_header, gate_rows(gates_failed)),
        "failed": (note_header, note_rows("failed")),
        "regressed": (perf_header, perf_rows("regressed")),
        "missing": (note_header, note_rows("missing")),
        "not_run": (note_header, note_rows("not_run")),
        "unconfirmed": (perf_header, perf_rows("unconfirmed")),
        "withheld": (perf_header, perf_rows("withheld")),
        "unknown": (perf_header, perf_rows("unknown")),
        "improved": (perf_header, perf_rows("improved")),
        "gates_passed": (gate_header, gate_rows(gates_passed)),
        "faster": (perf_header, perf_rows("faster")),
        "inconclusive": (perf_header, perf_rows("inconclusive")),
        "new": (cols(("Benchmark", "Params", "Head")), [new_row(v) for v in groups["new"]]),
        "unchanged": (perf_header, perf_rows("unchanged")),
        "environment": (("Key", "Value"), [(md_text(k), md_code(val)) for k, val in sorted(environment.items())]),
        "structure": ((), [(line,) for line in structure_lines(
            exact, md_code, md_text, (lambda v: ctx.machine_labels.get(v.machine, v.machine)) if several else None)]),
    }
    limits = {name: len(rows) for name, (_, rows) in sections.items()}
    visible = (
        ("gates_failed", "❌ Correctness gates failed"), ("failed", "❌ Failed to run on head"),
        ("regressed", "🔴 Regressions"), ("missing", "⚠️ Not measured on head"),
        ("not_run", "⚠️ Not compared: failed to run on base (see the job log)"),
        ("unconfirmed", "🟡 Slowdowns past the threshold, not confirmed (measure more samples)"),
        ("withheld", "⚠️ Withheld: base and head not measured in one job"),
        ("unknown", "❔ Direction unknown: neither better nor worse can be said (declare the benchmark's `direction`, "
                    "or map its name to `\"lower\"` or `\"higher\"` in asv.conf.json's `regressions_directions`)"),
        ("improved", "🟢 Improvements"),
    )
    folded = (
        ("gates_passed", "Correctness gates passed"),
        ("faster", "Faster, not confirmed (no action needed)"),
        ("inconclusive", "Inconclusive (each row says why: too few samples, not comparable, no ratio)"),
        ("new", "New series (no base measurement)"), ("unchanged", "Unchanged"),
    )

    def tbl(name: str) -> str:
        header, rows = sections[name]
        return md_table(header, rows, limits[name])

    def build() -> str:
        status, detail = headline(n)
        if ctx.problem:  # a check that did not run is not a pass: never "no regression"
            status, detail = "❌ Nothing was compared", md_text(ctx.problem)
        out = [MARKER, f"## {md_text(ctx.project.title)}", "", f"**{status}:** {detail}.", ""]
        block = structure_block([row[0] for row in sections["structure"][1]], limits["structure"], n, head_sha)
        if block:
            out += [*block, ""]
        if cpu:
            out += [*_cpu_warning(cpu, ctx.settings, len(perf) - sum(cpu.values())), ""]
        out.append(_commit_line(ctx, base_sha, head_sha))
        if base_sha == head_sha:
            out += ["", "⚠️ Base and head are the same commit: an A/A comparison, so every difference is noise."]
        out += ["", _job_line(ctx, n["withheld"], wide_thresholds(perf, ctx.settings.max_threshold))]
        moved = None if ctx.jobs is not None and ctx.jobs.together else moved_together(perf)
        if moved is not None:
            out += ["", _moved_line(moved, base_sha, head_sha)]
        if ctx.environment_changes:
            out += ["", "**⚠️ Base and head ran in different environments:** "
                    + "; ".join(md_text(c) for c in ctx.environment_changes)
                    + ". Any change below may be the environment's, not the code's."]
        out += ["", _legend(ctx.settings, rules)]
        if any(counts.values()):
            out += ["", "| Outcome | Series |", "|---|---|"]
            # A new series (no base measurement) is not an unchanged one: the headline counts them apart,
            # and a Django history's comment read "42 unchanged, 7 new" above "unchanged 49" (2026-12-07).
            fresh = n.get("new", 0)
            for o in Outcome:
                shown = counts[o] - fresh if o == Outcome.UNCHANGED else counts[o]
                if o == Outcome.INCONCLUSIVE:
                    # By the headline's groups, so that the two count the same rows alike (mujoco-warp's
                    # read "28 withheld, 1 of unknown direction" above "inconclusive 29", 2026-12-07).
                    for key, label in _INCONCLUSIVE_ROWS:
                        if n.get(key, 0):
                            out.append(f"| {_ICON[o]} {label} | {n[key]} |")
                            shown -= n[key]
                if shown:
                    out.append(f"| {_ICON[o]} {o.value} | {shown} |")
                if o == Outcome.UNCHANGED and fresh:
                    out.append(f"| {_ICON[o]} new (no base measurement) | {fresh} |")
        if not all_gates and ctx.correctness_expected:
            out += ["", "_No correctness results in this run._"]
        for name, title in visible:
            if sections[name][1]:
                out += ["", f"### {title} ({len(sections[name][1])})", "", *_whole_machines(groups.get(name, ()), ctx),
                        tbl(name)]
        for name, title in folded:
            if sections[name][1]:
                out += ["", f"<details><summary>{title} ({len(sections[name][1])})</summary>", "", tbl(name), "",
                        "</details>"]
        out += ["", "### Environment", ""]
        out.append(tbl("environment") if environment else "_Not recorded._")
        if dashboard_url:
            out += ["", f"📈 [Dashboard]({md_url(dashboard_url)})"]
        mark = comment_head_mark(head_sha)  # the last line: the commit these timings are of
        return "\n".join([*out, *([""] + mark if mark else [])]) + "\n"

    body = build()
    if section_of(body) is None:
        max_chars -= section_room
    # Cut the least important tables first, whole rows at a time, keeping as many rows of each as
    # fit (a binary search: row lengths vary); never the headline or the counts.
    for name in ("unchanged", "new", "inconclusive", "faster", "gates_passed", "structure", "improved", "unknown",
                 "withheld", "unconfirmed", "not_run", "missing", "regressed", "environment", "failed", "gates_failed"):
        if len(body) <= max_chars:
            return body
        lo, hi = 0, limits[name]
        while lo < hi:
            limits[name] = (lo + hi + 1) // 2
            if len(build()) <= max_chars:
                lo = limits[name]
            else:
                hi = limits[name] - 1
        limits[name] = lo
        body = build()
    if len(body) <= max_chars:
        return body
    raise ValueError(f"max_chars={max_chars} is too small for the comment's headline ({len(body)} chars without rows)")
