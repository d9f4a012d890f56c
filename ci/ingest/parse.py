"""Parse one asv result file (format version 2, asv 0.6) into a `ci.records.ParsedRun`.

A result file maps each benchmark name to a row in `result_columns` order; a parameterised
benchmark's per-point lists follow `itertools.product(*params)` (last parameter fastest).
`null` marks a failed point and NaN a skipped one (asv's `util.is_na` treats both as missing);
neither ever becomes a value here, they become `status="failed"` / `"skipped"` points.

Parsing is strict: anything that asv itself could not load, or that would make us store a wrong
number, raises `AsvFormatError` naming the file and the problem. Wrong numbers include:
- a non-finite result, sample, statistic or duration (NaN is a marker in the result column only;
  asv writes -inf/+inf as the bounds of the 99% interval of a single sample, and only there);
- a negative result or sample of a benchmark whose type cannot be negative (time, memory); a
  `track` benchmark may return any finite number;
- an absurd magnitude (`MAX_SECONDS` for a time, `MAX_BYTES` for a size, `MAX_TRACKED` for any
  other tracked value: beyond it the ratios and spreads the verdicts compute overflow);
- a result outside the range of its own raw samples (asv's result is their median);
- a timestamp outside 1970-2100, a parameter grid of more than `MAX_GRID_POINTS` points, more than
  `MAX_FILE_POINTS` points in one file.
No SQLAlchemy, no torch.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import math
import operator
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ci.ingest.asv_files import (
    MAX_RESULT_BYTES,
    RESULTS_API_VERSION,
    SIDECAR_ENV_KEYS,
    AsvFormatError,
    BenchmarkInfo,
    check_version,
    parse_json,
    read_file,
)
from ci.records import STAT_NAMES, Benchmark, Direction, Kind, ParsedPoint, ParsedRun, PointBlock
from ci.store.hosts import HOST_KEYS
from ci.text import clip, quote_path, redact_text, redact_variable

_STAT_COLUMNS = STAT_NAMES
_NUMBER_TYPES = {int, float}  # json.loads gives bool for true/false, so bools are rejected
# asv benchmark types that measure a duration or a size: a negative value is corrupt, not a measurement
# (asv_runner 0.3 writes time, memory, peakmemory; older asv mem, peakmem).
_NON_NEGATIVE_TYPES = frozenset({"time", "timeraw", "memory", "peakmemory", "mem", "peakmem"})
_TIME_TYPES = frozenset({"time", "timeraw"})
_SIZE_TYPES = frozenset({"memory", "peakmemory", "mem", "peakmem"})
MAX_SECONDS = 1e6  # 11.6 days per sample, or for a benchmark's whole run (`duration`); asv's default timeout is 60 s
MAX_BYTES = float(2**64)  # a size beyond a 64-bit address space
MAX_TRACKED = 1e100  # any other value: squares and ratios of values this size stay finite
# The suite's largest grid has a few hundred points (benchmarks/presets.py), MetPy's file 128 points in all.
# A point costs ~4 KB of memory until it is stored, and a series two dashboard pages: one 3 MB file of
# three 99,856-point grids took 1.2 GB and 25 s to ingest and 600,000 pages to render (2026-12-06); a
# benchmark's grid comes from the code measured, so a pull request chooses it. A grid of 20,000 points
# is hours of asv's time at one second a point.
MAX_GRID_POINTS = 20_000
MAX_FILE_POINTS = 100_000
# JavaScript millisecond timestamps asv writes (`date`, `started_at`): 1970-01-01 to 2100-01-01.
_MIN_JS_TIME, _MAX_JS_TIME = 0, 4_102_444_800_000


class _Bad(Exception):
    """A problem with the file being parsed; `parse_result_file` prefixes the file's name."""


def format_param_value(value_repr: str) -> str:
    """asv's display form of a parameter repr: quotes and `<class '...'>` wrappers stripped
    (the same rules as `asv.results._format_param_value`)."""
    for pattern in (r"^'(.+)'$", r"^u'(.+)'$", r"^<class '(.+)'>$"):
        m = re.match(pattern, value_repr)
        if m:
            return m.group(1)
    return value_repr


def _js_time(value: Any, what: str) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _Bad(f"{what} must be a JavaScript millisecond timestamp, got {clip(value, 80)}")
    if not _MIN_JS_TIME <= value < _MAX_JS_TIME:
        raise _Bad(f"{what} is {clip(value, 40)}, not a millisecond timestamp between 1970 and 2100")
    return datetime.fromtimestamp(value / 1000.0, tz=UTC)


