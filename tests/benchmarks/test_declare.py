"""Every tracked value of the suite declares which way is better, and asv's discovery carries the
declaration into benchmarks.json, where the service reads it (benchmarks.declare)."""

from __future__ import annotations

import io
import json
from pathlib import Path

from benchmarks import declare

SUITE = Path(__file__).resolve().parents[2] / "benchmarks"


def _discovered() -> list[dict]:
    """What `asv run` writes to benchmarks.json for this suite: asv_runner's own discovery."""
    from asv_runner.discovery import list_benchmarks

    buf = io.StringIO()
    list_benchmarks(str(SUITE), buf)
    return json.loads(buf.getvalue())


def test_every_track_benchmark_declares_its_direction_in_benchmarks_json():
    listed = _discovered()
    tracks = [b for b in listed if b["type"] == "track"]
    assert len(tracks) >= 7
    assert all(b.get("direction") in declare.DIRECTIONS for b in tracks), [b["name"] for b in tracks
                                                                            if "direction" not in b]
    by_name = {b["name"]: b["direction"] for b in tracks}
    assert by_name["bench_correctness.ModelCorrectnessPR.track_top1_agreement"] == declare.HIGHER
    assert by_name["bench_correctness.KernelError.track_max_abs_error"] == declare.LOWER
    assert all("direction" not in b for b in listed if b["type"] != "track")  # time: lower by what it measures


def test_the_service_reads_the_declarations(tmp_path):
    from ci.ingest.asv_files import load_benchmarks_json
    from ci.records import Direction

    listed = _discovered()
    (tmp_path / "benchmarks.json").write_text(json.dumps({"version": 2, **{b["name"]: b for b in listed}}))
    info = load_benchmarks_json(tmp_path)
    assert all(info[b["name"]].direction == Direction(b["direction"]) for b in listed if "direction" in b)
    assert all(i.direction != Direction.UNKNOWN for i in info.values())


def test_registering_twice_adds_one_type():
    from asv_runner.benchmarks import benchmark_types

    assert declare.register_with_asv() and declare.register_with_asv()
    assert sum(getattr(t, "records_direction", False) for t in benchmark_types) == 1
