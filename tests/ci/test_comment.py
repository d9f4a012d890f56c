"""The PR comment: marker, headline, tables, escaping, size limit with whole-row truncation."""

from __future__ import annotations

import html
import math
import re
from pathlib import Path

import pytest

from ci.outputs.comment import GITHUB_MAX_CHARS, MARKER, format_value, render_comment
from ci.records import WITHHELD_OTHER_JOB, Benchmark, Commit, Direction, Kind, Outcome, Verdict
from ci.verdicts import JobRelation, Jobs, VerdictSettings
from tests.conftest import requires

ROOT = Path(__file__).resolve().parents[2]

ENV = {"gpu": "NVIDIA H200", "driver": "570.86", "torch": "2.14.1", "triton": "3.8.0"}


def _v(name: str, outcome: Outcome, ratio: float = 1.0, **kw) -> Verdict:
    bench = kw.pop("bench", None) or Benchmark(name, (("B", "8"), ("N", "197")))
    return Verdict(benchmark=bench, outcome=outcome, base_value=1e-5, head_value=1e-5 * ratio, ratio=ratio,
                   ci_low=ratio * 0.98, ci_high=ratio * 1.02, p_value=1e-4, threshold=0.02,
                   base_sha="aaaa", head_sha="bbbb", reason=kw.pop("reason", "r"))


def _render(verdicts, gates=(), **kw) -> str:
    args = {"base_sha": "a" * 40, "head_sha": "b" * 40, "environment": ENV,
            "dashboard_url": "https://example.org/dash/index.html"}
    args.update(kw)
    return render_comment(list(verdicts), list(gates), **args)


def _tables_are_whole(body: str) -> None:
    """Every table has a header, a separator and rows with the header's column count."""
    lines = body.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].startswith("|"):
            cols = len(re.split(r"(?<!\\)\|", lines[i])) - 2
            assert re.fullmatch(r"\|(---\|)+", lines[i + 1]), lines[i + 1]
            j = i + 2
            while j < len(lines) and lines[j].startswith("|"):
                assert len(re.split(r"(?<!\\)\|", lines[j])) - 2 == cols, lines[j]
                j += 1
            i = j
        else:
            i += 1


def test_clean_run_headline_and_sections() -> None:
    body = _render([_v(f"s.B.time_{i}", Outcome.UNCHANGED) for i in range(3)])
    assert body.startswith(MARKER + "\n")
    assert "✅ No significant performance change" in body
    assert "<details><summary>Unchanged (3)</summary>" in body
    assert "No correctness results" not in body  # a suite without correctness benchmarks: nothing to miss
    expected = _render([_v("s.B.time_0", Outcome.UNCHANGED)], context=_ctx(correctness_expected=True))
    assert "_No correctness results in this run._" in expected
    assert "[Dashboard](https://example.org/dash/index.html)" in body
    assert "| gpu | `NVIDIA H200` |" in body
    assert "Regressions" not in body
    _tables_are_whole(body)


def test_regressions_improvements_and_gates() -> None:
    diff = Benchmark("bench_correct.Logits.track_max_abs_diff", unit="max abs diff", kind=Kind.CORRECTNESS)
    gate = Verdict(benchmark=diff, outcome=Outcome.FAILED, base_value=math.nan, head_value=0.006, ratio=1.5,
                   threshold=0.004, head_sha="b",
                   reason="max abs diff = 0.006 (fails)")
    verdicts = [_v("s.B.time_slow", Outcome.REGRESSED, 1.12), _v("s.B.time_fast", Outcome.IMPROVED, 0.8),
                _v("s.B.time_small", Outcome.REGRESSED, 1.05), _v("s.B.time_x", Outcome.INCONCLUSIVE, 1.3)]
    body = _render(verdicts, [gate])
    headline = body.splitlines()[3]
    assert headline.startswith("**❌ Performance check failed:**")
    assert "1 correctness failure(s)" in headline and "2 regression(s)" in headline
    assert "### 🔴 Regressions (2)" in body and "### 🟢 Improvements (1)" in body
    # Biggest regression first.
    assert body.index("time_slow") < body.index("time_small")
    assert "1.120×" in body and "[1.098, 1.142]" in body and "10 µs" in body and "11.2 µs" in body
    assert "~1.300×" in body  # past the threshold but unconfirmed, as asv marks it
    assert "**FAILED**: max abs diff = 0.006" in body
    assert "| ❌ failed | 1 |" in body
    _tables_are_whole(body)


def test_gates_passed_in_verdicts_are_not_duplicated() -> None:
    diff = Benchmark("bench_correct.Logits.track_top1", unit="top-1 agreement", direction=Direction.HIGHER,
                     kind=Kind.CORRECTNESS)
    gate = Verdict(benchmark=diff, outcome=Outcome.UNCHANGED, base_value=math.nan, head_value=1.0, ratio=1.0,
                   threshold=1.0, reason="passes")
    body = _render([gate, _v("s.B.time_a", Outcome.UNCHANGED)], [gate])
    assert body.count("track_top1") == 1
    assert "✅" in body


