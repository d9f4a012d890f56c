"""Parse one asv result file (format version 2, asv 0.6) into a `ci.records.ParsedRun`.

A result file maps each benchmark name to a row in `result_columns` order; a parameterised
benchmark's per-point lists follow `itertools.product(*params)` (last parameter fastest).
`null` marks a failed point and NaN a skipped one (asv's `util.is_na` treats both as missing);
neither ever becomes a value here, they become `status="failed"` / `"skipped"` points.

Parsing is strict: anything that asv itself could not load, or that would make us store a wrong
number, raises `AsvFormatError` naming the file and the problem. Wrong numbers include an infinite
result, a non-finite sample (NaN is a marker in the result column only) and a negative result or
sample of a benchmark whose type cannot be negative (time, memory); a `track` benchmark may
return any finite number. No SQLAlchemy, no torch.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
import math
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ci.ingest.asv_files import RESULTS_API_VERSION, SIDECAR_ENV_KEYS, AsvFormatError, BenchmarkInfo, check_version
from ci.records import Benchmark, Direction, Kind, ParsedPoint, ParsedRun

_STAT_COLUMNS = ("ci_99_a", "ci_99_b", "q_25", "q_75", "number", "repeat")
_NUMBER_TYPES = {int, float}  # json.loads gives bool for true/false, so bools are rejected
# asv benchmark types that measure a duration or a size: a negative value is corrupt, not a measurement.
_NON_NEGATIVE_TYPES = frozenset({"time", "timeraw", "mem", "peakmem"})


def format_param_value(value_repr: str) -> str:
    """asv's display form of a parameter repr: quotes and `<class '...'>` wrappers stripped
    (the same rules as `asv.results._format_param_value`)."""
    for pattern in (r"^'(.+)'$", r"^u'(.+)'$", r"^<class '(.+)'>$"):
        m = re.match(pattern, value_repr)
        if m:
            return m.group(1)
    return value_repr


def _js_time(value: Any, what: str, path: Path) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise AsvFormatError(f"{path}: {what} must be a JavaScript millisecond timestamp, got {value!r}")
    return datetime.fromtimestamp(value / 1000.0, tz=UTC)


def _is_na(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _per_point(value: Any, n_points: int, column: str, name: str, path: Path) -> list[Any]:
    """A column's per-point list; asv compresses an all-None list to None."""
    if value is None:
        return [None] * n_points
    if not isinstance(value, list) or len(value) != n_points:
        raise AsvFormatError(
            f"{path}: benchmark {name!r}: column {column!r} should list {n_points} points, got {value!r:.80}"
        )
    return value


def _number(value: Any, what: str, path: Path) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise AsvFormatError(f"{path}: {what} is not a number: {value!r:.80}")
    try:
        return float(value)
    except OverflowError:  # an int beyond float range
        raise AsvFormatError(f"{path}: {what} is not a finite number: {value!r:.80}") from None


def _check_measured(value: float, info: BenchmarkInfo, what: str, path: Path) -> None:
    """A measured value must be finite, and not negative for a time or memory benchmark."""
    if not math.isfinite(value):
        raise AsvFormatError(f"{path}: {what} is not a finite number: {value!r}")
    if value < 0 and info.type in _NON_NEGATIVE_TYPES:
        raise AsvFormatError(f"{path}: {what} is negative ({value!r}), impossible for a {info.type!r} benchmark")


def _check_samples(samples: list[Any], has_ints: bool, info: BenchmarkInfo, what: str, path: Path) -> None:
    """`_check_measured` for every sample (already known to be ints and floats)."""
    # One sum and one min instead of a check per sample: ingest reads ~5 M samples per 1,000 runs.
    # A sum of floats is finite when every float is (an overflow to inf only sends it the slow way);
    # ints (track benchmarks) may be beyond float range, so they always go the slow way.
    if has_ints or not math.isfinite(sum(samples)):
        for x in samples:
            _check_measured(_number(x, what, path), info, what, path)
    if info.type in _NON_NEGATIVE_TYPES:
        _check_measured(min(samples), info, what, path)