def _is_na(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _per_point(value: Any, n_points: int, column: str, name: str) -> list[Any]:
    """A column's per-point list; asv compresses an all-None list to None."""
    if value is None:
        return [None] * n_points
    if not isinstance(value, list) or len(value) != n_points:
        raise _Bad(f"benchmark {name!r}: column {column!r} should list {n_points} points, got {clip(value, 80)}")
    return value


def _number(value: Any, what: str) -> float:
    """A finite JSON number as a float."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _Bad(f"{what} is not a number: {clip(value, 80)}")
    try:
        number = float(value)
    except OverflowError:  # an int beyond float range
        raise _Bad(f"{what} is not a finite number: {clip(value, 80)}") from None
    if not math.isfinite(number):
        raise _Bad(f"{what} is not a finite number: {number!r}")
    return number


def magnitude_limit(info: BenchmarkInfo) -> tuple[float, str]:
    """The largest plausible |value| of a benchmark's results, and its unit for messages."""
    if info.type in _TIME_TYPES or info.unit == "seconds":
        return MAX_SECONDS, "s"
    if info.type in _SIZE_TYPES or info.unit == "bytes":
        return MAX_BYTES, "bytes"
    return MAX_TRACKED, info.unit


def _check_measured(value: float, info: BenchmarkInfo, what: str, zero_ok: bool = False) -> None:
    """A measured value must be finite, above zero for a time or memory benchmark (a run takes time and
    a process memory: a result of 0 is a timer or a probe that did not work, and a comparison read it
    as a 100% speed-up; one sample of 0 among others, `zero_ok`, is a coarse timer's), and not absurd."""
    if not math.isfinite(value):
        raise _Bad(f"{what} is not a finite number: {value!r}")
    if (value < 0 or (value == 0 and not zero_ok)) and info.type in _NON_NEGATIVE_TYPES:
        raise _Bad(f"{what} is {'negative' if value else 'zero'} ({value!r}), impossible for a {info.type!r} "
                   "benchmark")
    limit, unit = magnitude_limit(info)
    if abs(value) > limit:
        raise _Bad(f"{what} is {value!r}, beyond any plausible measurement (limit {limit:g} {unit})")


def _check_samples(samples: list[Any], has_ints: bool, info: BenchmarkInfo, what: str) -> tuple[float, float]:
    """`_check_measured` for every sample (already known to be ints and floats); their (min, max)."""
    # One sum and one min/max instead of a check per sample: ingest reads ~5 M samples per 1,000 runs.
    # A sum of floats is finite when every float is (an overflow to inf only sends it the slow way);
    # ints (track benchmarks) may be beyond float range, so they always go the slow way.
    if has_ints or not math.isfinite(sum(samples)):
        for x in samples:
            _check_measured(_number(x, what), info, what, zero_ok=True)
    lo, hi = float(min(samples)), float(max(samples))
    _check_measured(lo, info, what, zero_ok=True)
    _check_measured(hi, info, what, zero_ok=True)
    return lo, hi


def _check_stat_column(
    stat: str, column: list[Any], values: list[Any], info: BenchmarkInfo, name: str, all_results: bool = False
) -> None:
    """`_check_stat` for the points of one `stats_*` column that have a result; one pass over the
    column when it is all finite numbers in range (the common case), the per-value check otherwise.
    `all_results`: every point has a result (no value to filter out by its point)."""
    if all_results and None not in column:
        present = column
    else:
        present = [x for x, v in zip(column, values, strict=True) if x is not None and not _is_na(v)]
    if not present:
        return
    limit, _ = magnitude_limit(info)
    types = set(map(type, present))
    if types <= _NUMBER_TYPES:
        try:
            lo, hi, total = min(present), max(present), sum(present)
        except OverflowError:  # an int beyond float range
            lo = hi = total = math.inf
        counts = stat in ("number", "repeat")
        if math.isfinite(total) and (
            (counts and lo >= 1 and hi <= 1e12 and (types == {int} or all(
                type(x) is int or x == int(x) for x in present)))
            or (not counts and -limit <= lo and hi <= limit)
        ):
            return
    for j, (x, v) in enumerate(zip(column, values, strict=True)):
        if x is not None and not _is_na(v):
            _check_stat(stat, x, info, f"benchmark {name!r} point {j}")


def _check_stat(stat: str, value: Any, info: BenchmarkInfo, what: str) -> float:
    """One `stats_*` value: finite (the 99% interval of a single sample is asv's (-inf, +inf):
    kept as that), within the benchmark's magnitude limit, and a positive count for number/repeat."""
    if isinstance(value, float) and math.isinf(value) and (stat, value > 0) in (("ci_99_a", False), ("ci_99_b", True)):
        return value
    number = _number(value, f"{what} stats_{stat}")
    if stat in ("number", "repeat"):
        if number < 1 or number > 1e12 or number != int(number):
            raise _Bad(f"{what} stats_{stat} is {clip(value, 40)}, not a positive count")
        return number
    limit, unit = magnitude_limit(info)
    if abs(number) > limit:
        raise _Bad(f"{what} stats_{stat} is {number!r}, beyond any plausible measurement (limit {limit:g} {unit})")
    return number


def _plain_stats(stats_cols: dict[str, list[Any]], info: BenchmarkInfo) -> bool:
    """True when every point has every statistic, the counts (number, repeat) as ints in [1, 1e12]
    and the others as finite floats within the benchmark's magnitude limit: what `_check_stat_column`
    accepts, decided in two passes instead of six (each point must have a result: the caller says)."""
    counts = stats_cols["number"] + stats_cols["repeat"]
    if set(map(type, counts)) != {int} or min(counts) < 1 or max(counts) > 1e12:
        return False
    floats = stats_cols["ci_99_a"] + stats_cols["ci_99_b"] + stats_cols["q_25"] + stats_cols["q_75"]
    if set(map(type, floats)) != {float} or not math.isfinite(sum(floats)):
        return False
    limit, _ = magnitude_limit(info)
    return -limit <= min(floats) and max(floats) <= limit


def _all_finite_floats(values: list[Any]) -> bool:
    """True when `values` are all finite floats (so none is asv's None or NaN marker): one type set
    and one sum instead of a test per value (an overflowing sum only answers False)."""
    return bool(values) and set(map(type, values)) == {float} and math.isfinite(sum(values))


def _fast_points(
    grid_benches: tuple[tuple[Benchmark, str], ...],
    values: list[Any],
    samples_col: list[Any],
    stats_cols: dict[str, list[Any]],
    info: BenchmarkInfo,
    version: str | None,
    started: datetime | None,
    duration: float | None,
) -> PointBlock | None:
    """The points of one benchmark's row, as one block of columns, when it is the common case:
    every result a finite float, every point's samples a non-empty list of finite floats (or no point's), all within the
    benchmark's limits and each result within its samples' range. The checks run once per column
    instead of once per value (2026-12-02: a third of the parse). None when anything is otherwise:
    the per-point checks then decide, with their messages, so what is accepted and refused is
    unchanged. The stats columns are checked before (`_check_stat_column`)."""
    if not _all_finite_floats(values):
        return None
    negative_ok = info.type not in _NON_NEGATIVE_TYPES
    limit, _ = magnitude_limit(info)
    lo, hi = min(values), max(values)
    if (lo <= 0 and not negative_ok) or lo < -limit or hi > limit:
        return None
    if set(map(type, samples_col)) == {list}:
        if 0 in map(len, samples_col):
            return None
        flat = list(itertools.chain.from_iterable(samples_col))
        if not _all_finite_floats(flat):
            return None
        lo, hi = min(flat), max(flat)
        if (lo < 0 and not negative_ok) or lo < -limit or hi > limit:
            return None
        # Each result within its samples' range: exactly (all in C) first; only when that fails, with
        # the per-point slack the per-point check allows.
        if not (all(map(operator.le, map(min, samples_col), values))
                and all(map(operator.ge, map(max, samples_col), values))):  # fmt: skip
            for value, lo, hi in zip(values, map(min, samples_col), map(max, samples_col), strict=True):
                slack = 1e-9 * max(abs(lo), abs(hi))
                if not lo - slack <= value <= hi + slack:
                    return None
        samples: list[Any] = samples_col
        raw = True
    elif all(x is None for x in samples_col):
        samples = [(v,) for v in values]
        raw = False
    else:
        return None
    return PointBlock(grid_benches, values, samples, raw, tuple(stats_cols.values()), version, started, duration)


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
    *,
    raw: bytes | None = None,
    digest: str | None = None,
) -> ParsedRun:
    """Parse one asv result file into points.

    Args:
        path: `<results_dir>/<machine>/<hash[:8]>-<env>.json`.
        benchmarks: from `load_benchmarks_json`.
        machine_info: from `load_machine_json` for the file's machine directory.
        sidecar: the GPU sidecar for this commit (`read_gpu_sidecar`); its non-machine keys go
            into the run's environment.
        raw: the file's bytes when the caller has read them already (`ci.ingest.asv_files.read_file`);
            None reads the file (a regular file of at most `MAX_RESULT_BYTES`).
        digest: the sha256 hex digest of `raw` when the caller has computed it (ingest does, to
            skip files stored before); None computes it.

    Returns:
        A ParsedRun; raises AsvFormatError ("FILE: reason") on anything malformed.
    """
    path = Path(path)
    if raw is None:
        raw = read_file(path, MAX_RESULT_BYTES)
    data = parse_json(raw, path)
    check_version(path, data, RESULTS_API_VERSION)
    try:
        return _parse(path, digest or hashlib.sha256(raw).hexdigest(), data, benchmarks, machine_info, sidecar)
    except _Bad as exc:
        raise AsvFormatError(f"{quote_path(path)}: {exc}") from None


