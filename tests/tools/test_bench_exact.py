"""tools.bench_exact's reading of an asv result file: points measured, skipped (NaN) and failed (null) per
class, each setup_cache's seconds on the class that owns it, and the spill gate."""

from __future__ import annotations

import json
from pathlib import Path

from tools.bench_exact import setup_cache_owners, summarise

BENCH = '''
def _shared(self):
    return {}


class A:
    setup_cache = _shared

    def track_x(self, cache):
        return 1


class B:
    setup_cache = _shared

    def track_y(self, cache):
        return 1


class Kernels:
    def setup_cache(self):
        return {}

    def track_spilled_bytes(self, cache, kernel, arch):
        return 0
'''


def test_setup_caches_are_owned_by_the_classes_that_name_them(tmp_path):
    bench = tmp_path / "bench_s.py"
    bench.write_text(BENCH)
    assert setup_cache_owners(bench) == {2: "A + B", 21: "Kernels"}


def test_points_skips_failures_setup_seconds_and_spills(tmp_path):
    bench = tmp_path / "bench_s.py"
    bench.write_text(BENCH)
    cols = ["result", "params", "version", "started_at", "duration"]
    result = {
        "result_columns": cols,
        "results": {
            "bench_s.A.track_x": [[1.0, float("nan"), None], [], "1", 0, 0.5],
            "bench_s.B.track_y": [[2.0], [], "1", 0, 0.25],
            "bench_s.Kernels.track_spilled_bytes": [[0, 64, 0, float("nan")], [], "1", 0, 1.0],
        },
        "durations": {"<setup_cache bench_s:2>": 10.0, "<setup_cache bench_s:21>": 40.0, "<build>": 3.0},
    }
    path = tmp_path / "r.json"
    path.write_text(json.dumps(result))  # NaN as asv writes it
    table, spills = summarise(path, bench)
    got = {r["class"]: (r["points"], r["measured"], r["skipped"], r["failed"], r["setup_s"], r["points_s"])
           for r in table}
    assert got == {"A (setup_cache shared with B)": (3, 1, 1, 1, 10.0, 0.5), "B": (1, 1, 0, 0, 0.0, 0.25),
                   "Kernels": (4, 3, 1, 0, 40.0, 1.0)}
    assert spills == 1
    assert Path(path).read_text().count("NaN") == 2
