"""The files of an asv results directory (format version 2, asv 0.6): finding and loading them.

Layout read (asv `docs/source/dev.rst`, `asv/results.py`):

    <results_dir>/benchmarks.json                     name -> {type, unit, params, param_names, version, ...}
    <results_dir>/<machine>/machine.json              {machine, os, arch, cpu, num_cpu, ram, version: 1}
    <results_dir>/<machine>/<hash[:8]>-<env>.json     one run: commit x machine x environment (`ci.ingest.parse`)
    <results_dir>/<machine>/gpu-env-<hash[:8]>.json   our GPU sidecar (benchmarks/ writes it; optional)

Anything asv itself could not load raises `AsvFormatError` naming the file and the problem.
No SQLAlchemy, no torch.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ci.records import JOB_KEY, Direction, Kind, ParsedRun, classify

RESULTS_API_VERSION = 2  # asv.results.Results.api_version
BENCHMARKS_API_VERSION = 2  # asv.benchmarks.Benchmarks.api_version
SIDECAR_PREFIX = "gpu-env-"
SIDECAR_MACHINE_KEYS = ("gpu", "driver", "cuda", "torch", "triton")
# JOB_KEY: the runner's marker of the job (asv call) that measured the commit.
SIDECAR_ENV_KEYS = ("sm_clock_mhz", "mem_clock_mhz", "temperature_c", "power_w", "captured_at", "attention_launch",
                    JOB_KEY)  # fmt: skip
_NOT_RESULT_FILES = {"machine.json", "benchmarks.json"}


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


def load_json(path: Path) -> Any:
    """The JSON content of one of asv's files; AsvFormatError when missing, unreadable or not JSON."""
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


def check_version(path: Path, data: Any, expected: int) -> None:
    """AsvFormatError unless `data` is a JSON object of asv format version `expected`."""
    if not isinstance(data, dict):
        raise AsvFormatError(f"{path}: expected a JSON object, got {type(data).__name__}")
    version = data.get("version")
    if version != expected:
        raise AsvFormatError(f"{path}: asv format version {version!r}, expected {expected} (run `asv update`)")


def load_benchmarks_json(results_dir: str | Path) -> dict[str, BenchmarkInfo]:
    """Read `<results_dir>/benchmarks.json`.

    Args:
        results_dir: an asv results directory.

    Returns:
        benchmark name -> BenchmarkInfo (type, unit, param names, version, direction, kind).
    """
    path = Path(results_dir) / "benchmarks.json"
    data = load_json(path)
    check_version(path, data, BENCHMARKS_API_VERSION)
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
    data = load_json(path)
    check_version(path, data, 1)
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
    data = load_json(path)
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
