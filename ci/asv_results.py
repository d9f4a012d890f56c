"""Read an asv results directory (format version 2, asv 0.6) into plain parsed records.

Layout read (asv `docs/source/dev.rst`, `asv/results.py`):

    <results_dir>/benchmarks.json                     name -> {type, unit, params, param_names, version, ...}
    <results_dir>/<machine>/machine.json              {machine, os, arch, cpu, num_cpu, ram, version: 1}
    <results_dir>/<machine>/<hash[:8]>-<env>.json     one run: commit x machine x environment
    <results_dir>/<machine>/gpu-env-<hash[:8]>.json   our GPU sidecar (benchmarks/ writes it; optional)

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
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ci.records import Benchmark, Direction, Kind, classify

RESULTS_API_VERSION = 2  # asv.results.Results.api_version
BENCHMARKS_API_VERSION = 2  # asv.benchmarks.Benchmarks.api_version
SIDECAR_PREFIX = "gpu-env-"
SIDECAR_MACHINE_KEYS = ("gpu", "driver", "cuda", "torch", "triton")
SIDECAR_ENV_KEYS = ("sm_clock_mhz", "mem_clock_mhz", "temperature_c", "power_w", "captured_at", "attention_launch")
_STAT_COLUMNS = ("ci_99_a", "ci_99_b", "q_25", "q_75", "number", "repeat")
_NOT_RESULT_FILES = {"machine.json", "benchmarks.json"}
_NUMBER_TYPES = {int, float}  # json.loads gives bool for true/false, so bools are rejected
# asv benchmark types that measure a duration or a size: a negative value is corrupt, not a measurement.
_NON_NEGATIVE_TYPES = frozenset({"time", "timeraw", "mem", "peakmem"})


class AsvFormatError(ValueError):
    """An asv file is missing, truncated or not in the format asv 0.6 writes."""


@dataclass(frozen=True)
class BenchmarkInfo:
    """One entry of benchmarks.json: what the result rows need to become series."""

    name: str
    type: str  # time, track, peakmem, mem, timeraw
    unit: str
    param_names: tuple[str, ...]
    version: str | None
    direction: Direction
    kind: Kind


@dataclass(frozen=True)
class ParsedPoint:
    """One point of a benchmark's parameter grid in one run."""

    benchmark: Benchmark
    status: str  # "ok", "failed" (asv null) or "skipped" (asv NaN)
    samples: tuple[float, ...]  # raw samples; (value,) when asv ran without --record-samples
    has_raw_samples: bool
    value: float | None  # asv's reported value (the median); None unless status == "ok"
    stats: dict[str, float]  # ci_99_a, ci_99_b, q_25, q_75, number, repeat when asv recorded them
    benchmark_version: str | None
    started_at: datetime | None
    duration: float | None
    key: str = ""  # benchmark.key, computed once per grid instead of once per point

    def __post_init__(self) -> None:
        if not self.key:
            object.__setattr__(self, "key", self.benchmark.key)


@dataclass(frozen=True)
class ParsedRun:
    """One asv result file: a run of the suite on one commit, machine and environment."""

    path: Path
    run_key: str  # "<machine>/<commit_hash>/<env_name>": asv overwrites the same file for the same key
    digest: str  # sha256 of the file bytes: re-ingesting identical bytes is a no-op
    machine: str
    commit_hash: str
    commit_time: datetime | None  # asv's "date": the commit's time, not the run's
    env_name: str
    started_at: datetime | None  # earliest benchmark start in the file
    environment: tuple[tuple[str, str], ...]
    points: tuple[ParsedPoint, ...]
    skipped_unknown: tuple[str, ...]  # benchmark names absent from benchmarks.json (asv ignores them too)
    skipped_stale: tuple[str, ...]  # results whose benchmark version differs from benchmarks.json


def _load_json(path: Path) -> Any:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise AsvFormatError(f"{path}: file not found") from None
    except OSError as exc:
        raise AsvFormatError(f"{path}: cannot read ({exc})") from None
    try:
        return json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise AsvFormatError(f"{path}: not valid JSON, truncated or corrupt ({exc})") from None


def _check_version(path: Path, data: Any, expected: int) -> None:
    if not isinstance(data, dict):
        raise AsvFormatError(f"{path}: expected a JSON object, got {type(data).__name__}")
    version = data.get("version")
    if version != expected:
        raise AsvFormatError(f"{path}: asv format version {version!r}, expected {expected} (run `asv update`)")


