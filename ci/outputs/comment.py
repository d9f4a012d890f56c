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
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ci.format import format_value
from ci.outputs.structure import exact_only, structure_block, structure_counts, structure_lines
from ci.records import (
    MISSING_ON_HEAD,
    NEW_SERIES,
    NOT_ON_BASE,
    UNCONFIRMED_SLOWDOWN,
    UNKNOWN_DIRECTION,
    WITHHELD_OTHER_JOB,
    Commit,
    Kind,
    Outcome,
    Project,
    Result,
    StoreReader,
    Verdict,
    is_worse,
    machine_labels,
)
from ci.verdicts import (
    Comparison,
    JobRelation,
    Jobs,
    Spread,
    VerdictSettings,
    environment_changes,
    spread_for,
    spreads,
)

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
_CORRECTION_NAMES = {"bh": "Benjamini-Hochberg", "holm": "Holm", "bonferroni": "Bonferroni"}
# A threshold override whose regex names the CPU (this project's `.*CPU\.`) is the floor of a suite's
# CPU subset: when no GPU ran the job, its series get the CPU banner (`cpu_subset`).
_NAMES_CPU = re.compile(r"cpu", re.IGNORECASE)


@dataclass(frozen=True)
class CommentContext:
    """What the comment says around its tables: the commits, how they were measured, where the log is.

    Attributes:
        base_commit: the base commit's record (its subject is shown), None when unknown.
        head_commit: the head commit's record.
        commit_url: prefix of a commit's web page (e.g. `https://github.com/o/r/commit/`); None: no links.
        job_url: the job log's web page (GitHub Actions: the workflow run), None when there is none.
        jobs: whether base and head were measured in one job (`ci.verdicts.job_relation`); None: unknown.
        drift_known: series whose between-job drift the history gave (when not measured in one job).
        spreads: (machine, series key) -> (base, head) Spread of the samples (`ci.verdicts.spreads`).
        cpu_only: no GPU ran the job: where it timed the suite's CPU subset (`cpu_subset`), the
            comment says, first, that its timings prove nothing about kernel speed.
        settings: the verdicts' settings (the interval's level, the correction, the CPU floor).
        project: the project (its name heads the comment).
        correctness_expected: the suite has correctness benchmarks, so a comparison without
            correctness results says so.
        problem: why the comparison decides nothing (`ci.verdicts.Comparison.problem`: a side with
            not one measured point); it replaces the headline's verdict.
        environment_changes: what the runs' recorded environments of base and head differ in
            (`ci.verdicts.environment_changes`): every change below may be the environment's.
        machine_labels: machine key -> what a reader is shown (`ci.records.machine_labels`): where
            the verdicts span several machines (environments of one asv machine), each row names its own.
    """

    base_commit: Commit | None = None
    head_commit: Commit | None = None
    commit_url: str | None = None
    job_url: str | None = None
    jobs: Jobs | None = None
    drift_known: int = 0
    spreads: Mapping[Any, tuple[Spread | None, Spread | None]] = field(default_factory=dict)
    cpu_only: bool = False
    settings: VerdictSettings = field(default_factory=VerdictSettings)
    project: Project = field(default_factory=Project)
    correctness_expected: bool = False
    machine_labels: Mapping[str, str] = field(default_factory=dict)
    problem: str = ""
    environment_changes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name in ("commit_url", "job_url"):
            url = getattr(self, name)
            if url is not None and not (isinstance(url, str) and url.startswith(("http://", "https://"))):
                raise ValueError(f"{name} must be an http(s) URL, got {url!r}")

_GATE_HEADER = ("", "Benchmark", "Params", "Value", "Limit", "Result")
_NOTE_HEADER = ("Benchmark", "Params", "Base", "Why")
# `&` too: GitHub decodes character references in plain text (`&commat;`, `&#64;`, `&#x40;`, `&period;`)
# before it looks for mentions and links, so `&commat;octocat` mentioned @octocat (2026-12-05); escaped,
# the reference is shown as written.
_MD_PUNCTUATION = re.compile(r"([\\`*_{}\[\]()#+!<>|~&])")
# What GitHub turns into a link or a reference in plain text, and where a zero-width space breaks
# it: mentions (@user, team@org), issue references (#1, GH-1), bare URLs (any scheme://) and
# `www.` (cmark-gfm's autolink extension, which GitHub runs on comments).
_AUTOLINKS = re.compile(r"(@|#|:(?=//)|www(?=\.)|GH(?=-\d))", re.IGNORECASE)