@functools.lru_cache(maxsize=4096)
def _grid_benchmarks(
    name: str, unit: str, direction: Direction, kind: Kind, names: tuple[str, ...], grid: tuple[tuple[str, ...], ...]
) -> tuple[tuple[Benchmark, str], ...]:
    """The series (and their keys) of one benchmark's parameter grid; cached because every file repeats them."""
    benches = (
        Benchmark(
            name=name,
            params=tuple((pn, format_param_value(v)) for pn, v in zip(names, combo, strict=True)),
            unit=unit,
            direction=direction,
            kind=kind,
        )
        for combo in grid
    )
    return tuple((b, b.key) for b in benches)


def parse_result_file(
    path: str | Path,
    benchmarks: dict[str, BenchmarkInfo],
    machine_info: dict[str, str],
    sidecar: dict[str, str] | None = None,
) -> ParsedRun:
    """Parse one asv result file into points.

    Args:
        path: `<results_dir>/<machine>/<hash[:8]>-<env>.json`.
        benchmarks: from `load_benchmarks_json`.
        machine_info: from `load_machine_json` for the file's machine directory.
        sidecar: the GPU sidecar for this commit (`read_gpu_sidecar`); its non-machine keys go
            into the run's environment.

    Returns:
        A ParsedRun; raises AsvFormatError on anything malformed.
    """
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise AsvFormatError(f"{path}: cannot read ({exc})") from None
    try:
        data = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise AsvFormatError(f"{path}: not valid JSON, truncated or corrupt ({exc})") from None
    check_version(path, data, RESULTS_API_VERSION)
    for key in ("commit_hash", "env_name", "params", "results", "result_columns"):
        if key not in data:
            raise AsvFormatError(f"{path}: missing key {key!r}")
    commit_hash = data["commit_hash"]
    if not isinstance(commit_hash, str) or not re.fullmatch(r"[0-9a-fA-F]{7,64}", commit_hash):
        raise AsvFormatError(f"{path}: commit_hash is not a hex commit id: {commit_hash!r:.80}")
    env_name = data["env_name"]
    if not isinstance(env_name, str):
        raise AsvFormatError(f"{path}: env_name is not a string")
    params = data["params"]
    if not isinstance(params, dict):
        raise AsvFormatError(f"{path}: params (machine info) is not an object")
    machine = params.get("machine")
    if machine != machine_info.get("machine"):
        raise AsvFormatError(
            f"{path}: machine name {machine!r} does not match machine.json {machine_info.get('machine')!r}"
        )
    columns = data["result_columns"]
    if not isinstance(columns, list) or "result" not in columns or "params" not in columns:
        raise AsvFormatError(f"{path}: result_columns must list at least 'result' and 'params'")
    results = data["results"]
    if not isinstance(results, dict):
        raise AsvFormatError(f"{path}: results is not an object")

    points: list[ParsedPoint] = []
    unknown: list[str] = []
    stale: list[str] = []
    starts: list[datetime] = []
    for name, row in results.items():
        if not isinstance(row, list) or len(row) > len(columns):
            raise AsvFormatError(f"{path}: benchmark {name!r}: row does not match result_columns")
        cols = dict(zip(columns, row, strict=False))  # trailing all-None columns are dropped by asv
        info = benchmarks.get(name)
        if info is None:
            unknown.append(name)
            continue
        version = cols.get("version")
        if info.version is not None and version is not None and str(version) != info.version:
            stale.append(name)
            continue
        bparams = cols.get("params") or []
        if not isinstance(bparams, list) or not all(
            isinstance(p, list) and all(isinstance(v, str) for v in p) for p in bparams
        ):
            raise AsvFormatError(f"{path}: benchmark {name!r}: params must be lists of value reprs")
        names = (
            info.param_names
            if len(info.param_names) == len(bparams)
            else tuple(f"param{i + 1}" for i in range(len(bparams)))
        )
        grid = tuple(itertools.product(*bparams)) if bparams else ((),)
        n = len(grid)
        result = cols.get("result")
        if bparams:
            values = _per_point(result, n, "result", name, path)
        else:
            # Unparameterised benchmarks store a one-element list (asv >= 0.5); accept a bare number too.
            values = result if isinstance(result, list) else [result]
            if len(values) != 1:
                raise AsvFormatError(f"{path}: benchmark {name!r}: expected one result, got {len(values)}")
        samples_col = _per_point(cols.get("samples"), n, "samples", name, path)
        stats_cols = {s: _per_point(cols.get(f"stats_{s}"), n, f"stats_{s}", name, path) for s in _STAT_COLUMNS}
        started = _js_time(cols.get("started_at"), f"benchmark {name!r} started_at", path)
        if started is not None:
            starts.append(started)
        duration = cols.get("duration")
        duration = None if duration is None else _number(duration, f"benchmark {name!r} duration", path)
        grid_benches = _grid_benchmarks(name, info.unit, info.direction, info.kind, names, grid)
        for j, (bench, key) in enumerate(grid_benches):
            value = values[j]
            if _is_na(value):
                status = "failed" if value is None else "skipped"
                points.append(
                    ParsedPoint(
                        bench,
                        status,
                        (),
                        False,
                        None,
                        {},
                        None if version is None else str(version),
                        started,
                        duration,
                        key,
                    )
                )
                continue
            value = _number(value, f"benchmark {name!r} point {j} result", path)
            _check_measured(value, info, f"benchmark {name!r} point {j} result", path)
            raw_samples = samples_col[j]
            if raw_samples is not None:
                if not isinstance(raw_samples, list) or not raw_samples:
                    raise AsvFormatError(f"{path}: benchmark {name!r} point {j}: samples must be a non-empty list")
                # One set of types instead of a check per sample: ingest reads ~5 M samples per 1,000 runs.
                sample_types = {type(x) for x in raw_samples}
                if not sample_types <= _NUMBER_TYPES:
                    raise AsvFormatError(f"{path}: benchmark {name!r} point {j}: samples must all be numbers")
                _check_samples(raw_samples, int in sample_types, info, f"benchmark {name!r} point {j} sample", path)
                samples = tuple(raw_samples)
            else:
                samples = (value,)
            stats = {s: col[j] for s, col in stats_cols.items() if col[j] is not None}
            if not {type(x) for x in stats.values()} <= _NUMBER_TYPES:
                raise AsvFormatError(f"{path}: benchmark {name!r} point {j}: stats must all be numbers")
            points.append(
                ParsedPoint(
                    bench,
                    "ok",
                    samples,
                    raw_samples is not None,
                    value,
                    stats,
                    None if version is None else str(version),
                    started,
                    duration,
                    key,
                )
            )

    env: dict[str, str] = {"env_name": env_name}
    if isinstance(data.get("python"), str):
        env["python"] = data["python"]
    requirements = data.get("requirements")
    if isinstance(requirements, dict):
        env.update({f"req:{k}": str(v) for k, v in requirements.items()})
    env_vars = data.get("env_vars")
    if isinstance(env_vars, dict):
        env.update({f"env:{k}": str(v) for k, v in env_vars.items()})
    for key in SIDECAR_ENV_KEYS:
        if sidecar and key in sidecar:
            env[key] = sidecar[key]
    return ParsedRun(
        path=path,
        run_key=f"{machine}/{commit_hash}/{env_name}",
        digest=hashlib.sha256(raw).hexdigest(),
        machine=machine,
        commit_hash=commit_hash,
        commit_time=_js_time(data.get("date"), "date", path),
        env_name=env_name,
        started_at=min(starts) if starts else None,
        environment=tuple(sorted(env.items())),
        points=tuple(points),
        skipped_unknown=tuple(unknown),
        skipped_stale=tuple(stale),
    )
