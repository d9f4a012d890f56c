"""The pull-request comment: GitHub-flavoured markdown built from verdicts and correctness gates.

Layout (after asv-perch's and conbench's comments, shared/reference/ci-services.md §2):
a hidden sticky marker, a one-line verdict, an outcome count table, then, most important first:
the correctness gates that failed, benchmarks that failed to run on head, regressions, series
not measured on head, changes past the threshold that the statistics could not confirm, series
whose benchmark declares no direction (their change is shown, never judged), improvements;
collapsed: the gates that passed, other inconclusive series, new series, unchanged series; the
environment and a dashboard link.

GitHub rejects comment bodies over 65,536 characters, so tables are cut whole rows at a time,
lowest priority first, with an "N more" line; markdown is never cut mid-table.

Everything a contributor controls (benchmark names and parameters, units, machine and
environment values, reasons that quote them) is rendered inert: names and values as code spans
(any backticks in them fenced; GitHub links nothing inside a code span), other text with
markdown's punctuation escaped and a zero-width space wherever GitHub would otherwise autolink or
reference (after `@` and `#`, inside `://`, `www.` and `GH-1`), so it can neither close a table,
link, embed an image, nor mention anyone or reference an issue.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence

from ci.records import MISSING_ON_HEAD, NEW_SERIES, UNKNOWN_DIRECTION, Kind, Outcome, Result, StoreReader, Verdict

MARKER = "<!-- ragged-vit-bench -->"
GITHUB_MAX_CHARS = 65536

_ICON = {
    Outcome.FAILED: "❌",
    Outcome.REGRESSED: "🔴",
    Outcome.IMPROVED: "🟢",
    Outcome.INCONCLUSIVE: "🟡",
    Outcome.UNCHANGED: "⚪",
}
_PERF_HEADER = ("Benchmark", "Params", "Base", "Head", "Ratio", "Interval", "p", "Threshold")
_GATE_HEADER = ("", "Benchmark", "Params", "Value", "Limit", "Result")
_NOTE_HEADER = ("Benchmark", "Params", "Base", "Why")
_MD_PUNCTUATION = re.compile(r"([\\`*_{}\[\]()#+!<>|~])")
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
    HTML or table break), a zero-width space after `@`, `#`, the `:` of `://`, `www` before its
    dot and `GH` before `-1` (no mention, no issue reference, no autolinked URL)."""
    t = _MD_PUNCTUATION.sub(r"\\\1", str(text).replace("\r", " ").replace("\n", " "))
    return _AUTOLINKS.sub("\\1\u200b", t)


