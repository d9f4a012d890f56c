"""Exact series (`Kind.EXACT`): declared in benchmarks.json, stored, judged without statistics (changed or
unchanged, the gates), told first in the PR comment's Structure section, and placed at the commit where
they moved on the dashboard. Through the CLI on asv result files as asv writes them."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from ci.cli import main
from ci.records import Benchmark, Direction, Kind, Outcome, Result, declared_semantics
from ci.store import Store
from ci.verdicts import compare, detect_all, exact_steps, exact_verdicts, find_suspects
from tests.ci.conftest import sha_for
from tests.conftest import requires

MODELS, FORWARDS, MODES, BATCHES = ["'DeiT-S'"], ["'dense'", "'ATS'"], ["'graph'"], ["'B1'"]
EXACT_BENCHMARKS = [
    {"name": "bench_structure.Launches.track_launches", "type": "track", "unit": "launches", "direction": "lower",
     "exact": True, "params": [MODELS, FORWARDS, MODES, BATCHES], "param_names": ["model", "forward", "mode", "batch"],
     "version": "1"},
    {"name": "bench_structure.KernelResources.track_spilled_bytes", "type": "track", "unit": "spilled bytes",
     "direction": "lower", "exact": True, "params": [["'ragged_linear gelu=False norm #0'"], ["'sm_89'"]],
     "param_names": ["kernel", "arch"], "version": "1"},
    {"name": "bench_structure.KernelResources.track_registers", "type": "track", "unit": "registers",
     "direction": "lower", "exact": True, "params": [["'ragged_linear gelu=False norm #0'"], ["'sm_89'"]],
     "param_names": ["kernel", "arch"], "version": "1"},
    {"name": "bench_structure.KeptTokens.track_kept_tokens", "type": "track", "unit": "tokens", "direction": "lower",
     "exact": True, "params": [MODELS, ["'ATS'"], ["'1'"]], "param_names": ["model", "pruner", "stage"],
     "version": "1"},
    {"name": "bench_structure.Flops.track_decisions_version", "type": "track", "unit": "version",
     "direction": "higher", "exact": True, "params": [MODELS, ["'ATS'"]], "param_names": ["model", "pruner"],
     "version": "1"},
    # A timing series beside them: the statistics still decide it.
    {"name": "bench_pack.PackTokens.time_gpu", "type": "time", "unit": "seconds", "params": [["'b8'"]],
     "param_names": ["preset"], "version": "1"},
]
# (commit index -> value) per benchmark name and point: launches (dense, ATS), spills, registers, tokens, version.
BASE = {"track_launches": [139, 164], "track_spilled_bytes": [0], "track_registers": [112], "track_kept_tokens": [462],
        "track_decisions_version": [1]}


def _writer(head: dict[str, list[float]]):
    def samples(name: str, j: int, c: int) -> list[float]:
        if "time_gpu" in name:
            return [1e-5 * (1 + 0.001 * k) for k in range(10)]
        method = name.rsplit(".", 1)[-1]
        value = (head if c == 1 else BASE)[method][j]
        return [float(value)]  # one value: exact

    return samples


def _ingested(tmp_path: Path, asv_dir, head: dict[str, list[float]]) -> str:
    root = asv_dir([sha_for(0), sha_for(1)], benchmarks=EXACT_BENCHMARKS, samples=_writer(head), job="gha-1.1-pr/1")
    db = str(tmp_path / "h.sqlite")
    assert main(["ingest", "--db", db, str(root)]) == 0
    return db


def _comment(db: str, tmp_path: Path) -> tuple[int, str]:
    out = tmp_path / "comment.md"
    code = main(["comment", "--db", db, "--base", sha_for(0), "--head", sha_for(1), "--out", str(out)])
    return code, out.read_text()


def _html(body: str) -> str:
    try:  # a test dependency (pyproject's [test]): missing, the test skips locally and fails in CI
        import cmarkgfm
        from cmarkgfm.cmark import Options
    except ImportError:
        requires(False, "cmarkgfm")
    return cmarkgfm.github_flavored_markdown_to_html(body, options=Options.CMARK_OPT_UNSAFE)


def test_the_declaration_reaches_the_store_as_an_exact_kind(tmp_path, asv_dir):
    assert declared_semantics("track", "launches", "lower", True) == (Direction.LOWER, Kind.EXACT)
    assert declared_semantics("track", "bytes", None, None) == (Direction.LOWER, Kind.MEMORY)
    assert declared_semantics("time", "seconds", None, True) == (Direction.LOWER, Kind.LATENCY)  # timing is never exact
    db = _ingested(tmp_path, asv_dir, BASE)
    with Store(db) as store:
        kinds = {b.name.rsplit(".", 1)[-1]: b.kind for b in store.benchmarks()}
    assert kinds["track_launches"] == Kind.EXACT and kinds["track_spilled_bytes"] == Kind.EXACT
    assert kinds["time_gpu"] == Kind.LATENCY


def test_a_change_of_one_is_a_change_and_the_comment_opens_with_it(tmp_path, asv_dir):
    """164 -> 167 launches: no threshold, no test; the comment's first section says it as the issue asks,
    the check passes (a change is not a regression), and a forward still over dense says by how much."""
    db = _ingested(tmp_path, asv_dir, {**BASE, "track_launches": [139, 163], "track_registers": [113]})
    assert main(["compare", "--db", db, "--base", sha_for(0), "--head", sha_for(1), "--no-save"]) == 0
    code, body = _comment(db, tmp_path)
    assert code == 0
    structure = body.index("### Structure")
    assert structure < body.index("Base [") if "Base [" in body else True
    assert structure < body.index("| Outcome")  # it opens the comment, before the timings' table
    html = _html(body)
    text = re.sub(r"<[^>]+>", "", html)
    assert "DeiT-S ATS graph B1: 164 -&gt; 163 launches (24 more than dense, 25 on base)" in text
    assert "ragged_linear gelu=False norm #0 sm_89: 112 -&gt; 113 registers" in text
    assert "2 of 6 exact series changed" in text
    assert "dense graph B1" not in text  # unchanged series are not listed
    assert "✅" in body.split("\n")[3] and "2 structural change(s)" in body


@pytest.mark.parametrize("case", ["spill", "launches-over-dense", "tokens-unclaimed"])
def test_each_gate_fails_the_check(tmp_path, asv_dir, case):
    head = {"spill": {**BASE, "track_spilled_bytes": [64]},
            "launches-over-dense": {**BASE, "track_launches": [139, 167]},
            "tokens-unclaimed": {**BASE, "track_kept_tokens": [470]}}[case]
    db = _ingested(tmp_path, asv_dir, head)
    assert main(["compare", "--db", db, "--base", sha_for(0), "--head", sha_for(1), "--no-save"]) == 1
    code, body = _comment(db, tmp_path)
    assert code == 1 and body.split("\n")[3].startswith("**❌")
    text = re.sub(r"<[^>]+>", "", _html(body))
    expected = {"spill": "ragged_linear gelu=False norm #0 sm_89: 0 -&gt; 64 spilled bytes",
                "launches-over-dense": "DeiT-S ATS graph B1: 164 -&gt; 167 launches",
                "tokens-unclaimed": "DeiT-S ATS 1: kept tokens 462 -&gt; 470 tokens"}[case]
    assert f"❌ {expected}" in text, text
    assert "gate:" in text


def test_a_claimed_token_change_passes(tmp_path, asv_dir):
    db = _ingested(tmp_path, asv_dir, {**BASE, "track_kept_tokens": [470], "track_decisions_version": [2]})
    assert main(["compare", "--db", db, "--base", sha_for(0), "--head", sha_for(1), "--no-save"]) == 0
    _, body = _comment(db, tmp_path)
    assert "(claimed: track_decisions_version 1 -&gt; 2)" in _html(body)


def _exact(name: str, unit: str, params=(), direction=Direction.LOWER) -> Benchmark:
    return Benchmark(f"bench_structure.C.{name}", tuple(params), unit, direction, Kind.EXACT)


def test_verdicts_by_hand_new_missing_crash_and_one_value():
    launches = _exact("track_launches", "launches", (("forward", "ATS"),))
    dense = _exact("track_launches", "launches", (("forward", "dense"),))
    regs = _exact("track_registers", "registers")
    new = _exact("track_memsets", "memsets")
    b = [Result(launches, "a", "m", (164.0,)), Result(dense, "a", "m", (139.0,)), Result(regs, "a", "m", (96.0,))]
    h = [Result(launches, "b", "m", (160.0,)), Result(dense, "b", "m", (140.0,)), Result(regs, "b", "m", ()),
         Result(new, "b", "m", (12.0,))]
    got = {v.benchmark.key: v for v in exact_verdicts(b, h)}
    assert got[launches.key].outcome == Outcome.CHANGED and got[launches.key].threshold == 0.0
    assert got[dense.key].outcome == Outcome.CHANGED  # dense itself: no sibling to hold it against
    assert got[regs.key].outcome == Outcome.FAILED  # ran on base, crashed on head
    assert got[new.key].outcome == Outcome.UNCHANGED and got[new.key].reason.startswith("new series")
    missing = exact_verdicts([Result(regs, "a", "m", (96.0,))], [])
    assert missing[0].outcome == Outcome.INCONCLUSIVE and missing[0].reason.startswith("missing on head")
    noisy = exact_verdicts([Result(regs, "a", "m", (96.0, 97.0))], [Result(regs, "b", "m", (96.0,))])
    assert noisy[0].outcome == Outcome.INCONCLUSIVE and "not exact" in noisy[0].reason
    # compare() hands exact series to exact_verdicts: no p-value, no interval, whatever the sample count
    (v,) = [x for x in compare(b, h) if x.benchmark == launches]
    assert v.outcome == Outcome.CHANGED and math.isnan(v.p_value) and math.isnan(v.ci_low)


def test_history_steps_are_the_commits_where_the_value_moved():
    assert exact_steps(["a", "b", "c", "d", "e"], [3.0, 3.0, math.nan, 4.0, 4.0]) == [(3, 3.0, 4.0)]
    assert exact_steps(["a", "b"], [0.0, 64.0]) == [(1, 0.0, 64.0)]  # from zero too (a log detector cannot)
    spills = _exact("track_spilled_bytes", "spilled bytes")
    series = [Result(spills, sha_for(i), "m", (0.0 if i < 5 else 64.0,)) for i in range(12)]
    assert detect_all(series) == []  # no statistical change points, no suspicions for exact series
    assert find_suspects(series) == []


def test_the_dashboard_shows_where_each_figure_moved(tmp_path, asv_dir):
    commits = [sha_for(i) for i in range(4)]
    values = {0: 164, 1: 164, 2: 169, 3: 169}

    def samples(name: str, j: int, c: int) -> list[float]:
        if "time_gpu" in name:
            return [1e-5] * 5
        method = name.rsplit(".", 1)[-1]
        if method == "track_launches" and j == 1:
            return [float(values[c])]
        return [float(BASE[method][j])]

    root = asv_dir(commits, benchmarks=EXACT_BENCHMARKS, samples=samples)
    db = str(tmp_path / "h.sqlite")
    assert main(["ingest", "--db", db, str(root)]) == 0
    assert main(["dashboard", "--db", db, "--out", str(tmp_path / "site")]) == 0
    page = (tmp_path / "site" / "structure.html").read_text()
    assert sha_for(2)[:10] in page and sha_for(1)[:10] not in page.split('id="moves"')[1]
    assert re.search(r"DeiT-S ATS graph B1</a></td><td>launches</td>.*?<td class=\"num\">164</td>"
                     r"<td class=\"num worse\">169</td>", page, re.S)
    assert "Structure" in (tmp_path / "site" / "index.html").read_text()


def test_an_exact_only_job_replaces_the_structure_section_and_keeps_the_timings(tmp_path, asv_dir):
    """`ci comment --structure-only` (the fork-safe exact workflow): the sticky comment's Structure section
    becomes this job's, the GPU job's timings stay; rendered by GitHub's markdown, one Structure heading.
    Only while the sticky comment is of the head the exact job measured: timings of another commit (an
    older push), or of an unmarked one, give way to the exact job's own comment whole."""
    from ci.outputs.structure import COMMENT_HEAD, SECTION_END, SECTION_START

    db = _ingested(tmp_path, asv_dir, {**BASE, "track_launches": [139, 163]})
    sticky = tmp_path / "sticky.md"

    def gpu_body(head: str | None) -> str:
        return (f"## Benchmarks\n\n**✅ no regression:** 3 series\n\n{SECTION_START}\n### Structure\n\n"
                f"- DeiT-S ATS graph B1: 170 -> 171 launches\n{SECTION_END}\n\n| Outcome | Benchmark |\n|---|---|\n"
                "| ✅ unchanged | gpu-timing-row |\n" + (f"\n{COMMENT_HEAD.format(sha=head)}\n" if head else ""))

    for other in (sha_for(0), None):
        sticky.write_text(gpu_body(other))
        assert main(["comment", "--db", db, "--base", sha_for(0), "--head", sha_for(1), "--repo", "acme/ragged-vit",
                     "--pr", "7", "--dry-run", str(sticky), "--structure-only"]) == 0
        assert "gpu-timing-row" not in sticky.read_text() and "164 -&gt; 163" in _html(sticky.read_text())
    sticky.write_text(gpu_body(sha_for(1)))
    args = ["comment", "--db", db, "--base", sha_for(0), "--head", sha_for(1), "--repo", "acme/ragged-vit", "--pr",
            "7", "--dry-run", str(sticky), "--structure-only"]
    assert main(args) == 0
    text = re.sub(r"<[^>]+>", "", _html(sticky.read_text()))
    assert "DeiT-S ATS graph B1: 164 -&gt; 163 launches" in text and "170 -&gt; 171" not in text
    assert "gpu-timing-row" in text and "3 series" in text
    assert text.count("Structure") == 1
    # Without --structure-only the job's own comment replaces the whole file (the GPU job's way).
    assert main(args[:-1]) == 0
    assert "gpu-timing-row" not in sticky.read_text() and "164 -&gt; 163" in _html(sticky.read_text())