def test_inconclusive_headline() -> None:
    body = _render([_v("s.B.time_a", Outcome.INCONCLUSIVE, 1.01)])
    assert "🟡 No regression found; some series could not be judged" in body


def test_cells_are_escaped() -> None:
    """Parameters are code spans (GitHub renders them literally, `<script>` too); pipes are escaped
    for the table, newlines joined."""
    bench = Benchmark("s.B.time_a", (("shape", "a|b"), ("html", "<script>x</script>")))
    body = _render([_v("", Outcome.REGRESSED, 1.2, bench=bench)], environment={"note": "x|y\nz"})
    assert "| `shape=a\\|b, html=<script>x</script>` |" in body
    assert "`x\\|y z`" in body
    _tables_are_whole(body)


def test_controls_in_contributor_text_show_as_escapes() -> None:
    """A bidirectional override reorders what a reader sees, in a code span too (a benchmark can read as
    another); a terminal escape is noise. Both show as escapes, in code spans and plain text alike."""
    bench = Benchmark("s.B.time_\u202egnp", (("p", "a\x1b[31mb"),))
    body = _render([_v("", Outcome.REGRESSED, 1.2, bench=bench)], environment={"note": "x\u2066y"})
    assert "\u202e" not in body and "\x1b" not in body and "\u2066" not in body
    assert "s.B.time_\\u202egnp" in body and "p=a\\x1b[31mb" in body and "x\\u2066y" in body


def test_contributor_text_cannot_inject_markdown() -> None:
    """Names, parameters, units and machine values come from the PR's own benchmark code: a backtick
    must not close the code span, and plain text must not mention, link, embed or reference."""
    evil = "`time_tick`@octocat ![i](https://evil.example/n.png)"
    bench = Benchmark(f"s.B.{evil}", (("p", "'@octocat ![p](https://evil.example/px.png) [l](https://x) #123'"),),
                      unit="s ![u](https://evil.example/u.png) @octocat")
    missing = Verdict(benchmark=bench, outcome=Outcome.INCONCLUSIVE, base_value=1.0, head_value=math.nan,
                      ratio=math.nan,
                      reason="missing on head: removed, renamed or skipped")
    body = _render([_v("", Outcome.REGRESSED, 1.2, bench=bench), missing], environment={"m": "`x`@octocat"},
                   dashboard_url="https://x/a) ![t](https://evil.example/t.png")
    # Outside code spans nothing can form an image, a link or a mention.
    outside = re.sub(r"(`+)(?!`).*?(?<!`)\1(?!`)", "", body)
    assert "![" not in outside and "](" not in outside.replace("📈 [Dashboard](", "")
    assert "@octocat" not in outside and "#123" not in outside
    assert "``` `time_tick`@octocat ![i](https://evil.example/n.png) ```" not in body  # the fence is longer
    assert "``s.B.`time_tick`@octocat ![i](https://evil.example/n.png)``" in body
    assert "[Dashboard](https://x/a%29%20!%5Bt%5D%28https://evil.example/t.png)" in body
    _tables_are_whole(body)


URLS = ("images/s see https://evil.example/login www.evil.example HTTPS://EVIL.EXAMPLE/x WWW.evil.example "
        "ftp://evil.example (www.evil.example) *www.evil.example* mailto:a@evil.example xmpp:a@evil.example "
        "someone@evil.example GH-1 http:/\\/evil.example")


def test_contributor_text_is_never_autolinked() -> None:
    """GitHub autolinks bare URLs and `www.` in plain text (cmark-gfm's autolink extension): a unit
    such as "images/s see https://evil.example/login www.evil.example" rendered as live links. The
    body is rendered here by GitHub's own markdown library, with its autolink extension."""
    try:  # a test dependency (pyproject's [test]): missing, the test skips locally and fails in CI
        import cmarkgfm
        from cmarkgfm.cmark import Options
    except ImportError:
        requires(False, "cmarkgfm")

    bench = Benchmark(f"s.B.time_{URLS}", (("p", URLS),), unit=URLS)
    verdicts = [_v("", Outcome.REGRESSED, 1.2, bench=bench),
                Verdict(benchmark=bench, outcome=Outcome.INCONCLUSIVE, base_value=1.0, head_value=math.nan,
                        ratio=math.nan, reason=f"missing on head: {URLS}"),
                Verdict(benchmark=Benchmark("s.B.time_new", unit=URLS), outcome=Outcome.UNCHANGED, base_value=math.nan,
                        head_value=2.0, ratio=math.nan,
                        reason="new series: no base measurement to compare with")]
    # The header's contributor text too: commit subjects and the jobs' markers (the PR job writes them).
    ctx = _ctx(base_commit=Commit("a" * 40, subject=URLS), head_commit=Commit("b" * 40, subject=f"fix {URLS}"),
               jobs=Jobs(JobRelation.DIFFERENT, base=URLS, head=f"{URLS} 2"))
    body = _render(verdicts, environment={URLS: URLS}, dashboard_url="https://example.org/dash/index.html",
                   context=ctx)
    assert body.count("evil") > 60  # every place above holds it
    html = cmarkgfm.github_flavored_markdown_to_html(body, options=Options.CMARK_OPT_UNSAFE)
    links = re.findall(r"<a [^>]*>", html)
    assert links == ['<a href="https://example.org/dash/index.html">'], links  # the dashboard link only
    assert "evil.example" in html  # still shown, as text
    assert "<img" not in html


