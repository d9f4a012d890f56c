"""Reading and parsing an ingest's result files, here or in forked parsers.

Per file: read and parse inside one boundary (`_read_one`): whatever goes wrong with a file becomes
that file's error outcome, naming it. A file whose bytes the store holds is known by its digest and
not parsed (`Known`). A long history is read and parsed by forked parsers while the caller writes
(`read_all`); a parsed run crosses back from a parser in a compact form (`_wire`, `_unwire`).
Nothing here decides across files: `ci.ingest.results_dir` places what is read in path order.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import multiprocessing
import os
from collections import deque
from collections.abc import Generator
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, NamedTuple

from ci.forking import die_with_parent, fork_workers
from ci.ingest.asv_files import (
    MAX_RESULT_BYTES,
    AsvFormatError,
    BenchmarkInfo,
    read_file,
    read_gpu_sidecar,
    with_sidecar,
)
from ci.ingest.parse import parse_result_file
from ci.ingest.report import FileOutcome, file_outcome
from ci.records import Benchmark, Direction, Kind, ParsedRun, PointBlock
from ci.store import error_line
from ci.store.codec import float64s, int64s, pack_block
from ci.store.reads import paused_gc
from ci.text import quote_path

# From this many files to parse, forked parsers read and parse them while this process writes the
# parsed ones (`read_all`): 1,000 files 9.3 s in one process, 6.3-6.5 s so on 2 cores (2026-12-02,
# docs/performance.md "Ingest and store"). A commit's ingest (1-20 files) stays in one process: a
# pool of two forked parsers takes ~35 ms to start and stop, ~8 files' parse.
PARALLEL_MIN_FILES = 100
_TASK_FILES = 10  # files per task of a forked parser
_TASKS_AHEAD = 3  # tasks in flight per parser: what bounds the parsed files held in memory


@dataclass(frozen=True)
class Known:
    """A result file whose digest the store holds: what `ci.ingest.results_dir` needs to place it."""

    commit_sha: str
    run_key: str
    digest: str


def _read_one(
    path: Path, benchmarks: dict[str, BenchmarkInfo], info: dict[str, str], known: dict[str, tuple[str, str]]
) -> FileOutcome | Known | tuple[ParsedRun, dict[str, str] | FileOutcome]:
    """One result file read and parsed inside one boundary: the parsed run with its GPU sidecar
    (or the sidecar's error outcome), `Known`, or the file's error outcome: any exception but an
    interrupt becomes one, naming the file. Needs nothing of this ingest's other files, so it runs
    in a forked parser as well as here (`read_all`)."""
    try:
        raw = read_file(path, MAX_RESULT_BYTES)
        digest = hashlib.sha256(raw).hexdigest()
        stored = _stored(digest, known)
        if stored is not None:  # identical bytes were ingested before: skip the parse (most of a re-ingest)
            return stored
        run = parse_result_file(path, benchmarks, info, raw=raw, digest=digest)
    except AsvFormatError as exc:
        return file_outcome(path, "error", message=str(exc))
    except Exception as exc:  # noqa: BLE001 - the boundary: one bad file never stops the others
        return file_outcome(path, "error", message=_cannot(path, exc))
    try:
        # The sidecar is keyed by the commit, so it is read once the file has parsed; its job marker
        # applies only where it was recorded for these very bytes.
        sidecar = read_gpu_sidecar(path.parent, run.commit_hash, path.name, digest)
        return with_sidecar(run, sidecar), sidecar
    except AsvFormatError as exc:
        return run, file_outcome(path, "error", message=str(exc))
    except Exception as exc:  # noqa: BLE001 - as above
        return run, file_outcome(path, "error", message=_cannot(path, exc))


def _known(path: Path, known: dict[str, tuple[str, str]]) -> Known | None:
    """`Known` for a file whose bytes the store holds, else None (also for one that cannot be read:
    `_read_one` then says why)."""
    try:
        digest = hashlib.sha256(read_file(path, MAX_RESULT_BYTES)).hexdigest()
    except Exception:  # noqa: BLE001 - reported by `_read_one`
        return None
    return _stored(digest, known)


def _stored(digest: str, known: dict[str, tuple[str, str]]) -> Known | None:
    entry = known.get(digest)
    return None if entry is None else Known(entry[0], entry[1], digest)


def _cannot(path: Path, exc: Exception) -> str:
    return f"{quote_path(path)}: cannot be ingested ({error_line(exc)})"


# What a forked parser reads, set in it by `_fork_input` (inherited memory: a fork pickles nothing
# on the way in): the benchmarks, each machine folder's info and the stored digests.
_FORK_INPUT: tuple[dict[str, BenchmarkInfo], dict[Path, dict[str, str]], dict[str, tuple[str, str]]] | None = None


def _fork_input(
    parent: int, benchmarks: dict[str, BenchmarkInfo], infos: dict[Path, dict[str, str]],
    known: dict[str, tuple[str, str]]
) -> None:
    global _FORK_INPUT
    die_with_parent(parent)
    _FORK_INPUT = (benchmarks, infos, known)


_Read = FileOutcome | Known | tuple[ParsedRun, dict[str, str] | FileOutcome]
# A block's series as texts: (name, unit, direction, kind, each point's params).
_GridKey = tuple[str, str, str, str, tuple[tuple[tuple[str, str], ...], ...]]


def _read_task(paths: list[Path]) -> tuple[list[_GridKey], list[Any]]:
    """A forked parser's task: `_read_one` of each path, in the compact form `_unwire` reads."""
    assert _FORK_INPUT is not None
    benchmarks, infos, known = _FORK_INPUT
    with paused_gc():
        return _wire([_read_one(p, benchmarks, infos[p.parent], known) for p in paths])


def _wire(items: list[_Read]) -> tuple[list[_GridKey], list[Any]]:
    """Read files as they cross back from a forked parser: each block's series as an index into a
    table of the task's grids (sent once, not once a file) and its values packed as the store
    writes them (`pack_block`, done here instead of in the writer). Pickled as Benchmarks and
    float objects, a parsed run took ~4.6 ms to unpickle; in this form ~0.3 ms, and ~0.5 ms more
    to rebuild its blocks (`_unwire`; 2026-12-02, 2-core box)."""
    # id of a block's `benches` (one tuple per grid, `_grid_benchmarks`; `items` keeps each alive) -> index
    grids: dict[int, int] = {}
    table: list[_GridKey] = []
    out: list[Any] = []
    for item in items:
        if not isinstance(item, tuple) or not item[0].blocks:
            out.append(item)
            continue
        run, sidecar = item
        blocks: list[PointBlock | tuple[Any, ...]] = []  # a block as it is, or wired: (grid index, packed, ...)
        for block in run.blocks:
            at = grids.get(id(block.benches))
            if at is None:
                b0 = block.benches[0][0] if block.benches else None
                if b0 is None or any((b.name, b.unit, b.direction, b.kind) != (b0.name, b0.unit, b0.direction, b0.kind)
                                     for b, _ in block.benches):  # fmt: skip
                    blocks.append(block)  # not one benchmark's grid: as it is
                    continue
                at = grids[id(block.benches)] = len(table)
                params = tuple(b.params for b, _ in block.benches)
                table.append((b0.name, b0.unit, str(b0.direction), str(b0.kind), params))
            packed = block.packed or pack_block(block.values, block.samples, block.stats)
            blocks.append((at, packed, block.has_raw_samples, block.stats, block.benchmark_version, block.started_at,
                           block.duration))  # fmt: skip
        out.append(_Wired(replace(run, blocks=()), tuple(blocks), sidecar))
    return table, out


class _Wired(NamedTuple):
    """A parsed run as `_wire` sends it: the run without its blocks, the blocks, the sidecar."""

    run: ParsedRun
    blocks: tuple[Any, ...]
    sidecar: dict[str, str] | FileOutcome


@functools.lru_cache(maxsize=4096)
def _grid(key: _GridKey) -> tuple[tuple[Benchmark, str], ...]:
    """A block's series from their texts; the same tuple for the same texts (a history repeats its grids)."""
    name, unit, direction, kind, params = key
    benches = (Benchmark(name, p, unit, Direction(direction), Kind(kind)) for p in params)
    return tuple((b, b.key) for b in benches)


def _unwire(task: tuple[list[_GridKey], list[Any]]) -> list[_Read]:
    """`_wire`'s form read back: the same runs, their blocks' values unpacked and their packed
    columns kept for the store."""
    table, items = task
    grids = [_grid(key) for key in table]
    out: list[_Read] = []
    for item in items:
        if not isinstance(item, _Wired):
            out.append(item)
            continue
        blocks = []
        for w in item.blocks:
            if isinstance(w, PointBlock):
                blocks.append(w)
                continue
            at, packed, raw, stats, version, started, duration = w
            benches = grids[at]
            values = float64s(packed[0]).tolist()
            if raw:
                numbers = float64s(packed[1]).tolist()
                samples: list[Any] = []
                i = 0
                for n in int64s(packed[2]):
                    samples.append(numbers[i : i + n])
                    i += n
            else:
                samples = [(v,) for v in values]
            blocks.append(PointBlock(benches, values, samples, raw, stats, version, started, duration, packed))
        out.append((replace(item.run, blocks=tuple(blocks)), item.sidecar))
    return out


def read_all(
    paths: list[Path],
    benchmarks: dict[str, BenchmarkInfo],
    infos: dict[Path, dict[str, str]],
    known: dict[str, tuple[str, str]],
) -> Generator[_Read, None, None]:
    """`_read_one` of each path, in order: here for a few files, else in forked parsers (one per CPU,
    at most 8) while this process writes what they parsed, a few tasks ahead of the writer, so that
    memory holds a few dozen parsed files however long the history is. Parsing is about half of a
    file's ingest and writing the other half; a parsed run comes back compact (`_wire`), and with
    one parser on 2 cores the parser, which also packs and pickles, was the slower side (8.3 s for
    1,000 files against 7.5 s with two, 2026-12-02)."""
    # Files whose bytes the store holds are known from a read and a hash, here; only the others are
    # parsed, and only their number decides whether parsers are forked (a commit's ingest of a
    # long history's folder parses one file: forking for it doubled its 0.17 s, 2026-12-02).
    seen = [_known(path, known) for path in paths]
    fresh = [path for path, k in zip(paths, seen, strict=True) if k is None]
    parsers = fork_workers(len(fresh), PARALLEL_MIN_FILES)
    if parsers < 2:
        for path, k in zip(paths, seen, strict=True):
            yield k or _read_one(path, benchmarks, infos[path.parent], known)
        return
    tasks = iter([fresh[i : i + _TASK_FILES] for i in range(0, len(fresh), _TASK_FILES)])
    parsed: deque[_Read] = deque()
    # Not multiprocessing.Pool: a pool worker killed (out of memory, say) leaves its task's result
    # waited for forever; here the future fails and says so.
    pool = ProcessPoolExecutor(parsers, mp_context=multiprocessing.get_context("fork"), initializer=_fork_input,
                               initargs=(os.getpid(), benchmarks, infos, known))  # fmt: skip
    try:
        pending = deque((t, pool.submit(_read_task, t)) for t in itertools.islice(tasks, parsers * _TASKS_AHEAD))
        for k in seen:
            if k is not None:
                yield k
                continue
            if not parsed:
                task_paths, future = pending.popleft()
                try:
                    parsed.extend(_unwire(future.result()))
                except BrokenProcessPool:
                    raise RuntimeError(
                        f"a forked parser stopped (killed? out of memory?) before {quote_path(task_paths[0])} and "
                        f"the {len(task_paths) - 1} files after it were parsed; the batches stored before are kept, "
                        "and the same command again goes on from there"
                    ) from None
                task = next(tasks, None)
                if task is not None:
                    pending.append((task, pool.submit(_read_task, task)))
            yield parsed.popleft()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)  # at most a task per parser still runs
