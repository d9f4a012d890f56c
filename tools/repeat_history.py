"""Write a long history with real noise: a real asv results directory's commits, repeated.

The real histories under evaluation are 59-223 commits long; a project that benchmarks every commit
for a few years holds thousands, and the detector reads a long history in windows, with whole-series
statistics (its noise, its flips) that a short one never stresses. This writes such a history from a
short one: its commits in order (by the files' dates, then commit hash, as `ci ingest` orders them
without a checkout), `--repeat` times, each copy under new commit hashes and dates. Every
series (one benchmark point of one environment of one machine folder) of copy t is scaled by r**t,
where r is that series' level over its last 5 commits against its first 5, so each copy starts where
the copy before it ended: no step at the joins, the real series' own steps, outliers and noise
repeated. (Copies alternately reversed would also join without a step, but each real step then comes
back reversed a few commits later and reads as a flip.) A series whose level moves a lot over the real
history would compound past plausible values (uxarray's import time rises 9x: 9**14 over 15 copies puts
it at 1e15 s, which ingest refuses with the whole file), so r is bounded to keep the whole history
within `MAX_DRIFT` of the real levels and `HEADROOM` under ingest's limits: such a series steps back
at each join, and the count of them is printed. Dates are shifted back, so the last copy ends at the
real history's last date (forward instead where the first copy would start before 2000).

Every command that takes an asv results directory can then run on it: `tools.eval_history`,
`ci ingest`, `ci dashboard`. The result files keep asv's format and every field; values, their
statistics and samples are scaled; commit hashes are sha1("<copy>:<hash>"). Files that are not JSON
objects with a commit hash are counted and left out.

Usage: python -m tools.repeat_history RESULTS_DIR OUT [--repeat 6]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import shutil
import sys
from pathlib import Path
from typing import Any

import numpy as np

from ci.ingest.asv_files import iter_result_files, load_benchmarks_json
from ci.ingest.parse import magnitude_limit

SCALED = ("result", "stats_ci_99_a", "stats_ci_99_b", "stats_q_25", "stats_q_75")
ENDS = 5  # commits at each end of a series whose median levels give its ratio r
GAP_MS = 3_600_000  # between one copy's last date and the next copy's first
MAX_DRIFT = 1e12  # the copies scale a series by at most this factor either way over the whole history
HEADROOM = 10.0  # ...and keep its values this far under what ingest accepts (`magnitude_limit`)
EARLIEST_MS = 946_684_800_000  # 2000-01-01: the first copy's first date, at the earliest


def _positive(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and x == x and x > 0


def _read(results_dir: Path) -> tuple[list[tuple[Path, dict[str, Any]]], int]:
    """(result file, its content) of every readable result file, and how many were left out."""
    runs, bad = [], 0
    for path in iter_result_files(results_dir):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError):
            bad += 1
            continue
        if (not isinstance(data, dict) or not isinstance(data.get("commit_hash"), str)
                or not isinstance(data.get("results"), dict) or not isinstance(data.get("result_columns"), list)):
            bad += 1
            continue
        runs.append((path, data))
    return runs, bad


def _entries(data: dict[str, Any]) -> list[tuple[str, list[Any], int]]:
    """(benchmark name, its row, the index of the `result` column) of a run's results."""
    cols = data["result_columns"]
    if "result" not in cols:
        return []
    at = cols.index("result")
    return [(name, row, at) for name, row in data["results"].items()
            if isinstance(row, list) and len(row) > at and isinstance(row[at], list)]


def _ratios(runs: list[tuple[Path, dict[str, Any]]], order: dict[str, int], repeat: int,
            limits: dict[str, float]) -> tuple[dict[tuple[str, ...], float], int]:
    """Per series (machine folder, environment, benchmark, point), its last-`ENDS` over first-`ENDS`
    median level, for series with at least 2 x `ENDS` commits, bounded so that `repeat` copies stay
    within `MAX_DRIFT` and `HEADROOM` under their benchmark's limit in `limits` (by name); and how
    many series that bound moved."""
    values: dict[tuple[str, ...], list[tuple[int, float]]] = {}
    for path, data in runs:
        for name, row, at in _entries(data):
            for i, v in enumerate(row[at]):
                if _positive(v):
                    key = (path.parent.name, str(data.get("env_name")), name, str(i))
                    values.setdefault(key, []).append((order[data["commit_hash"]], float(v)))
    out, bounded = {}, 0
    for key, pts in values.items():
        if len(pts) >= 2 * ENDS:
            v = [x for _, x in sorted(pts)]
            r = float(np.median(v[-ENDS:]) / np.median(v[:ENDS]))
            if repeat > 1:
                most = limits.get(key[2], math.inf) / HEADROOM
                top = min(MAX_DRIFT, most / max(v)) ** (1.0 / (repeat - 1))
                low = MAX_DRIFT ** (-1.0 / (repeat - 1))
                if not low <= r <= top:
                    r, bounded = min(max(r, low), max(top, 1.0)), bounded + 1
            out[key] = r
    return out, bounded


