"""benchmarks/recorded/cpu-2026-12-exact-main, main's history under the exact tier as asv wrote it, through
`ci ingest` and `ci dashboard`: every file stores, every point is exact, and the structure page names the
commit at which each figure moved, with its value before and after."""

from __future__ import annotations

import json
import math
import re
import subprocess
from pathlib import Path

import pytest

from ci.cli import main
from ci.records import Kind
from ci.store import Store

ROOT = Path(__file__).resolve().parents[2]
RECORDED = ROOT / "benchmarks" / "recorded" / "cpu-2026-12-exact-main"
EVIT_FUSED_TOKEN = "1bbc2fedcc"  # EViT's fused token written by the pack kernel (2026-12-02)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> tuple[Path, str]:
    tmp = tmp_path_factory.mktemp("exact-history")
    db = str(tmp / "h.sqlite")
    assert main(["ingest", "--db", db, "--repo", str(ROOT), "--branch", "main", str(RECORDED)]) == 0
    assert main(["dashboard", "--db", db, "--out", str(tmp / "site")]) == 0
    return tmp / "site", db


def _moves(page: str) -> dict[str, str]:
    """Commit sha prefix -> that commit's block of the page's 'Where the figures moved' section."""
    section = page.split('id="moves"', 1)[1]
    blocks = re.split(r'<section class="commit-moves">', section)[1:]
    return {re.search(r'class="sha"[^>]*>([0-9a-f]+)<', b).group(1): b for b in blocks}


def test_the_recorded_history_is_main_measured_exactly(site):
    _, db = site
    files = sorted((RECORDED / "cpu-box").glob("*-virtualenv-py3.11.json"))
    assert len(files) >= 20
    with Store(db) as store:
        results = store.results(machine="cpu-box")
        main_shas = {c.sha for c in store.commits("main")}
    assert {r.commit_sha[:8] for r in results} == {f.name[:8] for f in files}
    assert {r.commit_sha for r in results} <= main_shas  # every commit is main's
    assert all(r.benchmark.kind == Kind.EXACT for r in results)
    assert all(len({s for s in r.samples if math.isfinite(s)}) == 1 for r in results)  # one value per point
    with Store(db) as store:
        order = [c.sha for c in store.commits("main")]
    per_commit = {}
    for r in results:
        per_commit[r.commit_sha] = per_commit.get(r.commit_sha, 0) + 1
    counts = [per_commit[sha] for sha in order if sha in per_commit]
    # A commit measures what its library has: the count grows as features land (EViT's fused-row pack,
    # ATS's search kernels, the fused forwards) and never shrinks; the newest measures nearly all 2,778.
    assert counts == sorted(counts) and counts[0] < counts[-1], counts
    assert counts[-1] >= 2_700, counts


def test_the_structure_page_names_the_commit_where_each_figure_moved(site):
    out, _ = site
    page = (out / "structure.html").read_text()
    moves = _moves(page)
    assert EVIT_FUSED_TOKEN in moves, sorted(moves)
    evit = re.sub(r"\s+", " ", moves[EVIT_FUSED_TOKEN])
    for model in ("DeiT-S", "DeiT-B"):
        for batch in ("B1", "B64"):
            assert re.search(rf"{model} EViT graph {batch}</a></td><td>launches</td>.*?<td class=\"num\">254</td>"
                             rf"<td class=\"num better\">216</td>", evit), (model, batch)
    assert "ATS graph" not in evit and "dense graph" not in evit  # only what that commit changed


def test_figures_move_only_where_the_library_changed(site):
    """Exact means no noise: a commit listed as moving a figure changed the library (pruners/, ragged_kernels/)
    since the measured commit before it."""
    out, db = site
    with Store(db) as store:
        measured = {r.commit_sha for r in store.results(machine="cpu-box")}
        order = [c.sha for c in store.commits("main") if c.sha in measured]
    moved = set(_moves((out / "structure.html").read_text()))
    for before, after in zip(order, order[1:], strict=False):
        changed = subprocess.run(["git", "-C", str(ROOT), "diff", "--name-only", before, after, "--", "pruners",
                                  "ragged_kernels"], capture_output=True, text=True, check=True).stdout.split()
        if after[:10] in moved:
            assert changed, f"{after[:10]} moved a figure but changed no library file since {before[:10]}"
    benchmarks = json.loads((RECORDED / "benchmarks.json").read_text())
    structure = [b for k, b in benchmarks.items() if k.startswith("bench_structure.")]
    assert len(structure) == 19 and all(b["exact"] is True and b["direction"] for b in structure)
