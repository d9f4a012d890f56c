"""Which way is better for a tracked value: the `direction` attribute, carried into asv's benchmarks.json.

asv assumes lower is better everywhere and has no direction of its own; its discovery writes to
benchmarks.json only the attributes its benchmark classes set (`unit`, `type`, `version`, ...).
So every `track_*` benchmark of this suite declares `direction` (`HIGHER` or `LOWER`) next to its
`unit`, and importing this package (asv does, before it looks for benchmarks) puts in front of
asv_runner's track type a subclass that records that attribute too: it reaches benchmarks.json,
where the service reads it (`ci.ingest.asv_files.load_benchmarks_json`). Time and memory
benchmarks need none: lower is better by what they measure.

Where asv_runner is missing or laid out differently (outside asv, another asv_runner), nothing is
registered: the service then goes by the unit (`ci.records.UNIT_SEMANTICS`), and reports a unit
it does not know as of unknown direction, never guessed.
"""

from __future__ import annotations

HIGHER = "higher"
LOWER = "lower"
DIRECTIONS = (HIGHER, LOWER)
# A track benchmark whose value is exact (the same on every run and machine: a count, a size) declares
# `exact = EXACT` next to its direction; benchmarks.json carries it and the service then compares the
# series without noise thresholds or sampling statistics (`ci.records.Kind.EXACT`).
EXACT = True


def declared_exact(attr_sources: list[object]) -> bool:
    """Whether a benchmark's attribute sources declare `exact = True` (asv's lookup order, as for `unit`)."""
    for source in attr_sources:
        value = getattr(source, "exact", None)
        if value is not None:
            return value is True
    return False


def declared_direction(attr_sources: list[object]) -> str | None:
    """The first `direction` attribute of a benchmark's attribute sources (its method, instance,
    module: asv's own lookup order for `unit`), None when none declares one."""
    for source in attr_sources:
        value = getattr(source, "direction", None)
        if value is not None:
            return value
    return None


def register_with_asv() -> bool:
    """Make asv's discovery record a track benchmark's `direction` (and `exact`, where declared) in
    benchmarks.json (idempotent).

    Returns:
        True when asv_runner's track type is (now) the recording one; False when asv_runner is not
        importable here or has no `benchmark_types` registry of that shape.
    """
    try:
        from asv_runner.benchmarks import benchmark_types
        from asv_runner.benchmarks.track import TrackBenchmark
    except ImportError:
        return False
    if not isinstance(benchmark_types, list):
        return False
    if any(getattr(kind, "records_direction", False) for kind in benchmark_types):
        return True

    class DirectedTrackBenchmark(TrackBenchmark):
        """asv's track benchmark, plus the declared `direction` (a string, so asv writes it out) and
        `exact` (a bool, written only where true)."""

        records_direction = True

        def __init__(self, name: str, func: object, attr_sources: list[object]) -> None:
            super().__init__(name, func, attr_sources)
            direction = declared_direction(attr_sources)
            if direction is not None:
                self.direction = str(direction)
            if declared_exact(attr_sources):
                self.exact = True

    benchmark_types.insert(0, DirectedTrackBenchmark)
    return True
