"""The project's asv.conf.json: read as asv reads it, found beside the results at ingest, kept in the
store, and one set of settings for every command that decides (compare, comment, the runner, the
dashboard's verdicts), on this project's results and on another project's."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from ci.cli import main
from ci.project import ConfigError, find_asv_conf, project_settings, read_asv_conf
from ci.records import Project
from ci.store import Store
from tests.ci.conftest import BENCHMARKS, MACHINE, sha_for, write_results

ROOT = Path(__file__).resolve().parents[2]
SLOW_KEY = "bench_attention.GPUTime.time_gpu(dtype=fp16, batch=1)"
JOB = "gha-1.1-pr/1"
# A suite that is not ours: no correctness benchmark, no CPU class, its own thresholds (6% to 80%).
FOREIGN_BENCHMARKS: list[dict[str, Any]] = [
    {"name": "benchmarks.TimeGrid.time_open", "type": "time", "unit": "seconds", "params": [["'small'", "'large'"]],
     "param_names": ["size"], "version": "g1"},
    {"name": "benchmarks.PeakMem.peakmem_open", "type": "peakmemory", "unit": "bytes", "params": [],
     "param_names": [], "version": "m1"},
]
FOREIGN_CONF = """{
    // written the way asv's template is: comments and a trailing comma
    "version": 1,
    "project": "tinygrid",
    "project_url": "https://example.org/tinygrid/",
    "repo": "https://example.org/tinygrid.git",
    "show_commit_url": "https://example.org/tinygrid/commit/",
    "regressions_thresholds": {".*": 0.06, "benchmarks.PeakMem": 0.8,},
}
"""


def _samples(slow_head: bool = False):
    """12 tight samples per point; with `slow_head`, SLOW_KEY is 1.5x slower at commit 1."""

    def make(name: str, j: int, c: int) -> list[float]:
        if "max_abs_diff" in name:
            return [0.001] * 6
        base = 1e-4 * (j + 1) if "time_" in name else 100.0 + j
        if slow_head and c == 1 and "time_gpu" in name and j == 0:
            base *= 1.5
        return [base * (1 + 0.002 * k) for k in range(12)]

    return make


def _conf(path: Path, **fields: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"version": 1, "repo": ".", **fields}))
    return path


@pytest.fixture(autouse=True)
def _no_github(monkeypatch: pytest.MonkeyPatch) -> None:
    """Commit links come from the project here, not from a GitHub Actions job that runs the tests."""
    for name in ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_RUN_ID", "GITHUB_RUN_ATTEMPT"):
        monkeypatch.delenv(name, raising=False)


def test_asv_conf_is_read_as_asv_reads_it(tmp_path: Path) -> None:
    conf = tmp_path / "asv.conf.json"
    conf.write_text(FOREIGN_CONF)
    project = read_asv_conf(conf)
    assert project == Project("tinygrid", "https://example.org/tinygrid/", "https://example.org/tinygrid/commit/",
                              ((".*", 0.06), ("benchmarks.PeakMem", 0.8)), str(conf))
    # asv's default "#" and a relative path are no link; no thresholds keep the built-in floor.
    bare = read_asv_conf(_conf(tmp_path / "b" / "asv.conf.json", show_commit_url="#", project_url="docs/"))
    assert (bare.name, bare.url, bare.commit_url, bare.thresholds) == ("", "", "", ())


@pytest.mark.parametrize(("text", "message"), [
    pytest.param('{"version": 1, "project": "x"', "not valid JSON", id="truncated"),
    pytest.param('{"project": "x"}', "No version specified", id="no-version"),
    pytest.param('{"version": 2}', "newer than", id="newer-format"),
    pytest.param('[1, 2]', "No version specified", id="not-an-object"),
    pytest.param('{"version": 1, "project": 3}', "project must be a string", id="name-not-text"),
    pytest.param('{"version": 1, "regressions_thresholds": {".*": "5%"}}', "must map to a non-negative number",
                 id="threshold-text"),
    pytest.param('{"version": 1, "regressions_thresholds": [0.05]}', "regressions_thresholds must be an object",
                 id="thresholds-list"),
    pytest.param('{"version": 1, "regressions_thresholds": {"(": 0.05}}', "bad regex", id="bad-regex"),
    pytest.param('{"version": 1, "regressions_thresholds": {"x": 200}}', "floor for", id="out-of-range"),
])
def test_a_malformed_asv_conf_is_a_clear_error(tmp_path: Path, text: str, message: str) -> None:
    conf = tmp_path / "asv.conf.json"
    conf.write_text(text)
    with pytest.raises(ConfigError, match=re.escape(message)) as err:
        read_asv_conf(conf)
    assert str(err.value).startswith(str(conf)), err.value
    with pytest.raises(ConfigError, match="no such file"):
        read_asv_conf(tmp_path / "missing.json")


@pytest.mark.slow
def test_ingest_finds_the_conf_whose_results_dir_is_the_folder(tmp_path: Path, capsys) -> None:
    # This project's layout: asv.conf.json at the top, results in .asv/results.
    ours = tmp_path / "ours"
    results = ours / ".asv" / "results"
    write_results(results, [sha_for(0)])
    shutil.copy(ROOT / "asv.conf.json", ours / "asv.conf.json")
    assert find_asv_conf(results) == (ours / "asv.conf.json", "")
    db = str(tmp_path / "h.sqlite")
    assert main(["ingest", "--db", db, str(results)]) == 0
    assert f"project 'ragged-vit' from {ours / 'asv.conf.json'}" in capsys.readouterr().err
    with Store(db) as store:
        assert store.project() == read_asv_conf(ours / "asv.conf.json")
    assert main(["ingest", "--db", db, str(results)]) == 0
    assert "project" not in capsys.readouterr().err  # unchanged: nothing to say, nothing written
    # A conf beside the folder that keeps its results elsewhere is not this folder's project.
    other = tmp_path / "other"
    write_results(other / "results", [sha_for(1)])
    _conf(other / "asv.conf.json", project="elsewhere", results_dir="bench-results")
    path, why = find_asv_conf(other / "results")
    assert path is None and "keeps its results in" in why and "not this folder's project" in why
    assert main(["ingest", "--db", db, str(other / "results")]) == 0
    assert "not this folder's project (pass --config to use it); the store keeps" in capsys.readouterr().err
    with Store(db) as store:
        assert store.project().name == "ragged-vit"  # the kept one stands
    (tmp_path / "lone" / "results").mkdir(parents=True)
    assert find_asv_conf(tmp_path / "lone" / "results") == (None, "")  # none above: nothing to say
    # --config names it outright.
    assert main(["ingest", "--db", db, "--config", str(other / "asv.conf.json"), str(other / "results")]) == 0
    with Store(db) as store:
        assert store.project().name == "elsewhere"


@pytest.mark.slow
def test_a_malformed_conf_stops_the_ingest_before_any_result(tmp_path: Path, capsys) -> None:
    root = tmp_path / "proj"
    write_results(root / "results", [sha_for(0)])
    (root / "asv.conf.json").write_text('{"version": 1, "regressions_thresholds": {".*": "5%"}}')
    db = str(tmp_path / "h.sqlite")
    assert main(["ingest", "--db", db, str(root / "results")]) == 2
    assert f"error: {root / 'asv.conf.json'}: regressions_thresholds: '.*' must map" in capsys.readouterr().err
    with Store(db) as store:
        assert store.counts()["runs"] == 0 and store.project() is None
    assert main(["ingest", "--db", db, "--config", str(tmp_path / "nope.json"), str(root / "results")]) == 2
    assert "nope.json: no such file" in capsys.readouterr().err
    (root / "asv.conf.jsonc").write_text("{}")
    with pytest.raises(ConfigError, match="asv refuses to choose"):
        find_asv_conf(root / "results")


def _verdicts_on_commit_page(site: Path, sha: str) -> dict[str, str]:
    """(benchmark name and params) -> outcome, as the dashboard's commit page lists its A/B verdicts."""
    from ci.site.model import commit_slug

    page = (site / "commit" / f"{commit_slug(sha)}.html").read_text()
    rows = re.findall(r'<td class="bench">([^<]*)(?: <span class="params">\(([^)]*)\)</span>)?</td>'
                      r'<td>[^<]*</td><td><span class="badge (\w+)">', page)
    return {f"{name}({params})" if params else name: outcome for name, params, outcome in rows}