def test_a_gpu_job_without_the_exact_tier_keeps_only_its_own_heads_structure_section(tmp_path, asv_dir):
    """`ci comment --keep-structure` (the PR's GPU job, `ci run --no-exact`: exact.yml measures the exact tier
    on a CPU runner): the sticky comment keeps the Structure section the exact job posted for the same head;
    for any other head, or a section naming none, it says the check is pending; never figures of another
    commit beside this one's timings. The exact job's later `--structure-only` replaces the pending one."""
    from ci.outputs.structure import SECTION_END, SECTION_HEAD, SECTION_START

    timings = [b for b in EXACT_BENCHMARKS if "time_gpu" in b["name"]]
    root = asv_dir([sha_for(0), sha_for(1)], name="gpu", benchmarks=timings, samples=_writer(BASE), job="gha-7.1-pr/1")
    gpu_db = str(tmp_path / "gpu.sqlite")
    assert main(["ingest", "--db", gpu_db, str(root)]) == 0
    sticky = tmp_path / "sticky.md"
    gpu = ["comment", "--db", gpu_db, "--base", sha_for(0), "--head", sha_for(1), "--repo", "acme/ragged-vit", "--pr",
           "7", "--dry-run", str(sticky), "--keep-structure"]

    def section(head: str | None, line: str) -> str:
        mark = [SECTION_HEAD.format(sha=head)] if head else []
        return "\n".join([SECTION_START, *mark, "### Structure", "", line, SECTION_END])

    def post(existing: str) -> str:
        sticky.write_text(existing)
        assert main(gpu) == 0
        return sticky.read_text()

    exact_body = f"## Benchmarks\n\n**✅ exact only:** 5 series\n\n{section(sha_for(1), '- exact-figures-of-head')}\n"
    body = post(exact_body)  # the exact job finished first, for this head: its figures stay
    assert "exact-figures-of-head" in body and "bench_pack.PackTokens.time_gpu" in body
    assert body.count("### Structure") == 1 and "⏳" not in body
    for older in (section(sha_for(0), "- exact-figures-of-base"), section(None, "- exact-figures-unmarked")):
        body = post(f"## Benchmarks\n\n**✅ no regression:** 1 series\n\n{older}\n")
        assert "exact-figures" not in body and body.count("### Structure") == 1
        assert "⏳ Not measured in this job" in body and sha_for(1)[:12] in body
    assert post("").count("⏳") == 1  # no sticky comment yet
    out = tmp_path / "out.md"
    assert main([*gpu[:7], "--keep-structure", "--out", str(out)]) == 0
    assert "⏳" in out.read_text() and "bench_pack.PackTokens.time_gpu" in out.read_text()
    # Then the exact job's own section (of this head) replaces the pending one; the timings stay.
    exact_db = _ingested(tmp_path, asv_dir, {**BASE, "track_launches": [139, 163]})
    assert main(["comment", "--db", exact_db, "--base", sha_for(0), "--head", sha_for(1), "--repo", "acme/ragged-vit",
                 "--pr", "7", "--dry-run", str(sticky), "--structure-only"]) == 0
    body = sticky.read_text()
    assert "⏳" not in body and "164 -&gt; 163 launches" in _html(body) and body.count("### Structure") == 1
    assert SECTION_HEAD.format(sha=sha_for(1)) in body
    # ... and a GPU job of the same head posting after it keeps those figures, in --out too.
    assert "164 -&gt; 163 launches" in _html(post(body))
    sticky.write_text(body)
    assert main([*gpu, "--out", str(out)]) == 0
    assert out.read_text() == sticky.read_text() and "164 -&gt; 163 launches" in _html(out.read_text())
    assert main([*gpu, "--structure-only"]) == 2  # a job either measured the exact tier alone or left it