# Character references GitHub decodes in plain text before it finds mentions, issue references and
# links: named (with and without the semicolon; `&commat` without one is not a reference to cmark,
# but is to a browser reading raw HTML), decimal, hexadecimal, zero-padded, and the pieces of `www.`
# and `://` spelled as references.
REFS = ("&commat;octocat", "&commat octocat", "&#64;octocat", "&#x40;octocat", "&#X40;octocat", "&#0064;octocat",
        "&#64octocat", "team&commat;org", "www&period;evil&period;example", "&#119;ww.evil.example",
        "https&colon;//evil.example", "https&#58;&#47;&#x2F;evil.example", "&num;123", "&#35;123", "GH&#45;1",
        "&lt;img src=x&gt;", "&amp;commat;octocat", "a &NewLine;b")


def _html_text(html_out: str) -> str:
    """What a reader of the rendered comment sees as text: the tags' content with references decoded."""
    return html.unescape(re.sub(r"<[^>]*>", " ", html_out))


def test_character_references_in_contributor_text_neither_mention_nor_link() -> None:
    """`&commat;octocat` in a commit subject rendered as a bare @-mention, `www&period;example&period;com`
    as link text: GitHub decodes a character reference in plain text before it looks for mentions and
    links. Every piece of contributor text the comment shows holds every form of reference here; the
    body is rendered by GitHub's own markdown library, and what a reader sees still reads as written."""
    try:
        import cmarkgfm
        from cmarkgfm.cmark import Options
    except ImportError:
        requires(False, "cmarkgfm")

    refs = " ".join(REFS)
    bench = Benchmark(f"s.B.time_{refs}", (("p", refs),), unit=f"s {refs}")
    verdicts = [_v("", Outcome.REGRESSED, 1.2, bench=bench),
                Verdict(benchmark=bench, outcome=Outcome.INCONCLUSIVE, base_value=1.0, head_value=math.nan,
                        ratio=math.nan, reason=f"missing on head: {refs}"),
                Verdict(benchmark=Benchmark("s.B.time_new", unit=refs), outcome=Outcome.UNCHANGED, base_value=math.nan,
                        head_value=2.0, ratio=math.nan,
                        reason="new series: no base measurement to compare with")]
    gate = Verdict(benchmark=Benchmark("s.C.track_diff", unit="max abs diff", kind=Kind.CORRECTNESS),
                   outcome=Outcome.FAILED,
                   base_value=math.nan, head_value=0.5, ratio=math.nan, threshold=0.004,
                   reason=f"logits differ: {refs}")
    ctx = _ctx(base_commit=Commit("a" * 40, subject=refs[:60]), head_commit=Commit("b" * 40, subject=REFS[0]),
               jobs=Jobs(JobRelation.DIFFERENT, base=refs, head=f"{refs} 2"))
    body = _render(verdicts, [gate], environment={refs: refs, "gpu": refs},
                   dashboard_url="https://example.org/dash/index.html", context=ctx)
    html_out = cmarkgfm.github_flavored_markdown_to_html(body, options=Options.CMARK_OPT_UNSAFE)
    assert re.findall(r"<a [^>]*>", html_out) == ['<a href="https://example.org/dash/index.html">']
    assert "<img" not in html_out
    # GitHub finds mentions, references and links in text outside code (in code, `&#64;` is those characters).
    prose = _html_text(re.sub(r"<code>.*?</code>", " ", html_out, flags=re.DOTALL))
    assert not re.search(r"@(?=\w)", prose), re.findall(r".{20}@\w+", prose)  # no mention
    assert not re.search(r"#\d|GH-\d", prose), re.findall(r".{20}#\d+", prose)  # no issue reference
    assert not re.search(r"(?i)www\.|://", prose), re.findall(r".{20}(?:www\.|://).{10}", prose)  # no link text
    shown = _html_text(html_out).replace("\u200b", "")
    for ref in REFS:  # the contributor's characters, as written, in every place above
        assert shown.count(ref) >= 9, (ref, shown.count(ref))
    assert f"“{REFS[0]}”" in shown  # the head commit's subject, whole