def _code(text: object) -> str:
    """`text` as an inline code span that nothing inside can close: the fence is one backtick longer
    than the longest run in it. Pipes are escaped for the table (GitHub unescapes them in code)."""
    t = str(text).replace("\r", " ").replace("\n", " ")
    if not t.strip():
        return "—"
    fence = "`" * (max((len(run) for run in re.findall(r"`+", t)), default=0) + 1)
    pad = " " if t.startswith("`") or t.endswith("`") else ""
    return f"{fence}{pad}{t}{pad}{fence}".replace("|", "\\|")


def _text(text: object) -> str:
    """Plain text that renders as itself: markdown punctuation escaped (no link, image, emphasis,
    HTML, table break or character reference: `&commat;` stays those eight characters instead of
    becoming `@`), a zero-width space after `@`, `#`, the `:` of `://`, `www` before its dot and
    `GH` before `-1` (no mention, no issue reference, no autolinked URL)."""
    t = _MD_PUNCTUATION.sub(r"\\\1", str(text).replace("\r", " ").replace("\n", " "))
    return _AUTOLINKS.sub("\\1\u200b", t)


def side_text(value: float, spread: Spread | None, unit: str) -> str:
    """One side of a timing row: median ±half the IQR (relative) and the sample count (plain text)."""
    if spread is None:
        return format_value(value, unit)
    half = spread.half_iqr
    iqr = f" ±{half * 100:.1f}%" if math.isfinite(half) else ""
    return f"{format_value(spread.median, unit)}{iqr} n={spread.n}"


def _side(value: float, spread: Spread | None, unit: str) -> str:
    return _text(side_text(value, spread, unit))


def _ratio(v: Verdict) -> str:
    if not math.isfinite(v.ratio):
        return "n/a"
    # asv's "~": a change past the threshold that the statistics could not confirm (a series of
    # unknown direction is inconclusive for another reason: its own section says which).
    tilde = "~" if (v.outcome == Outcome.INCONCLUSIVE and abs(v.ratio - 1) > (v.threshold or 0)
                    and not v.reason.startswith(UNKNOWN_DIRECTION)) else ""
    return f"{tilde}{v.ratio:.3f}×"


def _interval(v: Verdict) -> str:
    if not (math.isfinite(v.ci_low) and math.isfinite(v.ci_high)):
        return "n/a"
    return f"[{v.ci_low:.3f}, {v.ci_high:.3f}]"


def _params(v: Verdict) -> str:
    return _code(v.benchmark.params_label) if v.benchmark.params_label else "—"


def _perf_row(v: Verdict, sides: tuple[Spread | None, Spread | None] = (None, None)) -> tuple[str, ...]:
    b = v.benchmark
    return (
        _code(b.name), _params(v), _side(v.base_value, sides[0], b.unit), _side(v.head_value, sides[1], b.unit),
        _ratio(v), _interval(v), f"{v.p_value:.2g}" if math.isfinite(v.p_value) else "n/a",
        f"±{v.threshold * 100:.1f}%" if math.isfinite(v.threshold) else "n/a",
    )


def _note_row(v: Verdict, sides: tuple[Spread | None, Spread | None] = (None, None)) -> tuple[str, ...]:
    """A series the statistics could not judge: what it was on base, and why."""
    b = v.benchmark
    return (_code(b.name), _params(v), _side(v.base_value, sides[0], b.unit), _text(v.reason))


