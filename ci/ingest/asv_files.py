"""The files of an asv results directory (format version 2, asv 0.6): finding and loading them.

Layout read (asv `docs/source/dev.rst`, `asv/results.py`):

    <results_dir>/benchmarks.json                     name -> {type, unit, params, param_names, version, ...}
    <results_dir>/<machine>/machine.json              {machine, os, arch, cpu, num_cpu, ram, version: 1}
    <results_dir>/<machine>/<hash[:8]>-<env>.json     one run: commit x machine x environment (`ci.ingest.parse`)
    <results_dir>/<machine>/gpu-env-<hash[:8]>.json   our GPU sidecar (benchmarks/ writes it; optional), with
                                                      the runner's record of the asv call behind each result file

Anything asv itself could not load raises `AsvFormatError` naming the file and the problem.
Every file is read by `read_file`: a regular file only (a FIFO, a device or a symlink to one is
refused unread), at most a size cap, and file names in messages go through `ci.text.quote_path`,
so no name can forge a line of output. No SQLAlchemy, no torch.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from types import ModuleType
from typing import Any

from ci.records import JOB_KEY, Direction, Kind, ParsedRun, declared_semantics
from ci.text import clip, quote_path

_orjson: ModuleType | None
try:  # a C JSON parser, 4x json's speed on result files (2026-12-02); json alone does the same, slower
    import orjson as _orjson_module

    _orjson = _orjson_module
except ImportError:  # pragma: no cover - the service extra installs it
    _orjson = None

RESULTS_API_VERSION = 2  # asv.results.Results.api_version
BENCHMARKS_API_VERSION = 2  # asv.benchmarks.Benchmarks.api_version
SIDECAR_PREFIX = "gpu-env-"
SIDECAR_MACHINE_KEYS = ("gpu", "driver", "cuda", "torch", "triton")
SIDECAR_STACK_KEYS = ("driver", "cuda", "torch", "triton")  # also recorded per run (`with_sidecar`)
# What a read sidecar puts into a run's environment. JOB_KEY (the runner's marker of the asv call
# that wrote the run's file) is never a plain key of the file: `read_gpu_sidecar` sets it only from
# a call record whose digest matches the result file (`SIDECAR_CALLS_KEY`).
SIDECAR_ENV_KEYS = ("sm_clock_mhz", "mem_clock_mhz", "temperature_c", "power_w", "captured_at", "attention_launch",
                    JOB_KEY)  # fmt: skip
# The runner's record, per result file of the commit, of the asv call that wrote it and the sha256 of
# the bytes that call wrote: {"<result file name>": {"call": "<marker>", "sha256": "<hex>"}}. A file
# rewritten since (a plain `asv run` or `asv continuous` of the commit) no longer has that digest.
SIDECAR_CALLS_KEY = "asv_calls"
# The runner's marker before it was bound to files: one per commit, which any later asv run of the
# commit inherited (e.g. benchmarks/recorded/h200-2026-12-main). It cannot be verified, so it is never
# read; the runner drops it from a sidecar it marks.
LEGACY_JOB_KEY = "job"
_SHA256_HEX = frozenset("0123456789abcdef")
_NOT_RESULT_FILES = {"machine.json", "benchmarks.json"}
# Size caps, far above what asv writes: the largest recorded result file (half the suite, with
# --record-samples) is 87 KB and benchmarks.json 27 KB (benchmarks/recorded, 2026-11-29). A
# file over its cap is refused unread, so a runaway or hostile file cannot exhaust the memory.
MAX_RESULT_BYTES = 64 * 2**20
MAX_BENCHMARKS_BYTES = 64 * 2**20
MAX_SMALL_BYTES = 2**20  # machine.json, the GPU sidecar
_FILE_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
               (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


class AsvFormatError(ValueError):
    """An asv file is missing, truncated or not in the format asv 0.6 writes."""


def read_file(path: Path, limit: int) -> bytes:
    """The bytes of one of asv's files, read only if it is a regular file (a symlink to one is
    followed) of at most `limit` bytes: a FIFO would block the read forever and a symlink to
    /dev/zero would never end, so neither is read.

    Args:
        path: the file.
        limit: the largest size accepted, in bytes.

    Returns:
        The file's content; AsvFormatError (naming the file) when missing, not a regular file,
        over the limit or unreadable.
    """
    shown = quote_path(path)
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer; the type is checked on the open descriptor.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except FileNotFoundError:
        raise AsvFormatError(f"{shown}: file not found") from None
    except OSError as exc:
        raise AsvFormatError(f"{shown}: cannot read ({exc.strerror or exc})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = next((name for test, name in _FILE_KINDS if test(info.st_mode)), "not a regular file")
            raise AsvFormatError(f"{shown}: not a regular file ({kind}); refused unread")
        if info.st_size > limit:
            raise AsvFormatError(f"{shown}: {info.st_size:,} bytes, over the {limit:,}-byte limit for this file; "
                                 "refused unread")
        chunks, size = [], 0
        while True:  # a file growing while it is read stops at the limit too
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                raise AsvFormatError(f"{shown}: grew past the {limit:,}-byte limit while being read")
        return b"".join(chunks)
    except OSError as exc:
        raise AsvFormatError(f"{shown}: cannot read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)


# orjson and json differ on valid JSON in one way that matters here: an integer of more than 64 bits
# becomes a float in orjson and stays an int in json (json refuses one of more than 4,300 digits, which
# orjson reads as infinity). So a text with an integer literal of 19 digits or more goes to json, as
# does anything orjson refuses (NaN, which asv writes for a skipped point; a byte-order mark; a lone
# surrogate; nesting past 1,024): the values and the errors are json's. The test maps each byte to
# its class (digit, a byte that can come before a number, anything else) and looks for a run of 19
# digits after a number's start: 0.5 ms for a 185 KB file against 1.2-4 ms for a regular
# expression (2026-12-02), where the 20-digit fractions repr writes (0.00012345678901234567) are no hit.
# The one difference left: nesting 1,000 to 1,023 deep, past json's limit (the interpreter's stack,
# so it depends on the caller's depth) and within orjson's, is read: a file nested that deep in a
# value ingest leaves aside (an unknown key, a `python` or `direction` that is not text) goes in where
# json refused it; anywhere else ingest's own checks still refuse it (measured 2026-12-02).
_BYTE_CLASS = bytes(
    ord("0") if chr(c).isdigit() and c < 128 else ord("x") if chr(c) in "[,: \t\n\r-" else ord("y") for c in range(256)
)
_LONG_INTEGER = b"x" + b"0" * 19


def parse_json(raw: bytes, path: Path) -> Any:
    """JSON text as Python values, the same values and errors as `json.loads`; AsvFormatError for
    anything `json` refuses (bad syntax, bad UTF-8, an integer of more digits than Python converts,
    nesting deeper than the interpreter's stack)."""
    if _orjson is not None and _LONG_INTEGER not in (b" " + raw).translate(_BYTE_CLASS):
        try:
            return _orjson.loads(raw)
        except _orjson.JSONDecodeError:
            pass  # json decides, with its own message (or its own reading of NaN and Infinity)
    try:
        return json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise AsvFormatError(f"{quote_path(path)}: not valid JSON, truncated or corrupt ({exc})") from None
    except RecursionError:
        raise AsvFormatError(f"{quote_path(path)}: not valid JSON: nested too deeply") from None
    except ValueError as exc:  # e.g. an integer literal of more than sys.get_int_max_str_digits() digits
        raise AsvFormatError(f"{quote_path(path)}: not valid JSON ({str(exc).split(';')[0]})") from None


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


def load_json(path: Path, limit: int = MAX_SMALL_BYTES) -> Any:
    """The JSON content of one of asv's files; AsvFormatError when missing, unreadable, not a
    regular file, over `limit` bytes or not JSON."""
    return parse_json(read_file(path, limit), path)


def check_version(path: Path, data: Any, expected: int) -> None:
    """AsvFormatError unless `data` is a JSON object of asv format version `expected`."""
    if not isinstance(data, dict):
        raise AsvFormatError(f"{quote_path(path)}: expected a JSON object, got {type(data).__name__}")
    version = data.get("version")
    if version != expected:
        raise AsvFormatError(
            f"{quote_path(path)}: asv format version {clip(version, 40)}, expected {expected} (run `asv update`)"
        )


def load_benchmarks_json(results_dir: str | Path) -> dict[str, BenchmarkInfo]:
    """Read `<results_dir>/benchmarks.json`.

    Args:
        results_dir: an asv results directory.

    Returns:
        benchmark name -> BenchmarkInfo (type, unit, param names, version, direction, kind). The
        direction comes from the benchmark's declaration (`ci.records.declared_semantics`): asv's
        type, the suite's `direction` attribute (benchmarks.declare carries it into this file),
        else the unit; a benchmark none of them settles has `Direction.UNKNOWN`. A track benchmark that
        declares `exact` there is of `Kind.EXACT`.
    """
    path = Path(results_dir) / "benchmarks.json"
    data = load_json(path, MAX_BENCHMARKS_BYTES)
    check_version(path, data, BENCHMARKS_API_VERSION)
    shown = quote_path(path)
    out: dict[str, BenchmarkInfo] = {}
    for name, entry in data.items():
        if name == "version":
            continue
        if not isinstance(entry, dict):
            raise AsvFormatError(f"{shown}: entry {clip(name, 200)} is not an object")
        btype = entry.get("type")
        if not isinstance(btype, str):
            raise AsvFormatError(f"{shown}: entry {clip(name, 200)} has no benchmark type")
        unit = entry.get("unit") or ("seconds" if btype in ("time", "timeraw") else "bytes" if "mem" in btype else "")
        param_names = entry.get("param_names") or []
        if not isinstance(param_names, list) or not all(isinstance(p, str) for p in param_names):
            raise AsvFormatError(f"{shown}: entry {clip(name, 200)} has malformed param_names")
        version = entry.get("version")
        direction, kind = declared_semantics(btype, str(unit), entry.get("direction"), entry.get("exact"))
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
        raise AsvFormatError(f"{quote_path(path)}: no machine name")
    return {k: str(v) for k, v in data.items() if k != "version" and v is not None}


def read_gpu_sidecar(
    machine_dir: str | Path, commit_hash: str, result_file: str = "", digest: str = ""
) -> dict[str, str]:
    """Read the GPU environment sidecar for one commit, `{}` when there is none.

    Args:
        machine_dir: `<results_dir>/<machine>`.
        commit_hash: the full commit hash of the run.
        result_file: the name of the result file being ingested ("": none, so no job marker).
        digest: the sha256 hex digest of that file's bytes.

    Returns:
        key -> string value, only keys of the sidecar contract; `JOB_KEY` only when the sidecar
        records the asv call that wrote `result_file` with this very `digest` (`call_of`).
    """
    path = Path(machine_dir) / f"{SIDECAR_PREFIX}{commit_hash[:8]}.json"
    if not os.path.lexists(path):
        return {}
    data = load_json(path)
    if not isinstance(data, dict):
        raise AsvFormatError(f"{quote_path(path)}: GPU sidecar must be a JSON object")
    allowed = (set(SIDECAR_MACHINE_KEYS) | set(SIDECAR_ENV_KEYS)) - {JOB_KEY}
    out = {k: str(v) for k, v in data.items() if k in allowed and v is not None}
    call = call_of(data, result_file, digest)
    if call:
        out[JOB_KEY] = call
    return out


def call_of(sidecar: dict[str, Any], result_file: str, digest: str) -> str:
    """The marker of the asv call that wrote `result_file`, as a sidecar's `SIDECAR_CALLS_KEY` records
    it, when the bytes it wrote are the bytes given; else "" (unknown).

    A record of other bytes (the file was rewritten since), a sidecar without records (written by
    the suite alone, or with a bare `LEGACY_JOB_KEY` marker) or a malformed record says nothing of
    who measured the file: unknown, so a comparison takes it as measured apart.

    Args:
        sidecar: the sidecar's JSON object.
        result_file: a result file's name, e.g. `1a2b3c4d-virtualenv-py3.12.json`.
        digest: the sha256 hex digest of that file's bytes now.

    Returns:
        The marker, or "".
    """
    calls = sidecar.get(SIDECAR_CALLS_KEY)
    record = calls.get(result_file) if isinstance(calls, dict) and result_file else None
    if not isinstance(record, dict):
        return ""
    call, recorded = record.get("call"), record.get("sha256")
    if not (isinstance(call, str) and call and isinstance(recorded, str) and len(recorded) == 64):
        return ""
    return call if digest and recorded == digest.lower() else ""


def with_calls(sidecar: dict[str, Any], call: str, written: dict[str, str]) -> dict[str, Any]:
    """A sidecar's content with `call` recorded as the asv call that wrote each of `written`'s files
    (the format `call_of` reads; the runner writes it, `ci.runner.asv.mark_call`). Other files' records
    stay; a bare `LEGACY_JOB_KEY` marker goes, as it says nothing true of the files.

    Args:
        sidecar: the sidecar's JSON object as read ({} when there is none).
        call: the asv call's marker (`ci.runner.config.call_marker`).
        written: result file name -> sha256 hex digest of the bytes that call wrote.

    Returns:
        A new JSON object for the sidecar.
    """
    for name, digest in written.items():
        if len(digest) != 64 or not set(digest) <= _SHA256_HEX:
            raise ValueError(f"{name}: not a sha256 hex digest: {clip(digest, 80)}")
    out = {k: v for k, v in sidecar.items() if k != LEGACY_JOB_KEY}
    calls = out.get(SIDECAR_CALLS_KEY)
    calls = dict(calls) if isinstance(calls, dict) else {}
    calls.update({name: {"call": call, "sha256": digest} for name, digest in sorted(written.items())})
    out[SIDECAR_CALLS_KEY] = calls
    return out


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
    """The run with the GPU sidecar's non-machine keys (clocks, temperature, ...) and its software
    stack (driver, CUDA, torch, triton: `SIDECAR_STACK_KEYS`) in its environment: the stack is the
    host's environment at the time of the run, and its changes are what an alert group is labelled
    with (`ci.verdicts.groups`); the machine row keeps only the newest.

    Args:
        run: a parsed run.
        sidecar: from `read_gpu_sidecar`.

    Returns:
        A new ParsedRun (the same one when the sidecar adds nothing).
    """
    extra = {k: sidecar[k] for k in (*SIDECAR_ENV_KEYS, *SIDECAR_STACK_KEYS) if k in sidecar}
    if not extra:
        return run
    return replace(run, environment=tuple(sorted({**dict(run.environment), **extra}.items())))