def _decisions(tmp_path: Path, db: str, config: Path | None, runner_repo: Path) -> dict[str, Any]:
    """One verdict per command on the same results: compare's and comment's exit codes, the comment's
    headline, the dashboard's verdict for SLOW_KEY, and the runner's (`ab_comparison`, its checkout's
    asv.conf.json) exit code and outcome."""
    from ci.runner.config import RunnerConfig
    from ci.runner.jobs import ab_comparison
    from ci.verdicts import exit_code

    extra = ["--config", str(config)] if config is not None else []
    base, head = sha_for(0), sha_for(1)
    out: dict[str, Any] = {"compare": main(["compare", "--db", db, *extra, "--base", base, "--head", head])}
    tmp_path.mkdir(parents=True, exist_ok=True)
    comment = tmp_path / "comment.md"
    out["comment"] = main(["comment", "--db", db, *extra, "--base", base, "--head", head, "--out", str(comment)])
    out["headline"] = comment.read_text().splitlines()[3].split(":**")[0]
    site = tmp_path / "site"
    assert main(["dashboard", "--db", db, "--out", str(site)]) == 0  # what compare and comment decided
    out["dashboard"] = _verdicts_on_commit_page(site, head)[SLOW_KEY]
    cfg = RunnerConfig(repo=runner_repo, db=db, machine=MACHINE)
    with Store(db) as store:
        comparison = ab_comparison(cfg, store, base, head)
    out["run"] = exit_code(comparison.verdicts)
    out["run_outcome"] = next(v.outcome.value for v in comparison.verdicts if v.benchmark.key == SLOW_KEY)
    return out