def _scaled(data: dict[str, Any], machine: str, ratios: dict[tuple[str, ...], float], copy: int) -> dict[str, Any]:
    """A deep copy of a run with every series' values, statistics and samples scaled for `copy`."""
    data = json.loads(json.dumps(data))
    cols = data["result_columns"]
    for name, row, at in _entries(data):
        for i in range(len(row[at])):
            f = ratios.get((machine, str(data.get("env_name")), name, str(i)), 1.0) ** copy
            for col in (*SCALED, "samples"):
                j = cols.index(col) if col in cols else -1
                if not 0 <= j < len(row) or not isinstance(row[j], list) or i >= len(row[j]):
                    continue
                x = row[j][i]
                if col == "samples" and isinstance(x, list):
                    row[j][i] = [s * f if _positive(s) else s for s in x]
                elif _positive(x):
                    row[j][i] = x * f
    return data


def repeat_history(results_dir: Path, out: Path, repeat: int) -> dict[str, int]:
    """Write `repeat` copies of `results_dir`'s history under `out` (made; must not hold a results
    directory yet) and return its counts."""
    if repeat < 1:
        raise ValueError(f"repeat must be >= 1, got {repeat}")
    if not (results_dir / "benchmarks.json").is_file():
        raise FileNotFoundError(f"{results_dir} holds no benchmarks.json: not an asv results directory")
    target = out / "results"
    if target.exists():
        raise FileExistsError(f"{target} exists: choose an empty output folder")
    runs, bad = _read(results_dir)
    if not runs:
        raise ValueError(f"{results_dir} holds no readable result file")
    first_date: dict[str, int] = {}
    for _, data in runs:
        date = data.get("date") if isinstance(data.get("date"), int) else 0
        sha = data["commit_hash"]
        first_date[sha] = min(first_date.get(sha, date), date)
    shas = sorted(first_date, key=lambda s: (first_date[s], s))
    order = {sha: i for i, sha in enumerate(shas)}
    limits = {name: magnitude_limit(info)[0] for name, info in load_benchmarks_json(results_dir).items()}
    ratios, joined = _ratios(runs, order, repeat, limits)
    span = first_date[shas[-1]] - first_date[shas[0]] + GAP_MS
    # The last copy ends at the real history's last date, unless the first would then start before
    # 2000 (ingest warns of such dates, and refuses one before 1970): then the copies follow it.
    start = -(repeat - 1) * span if first_date[shas[0]] - (repeat - 1) * span >= EARLIEST_MS else 0
    target.mkdir(parents=True)
    shutil.copy2(results_dir / "benchmarks.json", target / "benchmarks.json")
    conf = results_dir.parent / "asv.conf.json"
    if conf.is_file():
        shutil.copy2(conf, out / "asv.conf.json")
    for machine_json in results_dir.glob("*/machine.json"):
        (target / machine_json.parent.name).mkdir(exist_ok=True)
        shutil.copy2(machine_json, target / machine_json.parent.name / "machine.json")
    written = 0
    for copy in range(repeat):
        for path, data in runs:
            machine = path.parent.name
            sha = data["commit_hash"]
            new = hashlib.sha1(f"{copy}:{sha}".encode()).hexdigest()
            run = _scaled(data, machine, ratios, copy)
            run["commit_hash"] = new
            if isinstance(run.get("date"), int):
                run["date"] = run["date"] + start + copy * span
            name = path.name[len(sha[:8]):] if path.name.startswith(sha[:8]) else "-" + path.name
            (target / machine).mkdir(exist_ok=True)
            (target / machine / f"{new[:8]}{name}").write_text(json.dumps(run), encoding="utf-8")
            written += 1
    return {"commits": len(shas) * repeat, "result files": written, "series scaled": len(ratios),
            f"series stepping back at the joins (past {MAX_DRIFT:g}x or ingest's limits)": joined,
            "files left out": bad}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.repeat_history", description=__doc__.split("\n\n")[0])
    ap.add_argument("results_dir", type=Path, help="an asv results directory (benchmarks.json inside)")
    ap.add_argument("out", type=Path, help="folder to write (results/ and asv.conf.json inside)")
    ap.add_argument("--repeat", type=int, default=6, help="copies of the history, one after the other")
    args = ap.parse_args(argv)
    try:
        counts = repeat_history(args.results_dir, args.out, args.repeat)
    except (OSError, ValueError) as exc:
        ap.error(str(exc))
    print(f"{args.out / 'results'}: " + ", ".join(f"{v:,} {k}" for k, v in counts.items()), file=sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