def test_failed_missing_new_and_unconfirmed_series_are_shown_as_such() -> None:
    def v(name, outcome, ratio, reason, base=1e-5, head=1e-5, threshold=0.02):
        return Verdict(benchmark=Benchmark(name), outcome=outcome, base_value=base, head_value=head, ratio=ratio,
                       threshold=threshold, reason=reason)

    nan = math.nan
    verdicts = [
        v("s.B.time_crash", Outcome.FAILED, nan, "failed to run on head: asv recorded an error (see the job log)",
          head=nan),
        v("s.B.time_gone", Outcome.INCONCLUSIVE, nan, "missing on head: removed, renamed or skipped", head=nan),
        v("s.B.time_new", Outcome.UNCHANGED, nan, "new series: no base measurement to compare with", base=nan),
        v("s.B.time_2x", Outcome.INCONCLUSIVE, 2.0, "too few samples for a test (1 base, 1 head; need 5)"),
        v("s.B.time_same", Outcome.UNCHANGED, 1.0, ""),
    ]
    body = _render(verdicts)
    headline = body.splitlines()[3]
    assert headline.startswith("**❌ Performance check failed:**")
    assert "1 benchmark(s) failed to run on head" in headline and "correctness" not in headline
    assert "1 not measured on head" in headline and "1 unconfirmed slowdown(s)" in headline and "1 new" in headline
    assert "### ❌ Failed to run on head (1)" in body and "failed to run on head: asv recorded an error" in body
    assert "### ⚠️ Not measured on head (1)" in body
    # the 2x change is visible, not folded away with the series that only need more samples
    section = body[body.index("### 🟡 Slowdowns past the threshold"):]
    assert "time_2x" in section.split("###")[1] and "~2.000×" in section
    assert "<details><summary>New series (no base measurement) (1)</summary>" in body
    assert body.index("time_new") > body.index("<details><summary>New series")
    # The outcome table counts the new series apart from the unchanged one, as the headline does.
    assert "| ⚪ unchanged | 1 |" in body and "| ⚪ new (no base measurement) | 1 |" in body
    _tables_are_whole(body)


def test_a_skipped_or_crashed_gate_is_not_a_pass() -> None:
    diff = Benchmark("bench_correct.Logits.track_max_abs_diff", unit="max abs diff", kind=Kind.CORRECTNESS)
    gone = Verdict(benchmark=diff, outcome=Outcome.FAILED, base_value=0.001, head_value=math.nan, ratio=math.nan,
                   reason="correctness check missing on head: removed, renamed or skipped: a check that did not "
                          "run is not a pass")
    body = _render([gone])
    assert "**FAILED**: correctness check missing on head" in body and "| pass |" not in body
    assert "1 correctness failure(s)" in body.splitlines()[3]


def test_a_same_commit_comparison_says_so() -> None:
    body = _render([_v("s.B.time_a", Outcome.UNCHANGED)], base_sha="c" * 40, head_sha="c" * 40)
    assert "same commit: an A/A comparison" in body


@pytest.mark.parametrize("max_chars", [GITHUB_MAX_CHARS, 30_000, 20_000])
def test_regressions_outrank_passing_gates_and_fill_the_space(max_chars: int) -> None:
    """Many series, many passing gates, escaped text: the regressions get every row that fits."""
    passing = [Verdict(benchmark=Benchmark(f"bench_c.Logits.track_max_abs_diff_{i:03d}", (("m", "a<b|c"),),
                                 unit="max abs diff", kind=Kind.CORRECTNESS),
                       outcome=Outcome.UNCHANGED, base_value=math.nan, head_value=0.001, ratio=0.25, threshold=0.004,
                       reason="passes")
               for i in range(300)]
    verdicts = [_v(f"bench_module.Reg.time_{i:04d}", Outcome.REGRESSED, 1.1 + i / 1e4,
                   bench=Benchmark(f"bench_module.Reg.time_{i:04d}", (("shape", "<|>" * 5),)))
                for i in range(1000)]
    verdicts += [_v(f"bench_module.Same.time_{i:04d}", Outcome.UNCHANGED) for i in range(2000)]
    body = _render(verdicts + passing, max_chars=max_chars)
    assert len(body) <= max_chars
    n_reg = len(re.findall(r"bench_module\.Reg\.time_", body))
    assert n_reg > 0 and "max_abs_diff_000" not in body  # passing gates went before regressions
    one_more_row = len(body.splitlines()[body.splitlines().index("### 🔴 Regressions (1000)") + 4]) + 1
    assert len(body) + one_more_row > max_chars  # no space left unused
    assert "| gpu | `NVIDIA H200` |" in body  # the environment stays
    _tables_are_whole(body)


@pytest.mark.parametrize("max_chars", [GITHUB_MAX_CHARS, 20_000, 6_000, 3_000])
@pytest.mark.slow
def test_size_limit_truncates_whole_rows(max_chars: int) -> None:
    verdicts = [_v(f"bench_module.SomeLongClassName.time_case_{i:05d}", o, 1.1)
                for i in range(3000) for o in (Outcome.UNCHANGED,)]
    verdicts += [_v(f"bench_module.Reg.time_{i:04d}", Outcome.REGRESSED, 1.1 + i / 1e4) for i in range(400)]
    body = _render(verdicts, max_chars=max_chars)
    assert len(body) <= max_chars
    assert body.startswith(MARKER)
    assert re.search(r"_… and \d+ more", body)
    _tables_are_whole(body)
    # The headline counts everything, even rows that were cut.
    assert "400 regression(s)" in body and "3000 unchanged" in body
    # Regressions are kept before unchanged rows are.
    n_reg = len(re.findall(r"bench_module\.Reg\.time_", body))
    n_unch = len(re.findall(r"SomeLongClassName", body))
    assert n_reg >= 1
    if n_unch:
        assert n_reg == 400