@pytest.mark.slow
def test_every_deciding_command_takes_one_rule(tmp_path: Path) -> None:
    """The same results through compare, comment, the dashboard and the runner's settings path: one
    verdict, one exit code. The project's asv.conf.json gives the GPU series an 80% floor, so the
    head's 1.5x there is no regression for any of them (the built-in 2.5% floor would call it one)."""
    proj = tmp_path / "proj"
    write_results(proj / "results", [sha_for(0), sha_for(1)], samples=_samples(slow_head=True), job=JOB)
    conf = _conf(proj / "asv.conf.json", project="wide", regressions_thresholds={".*": 0.025, ".*GPUTime": 0.8})
    db = str(tmp_path / "h.sqlite")
    assert main(["ingest", "--db", db, str(proj / "results")]) == 0
    got = _decisions(tmp_path / "kept", db, None, proj)
    assert got == {"compare": 0, "comment": 0, "headline": "**✅ No significant performance change",
                   "dashboard": "unchanged", "run": 0, "run_outcome": "unchanged"}, got
    # --config overrides the store's for every command alike (the runner's checkout is its own --config).
    strict = _conf(tmp_path / "strict" / "asv.conf.json", regressions_thresholds={".*": 0.025})
    got = _decisions(tmp_path / "strict", db, strict, strict.parent)
    assert got == {"compare": 1, "comment": 1, "headline": "**❌ Performance check failed",
                   "dashboard": "regressed", "run": 1, "run_outcome": "regressed"}, got
    assert project_settings(config=conf).verdicts.floor_for(SLOW_KEY) == 0.8