def _gate_row(v: Verdict) -> tuple[str, ...]:
    b = v.benchmark
    if v.outcome == Outcome.FAILED:
        result = "**FAILED**: " + _text(v.reason)
    elif v.outcome == Outcome.UNCHANGED:
        result = "pass"
    else:
        result = f"{v.outcome.value}: {_text(v.reason)}"
    return (
        _ICON[v.outcome], _code(b.name), _params(v),
        f"{v.head_value:.6g}" if math.isfinite(v.head_value) else "n/a",
        f"{v.threshold:g}" if math.isfinite(v.threshold) else "n/a", result,
    )


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], limit: int) -> str:
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


def _sort_key(v: Verdict) -> tuple[float, str]:
    # Biggest change first within a section.
    size = abs(math.log(v.ratio)) if math.isfinite(v.ratio) and v.ratio > 0 else -1.0
    return (-size, v.benchmark.key)


def _past_threshold(v: Verdict) -> bool:
    """Inconclusive, but the ratio moved past the series' threshold (asv's "~")."""
    return (v.outcome == Outcome.INCONCLUSIVE and math.isfinite(v.ratio) and v.ratio > 0
            and abs(v.ratio - 1) > (v.threshold if math.isfinite(v.threshold) else 0))


def _unconfirmed(v: Verdict) -> bool:
    """An unconfirmed slowdown past the threshold (of the median, or of the tail the verdict names):
    worth a look. An unconfirmed speed-up is not an alarm (it is listed, folded, with the other
    inconclusive series)."""
    return v.reason.startswith(UNCONFIRMED_SLOWDOWN) or (
        _past_threshold(v) and is_worse(v.benchmark.direction, v.ratio) is True)


def _reaches_regression(v: Verdict) -> bool:
    """The ratio's interval reaches past the series' threshold on the slow side (a regression is not
    ruled out, whatever the median ratio says)."""
    if not (math.isfinite(v.ci_low) and math.isfinite(v.ci_high) and math.isfinite(v.threshold)):
        return False
    if is_worse(v.benchmark.direction, 2.0):  # lower is better: a ratio above 1 is slower
        return v.ci_high > 1 + v.threshold
    return v.ci_low < 1 / (1 + v.threshold)


def _faster(v: Verdict) -> bool:
    """An inconclusive speed-up: the ratio moved the good way and the interval does not reach a
    regression. Listed, folded; never an alarm."""
    return (math.isfinite(v.ratio) and v.ratio > 0 and v.ratio != 1 and not is_worse(v.benchmark.direction, v.ratio)
            and not _reaches_regression(v))


def headline(n: Mapping[str, int]) -> tuple[str, str]:
    """The one-line verdict of a comparison: (status, detail), from the series counted per group
    (`group_verdicts`, plus "gates_failed"). A speed-up never makes the status an alarm."""
    parts = [
        f"{n.get(key, 0)} {label}" for key, label in (
            ("gates_failed", "correctness failure(s)"), ("failed", "benchmark(s) failed to run on head"),
            ("regressed", "regression(s)"), ("missing", "not measured on head"),
            ("not_run", "not compared (failed to run on base)"),
            ("unconfirmed", "unconfirmed slowdown(s)"), ("withheld", "withheld (not measured in one job)"),
            ("unknown", "of unknown direction"), ("improved", "improvement(s)"),
            ("faster", "unconfirmed speed-up(s)"),
            ("inconclusive", "inconclusive"), ("new", "new"), ("unchanged", "unchanged"),
            ("exact_failed", "structural gate(s) failed"), ("exact_changed", "structural change(s)"),
        ) if n.get(key, 0)
    ]
    if not parts and n.get("exact"):
        parts = [f"{n['exact']} exact series unchanged"]
    detail = ", ".join(parts) if parts else "no benchmarks were compared"
    if n.get("gates_failed") or n.get("failed") or n.get("regressed") or n.get("exact_failed"):
        return "❌ Performance check failed", detail
    if n.get("missing") or n.get("not_run") or n.get("unconfirmed") or n.get("withheld") or n.get("unknown"):
        return "🟡 No regression confirmed; look at the series below", detail
    if n.get("inconclusive"):
        return "🟡 No regression found, some series need more samples", detail
    return "✅ No significant performance change", detail


GROUPS = ("failed", "regressed", "missing", "not_run", "unconfirmed", "withheld", "unknown", "improved", "faster",
          "inconclusive", "new", "unchanged")