def test_kept_sections_are_found_only_as_whole_lines_and_cut_to_githubs_limit():
    """Markers inside contributor text (a parameter in a table cell) are no section, so the GPU job's body
    still gets its pending one; a kept section too long for GitHub beside the timings keeps its first lines
    and says how many more the exact workflow's job summary holds."""
    from ci.outputs.structure import SECTION_END, SECTION_HEAD, SECTION_START, keep_section, section_of

    head = sha_for(1)
    fresh = (f"<!-- ragged-vit-bench -->\n## Benchmarks\n\n**✅ No significant performance change:** 1.\n\n"
             f"| `p={SECTION_START}` | `{SECTION_END}` |\n")
    assert section_of(fresh) is None
    body = keep_section("", fresh, head, 65536)
    assert "⏳ Not measured in this job" in body and f"| `p={SECTION_START}` |" in body
    items = [f"- `DeiT-S ATS graph B{i}`: 164 -> 165 launches" for i in range(600)]
    old = "\n".join([SECTION_START, SECTION_HEAD.format(sha=head), "### Structure", "", "❌ 600 of 900 exact series "
                     "changed; 1 gate(s) failed.", "", *items, SECTION_END])
    body = keep_section(f"x\n\n{old}\n", fresh, head, 12_000)
    assert len(body) <= 12_000 and items[0] in body and items[-1] not in body and "❌ 600 of 900" in body
    assert re.search(r"_… and \d+ more \(see the `exact` workflow's job summary\)\._\n" + re.escape(SECTION_END), body)