@pytest.mark.slow
def test_another_projects_results_carry_its_name_its_links_and_only_its_sections(tmp_path: Path) -> None:
    proj = tmp_path / "tinygrid"
    results = proj / "results"
    write_results(results, [sha_for(0), sha_for(1)], machine="gh-runner", benchmarks=FOREIGN_BENCHMARKS, job=JOB)
    (proj / "asv.conf.json").write_text(FOREIGN_CONF)
    db = str(tmp_path / "h.sqlite")
    assert main(["ingest", "--db", db, str(results)]) == 0
    out = tmp_path / "comment.md"
    assert main(["comment", "--db", db, "--base", sha_for(0), "--head", sha_for(1), "--out", str(out)]) == 0
    body = out.read_text()
    lines = body.splitlines()
    assert lines[:2] == ["<!-- ragged-vit-bench -->", "## tinygrid benchmarks"]  # the bot's sticky marker stays
    # Only the bot's hidden markers (the sticky one, the commit the timings are of) name this project.
    hidden = re.compile(r"<!-- ragged-vit-[\w-]+: [0-9a-f]+ -->")
    assert "ragged" not in "\n".join(ln for ln in lines[1:] if not hidden.fullmatch(ln))
    assert "CPU only" not in body and "[!WARNING]" not in body  # no GPU ran, but it has no CPU subset
    assert "correctness" not in body.lower()  # a suite without correctness benchmarks misses none
    assert f"[`{sha_for(1)[:12]}`](https://example.org/tinygrid/commit/{sha_for(1)})" in body
    assert "at least ±6%" in body
    site = tmp_path / "site"
    assert main(["dashboard", "--db", db, "--out", str(site)]) == 0
    index = (site / "index.html").read_text()
    assert "<title>tinygrid benchmarks</title>" in index and ">tinygrid benchmarks</a>" in index
    assert not (site / "correctness.html").exists() and "Correctness" not in index
    pages = [p.read_text() for p in site.rglob("*.html")]
    assert pages and not any("ragged-vit" in p or "correctness.html" in p for p in pages)
    commit_page = _commit_page(site, sha_for(1))
    assert f'href="https://example.org/tinygrid/commit/{sha_for(1)}"' in commit_page


def _commit_page(site: Path, sha: str) -> str:
    from ci.site.model import commit_slug

    return (site / "commit" / f"{commit_slug(sha)}.html").read_text()


@pytest.mark.slow
def test_our_results_keep_our_name_our_cpu_banner_and_our_correctness_tab(tmp_path: Path) -> None:
    ours = tmp_path / "ours"
    cpu = {"name": "bench_pack.PackTokensCPU.time_host", "type": "time", "unit": "seconds", "params": [["'tiny'"]],
           "param_names": ["preset"], "version": "p1"}
    write_results(ours / ".asv" / "results", [sha_for(0), sha_for(1)], benchmarks=[*BENCHMARKS, cpu],
                  samples=_samples(), job=JOB)  # no GPU sidecar: a CPU-only job
    shutil.copy(ROOT / "asv.conf.json", ours / "asv.conf.json")
    db = str(tmp_path / "h.sqlite")
    assert main(["ingest", "--db", db, str(ours / ".asv" / "results")]) == 0
    out = tmp_path / "comment.md"
    assert main(["comment", "--db", db, "--base", sha_for(0), "--head", sha_for(1), "--out", str(out)]) == 0
    lines = out.read_text().splitlines()
    assert lines[:2] == ["<!-- ragged-vit-bench -->", "## ragged-vit benchmarks"]
    assert lines[6].startswith("> **CPU only: these timings prove nothing about kernel speed.**"), lines[6]
    assert "its 1 series of the suite's CPU subset (`regressions_thresholds`: `.*CPU\\.` ±400%)" in lines[6]
    assert "past ±400%; the other series need at least ±2.5%" in lines[6]
    assert f"(https://github.com/ragged-vit/ragged-vit/commit/{sha_for(1)})" in out.read_text()
    site = tmp_path / "site"
    assert main(["dashboard", "--db", db, "--out", str(site)]) == 0
    index = (site / "index.html").read_text()
    assert "<title>ragged-vit benchmarks</title>" in index and 'href="correctness.html"' in index
    assert (site / "correctness.html").is_file()


def _stepped(step: float, at: int = 10):
    """Tight samples (0.2% apart); SLOW_KEY's level moves by `step` from commit `at` on."""

    def make(name: str, j: int, c: int) -> list[float]:
        if "max_abs_diff" in name:
            return [0.001] * 6
        base = 1e-4 * (j + 1) if "time_" in name else 100.0 + j
        if "time_gpu" in name and j == 0 and c >= at:
            base *= 1 + step
        wobble = 1 + 0.001 * ((c * 7) % 5)  # commit-to-commit noise of ~0.2%
        return [base * wobble * (1 + 0.002 * k) for k in range(12)]

    return make