def group_verdicts(perf: Sequence[Verdict]) -> dict[str, list[Verdict]]:
    """Timing verdicts by what the reader should do about them (keys `GROUPS`), biggest change
    first in each group: an inconclusive speed-up is "faster" (listed, never an alarm), an
    inconclusive slowdown past the threshold "unconfirmed"."""
    groups: dict[str, list[Verdict]] = {k: [] for k in GROUPS}
    for v in perf:
        if v.outcome == Outcome.INCONCLUSIVE:
            if v.reason.startswith(NOT_ON_BASE):
                key = "not_run"
            elif v.reason.startswith(MISSING_ON_HEAD):
                key = "missing"
            elif v.reason == WITHHELD_OTHER_JOB:
                key = "withheld"
            elif v.reason.startswith(UNKNOWN_DIRECTION):
                key = "unknown"
            elif _unconfirmed(v):
                key = "unconfirmed"
            elif _faster(v):
                key = "faster"
            else:
                key = "inconclusive"
        elif v.outcome == Outcome.UNCHANGED and v.reason == NEW_SERIES:
            key = "new"
        else:
            key = v.outcome.value
        groups[key].append(v)
    for rows in groups.values():
        rows.sort(key=_sort_key)
    return groups


def _safe_url(url: str) -> str:
    """A link target that cannot end the markdown link early or start another one."""
    return re.sub(r"[\s()\[\]<>`\"']", lambda m: f"%{ord(m.group()):02X}", url)


def _commit_line(ctx: CommentContext, base_sha: str, head_sha: str) -> str:
    """Base → head: each commit as a link (when the repository's URL is known) and its subject."""

    def one(label: str, sha: str, commit: Commit | None) -> str:
        short = f"`{sha[:12]}`" if _SHA_RE.fullmatch(sha) else _code(sha[:12])
        if ctx.commit_url and _SHA_RE.fullmatch(sha):
            short = f"[{short}]({_safe_url(ctx.commit_url + sha)})"
        subject = (commit.subject if commit is not None else "").strip()
        if len(subject) > _SUBJECT_CHARS:
            subject = subject[: _SUBJECT_CHARS - 1] + "…"
        return f"{label} {short}" + (f" “{_text(subject)}”" if subject else "")

    return f"{one('Base', base_sha, ctx.base_commit)} → {one('head', head_sha, ctx.head_commit)}."


def _job_line(ctx: CommentContext, withheld: int) -> str:
    """How base and head were measured and which rule decided (in-job or cross-job); "one job" only
    when both sides' runs carry the marker of one asv call, verified against their result files."""
    jobs = ctx.jobs
    log = f" [Job log]({_safe_url(ctx.job_url)})." if ctx.job_url else ""
    if jobs is not None and jobs.relation == JobRelation.SAME:
        return (f"**In-job rule.** Measured in one job ({_code(jobs.head)}): base and head in one asv call, rounds "
                f"interleaved, so drift over the job hits both alike.{log}")
    if jobs is not None and jobs.relation == JobRelation.DIFFERENT:
        why = f"**⚠️ Base and head were measured in different jobs** ({_code(jobs.base)} and {_code(jobs.head)})"
    else:
        why = ("**⚠️ Nothing records that base and head were measured in one job** (a side's results carry no "
               "verified job marker: measured outside the runner, rewritten since, or marked before markers were "
               "bound to their result files)")
    widened = (f"{ctx.drift_known} series' thresholds include their between-job drift measured on this machine's "
               "history" if ctx.drift_known else "this machine's history gives no series' between-job drift")
    held = f"; {withheld} series without it are withheld" if withheld else ""
    return f"**Cross-job rule.** {why}: drift between jobs is not in either side's samples, so {widened}{held}.{log}"


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
    rules = ", ".join(f"{_code(pattern)} ±{_pct(floor)}" for pattern, floor in sorted(subset))
    n = sum(subset.values())
    others = f"; the other series need at least ±{_pct(settings.floor)}" if n_other else ""
    return [
        "> [!WARNING]",
        f"> **CPU only: these timings prove nothing about kernel speed.** No GPU ran this job: its {n} series of the "
        f"suite's CPU subset (`regressions_thresholds`: {rules}) were timed on a CPU, where the level of a series "
        f"moves between processes, so they are called changed only past {past}{others}. Judge kernel speed on a GPU "
        "runner.",
    ]


