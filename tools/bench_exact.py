"""Benchmark script (not a test): what the exact tier costs, end to end, on this machine.

Clones the checkout (its HEAD, or `--rev`) into a temporary folder, as a fresh CI clone is, and runs the
exact subset there through the project's runner and the real asv CLI, as `.ci/run`, `ci run --exact` and
the pull-request workflow run it:

    python -m ci run --repo CLONE --commits SHA --exact --no-resume --machine exact-budget --db TMP --dashboard ''

then prints, from asv's own result file, a table per benchmark class (points, measured, skipped, failed,
the seconds of its `setup_cache` and of its points), the runner call's wall time against the budget
(default 300 s: the exact subset must fit in 5 minutes of the project's 2-core CPU box), the machine's
CPUs and load, and the size of Triton's compile cache before and after (compiles are cached by the kernels'
source, so a warm cache changes no value, only the time). Exit 0 with every point measured or skipped as the suite
says; 1 on a failed point, when a shipping kernel spills on any architecture (the exact gate that needs no
base) or, with `--fail-over-budget`, over the budget; 2 when the runner itself failed. `.ci/run` runs it
without `--fail-over-budget`: the time is a measurement to read in the table, not a test that a loaded
shared box may fail.

    .venv/bin/python -m tools.bench_exact [--rev REV] [--budget 300] [--fail-over-budget] [--log FILE]

The runner's whole output goes to `--log` (default `.asv/bench-exact.log`; its tail is printed when the
runner fails).
"""

from __future__ import annotations

import argparse
import ast
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUDGET_S = 300.0
MACHINE = "exact-budget"


def setup_cache_owners(bench_file: Path) -> dict[int, str]:
    """Line of each function a `setup_cache` names in `bench_file` -> the classes that use it
    (asv keys a setup_cache's duration by `<module>:<line>`)."""
    tree = ast.parse(bench_file.read_text())
    functions = {n.name: n.lineno for n in tree.body if isinstance(n, ast.FunctionDef)}
    owners: dict[int, list[str]] = {}
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        for item in node.body:
            if isinstance(item, ast.FunctionDef) and item.name == "setup_cache":
                owners.setdefault(item.lineno, []).append(node.name)
            elif isinstance(item, ast.Assign) and any(getattr(t, "id", None) == "setup_cache" for t in item.targets):
                name = getattr(item.value, "id", None)
                if name in functions:
                    owners.setdefault(functions[name], []).append(node.name)
    return {line: " + ".join(sorted(names)) for line, names in owners.items()}


def summarise(result_file: Path, bench_file: Path) -> tuple[list[dict], int]:
    """Per class: points, measured, skipped (NaN), failed (null), setup and point seconds; and the number
    of (kernel, architecture) points whose spilled bytes are above zero."""
    data = json.loads(result_file.read_text())
    cols = data["result_columns"]
    owners = setup_cache_owners(bench_file)
    rows: dict[str, dict] = {}
    spills = 0
    for name, row in data["results"].items():
        r = dict(zip(cols, row, strict=False))
        cls = name.split(".")[1]
        values = r["result"] if isinstance(r["result"], list) else [r["result"]]
        out = rows.setdefault(cls, {"class": cls, "points": 0, "measured": 0, "skipped": 0, "failed": 0,
                                    "setup_s": 0.0, "points_s": 0.0})
        out["points"] += len(values)
        out["failed"] += sum(v is None for v in values)
        out["skipped"] += sum(isinstance(v, float) and math.isnan(v) for v in values)
        out["measured"] += sum(v is not None and not (isinstance(v, float) and math.isnan(v)) for v in values)
        out["points_s"] += float(r.get("duration") or 0.0)
        if name.endswith(".track_spilled_bytes"):
            spills += sum(1 for v in values if isinstance(v, int | float) and not math.isnan(v) and v > 0)
    table = sorted(rows.values(), key=lambda x: x["class"])
    for key, seconds in (data.get("durations") or {}).items():
        line = int(key.rstrip(">").rsplit(":", 1)[1]) if key.startswith("<setup_cache") else None
        first, *others = owners.get(line, key).split(" + ")
        target = rows.get(first)
        if target is not None:
            target["setup_s"] += seconds
            if others:  # one setup_cache that several classes share: its seconds on the first
                target["class"] = f"{first} (setup_cache shared with {', '.join(others)})"
    return table, spills