def test_the_history_counts_a_step_by_the_projects_threshold(tmp_path: Path) -> None:
    """A +4% step on a quiet series is a regression under a 2.5% threshold and nothing under 6%: in the
    history job's alerts, on the dashboard's regressions page and in its suspicions alike, as in the
    A/B verdicts (one table, the project's `regressions_thresholds`; `asv publish` drops a jump under
    its threshold too)."""
    from ci.runner.alerts import history_alerts

    commits = [sha_for(c) for c in range(20)]
    seen = {}
    for name, floor in (("tight", 0.025), ("wide", 0.06)):
        proj = tmp_path / name
        write_results(proj / "results", commits, samples=_stepped(0.04))
        _conf(proj / "asv.conf.json", project=name, regressions_thresholds={".*": floor})
        db = str(tmp_path / f"{name}.sqlite")
        assert main(["ingest", "--db", db, str(proj / "results")]) == 0
        with Store(db) as store:
            alerts = [(a.benchmark.key, a.commit_sha) for a in history_alerts(store, MACHINE)]
        site = tmp_path / f"site-{name}"
        assert main(["dashboard", "--db", db, "--out", str(site)]) == 0
        page = (site / "regressions.html").read_text()
        seen[name] = (alerts, sha_for(10)[:8] in page)
    assert seen["tight"] == ([(SLOW_KEY, sha_for(10))], True), seen
    assert seen["wide"] == ([], False), seen


def test_a_suspicion_needs_the_projects_threshold(tmp_path: Path) -> None:
    """The two newest commits +4% up on a quiet series: suspected under a 2.5% threshold (the
    change-point detector cannot judge it yet), not under 6%; the series' threshold shown is the
    project's where the noise asks less."""
    from ci.site.model import load_snapshot

    commits = [sha_for(c) for c in range(20)]
    got = {}
    for name, floor in (("tight", 0.025), ("wide", 0.06)):
        proj = tmp_path / name
        write_results(proj / "results", commits, samples=_stepped(0.04, at=18))
        _conf(proj / "asv.conf.json", project=name, regressions_thresholds={".*": floor})
        db = str(tmp_path / f"{name}.sqlite")
        assert main(["ingest", "--db", db, str(proj / "results")]) == 0
        with Store(db) as store:
            snap = load_snapshot(store, floor_for=project_settings(store).floor_for)
        (series,) = [s for s in snap.series if s.benchmark.key == SLOW_KEY]
        got[name] = ([(x.commit_sha, x.state.value) for x in series.suspects], round(series.threshold, 3))
    assert got == {"tight": ([(sha_for(18), "suspected")], 0.025), "wide": ([], 0.06)}, got


def test_an_asv_conf_without_thresholds_means_asvs_five_percent(tmp_path: Path) -> None:
    """A series that no `regressions_thresholds` entry matches takes asv's own default, 5%, as `asv
    publish` reads the same file (an entry that matches keeps its value, even below 5%); with no
    asv.conf.json at all the service's built-in floor applies."""
    bare = project_settings(config=_conf(tmp_path / "bare" / "asv.conf.json", project="bare"))
    assert bare.floor_for(SLOW_KEY) == 0.05
    some = project_settings(config=_conf(tmp_path / "some" / "asv.conf.json",
                                         regressions_thresholds={"bench_attention.GPUTime": 0.01}))
    assert some.floor_for(SLOW_KEY) == 0.01 and some.floor_for("bench_pack.Pack.time_host") == 0.05
    assert project_settings().floor_for(SLOW_KEY) == 0.025
    # What compare and comment print of it: a file that sets none is not said to set them.
    from ci.cli import _rules_line

    bare_conf = tmp_path / "bare" / "asv.conf.json"
    assert _rules_line(bare) == f"thresholds: asv's default, 5% ({bare_conf} of 'bare' sets no regressions_thresholds)"
    assert _rules_line(some) == f"thresholds: regressions_thresholds in {tmp_path / 'some' / 'asv.conf.json'}"
    assert _rules_line(project_settings()).startswith("thresholds: built in")