def _legend(settings: VerdictSettings, n_tested: int) -> str:
    correction = _CORRECTION_NAMES.get(settings.correction)
    corrected = f", {correction}-corrected over the {n_tested} series tested" if correction else ", uncorrected"
    return (f"Base and head: median ± half the interquartile range, n samples. Ratio = head / base of the medians; "
            f"interval = {settings.confidence * 100:g}% bootstrap confidence interval of the ratio; p = Mann-Whitney U"
            f"{corrected}; threshold = the change a series must pass, at least ±{settings.floor * 100:g}% and "
            "adapted to its noise.")


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
        raise ValueError(f"dashboard_url must be an http(s) URL, got {dashboard_url!r}")
    ctx = context if context is not None else CommentContext()
    if not isinstance(ctx, CommentContext):
        raise TypeError(f"context must be a CommentContext, got {type(ctx).__name__}")

    gate_by_key = {(v.benchmark.key, v.machine): v for v in verdicts if v.benchmark.kind == Kind.CORRECTNESS}
    gate_by_key.update({(v.benchmark.key, v.machine): v for v in gates})
    all_gates = sorted(gate_by_key.values(), key=lambda v: (v.benchmark.key, v.machine))
    gates_failed = [v for v in all_gates if v.outcome != Outcome.UNCHANGED]
    gates_passed = [v for v in all_gates if v.outcome == Outcome.UNCHANGED]
    exact = exact_only(verdicts)  # the Structure section's (ci.outputs.structure), never a timing group
    perf = [v for v in verdicts if v.benchmark.kind not in (Kind.CORRECTNESS, Kind.EXACT)]
    groups = group_verdicts(perf)
    n = {k: len(rows) for k, rows in groups.items()}
    n["gates_failed"] = len(gates_failed)
    n.update(structure_counts(exact))
    counts = {o: sum(v.outcome == o for v in perf) + sum(v.outcome == o for v in all_gates) for o in Outcome}
    n_tested = sum(math.isfinite(v.p_value) for v in perf)
    # Series of several machines (environments of one asv machine): each row names its machine.
    several = len({v.machine for v in (*perf, *all_gates)}) > 1

    def cols(header: Sequence[str], at: int = 2) -> Sequence[str]:
        return (*header[:at], "Machine", *header[at:]) if several else header

    def where(row: tuple[str, ...], v: Verdict, at: int = 2) -> tuple[str, ...]:
        return (*row[:at], _code(ctx.machine_labels.get(v.machine, v.machine)), *row[at:]) if several else row

    cpu = cpu_subset(perf, ctx.settings) if ctx.cpu_only else {}

    def perf_rows(name: str) -> list[tuple[str, ...]]:
        return [where(_perf_row(v, spread_for(ctx.spreads, v)), v) for v in groups[name]]

    def note_rows(name: str) -> list[tuple[str, ...]]:
        return [where(_note_row(v, spread_for(ctx.spreads, v)), v) for v in groups[name]]

    def gate_rows(rows: list[Verdict]) -> list[tuple[str, ...]]:
        return [where(_gate_row(v), v, 3) for v in rows]

    def new_row(v: Verdict) -> tuple[str, ...]:
        head_side = spread_for(ctx.spreads, v)[1]
        return where((_code(v.benchmark.name), _params(v), _side(v.head_value, head_side, v.benchmark.unit)), v)

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
        "environment": (("Key", "Value"), [(_text(k), _code(val)) for k, val in sorted(environment.items())]),
        "structure": ((), [(line,) for line in structure_lines(
            exact, _code, _text, (lambda v: ctx.machine_labels.get(v.machine, v.machine)) if several else None)]),
    }
    limits = {name: len(rows) for name, (_, rows) in sections.items()}
    visible = (
        ("gates_failed", "❌ Correctness gates failed"), ("failed", "❌ Failed to run on head"),
        ("regressed", "🔴 Regressions"), ("missing", "⚠️ Not measured on head"),
        ("not_run", "⚠️ Not compared: failed to run on base (see the job log)"),
        ("unconfirmed", "🟡 Slowdowns past the threshold, not confirmed (measure more samples)"),
        ("withheld", "⚠️ Withheld: base and head not measured in one job"),
        ("unknown", "❔ Direction unknown: neither better nor worse can be said (declare the benchmark's `direction`)"),
        ("improved", "🟢 Improvements"),
    )
    folded = (
        ("gates_passed", "Correctness gates passed"),
        ("faster", "Faster, not confirmed (no action needed)"), ("inconclusive", "Inconclusive: need more samples"),
        ("new", "New series (no base measurement)"), ("unchanged", "Unchanged"),
    )

    def tbl(name: str) -> str:
        header, rows = sections[name]
        return _table(header, rows, limits[name])

    def build() -> str:
        status, detail = headline(n)
        if ctx.problem:  # a check that did not run is not a pass: never "no regression"
            status, detail = "❌ Nothing was compared", _text(ctx.problem)
        out = [MARKER, f"## {_text(ctx.project.title)}", "", f"**{status}:** {detail}.", ""]
        block = structure_block([row[0] for row in sections["structure"][1]], limits["structure"], n)
        if block:
            out += [*block, ""]
        if cpu:
            out += [*_cpu_warning(cpu, ctx.settings, len(perf) - sum(cpu.values())), ""]
        out.append(_commit_line(ctx, base_sha, head_sha))
        if base_sha == head_sha:
            out += ["", "⚠️ Base and head are the same commit: an A/A comparison, so every difference is noise."]
        out += ["", _job_line(ctx, n["withheld"])]
        if ctx.environment_changes:
            out += ["", "**⚠️ Base and head ran in different environments:** "
                    + "; ".join(_text(c) for c in ctx.environment_changes)
                    + ". Any change below may be the environment's, not the code's."]
        out += ["", _legend(ctx.settings, n_tested)]
        if any(counts.values()):
            out += ["", "| Outcome | Series |", "|---|---|"]
            out += [f"| {_ICON[o]} {o.value} | {counts[o]} |" for o in Outcome if counts[o]]
        if not all_gates and ctx.correctness_expected:
            out += ["", "_No correctness results in this run._"]
        for name, title in visible:
            if sections[name][1]:
                out += ["", f"### {title} ({len(sections[name][1])})", "", tbl(name)]
        for name, title in folded:
            if sections[name][1]:
                out += ["", f"<details><summary>{title} ({len(sections[name][1])})</summary>", "", tbl(name), "",
                        "</details>"]
        out += ["", "### Environment", ""]
        out.append(tbl("environment") if environment else "_Not recorded._")
        if dashboard_url:
            out += ["", f"📈 [Dashboard]({_safe_url(dashboard_url)})"]
        return "\n".join(out) + "\n"

    body = build()
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