def test_fits_without_truncation_when_small() -> None:
    body = _render([_v("s.B.time_a", Outcome.REGRESSED, 1.2)])
    assert "more (see the dashboard" not in body


def test_format_value_units() -> None:
    assert format_value(1.23e-5, "seconds") == "12.3 µs"
    assert format_value(0.5, "seconds") == "500 ms"
    assert format_value(2.5, "seconds") == "2.5 s"
    assert format_value(3e-10, "seconds") == "0.3 ns"
    assert format_value(1.5 * 2**30, "bytes") == "1.5 GiB"
    assert format_value(1870.4, "images/s") == "1,870 images/s"
    assert format_value(0.9991, "top-1 agreement") == "0.9991 top-1 agreement"
    assert format_value(math.nan, "seconds") == "n/a"


def test_bad_inputs() -> None:
    with pytest.raises(TypeError, match="verdicts must be a sequence"):
        render_comment("x", [], base_sha="a", head_sha="b", environment={}, dashboard_url=None)  # type: ignore
    with pytest.raises(TypeError, match="only Verdict"):
        _render([{"outcome": "regressed"}])
    with pytest.raises(TypeError, match="Mapping"):
        _render([], environment={"gpu": 1})
    with pytest.raises(ValueError, match="non-empty"):
        _render([], base_sha="")
    with pytest.raises(ValueError, match="dashboard_url"):
        _render([], dashboard_url="javascript:alert(1)")
    # The comment is public: a link's password was published verbatim (2026-12-07); refused, never shown.
    with pytest.raises(ValueError, match="must not hold a credential") as refused:
        _render([], dashboard_url="https://u:s3cretPASSW0RD@dash.example.com/")
    assert "s3cretPASSW0RD" not in str(refused.value)
    with pytest.raises(ValueError, match="job URL must not hold a credential"):
        _render([], context=_ctx(job_url="https://ci.example.com/job?token=abcdef123456"))
    with pytest.raises(ValueError, match="too small"):
        _render([_v("s.B.time_a", Outcome.REGRESSED, 1.2)], max_chars=200)


def _ctx(**kw):
    from ci.outputs.comment import CommentContext

    return CommentContext(**kw)


def test_an_unconfirmed_speed_up_never_raises_the_alarm() -> None:
    """A 0.6x ratio that the statistics could not confirm is listed, folded, and the headline stays green;
    the same ratio the other way (a slowdown) is an alarm."""
    faster = _v("s.B.time_fast", Outcome.INCONCLUSIVE, 0.6, reason="-40.0% beyond the threshold but not significant")
    body = _render([faster, _v("s.B.time_same", Outcome.UNCHANGED)])
    assert "**✅ No significant performance change:**" in body.splitlines()[3], body.splitlines()[3]
    assert "1 unconfirmed speed-up(s)" in body.splitlines()[3]
    assert "<details><summary>Faster, not confirmed (no action needed) (1)</summary>" in body
    slower = _v("s.B.time_slow", Outcome.INCONCLUSIVE, 1.6, reason="+60.0% beyond the threshold but not significant")
    assert body_headline(_render([slower])).startswith("**🟡 No regression confirmed")
    # A median a little faster whose interval still reaches a regression is not a speed-up (make demo, 2026-12-01).
    wide = Verdict(benchmark=Benchmark("s.B.time_wide"), outcome=Outcome.INCONCLUSIVE, base_value=1.3e-3,
                   head_value=1.29e-3, ratio=0.987, ci_low=0.318, ci_high=2.989, p_value=0.97, threshold=1.0,
                   reason="-1.3% within the threshold but the interval reaches a regression")
    assert body_headline(_render([wide])).startswith("**🟡 No regression found; some series could not be judged")
    tput = Benchmark("s.B.track_images", unit="images/s", direction=Direction.HIGHER, kind=Kind.THROUGHPUT)
    more_images = _v("", Outcome.INCONCLUSIVE, 1.6, bench=tput)  # higher is better: a speed-up
    assert body_headline(_render([more_images])).startswith("**✅")


def body_headline(body: str) -> str:
    return body.splitlines()[3]


def test_commits_are_links_with_inert_subjects_and_the_job_log_is_linked() -> None:
    from ci.records import Commit

    base, head = "a" * 40, "b" * 40
    ctx = _ctx(base_commit=Commit(base, subject="Tune the kernel"),
               head_commit=Commit(head, subject="Fix @octocat's [link](https://evil.example) " + "x" * 100),
               commit_url="https://github.com/o/r/commit/", job_url="https://github.com/o/r/actions/runs/42/attempts/2")
    body = _render([_v("s.B.time_a", Outcome.UNCHANGED)], context=ctx)
    line = next(ln for ln in body.splitlines() if ln.startswith("Base "))
    assert line.startswith(f"Base [`{base[:12]}`](https://github.com/o/r/commit/{base}) “Tune the kernel” → head "
                           f"[`{head[:12]}`](https://github.com/o/r/commit/{head}) “Fix @\u200bocto")
    assert line.endswith("…”.") and "](https://evil.example)" not in line, "a subject is inert text, cut to one line"
    assert "[Job log](https://github.com/o/r/actions/runs/42/attempts/2)" in body
    with pytest.raises(ValueError, match="job_url"):
        _ctx(job_url="javascript:alert(1)")


