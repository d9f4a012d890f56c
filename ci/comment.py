"""The pull-request comment: GitHub-flavoured markdown built from verdicts and correctness gates.

Layout (after asv-perch's and conbench's comments, shared/reference/ci-services.md §2):
a hidden sticky marker, a one-line verdict, an outcome count table, the correctness gates,
regressions, improvements, inconclusive series, unchanged series (collapsed), the environment
and a dashboard link. GitHub rejects comment bodies over 65,536 characters, so tables are cut
whole rows at a time, lowest priority first, with an "N more" line; markdown is never cut
mid-table.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from ci.records import Kind, Outcome, Verdict

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


def _cell(text: str) -> str:
    """Escape a table cell: pipes split cells, newlines end rows, `<` could open HTML."""
    return (
        str(text).replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")
        .replace("\r", " ").replace("\n", " ")
    )


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
    # asv's "~": a change past the threshold that the statistics could not confirm.
    tilde = "~" if v.outcome == Outcome.INCONCLUSIVE and abs(v.ratio - 1) > (v.threshold or 0) else ""
    return f"{tilde}{v.ratio:.3f}×"


def _interval(v: Verdict) -> str:
    if not (math.isfinite(v.ci_low) and math.isfinite(v.ci_high)):
        return "n/a"
    return f"[{v.ci_low:.3f}, {v.ci_high:.3f}]"


def _perf_row(v: Verdict) -> tuple[str, ...]:
    b = v.benchmark
    return (
        f"`{b.name}`", b.params_label or "—", format_value(v.base_value, b.unit), format_value(v.head_value, b.unit),
        _ratio(v), _interval(v), f"{v.p_value:.2g}" if math.isfinite(v.p_value) else "n/a",
        f"±{v.threshold * 100:.1f}%" if math.isfinite(v.threshold) else "n/a",
    )


def _gate_row(v: Verdict) -> tuple[str, ...]:
    b = v.benchmark
    return (
        _ICON[v.outcome], f"`{b.name}`", b.params_label or "—", f"{v.head_value:.6g}" if math.isfinite(
            v.head_value) else "n/a", f"{v.threshold:g}" if math.isfinite(v.threshold) else "n/a",
        "**FAILED**: " + v.reason if v.outcome == Outcome.FAILED else "pass",
    )


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], limit: int) -> str:
    """A whole markdown table of the first `limit` rows, then an "N more" line for the rest."""
    shown = rows[:limit]
    lines = []
    if shown:
        lines.append("| " + " | ".join(_cell(h) for h in header) + " |")
        lines.append("|" + "|".join("---" for _ in header) + "|")
        lines.extend("| " + " | ".join(_cell(c) for c in row) + " |" for row in shown)
    if len(rows) > len(shown):
        if shown:
            lines.append("")
        lines.append(f"_… and {len(rows) - len(shown)} more (see the dashboard or the job log)._")
    return "\n".join(lines)


def _sort_key(v: Verdict) -> tuple[float, str]:
    # Biggest change first within a section.
    size = abs(math.log(v.ratio)) if math.isfinite(v.ratio) and v.ratio > 0 else -1.0
    return (-size, v.benchmark.key)


def _headline(counts: Mapping[Outcome, int]) -> str:
    failed, regressed = counts[Outcome.FAILED], counts[Outcome.REGRESSED]
    parts = [
        f"{counts[o]} {label}" for o, label in (
            (Outcome.FAILED, "correctness failure(s)"), (Outcome.REGRESSED, "regression(s)"),
            (Outcome.IMPROVED, "improvement(s)"), (Outcome.INCONCLUSIVE, "inconclusive"),
            (Outcome.UNCHANGED, "unchanged"),
        ) if counts[o]
    ]
    detail = ", ".join(parts) if parts else "no benchmarks were compared"
    if failed or regressed:
        return f"**❌ Performance check failed:** {detail}."
    if counts[Outcome.INCONCLUSIVE]:
        return f"**🟡 No regression found, some series need more samples:** {detail}."
    return f"**✅ No significant performance change:** {detail}."


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
        gates: verdicts from `ci.gates.correctness_gates` (deduplicated against `verdicts` by key).
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
    all_gates = sorted(gate_by_key.values(), key=lambda v: (v.outcome != Outcome.FAILED, v.benchmark.key))
    perf = [v for v in verdicts if v.benchmark.kind != Kind.CORRECTNESS]
    by = {o: sorted((v for v in perf if v.outcome == o), key=_sort_key) for o in Outcome}
    counts = {o: len(by[o]) for o in Outcome}
    counts[Outcome.FAILED] += sum(v.outcome == Outcome.FAILED for v in all_gates)

    sections = {
        "gates": (_GATE_HEADER, [_gate_row(v) for v in all_gates]),
        "regressed": (_PERF_HEADER, [_perf_row(v) for v in by[Outcome.REGRESSED] + by[Outcome.FAILED]]),
        "improved": (_PERF_HEADER, [_perf_row(v) for v in by[Outcome.IMPROVED]]),
        "inconclusive": (_PERF_HEADER, [_perf_row(v) for v in by[Outcome.INCONCLUSIVE]]),
        "unchanged": (_PERF_HEADER, [_perf_row(v) for v in by[Outcome.UNCHANGED]]),
        "environment": (("Key", "Value"), [(k, f"`{val}`") for k, val in sorted(environment.items())]),
    }
    limits = {name: len(rows) for name, (_, rows) in sections.items()}

    def tbl(name: str) -> str:
        header, rows = sections[name]
        return _table(header, rows, limits[name])

    def build() -> str:
        out = [MARKER, "## ragged-vit benchmarks", "", _headline(counts), ""]
        out.append(f"Base `{_cell(base_sha[:12])}` → head `{_cell(head_sha[:12])}`, measured in the same job. "
                   "Ratio = head / base of the medians; interval = bootstrap CI of the ratio; p = Mann-Whitney U, "
                   "corrected for the number of series; threshold adapts to each series' noise.")
        out += ["", "| Outcome | Series |", "|---|---|"]
        out += [f"| {_ICON[o]} {o.value} | {counts[o]} |" for o in Outcome if counts[o]]
        out += ["", "### Correctness gates", ""]
        out.append(tbl("gates") if all_gates else "_No correctness results in this run._")
        for name, title in (("regressed", "Regressions"), ("improved", "Improvements")):
            if sections[name][1]:
                out += ["", f"### {_ICON[Outcome[name.upper()]]} {title} ({len(sections[name][1])})", "", tbl(name)]
        for name, title in (("inconclusive", "Inconclusive: need more samples"), ("unchanged", "Unchanged")):
            if sections[name][1]:
                out += ["", f"<details><summary>{title} ({len(sections[name][1])})</summary>", "", tbl(name), "",
                        "</details>"]
        out += ["", "### Environment", ""]
        out.append(tbl("environment") if environment else "_Not recorded._")
        if dashboard_url:
            out += ["", f"📈 [Dashboard]({dashboard_url})"]
        return "\n".join(out) + "\n"

    body = build()
    # Cut the least important tables first, whole rows at a time; never the headline or counts.
    for name in ("unchanged", "inconclusive", "environment", "improved", "regressed", "gates"):
        while len(body) > max_chars and limits[name] > 0:
            excess = len(body) - max_chars
            rows = sections[name][1][: limits[name]]
            avg = max(1, sum(len(" | ".join(r)) + 8 for r in rows) // len(rows))
            limits[name] = max(0, limits[name] - max(1, excess // avg))
            body = build()
        if len(body) <= max_chars:
            return body
    raise ValueError(f"max_chars={max_chars} is too small for the comment's headline ({len(body)} chars without rows)")