def format_value(value: float, unit: str) -> str:
    """A measurement with a readable unit: seconds auto-scaled to ns/µs/ms, bytes to KiB/MiB/GiB.

    Args:
        value: the number in `unit`.
        unit: the benchmark's unit ("seconds", "bytes", "images/s", ...).

    Returns:
        Text such as "12.3 µs", "1.50 GiB", "1,870 images/s" or "n/a" for NaN.
    """
    if value is None or not math.isfinite(value):
        return "n/a"
    if unit == "seconds":
        for scale, name in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns")):
            if abs(value) >= scale or scale == 1e-9:
                return f"{value / scale:.3g} {name}"
    if unit == "bytes":
        for scale, name in ((2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB"), (1, "B")):
            if abs(value) >= scale or scale == 1:
                return f"{value / scale:.3g} {name}"
    if abs(value) >= 1000:
        return f"{value:,.0f} {unit}"
    return f"{value:.4g} {unit}"


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


def _perf_row(v: Verdict) -> tuple[str, ...]:
    b = v.benchmark
    return (
        _code(b.name), _params(v), _text(format_value(v.base_value, b.unit)), _text(format_value(v.head_value, b.unit)),
        _ratio(v), _interval(v), f"{v.p_value:.2g}" if math.isfinite(v.p_value) else "n/a",
        f"±{v.threshold * 100:.1f}%" if math.isfinite(v.threshold) else "n/a",
    )


def _note_row(v: Verdict) -> tuple[str, ...]:
    """A series the statistics could not judge: what it was on base, and why."""
    b = v.benchmark
    return (_code(b.name), _params(v), _text(format_value(v.base_value, b.unit)), _text(v.reason))


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


def _unconfirmed(v: Verdict) -> bool:
    """Inconclusive, but the ratio moved past the series' threshold (asv's "~"): worth a look."""
    return (v.outcome == Outcome.INCONCLUSIVE and math.isfinite(v.ratio) and v.ratio > 0
            and abs(v.ratio - 1) > (v.threshold if math.isfinite(v.threshold) else 0))


def _headline(n: Mapping[str, int]) -> str:
    parts = [
        f"{n[key]} {label}" for key, label in (
            ("gates_failed", "correctness failure(s)"), ("failed", "benchmark(s) failed to run on head"),
            ("regressed", "regression(s)"), ("missing", "not measured on head"),
            ("unconfirmed", "unconfirmed change(s)"), ("unknown", "of unknown direction"),
            ("improved", "improvement(s)"),
            ("inconclusive", "inconclusive"), ("new", "new"), ("unchanged", "unchanged"),
        ) if n[key]
    ]
    detail = ", ".join(parts) if parts else "no benchmarks were compared"
    if n["gates_failed"] or n["failed"] or n["regressed"]:
        return f"**❌ Performance check failed:** {detail}."
    if n["missing"] or n["unconfirmed"] or n["unknown"]:
        return f"**🟡 No regression confirmed; look at the series below:** {detail}."
    if n["inconclusive"]:
        return f"**🟡 No regression found, some series need more samples:** {detail}."
    return f"**✅ No significant performance change:** {detail}."


def _safe_url(url: str) -> str:
    """A link target that cannot end the markdown link early or start another one."""
    return re.sub(r"[\s()\[\]<>`\"']", lambda m: f"%{ord(m.group()):02X}", url)


def render_comment(
    verdicts: Sequence[Verdict],
    gates: Sequence[Verdict],
    *,
    base_sha: str,
    head_sha: str,
    environment: Mapping[str, str],
    dashboard_url: str | None,
    max_chars: int = GITHUB_MAX_CHARS,
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

    gate_by_key = {v.benchmark.key: v for v in verdicts if v.benchmark.kind == Kind.CORRECTNESS}
    gate_by_key.update({v.benchmark.key: v for v in gates})
    all_gates = sorted(gate_by_key.values(), key=lambda v: v.benchmark.key)
    gates_failed = [v for v in all_gates if v.outcome != Outcome.UNCHANGED]
    gates_passed = [v for v in all_gates if v.outcome == Outcome.UNCHANGED]
    perf = [v for v in verdicts if v.benchmark.kind != Kind.CORRECTNESS]
    groups: dict[str, list[Verdict]] = {k: [] for k in (
        "failed", "regressed", "missing", "unconfirmed", "unknown", "improved", "inconclusive", "new", "unchanged")}
    for v in perf:
        if v.outcome == Outcome.INCONCLUSIVE:
            key = "missing" if v.reason.startswith(MISSING_ON_HEAD) else "unknown" if v.reason.startswith(
                UNKNOWN_DIRECTION) else "unconfirmed" if _unconfirmed(v) else "inconclusive"
        elif v.outcome == Outcome.UNCHANGED and v.reason == NEW_SERIES:
            key = "new"
        else:
            key = v.outcome.value
        groups[key].append(v)
    for rows in groups.values():
        rows.sort(key=_sort_key)
    n = {k: len(rows) for k, rows in groups.items()}
    n["gates_failed"] = len(gates_failed)
    counts = {o: sum(v.outcome == o for v in perf) + sum(v.outcome == o for v in all_gates) for o in Outcome}

    def new_row(v: Verdict) -> tuple[str, ...]:
        return (_code(v.benchmark.name), _params(v), _text(format_value(v.head_value, v.benchmark.unit)))

    sections: dict[str, tuple[Sequence[str], list[tuple[str, ...]]]] = {
        "gates_failed": (_GATE_HEADER, [_gate_row(v) for v in gates_failed]),
        "failed": (_NOTE_HEADER, [_note_row(v) for v in groups["failed"]]),
        "regressed": (_PERF_HEADER, [_perf_row(v) for v in groups["regressed"]]),
        "missing": (_NOTE_HEADER, [_note_row(v) for v in groups["missing"]]),
        "unconfirmed": (_PERF_HEADER, [_perf_row(v) for v in groups["unconfirmed"]]),
        "unknown": (_PERF_HEADER, [_perf_row(v) for v in groups["unknown"]]),
        "improved": (_PERF_HEADER, [_perf_row(v) for v in groups["improved"]]),
        "gates_passed": (_GATE_HEADER, [_gate_row(v) for v in gates_passed]),
        "inconclusive": (_PERF_HEADER, [_perf_row(v) for v in groups["inconclusive"]]),
        "new": (("Benchmark", "Params", "Head"), [new_row(v) for v in groups["new"]]),
        "unchanged": (_PERF_HEADER, [_perf_row(v) for v in groups["unchanged"]]),
        "environment": (("Key", "Value"), [(_text(k), _code(val)) for k, val in sorted(environment.items())]),
    }
    limits = {name: len(rows) for name, (_, rows) in sections.items()}
    visible = (
        ("gates_failed", "❌ Correctness gates failed"), ("failed", "❌ Failed to run on head"),
        ("regressed", "🔴 Regressions"), ("missing", "⚠️ Not measured on head"),
        ("unconfirmed", "🟡 Changes past the threshold, not confirmed (measure more samples)"),
        ("unknown", "❔ Direction unknown: neither better nor worse can be said (declare the benchmark's `direction`)"),
        ("improved", "🟢 Improvements"),
    )
    folded = (
        ("gates_passed", "Correctness gates passed"), ("inconclusive", "Inconclusive: need more samples"),
        ("new", "New series (no base measurement)"), ("unchanged", "Unchanged"),
    )

    def tbl(name: str) -> str:
        header, rows = sections[name]
        return _table(header, rows, limits[name])

    def build() -> str:
        out = [MARKER, "## ragged-vit benchmarks", "", _headline(n), ""]
        out.append(f"Base `{base_sha[:12]}` → head `{head_sha[:12]}`, measured in the same job. "
                   "Ratio = head / base of the medians; interval = bootstrap CI of the ratio; p = Mann-Whitney U, "
                   "corrected for the number of series; threshold adapts to each series' noise.")
        if base_sha == head_sha:
            out += ["", "⚠️ Base and head are the same commit: an A/A comparison, so every difference is noise."]
        out += ["", "| Outcome | Series |", "|---|---|"]
        out += [f"| {_ICON[o]} {o.value} | {counts[o]} |" for o in Outcome if counts[o]]
        if not all_gates:
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
    for name in ("unchanged", "new", "inconclusive", "gates_passed", "improved", "unknown", "unconfirmed", "missing",
                 "regressed", "environment", "failed", "gates_failed"):
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


def comment_environment(store: StoreReader, machine: str, head_results: Sequence[Result]) -> dict[str, str]:
    """What the PR comment's environment table shows: the machine's GPU stack, then the head run's clocks,
    temperature, Python and asv environment."""
    env = {"machine": machine}
    row = next((m for m in store.machines() if m.name == machine), None)
    if row is not None:
        env.update({k: getattr(row, k) for k in ("gpu", "driver", "cuda", "torch", "triton") if getattr(row, k)})
    if head_results:
        keep = ("sm_clock_mhz", "mem_clock_mhz", "temperature_c", "python", "env_name")
        env.update({k: v for k, v in head_results[0].environment if k in keep and v})
    return env