def test_the_same_job_is_claimed_only_when_both_sides_say_so() -> None:
    from ci.verdicts import JobRelation, Jobs

    v = [_v("s.B.time_a", Outcome.UNCHANGED)]
    same = _render(v, context=_ctx(jobs=Jobs(JobRelation.SAME, "gha-1.1-pr/1", "gha-1.1-pr/1")))
    assert "**In-job rule.** Measured in one job (`gha-1.1-pr/1`)" in same and "Cross-job" not in same
    apart = _render(v, context=_ctx(jobs=Jobs(JobRelation.DIFFERENT, "gha-1.1-pr/1", "gha-2.1-pr/1"), drift_known=3))
    assert "**⚠️ Base and head were measured in different jobs** (`gha-1.1-pr/1` and `gha-2.1-pr/1`)" in apart
    assert "3 series' thresholds include their between-job drift" in apart and "Measured in one job" not in apart
    assert "**Cross-job rule.**" in apart and "In-job rule" not in apart
    for body in (_render(v), _render(v, context=_ctx(jobs=Jobs(JobRelation.UNKNOWN)))):
        assert "**Cross-job rule.** **⚠️ Nothing records that base and head were measured in one job**" in body
        assert "same job" not in body and "Measured in one job" not in body and "In-job rule" not in body


def test_a_cross_job_threshold_too_wide_to_judge_is_said_with_its_size() -> None:
    """Across jobs, a young history's drift can allow ±69%: "unchanged" there only rules out a change
    past it, and the job line says how many series are that wide and how far, with what to do."""
    from dataclasses import replace as with_

    wide = with_(_v("s.B.time_wide", Outcome.UNCHANGED, 1.1), threshold=0.689)
    narrow = with_(_v("s.B.time_narrow", Outcome.UNCHANGED, 1.01), threshold=0.05)
    apart = _ctx(jobs=Jobs(JobRelation.DIFFERENT, "gha-1.1-pr/1", "gha-2.1-pr/1"), drift_known=2)
    body = _render([wide, narrow], context=apart)
    assert "1 series' thresholds are wider than ±25% (up to +68.9% / -40.8%)" in body
    assert "`python -m ci continuous`" in body
    assert "wider than" not in _render([narrow], context=apart)
    unknown = with_(wide, benchmark=Benchmark("s.B.track_wide", unit="widgets", direction=Direction.UNKNOWN))
    assert not unknown.benchmark.judged
    assert "1 series' thresholds are wider" in _render([unknown, narrow], context=apart)
    together = _ctx(jobs=Jobs(JobRelation.SAME, "gha-1.1-pr/1", "gha-1.1-pr/1"))
    assert "wider than" not in _render([wide, narrow], context=together)  # in-job: the rule is not the drift's
    # The terminal's line (`python -m ci compare`) says it too, given the settings' cap.
    from ci.verdicts import Comparison, measurement_line

    cross = Comparison([], [], Jobs(JobRelation.DIFFERENT, "gha-1.1-pr/1", "gha-2.1-pr/1"), [wide, narrow], 2)
    line = measurement_line(cross, 0.25)
    assert line.startswith("warning: cross-job rule") and "1 series' thresholds are wider than ±25%" in line
    assert "(up to +68.9% / -40.8%)" in line and "wider" not in measurement_line(cross)


def test_each_side_shows_median_spread_and_sample_count_and_the_interval_level_is_stated() -> None:
    from ci.verdicts import Spread

    v = _v("s.B.time_slow", Outcome.REGRESSED, 1.12)
    sides = {v.benchmark.key: (Spread(1.0e-5, 0.99e-5, 1.01e-5, 10), Spread(1.12e-5, 1.1e-5, 1.14e-5, 12))}
    body = _render([v], context=_ctx(spreads=sides))
    assert "| 10 µs ±1.0% n=10 | 11.2 µs ±1.8% n=12 | 1.120× |" in body
    assert "interval = 90% bootstrap confidence interval of the ratio" in body
    assert "Benjamini-Hochberg-corrected over the 1 series tested" in body
    body = _render([v], context=_ctx(settings=VerdictSettings(confidence=0.95, correction="none")))
    assert "interval = 95% bootstrap" in body and ", uncorrected" in body


def _ours():
    """The verdicts' settings of this project's asv.conf.json (its `.*CPU\\.` floor of 400%)."""
    from ci.project import project_settings

    return project_settings(config=ROOT / "asv.conf.json").verdicts