def github_urls(environ: Mapping[str, str]) -> tuple[str | None, str | None]:
    """The commit-link prefix and the job-log link a GitHub Actions job provides, from its
    environment (GITHUB_SERVER_URL, GITHUB_REPOSITORY, GITHUB_RUN_ID, GITHUB_RUN_ATTEMPT).

    Args:
        environ: the process environment (or any mapping of its variables).

    Returns:
        (e.g. "https://github.com/o/r/commit/" or None, "https://github.com/o/r/actions/runs/1/attempts/2"
        or None); values that are not what GitHub sets give None.
    """
    server = environ.get("GITHUB_SERVER_URL", "https://github.com").rstrip("/")
    repo = environ.get("GITHUB_REPOSITORY", "")
    if not re.fullmatch(r"https?://[A-Za-z0-9.-]+(:[0-9]+)?", server) or not re.fullmatch(
        r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+", repo
    ):
        return None, None
    commit_url = f"{server}/{repo}/commit/"
    run_id, attempt = environ.get("GITHUB_RUN_ID", ""), environ.get("GITHUB_RUN_ATTEMPT", "")
    if not re.fullmatch(r"[0-9]{1,20}", run_id):
        return commit_url, None
    job_url = f"{server}/{repo}/actions/runs/{run_id}"
    if re.fullmatch(r"[0-9]{1,6}", attempt):
        job_url += f"/attempts/{attempt}"
    return commit_url, job_url