def _parse(
    path: Path,
    digest: str,
    data: dict[str, Any],
    benchmarks: dict[str, BenchmarkInfo],
    machine_info: dict[str, str],
    sidecar: dict[str, str] | None,
) -> ParsedRun:
    for key in ("commit_hash", "env_name", "params", "results", "result_columns"):
        if key not in data:
            raise _Bad(f"missing key {key!r}")
    commit_hash = data["commit_hash"]
    if not isinstance(commit_hash, str) or not re.fullmatch(r"[0-9a-fA-F]{7,64}", commit_hash):
        raise _Bad(f"commit_hash is not a hex commit id: {clip(commit_hash, 80)}")
    commit_hash = commit_hash.lower()  # git's names are lower case; capitals name the same commit
    env_name = data["env_name"]
    if not isinstance(env_name, str):
        raise _Bad("env_name is not a string")
    params = data["params"]
    if not isinstance(params, dict):
        raise _Bad("params (machine info) is not an object")
    machine = params.get("machine")
    if not isinstance(machine, str) or machine != machine_info.get("machine"):
        raise _Bad(f"machine name {clip(machine, 80)} does not match machine.json "
                   f"{clip(machine_info.get('machine'), 80)}")
    columns = data["result_columns"]
    if not isinstance(columns, list) or "result" not in columns or "params" not in columns:
        raise _Bad("result_columns must list at least 'result' and 'params'")
    results = data["results"]
    if not isinstance(results, dict):
        raise _Bad("results is not an object")

    points: list[ParsedPoint] = []
    blocks: list[PointBlock] = []
    unknown: list[str] = []
    stale: list[str] = []
    skipped_versions: list[tuple[str, str | None]] = []
    starts: list[datetime] = []
    # The file's points before any is built (each grid's size from its params' lengths).
    at = columns.index("params")
    in_file = sum(math.prod(len(p) if isinstance(p, list) else 1 for p in row[at])
                  for row in results.values()
                  if isinstance(row, list) and len(row) > at and isinstance(row[at], list) and row[at])
    if in_file > MAX_FILE_POINTS:
        raise _Bad(f"{in_file:,} points in one file, over the limit of {MAX_FILE_POINTS:,}")
    for name, row in results.items():
        if not isinstance(row, list) or len(row) > len(columns):
            raise _Bad(f"benchmark {name!r}: row does not match result_columns")
        cols = dict(zip(columns, row, strict=False))  # trailing all-None columns are dropped by asv
        info = benchmarks.get(name)
        version = cols.get("version")
        if info is None:
            unknown.append(name)
            skipped_versions.append((name, None if version is None else str(version)))
            continue
        if info.version is not None and version is not None and str(version) != info.version:
            stale.append(name)
            skipped_versions.append((name, str(version)))
            continue
        bparams = cols.get("params") or []
        if not isinstance(bparams, list) or not all(
            isinstance(p, list) and all(isinstance(v, str) for v in p) for p in bparams
        ):
            raise _Bad(f"benchmark {name!r}: params must be lists of value reprs")
        # The grid's size before the grid: a few short lists can multiply to billions of points.
        n = math.prod(len(p) for p in bparams)
        if n > MAX_GRID_POINTS:
            raise _Bad(f"benchmark {name!r}: a parameter grid of {n:,} points, over the limit of {MAX_GRID_POINTS:,}")
        names = (
            info.param_names
            if len(info.param_names) == len(bparams)
            else tuple(f"param{i + 1}" for i in range(len(bparams)))
        )
        grid = tuple(itertools.product(*bparams)) if bparams else ((),)
        n = len(grid)
        result = cols.get("result")
        if bparams:
            values = _per_point(result, n, "result", name)
        else:
            # Unparameterised benchmarks store a one-element list (asv >= 0.5); accept a bare number too.
            values = result if isinstance(result, list) else [result]
            if len(values) != 1:
                raise _Bad(f"benchmark {name!r}: expected one result, got {len(values)}")
        samples_col = _per_point(cols.get("samples"), n, "samples", name)
        stats_cols = {s: _per_point(cols.get(f"stats_{s}"), n, f"stats_{s}", name) for s in _STAT_COLUMNS}
        all_results = _all_finite_floats(values)
        if not (all_results and _plain_stats(stats_cols, info)):
            for stat, col in stats_cols.items():
                _check_stat_column(stat, col, values, info, name, all_results)
        started = _js_time(cols.get("started_at"), f"benchmark {name!r} started_at")
        if started is not None:
            starts.append(started)
        duration = cols.get("duration")
        if duration is not None:
            duration = _number(duration, f"benchmark {name!r} duration")
            if not 0 <= duration <= MAX_SECONDS:
                raise _Bad(f"benchmark {name!r} duration is {duration!r} s, not between 0 and {MAX_SECONDS:g} s")
        grid_benches = _grid_benchmarks(name, info.unit, info.direction, info.kind, names, grid)
        version_text = None if version is None else str(version)
        fast = _fast_points(grid_benches, values, samples_col, stats_cols, info, version_text, started, duration)
        if fast is not None:
            blocks.append(fast)
            continue
        for j, (bench, key) in enumerate(grid_benches):
            value = values[j]
            what = f"benchmark {name!r} point {j}"
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
            value = _number(value, f"{what} result")
            _check_measured(value, info, f"{what} result")
            raw_samples = samples_col[j]
            if raw_samples is not None:
                if not isinstance(raw_samples, list) or not raw_samples:
                    raise _Bad(f"{what}: samples must be a non-empty list")
                # One set of types instead of a check per sample: ingest reads ~5 M samples per 1,000 runs.
                sample_types = {type(x) for x in raw_samples}
                if not sample_types <= _NUMBER_TYPES:
                    raise _Bad(f"{what}: samples must all be numbers")
                lo, hi = _check_samples(raw_samples, int in sample_types, info, f"{what} sample")
                # asv's result is the median of the samples: one outside their range is not theirs.
                slack = 1e-9 * max(abs(lo), abs(hi))
                if not lo - slack <= value <= hi + slack:
                    raise _Bad(f"{what} result {value!r} lies outside its samples' range [{lo!r}, {hi!r}]")
                samples = tuple(raw_samples)
            else:
                samples = (value,)
            stats = {s: col[j] for s, col in stats_cols.items() if col[j] is not None}
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
    if isinstance(params.get("os"), str) and params["os"]:
        env["os"] = params["os"]  # the kernel version is the host's environment (`ci.store.hosts`)
    requirements = data.get("requirements")
    if isinstance(requirements, dict):  # a requirement may be a URL with a password in it: no credentials kept
        env.update({f"req:{redact_text(str(k))}": redact_text(str(v)) for k, v in requirements.items()})
    env_vars = data.get("env_vars")
    if isinstance(env_vars, dict):
        env.update({f"env:{k}": redact_variable(str(k), str(v)) for k, v in env_vars.items()})  # no credentials kept
    for key in SIDECAR_ENV_KEYS:
        if sidecar and key in sidecar:
            env[key] = sidecar[key]
    return ParsedRun(
        path=path,
        run_key=f"{machine}/{commit_hash}/{env_name}",
        digest=digest,
        machine=machine,
        commit_hash=commit_hash,
        commit_time=_js_time(data.get("date"), "date"),
        env_name=env_name,
        started_at=min(starts) if starts else None,
        environment=tuple(sorted(env.items())),
        points=tuple(points),
        skipped_unknown=tuple(unknown),
        skipped_stale=tuple(stale),
        skipped_versions=tuple(skipped_versions),
        blocks=tuple(blocks),
        host_info=tuple(sorted((k, str(v)) for k, v in params.items()
                               if k in HOST_KEYS and isinstance(v, str | int | float) and not isinstance(v, bool))),
    )