def test_a_cpu_only_comment_says_first_and_loudly_that_it_proves_nothing_about_kernel_speed() -> None:
    cpu, gpu = _v("bench_pack.PackCPU.time_host", Outcome.UNCHANGED), _v("s.B.time_a", Outcome.UNCHANGED)
    body = _render([cpu, gpu], context=_ctx(cpu_only=True, settings=_ours()))
    lines = body.splitlines()
    assert lines[5:7] == ["> [!WARNING]", lines[6]] and lines[6].startswith(
        "> **CPU only: these timings prove nothing about kernel speed.**")
    assert "its 1 series of the suite's CPU subset (`regressions_thresholds`: `.*CPU\\.` ±400%)" in lines[6]
    assert "past ±400%; the other series need at least ±2.5%" in lines[6]
    # Only where the job ran the CPU subset without a GPU: not on a GPU, not for series no CPU floor sets.
    assert "CPU only" not in _render([cpu, gpu], context=_ctx(settings=_ours()))
    assert "CPU only" not in _render([gpu], context=_ctx(cpu_only=True, settings=_ours()))
    assert "CPU only" not in _render([cpu, gpu], context=_ctx(cpu_only=True))  # the built-in settings: no CPU floor


def test_the_cpu_banner_is_worded_from_the_settings_numbers() -> None:
    settings = VerdictSettings.from_thresholds({".*": 0.06, "cpu_small": 0.5, r".*\.SlowCPU": 0.8, "other": 3.0})
    verdicts = [_v("cpu_small.T.time_a", Outcome.UNCHANGED), _v("mod.SlowCPU.time_b", Outcome.UNCHANGED),
                _v("mod.SlowCPU.time_c", Outcome.UNCHANGED)]
    line = _render(verdicts, context=_ctx(cpu_only=True, settings=settings)).splitlines()[6]
    assert "its 3 series of the suite's CPU subset (`regressions_thresholds`: `.*\\.SlowCPU` ±80%, `cpu_small` ±50%)" \
        in line, line
    assert "called changed only past ±50% to ±80%. Judge" in line  # every compared series is a CPU one


def test_github_urls_come_from_the_actions_environment() -> None:
    from ci.outputs.comment import github_urls

    env = {"GITHUB_SERVER_URL": "https://github.com", "GITHUB_REPOSITORY": "o/r", "GITHUB_RUN_ID": "123",
           "GITHUB_RUN_ATTEMPT": "2"}
    assert github_urls(env) == ("https://github.com/o/r/commit/", "https://github.com/o/r/actions/runs/123/attempts/2")
    assert github_urls({"GITHUB_REPOSITORY": "o/r"}) == ("https://github.com/o/r/commit/", None)
    assert github_urls({}) == (None, None)
    assert github_urls({**env, "GITHUB_REPOSITORY": "o/r) ![x](y"}) == (None, None)
    assert github_urls({**env, "GITHUB_RUN_ID": "1; rm"})[1] is None


def test_the_fuller_comment_still_fits_githubs_limit() -> None:
    from ci.records import Commit
    from ci.verdicts import JobRelation, Jobs, Spread

    verdicts = [_v(f"bench_module.RegCPU.time_{i:04d}", Outcome.REGRESSED, 1.1 + i / 1e4) for i in range(800)]
    verdicts += [_v(f"bench_module.Fast.time_{i:04d}", Outcome.INCONCLUSIVE, 0.5) for i in range(800)]
    verdicts += [_v(f"bench_module.Held.time_{i:04d}", Outcome.INCONCLUSIVE, 1.0, reason=WITHHELD_OTHER_JOB)
                 for i in range(800)]
    sides = {v.benchmark.key: (Spread(1e-5, 0.9e-5, 1.1e-5, 20), Spread(1.1e-5, 1e-5, 1.2e-5, 20)) for v in verdicts}
    ctx = _ctx(base_commit=Commit("a" * 40, subject="s" * 200), head_commit=Commit("b" * 40, subject="t"),
               commit_url="https://github.com/o/r/commit/", job_url="https://github.com/o/r/actions/runs/1",
               jobs=Jobs(JobRelation.DIFFERENT, "x/1", "y/1"), spreads=sides, cpu_only=True, settings=_ours())
    body = _render(verdicts, context=ctx)
    assert len(body) <= GITHUB_MAX_CHARS
    assert "800 regression(s)" in body and "800 withheld" in body and "800 unconfirmed speed-up(s)" in body
    assert "CPU only" in body and "[Job log]" in body
    _tables_are_whole(body)