def comment_context(
    store: StoreReader,
    comparison: Comparison,
    environment: Mapping[str, str],
    *,
    commit_url: str | None = None,
    job_url: str | None = None,
    settings: VerdictSettings | None = None,
    project: Project | None = None,
) -> CommentContext:
    """The CommentContext of one comparison read from a store (`ci.verdicts.compare_commits`).

    Args:
        store: the store (commit subjects, whether the suite has correctness benchmarks).
        comparison: what was compared and how it was measured.
        environment: the environment table (`comment_environment`); no "gpu" in it means CPU only.
        commit_url: prefix of a commit's web page (the GitHub job's, or given), or None: the
            project's `show_commit_url`, if any.
        job_url: the job log's web page, or None.
        settings: the verdicts' settings (None: the defaults).
        project: the project (`ci.project.project_settings`; None: unnamed).

    Returns:
        A CommentContext.
    """
    shas = {r.commit_sha for r in (*comparison.base[:1], *comparison.head[:1])}
    commits = {c.sha: c for c in store.commits() if c.sha in shas}
    base_sha = comparison.base[0].commit_sha if comparison.base else ""
    head_sha = comparison.head[0].commit_sha if comparison.head else ""
    project = project or Project()
    return CommentContext(
        base_commit=commits.get(base_sha), head_commit=commits.get(head_sha),
        commit_url=commit_url or project.commit_url or None, job_url=job_url, jobs=comparison.jobs,
        drift_known=comparison.drift_known, spreads=spreads(comparison.base, comparison.head),
        cpu_only=not environment.get("gpu"), settings=settings or VerdictSettings(), project=project,
        correctness_expected=any(b.kind == Kind.CORRECTNESS for b in store.benchmarks()),
        machine_labels=machine_labels(store.machines()), problem=comparison.problem or "",
        environment_changes=_environment_changes(comparison),
    )  # fmt: skip


def _environment_changes(comparison: Comparison) -> tuple[str, ...]:
    """What base's and head's runs recorded differently, per machine compared (its name first
    where several were)."""
    out: list[str] = []
    machines = sorted({r.machine for r in comparison.head})
    for m in machines:
        b = next((dict(r.environment) for r in comparison.base if r.machine == m and r.environment), None)
        h = next((dict(r.environment) for r in comparison.head if r.machine == m and r.environment), None)
        if b is not None and h is not None:
            prefix = f"{m}: " if len(machines) > 1 else ""
            out += [prefix + c for c in environment_changes(b, h)]
    return tuple(out)


def comment_environment(store: StoreReader, machine: str | Sequence[str], head_results: Sequence[Result]
                        ) -> dict[str, str]:
    """What the PR comment's environment table shows: the machine's GPU stack, then the head run's clocks,
    temperature, Python and asv environment (each environment's name where several were compared)."""
    keys = [machine] if isinstance(machine, str) else list(machine)
    rows = {m.name: m for m in store.machines()}
    first = rows.get(keys[0]) if keys else None
    env = {"machine": first.machine_name if first is not None else ", ".join(keys)}
    if first is not None:
        env.update({k: getattr(first, k) for k in ("gpu", "driver", "cuda", "torch", "triton") if getattr(first, k)})
    if len(keys) > 1:
        env["environments"] = ", ".join(rows[k].env_name if k in rows and rows[k].env_name else k for k in keys)
    if head_results:
        keep = ("sm_clock_mhz", "mem_clock_mhz", "temperature_c") if len(keys) > 1 else (
            "sm_clock_mhz", "mem_clock_mhz", "temperature_c", "python", "env_name")
        env.update({k: v for k, v in head_results[0].environment if k in keep and v})
    return env