def format_param_value(value_repr: str) -> str:
    """asv's display form of a parameter repr: quotes and `<class '...'>` wrappers stripped
    (the same rules as `asv.results._format_param_value`)."""
    for pattern in (r"^'(.+)'$", r"^u'(.+)'$", r"^<class '(.+)'>$"):
        m = re.match(pattern, value_repr)
        if m:
            return m.group(1)
    return value_repr


def load_benchmarks_json(results_dir: str | Path) -> dict[str, BenchmarkInfo]:
    """Read `<results_dir>/benchmarks.json`.

    Args:
        results_dir: an asv results directory.

    Returns:
        benchmark name -> BenchmarkInfo (type, unit, param names, version, direction, kind).
    """
    path = Path(results_dir) / "benchmarks.json"
    data = _load_json(path)
    _check_version(path, data, BENCHMARKS_API_VERSION)
    out: dict[str, BenchmarkInfo] = {}
    for name, entry in data.items():
        if name == "version":
            continue
        if not isinstance(entry, dict):
            raise AsvFormatError(f"{path}: entry {name!r} is not an object")
        btype = entry.get("type")
        if not isinstance(btype, str):
            raise AsvFormatError(f"{path}: entry {name!r} has no benchmark type")
        unit = entry.get("unit") or ("seconds" if btype in ("time", "timeraw") else "bytes" if "mem" in btype else "")
        param_names = entry.get("param_names") or []
        if not isinstance(param_names, list) or not all(isinstance(p, str) for p in param_names):
            raise AsvFormatError(f"{path}: entry {name!r} has malformed param_names")
        version = entry.get("version")
        direction, kind = classify(btype, str(unit))
        out[name] = BenchmarkInfo(
            name=name,
            type=btype,
            unit=str(unit),
            param_names=tuple(param_names),
            version=None if version is None else str(version),
            direction=direction,
            kind=kind,
        )
    return out


def load_machine_json(machine_dir: str | Path) -> dict[str, str]:
    """Read `<machine_dir>/machine.json` (asv's machine info, format version 1).

    Args:
        machine_dir: `<results_dir>/<machine>`.

    Returns:
        The machine info as strings (`machine`, `os`, `arch`, `cpu`, `num_cpu`, `ram`, ...).
    """
    path = Path(machine_dir) / "machine.json"
    data = _load_json(path)
    _check_version(path, data, 1)
    name = data.get("machine")
    if not isinstance(name, str) or not name:
        raise AsvFormatError(f"{path}: no machine name")
    return {k: str(v) for k, v in data.items() if k != "version" and v is not None}


def read_gpu_sidecar(machine_dir: str | Path, commit_hash: str) -> dict[str, str]:
    """Read the GPU environment sidecar for one commit, `{}` when there is none.

    Args:
        machine_dir: `<results_dir>/<machine>`.
        commit_hash: the full commit hash of the run.

    Returns:
        key -> string value, only keys of the sidecar contract.
    """
    path = Path(machine_dir) / f"{SIDECAR_PREFIX}{commit_hash[:8]}.json"
    if not path.exists():
        return {}
    data = _load_json(path)
    if not isinstance(data, dict):
        raise AsvFormatError(f"{path}: GPU sidecar must be a JSON object")
    allowed = set(SIDECAR_MACHINE_KEYS) | set(SIDECAR_ENV_KEYS)
    return {k: str(v) for k, v in data.items() if k in allowed and v is not None}


def iter_result_files(results_dir: str | Path) -> Iterator[Path]:
    """Result files under `results_dir` in a stable order (machine dir, then file name).

    Args:
        results_dir: an asv results directory.

    Returns:
        An iterator of paths; machine.json, benchmarks.json and GPU sidecars are not result files.
    """
    root = Path(results_dir)
    for machine_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        for path in sorted(machine_dir.glob("*.json")):
            if path.name in _NOT_RESULT_FILES or path.name.startswith(SIDECAR_PREFIX):
                continue
            yield path


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


def with_sidecar(run: ParsedRun, sidecar: dict[str, str]) -> ParsedRun:
    """The run with the GPU sidecar's non-machine keys (clocks, temperature, ...) in its environment.

    Args:
        run: a parsed run.
        sidecar: from `read_gpu_sidecar`.

    Returns:
        A new ParsedRun (the same one when the sidecar adds nothing).
    """
    extra = {k: sidecar[k] for k in SIDECAR_ENV_KEYS if k in sidecar}
    if not extra:
        return run
    return replace(run, environment=tuple(sorted({**dict(run.environment), **extra}.items())))


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
    _check_version(path, data, RESULTS_API_VERSION)
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