def _cache_entries() -> int:
    folder = Path(os.environ.get("TRITON_CACHE_DIR") or Path.home() / ".triton" / "cache")
    return sum(1 for _ in folder.iterdir()) if folder.is_dir() else 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.bench_exact", description=__doc__.split("\n\n")[0])
    p.add_argument("--rev", default="HEAD", help="commit to measure (default HEAD)")
    p.add_argument("--budget", type=float, default=BUDGET_S, help="seconds the runner call may take (default 300)")
    p.add_argument("--fail-over-budget", action="store_true", help="exit 1 when the runner call takes longer")
    p.add_argument("--log", default=str(ROOT / ".asv" / "bench-exact.log"),
                   help="the runner's whole output (default .asv/bench-exact.log)")
    args = p.parse_args(argv)

    sha = subprocess.run(["git", "-C", str(ROOT), "rev-parse", args.rev], capture_output=True, text=True,
                         check=True).stdout.strip()  # fmt: skip
    subject = subprocess.run(["git", "-C", str(ROOT), "log", "-1", "--format=%s", sha], capture_output=True,
                             text=True, check=True).stdout.strip()  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="bench-exact-") as tmp:
        clone = Path(tmp) / "repo"
        subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(ROOT), str(clone)], check=True)
        subprocess.run(["git", "-C", str(clone), "checkout", "-q", sha], check=True)
        log = Path(args.log)
        log.parent.mkdir(parents=True, exist_ok=True)
        load_before, cache_before = os.getloadavg(), _cache_entries()
        cmd = [sys.executable, "-m", "ci", "run", "--repo", str(clone), "--commits", sha, "--exact", "--no-resume",
               "--machine", MACHINE, "--db", str(Path(tmp) / "h.sqlite"), "--dashboard", ""]
        t0 = time.monotonic()
        with log.open("w") as f:
            proc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=clone, check=False)
        wall = time.monotonic() - t0
        load_after, cache_after = os.getloadavg(), _cache_entries()
        results = sorted((clone / ".asv" / "results" / MACHINE).glob(f"{sha[:8]}-*.json"))
        if proc.returncode == 2 or not results:
            print(log.read_text()[-4000:], file=sys.stderr)
            print(f"error: the runner exited {proc.returncode} and wrote {len(results)} result file(s)",
                  file=sys.stderr)
            return 2
        table, spills = summarise(results[0], clone / "benchmarks" / "bench_structure.py")

    cpus = len(os.sched_getaffinity(0))
    print(f"exact tier of {sha[:8]} ({subject[:60]}), {time.strftime('%Y-%m-%d %H:%M')}, {cpus} CPUs, "
          f"load average {load_before[0]:.1f} before, {load_after[0]:.1f} after; Triton's cache {cache_before} "
          f"entries before, {cache_after} after (new entries: compiles, by this call or another process)")
    print()
    print("| class | points | measured | skipped | failed | setup_cache s | points s |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in table:
        print(f"| {r['class']} | {r['points']:,} | {r['measured']:,} | {r['skipped']:,} | {r['failed']:,} | "
              f"{r['setup_s']:.1f} | {r['points_s']:.1f} |")
    total = {k: sum(r[k] for r in table) for k in ("points", "measured", "skipped", "failed", "setup_s", "points_s")}
    print(f"| **total** | {total['points']:,} | {total['measured']:,} | {total['skipped']:,} | {total['failed']:,} | "
          f"{total['setup_s']:.1f} | {total['points_s']:.1f} |")
    print()
    within = wall <= args.budget
    print(f"runner call (asv environment, install of the commit, every point, ingest): {wall:.0f} s, budget "
          f"{args.budget:.0f} s: {'within' if within else 'OVER'}; runner exit {proc.returncode}")
    print(f"spill gate: {spills} (kernel, architecture) point(s) spill")
    failed = []
    if not within and args.fail_over_budget:
        failed.append(f"{wall:.0f} s is over the budget of {args.budget:.0f} s")
    if total["failed"]:
        failed.append(f"{total['failed']} point(s) failed (see the runner log {log})")
    if spills:
        failed.append(f"{spills} kernel point(s) spill")
    if proc.returncode != 0:
        failed.append(f"the runner exited {proc.returncode}")
    for why in failed:
        print(f"FAIL: {why}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