def test_a_comment_whose_tables_fill_the_limit_still_takes_a_structure_section() -> None:
    """2,000 series cut the tables to GitHub's limit; the pending Structure section the GPU job adds
    (`--keep-structure`) then had no room: exit 2 and no comment (2026-12-07). `section_room` leaves it."""
    from ci.outputs.structure import SECTION_ROOM, keep_section, section_of

    verdicts = [_v(f"bench_module.Same.time_{i:04d}", Outcome.UNCHANGED, 1.0 + i / 1e5) for i in range(2000)]
    verdicts += [_v(f"bench_module.Reg.time_{i:04d}", Outcome.REGRESSED, 1.2) for i in range(300)]
    full = _render(verdicts)
    assert len(full) > GITHUB_MAX_CHARS - SECTION_ROOM, "the tables fill the limit"
    body = _render(verdicts, section_room=SECTION_ROOM)
    assert len(body) <= GITHUB_MAX_CHARS - SECTION_ROOM and "300 regression(s)" in body
    head = "b" * 40
    kept = keep_section("", body, head, GITHUB_MAX_CHARS)
    assert len(kept) <= GITHUB_MAX_CHARS and section_of(kept) is not None


def test_a_slower_tail_that_is_not_confirmed_is_listed_as_a_slowdown() -> None:
    """Across jobs a slower tail (the upper quartile past the threshold) is INCONCLUSIVE with the median
    within it: the comment lists it with the slowdowns, not folded with the series that need samples."""
    tail = _v("s.B.time_tail", Outcome.INCONCLUSIVE, 1.007,
              reason="unconfirmed slowdown: +0.7% median, but the upper quartile +90.2% [+88.0%, +91.0%] beyond the "
                     "threshold, across jobs, where the history's allowance is of medians")
    body = _render([tail, _v("s.B.time_same", Outcome.UNCHANGED)])
    assert "1 unconfirmed slowdown(s)" in body.splitlines()[3], body.splitlines()[3]
    section = body[body.index("### 🟡 Slowdowns past the threshold"):]
    assert "time_tail" in section.split("###")[1]


def test_series_that_moved_together_across_jobs_name_the_runner_first() -> None:
    """A runner of another speed moves every series of its job alike: 9 of 10 series 14% slower across
    jobs reads as such, with the command that measures both in one job; the verdicts themselves stand.
    In one job, with series moving both ways, with few series or small moves, nothing is said."""
    from ci.outputs.comment import moved_together
    from ci.verdicts import JobRelation, Jobs

    slow = [_v(f"s.B.time_{i}", Outcome.REGRESSED, 1.14) for i in range(9)]
    slow.append(_v("s.B.time_z", Outcome.UNCHANGED, 0.99))
    assert moved_together(slow) == (9, 10, pytest.approx(0.14))
    body = _render(slow)
    assert "**⚠️ 9 of 10 series moved the same way between the two jobs** (median 14.0% slower)" in body
    assert f"`python -m ci continuous {'a' * 12} {'b' * 12}`" in body
    assert " regressed | 9 |" in body  # the verdicts stand
    same = _render(slow, context=_ctx(jobs=Jobs(JobRelation.SAME, "gha-1.1-pr/1", "gha-1.1-pr/1")))
    assert "moved the same way" not in same
    faster = [_v(f"s.B.time_{i}", Outcome.IMPROVED, 0.9) for i in range(8)]
    assert moved_together(faster) == (8, 8, pytest.approx(-0.1)) and "10.0% faster" in _render(faster)
    both = [_v(f"s.B.time_{i}", Outcome.INCONCLUSIVE, 1.14 if i % 2 else 0.88) for i in range(10)]
    few = slow[:7]
    small = [_v(f"s.B.time_{i}", Outcome.UNCHANGED, 1.02) for i in range(10)]
    unknown = [_v(f"s.B.time_{i}", Outcome.INCONCLUSIVE, 1.14,
                  bench=Benchmark(f"s.B.other_{i}", direction=Direction.UNKNOWN)) for i in range(10)]
    # A change of the code moves the series that run it: four barely moved beside +40-57% (stingray's).
    code = [_v(f"s.B.time_{i}", Outcome.REGRESSED, 1.4 + 0.02 * i) for i in range(8)]
    code += [_v(f"s.B.time_q{i}", Outcome.UNCHANGED, 1.003) for i in range(4)]
    for quiet in (both, few, small, unknown, code):
        assert moved_together(quiet) is None and "moved the same way" not in _render(quiet)


def test_a_subject_cut_through_a_urls_password_shows_none_of_it() -> None:
    """The comment cuts a commit subject at 72 characters: cut before redaction, a cut through the "@" of
    `https://user:password@host` left the password's start on show, no longer shaped like one
    (2026-12-07). Redacted first, nothing of it shows."""
    from ci.records import Commit

    subject = "Point the benchmarks' data sets at the mirror https://ci-bot:hunter2-Secret-Value@data.example.org/s"
    assert subject.index("hunter2") < 71 < subject.index("@")  # the cut falls inside the password
    ctx = _ctx(base_commit=Commit("a" * 40, subject="Tune the kernel"), head_commit=Commit("b" * 40, subject=subject))
    body = _render([Verdict(benchmark=Benchmark("s.B.time_x"), outcome=Outcome.UNCHANGED, base_value=1.0,
                            head_value=1.0, ratio=1.0)], context=ctx)
    assert "hunter2" not in body and "ci-bot:\\*\\*\\*@data.e" in body.replace("\u200b", "")