def test_the_demos_head_table_puts_the_exact_figures_beside_the_timings(tmp_path, asv_dir):
    from ci.outputs.structure import head_summary

    db = _ingested(tmp_path, asv_dir, {**BASE, "track_launches": [139, 163]})
    with Store(db) as store:
        lines = head_summary(store.results(commit_sha=sha_for(1)), store.results(commit_sha=sha_for(0)))
        alone = head_summary(store.results(commit_sha=sha_for(1)))
    rows = {ln.split()[1] if ln.startswith("exact") else ln.split()[2]: ln for ln in lines[2:]}
    assert lines[0].split() == ["kind", "benchmark", "series", "values", "changed", "vs", "parent"]
    assert rows["bench_structure.Launches.track_launches"].split()[2:] == ["2", "139-163", "launches", "1"]
    assert rows["bench_structure.KernelResources.track_spilled_bytes"].split()[2:] == ["1", "0", "spilled", "bytes",
                                                                                         "0"]
    assert rows["bench_pack.PackTokens.time_gpu"].startswith("timing (median)")
    assert rows["bench_pack.PackTokens.time_gpu"].split()[3:] == ["1", "1e-05", "seconds"]  # one series: its median
    launches = next(ln for ln in alone if "track_launches" in ln)
    assert launches.split()[-1] == "launches"  # no parent: no changed column
    assert head_summary([]) == []
