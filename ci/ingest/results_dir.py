"""Ingest an asv results directory into the store.

Per file: read and parse inside one boundary (`_read_one`): whatever goes wrong with a file (a
malformed or truncated one, an irregular file, a value out of range, an error nobody foresaw)
becomes that file's one-line "FILE: reason" outcome, and every other file still goes in. A long
history is read and parsed by forked parsers while this process writes (`_read_all`); what is
decided across files (a second copy of a run, bytes stored before) is decided here, in path
order, so the outcome and the store are those of one process (tests/ci/test_ingest_forked.py). Parsed
files are written in batches (`BATCH_FILES`), one transaction per batch and one savepoint per file
(`Store.ingest_runs`): a file is stored whole or not at all, a crash, an interrupt or a kill loses
at most the uncommitted batch (the batches committed before it stay, the next ingest writes the
rest), and ingesting the same directory again changes nothing. Two files that hold the same run
(machine, commit and environment: e.g. a copied machine folder) with different contents are never
both written: the first in path order is, the others are errors, the same on every ingest. A file
holding a different run than the one stored from another file (another results folder) is refused,
naming both, unless `replace` (`ci ingest --replace`); asv rewriting the stored run's own file
replaces it. Commit
metadata (parents, branch, time, subject) comes from `git log` when a checkout is given, otherwise
the commit is known by its sha and asv's date only (`ci.ingest.git`). A commit of which git's
record cannot be read, or not all of it, is named in a warning and stored with what could be read
(asv's date for a time git cannot give); every other commit gets its metadata, its position in
git's history included (history order is git's topology, `ci.records.Commit.position`).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import itertools
import multiprocessing
import os
import time
from collections import deque
from collections.abc import Callable, Generator, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, NamedTuple

from sqlalchemy.exc import SQLAlchemyError

from ci.forking import fork_workers
from ci.ingest.asv_files import (
    MAX_RESULT_BYTES,
    SIDECAR_MACHINE_KEYS,
    AsvFormatError,
    BenchmarkInfo,
    iter_result_files,
    load_benchmarks_json,
    load_machine_json,
    read_file,
    read_gpu_sidecar,
    with_sidecar,
)
from ci.ingest.git import CommitLog, branch_log, commit_order_warning, commit_warning, git_commits
from ci.ingest.parse import parse_result_file
from ci.records import Benchmark, Commit, Direction, Kind, Machine, ParsedRun, PointBlock
from ci.store import REPLACED_FROM_ANOTHER_SOURCE, ReplacementRefused, Store, StoreLimitError, error_line
from ci.store.codec import float64s, int64s, pack_block
from ci.store.hosts import describe, host_differences, host_fingerprint, same_host
from ci.store.reads import paused_gc
from ci.text import printable, quote_path

BATCH_FILES = 50  # result files per transaction (each in its own savepoint): `Store.ingest_runs`
# From this many files to parse, forked parsers read and parse them while this process writes the
# parsed ones (`_read_all`): 1,000 files 9.3 s in one process, 6.3-6.5 s so on 2 cores (2026-12-02,
# docs/performance.md "Ingest and store"). A commit's ingest (1-20 files) stays in one process: a
# pool of two forked parsers takes ~35 ms to start and stop, ~8 files' parse.
PARALLEL_MIN_FILES = 100
_TASK_FILES = 10  # files per task of a forked parser
_TASKS_AHEAD = 3  # tasks in flight per parser: what bounds the parsed files held in memory


@dataclass(frozen=True)
class FileOutcome:
    """What happened to one result file."""

    path: str
    status: str  # inserted, replaced, unchanged, error
    points: int = 0  # benchmark points in the file (results plus marked failures)
    message: str = ""
    skipped: int = 0  # benchmarks left out: unknown to benchmarks.json, or of another version (as asv does)


@dataclass(frozen=True)
class IngestReport:
    """The outcome of one ingest call, file by file, and how long it took."""

    files: tuple[FileOutcome, ...]
    seconds: float = 0.0  # wall time of the whole call
    # One line per commit whose git record cannot be read, or not all of it (`ci.ingest.git`), then
    # one per machine this ingest added beside one of the same asv name: another environment, or
    # another host (`machine_notes`), so that no series is split or kept apart without a word.
    notes: tuple[str, ...] = ()

    @property
    def points_written(self) -> int:
        """Points of the files inserted or replaced."""
        return sum(f.points for f in self.files if f.status in ("inserted", "replaced"))

    def count(self, status: str) -> int:
        """Files with the given status."""
        return sum(1 for f in self.files if f.status == status)

    @property
    def errors(self) -> tuple[FileOutcome, ...]:
        return tuple(f for f in self.files if f.status == "error")

    @property
    def ok(self) -> bool:
        """True when every file went in (or was already in)."""
        return not self.errors

    def summary(self) -> str:
        """One line for humans."""
        written = self.points_written
        skipped = sum(f.skipped for f in self.files)
        return (
            f"{len(self.files)} result files: {self.count('inserted')} inserted, {self.count('replaced')} replaced, "
            f"{self.count('unchanged')} unchanged, {len(self.errors)} errors; {written} points written"
            f" in {self.seconds:.1f} s ({throughput(written, self.seconds)})"
            + (f"; {skipped} benchmarks skipped (not in benchmarks.json or stale version)" if skipped else "")
        )


def throughput(points: int, seconds: float) -> str:
    """`points` per second as shown in ingest's messages, e.g. "61,250 points/s"."""
    return f"{points / seconds:,.0f} points/s" if seconds > 0 else "- points/s"


@dataclass(frozen=True)
class IngestProgress:
    """Where a running ingest is, after each batch of files (for progress lines on long runs)."""

    files_done: int
    files_total: int
    points_written: int
    seconds: float


def _commit(run: ParsedRun, git_info: CommitLog) -> Commit:
    """The run's commit: git's record of it, with asv's date where git gave none (or no date)."""
    commit = git_info.commits.get(run.commit_hash)
    if commit is None:
        return Commit(sha=run.commit_hash, time=run.commit_time)
    return commit if commit.time is not None else replace(commit, time=run.commit_time)


def _machine(run: ParsedRun, info: dict[str, str], sidecar: dict[str, str]) -> Machine:
    """The machine a run was measured on: asv's machine name and the run's environment, its host
    as the result file records it (machine.json where the file records nothing), and the GPU
    sidecar's gpu/driver/cuda/torch/triton. The store decides which stored machine that is."""
    own = {**info, **dict(run.host_info)}  # the file's own record of the host wins: it is the run's
    return Machine(
        name=run.machine,
        cpu=own.get("cpu", ""),
        extra=tuple(sorted((k, v) for k, v in own.items() if k not in ("machine", "cpu"))),
        asv_name=run.machine,
        env_name=run.env_name,
        host=host_fingerprint({**own, "gpu": sidecar.get("gpu", "")}),
        **{k: sidecar.get(k, "") for k in SIDECAR_MACHINE_KEYS},
    )


def _outcome(path: Path, status: str, points: int = 0, message: str = "", skipped: int = 0) -> FileOutcome:
    """A file's outcome; its message is one printable line whatever the file's name or content held."""
    return FileOutcome(str(path), status, points, printable(message), skipped)


def _store_failure(path: Path, exc: Exception) -> str:
    """Why the store did not take a parsed file: its own rule for what it can hold (the same on
    every database), a database error, or anything else as what it is."""
    if isinstance(exc, StoreLimitError | ReplacementRefused):
        return f"{quote_path(path)}: {exc}"
    if isinstance(exc, SQLAlchemyError):
        return f"{quote_path(path)}: database error: {error_line(exc)}"
    return f"{quote_path(path)}: not stored ({error_line(exc)})"


@dataclass(frozen=True)
class _Unchanged:
    """A result file whose bytes were ingested before."""

    commit_sha: str


@dataclass(frozen=True)
class _Known:
    """A result file whose digest the store holds: what `_claim` needs to place it."""

    commit_sha: str
    run_key: str
    digest: str


def _read_one(
    path: Path, benchmarks: dict[str, BenchmarkInfo], info: dict[str, str], known: dict[str, tuple[str, str]]
) -> FileOutcome | _Known | tuple[ParsedRun, dict[str, str] | FileOutcome]:
    """One result file read and parsed inside one boundary: the parsed run with its GPU sidecar
    (or the sidecar's error outcome), `_Known`, or the file's error outcome: any exception but an
    interrupt becomes one, naming the file. Needs nothing of this ingest's other files, so it runs
    in a forked parser as well as here (`_read_all`)."""
    try:
        raw = read_file(path, MAX_RESULT_BYTES)
        digest = hashlib.sha256(raw).hexdigest()
        stored = _stored(digest, known)
        if stored is not None:  # identical bytes were ingested before: skip the parse (most of a re-ingest)
            return stored
        run = parse_result_file(path, benchmarks, info, raw=raw, digest=digest)
    except AsvFormatError as exc:
        return _outcome(path, "error", message=str(exc))
    except Exception as exc:  # noqa: BLE001 - the boundary: one bad file never stops the others
        return _outcome(path, "error", message=_cannot(path, exc))
    try:
        # The sidecar is keyed by the commit, so it is read once the file has parsed; its job marker
        # applies only where it was recorded for these very bytes.
        sidecar = read_gpu_sidecar(path.parent, run.commit_hash, path.name, digest)
        return with_sidecar(run, sidecar), sidecar
    except AsvFormatError as exc:
        return run, _outcome(path, "error", message=str(exc))
    except Exception as exc:  # noqa: BLE001 - as above
        return run, _outcome(path, "error", message=_cannot(path, exc))


def _known(path: Path, known: dict[str, tuple[str, str]]) -> _Known | None:
    """`_Known` for a file whose bytes the store holds, else None (also for one that cannot be read:
    `_read_one` then says why)."""
    try:
        digest = hashlib.sha256(read_file(path, MAX_RESULT_BYTES)).hexdigest()
    except Exception:  # noqa: BLE001 - reported by `_read_one`
        return None
    return _stored(digest, known)


def _stored(digest: str, known: dict[str, tuple[str, str]]) -> _Known | None:
    entry = known.get(digest)
    return None if entry is None else _Known(entry[0], entry[1], digest)


def _cannot(path: Path, exc: Exception) -> str:
    return f"{quote_path(path)}: cannot be ingested ({error_line(exc)})"


@dataclass(frozen=True)
class _Clash:
    """A file whose bytes are the stored run's, after an earlier file (path order) with other contents
    of that run: stale if the earlier file replaced the run, still the stored one if the store refused it."""

    commit_sha: str
    earlier: str  # the earlier file's path
    outcome: FileOutcome  # its outcome if the earlier file was stored


def _placed(
    path: Path,
    item: FileOutcome | _Known | tuple[ParsedRun, dict[str, str] | FileOutcome],
    info: dict[str, str],
    claims: dict[str, tuple[Path, str]],
) -> FileOutcome | _Unchanged | _Clash | tuple[ParsedRun, dict[str, str], dict[str, str]]:
    """A read file (`_read_one`) placed among this ingest's files in path order: (run, machine info,
    sidecar) to write, `_Unchanged`, `_Clash` (stored bytes after another file of their run), or its
    outcome (a run another file already holds with other contents is an error, before anything
    about its sidecar)."""
    if isinstance(item, FileOutcome):
        return item
    if isinstance(item, _Known):
        clash = _claim(claims, item.run_key, path, item.digest)
        if clash is None:
            return _Unchanged(item.commit_sha)
        return _Clash(item.commit_sha, str(claims[item.run_key][0]), clash)
    run, sidecar = item
    clash = _claim(claims, run.run_key, path, run.digest)
    if clash is not None:
        return clash
    if isinstance(sidecar, FileOutcome):
        return sidecar
    return run, info, sidecar


# What a forked parser reads, set in it by `_fork_input` (inherited memory: a fork pickles nothing
# on the way in): the benchmarks, each machine folder's info and the stored digests.
_FORK_INPUT: tuple[dict[str, BenchmarkInfo], dict[Path, dict[str, str]], dict[str, tuple[str, str]]] | None = None


def _fork_input(
    benchmarks: dict[str, BenchmarkInfo], infos: dict[Path, dict[str, str]], known: dict[str, tuple[str, str]]
) -> None:
    global _FORK_INPUT
    _FORK_INPUT = (benchmarks, infos, known)


_Read = FileOutcome | _Known | tuple[ParsedRun, dict[str, str] | FileOutcome]
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


def _read_all(
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
                               initargs=(benchmarks, infos, known))  # fmt: skip
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


def _claim(claims: dict[str, tuple[Path, str]], run_key: str, path: Path, digest: str) -> FileOutcome | None:
    """Record that `path` holds `run_key`; an error outcome when an earlier file (path order) holds
    the same run with other contents. An identical copy is no conflict."""
    first = claims.setdefault(run_key, (path, digest))
    if first[1] == digest:
        return None
    return _outcome(
        path,
        "error",
        message=(
            f"{quote_path(path)}: holds the same run as {quote_path(first[0])} (machine/commit/environment "
            f"{run_key!r}) with other contents; only the first in path order is stored: asv keeps one file "
            "per run, so remove the stale copy (a copied machine folder?)"
        ),
    )


def _write_batch(
    store: Store,
    parsed: list[tuple[ParsedRun, dict[str, str], dict[str, str]]],
    outcomes: list[FileOutcome],
    repo: str | os.PathLike[str] | None,
    branch: str | None,
    on_branch: CommitLog,
    problems: dict[str, str],
    replace: bool,
) -> tuple[int, list[str]]:
    """One transaction of parsed files (`Store.ingest_runs`), each file's outcome appended to
    `outcomes` and what git's records of their commits lacked to `problems`; returns the points
    written and a note per run replaced from another source (`replace`)."""
    git_info = git_commits(repo, [r.commit_hash for r, _, _ in parsed], branch, on_branch) if repo else CommitLog()
    problems.update(git_info.problems)
    items = [(run, _machine(run, info, sidecar), _commit(run, git_info)) for run, info, sidecar in parsed]
    try:
        statuses: list[str | Exception] = store.ingest_runs(items, replace=replace)
    except Exception as exc:  # the batch's transaction failed as a whole: nothing of it is stored
        statuses = [exc] * len(items)
    written = 0
    notes = []
    for (run, _, _), status in zip(items, statuses, strict=True):
        if isinstance(status, Exception):
            outcomes.append(_outcome(run.path, "error", message=_store_failure(run.path, status)))
            continue
        if status == REPLACED_FROM_ANOTHER_SOURCE:
            status = "replaced"
            notes.append(printable(f"note: {quote_path(run.path)}: replaced the stored run of {run.run_key!r} "
                                   "ingested from another file (--replace; recorded in the store)"))
        skipped = run.skipped_unknown + run.skipped_stale
        note = ""
        if skipped:
            note = (
                f"{quote_path(run.path)}: skipped {len(run.skipped_unknown)} benchmarks missing from "
                f"benchmarks.json and {len(run.skipped_stale)} of another benchmark version: "
                + ", ".join(repr(name) for name in skipped[:5])
            )
        outcomes.append(_outcome(run.path, status, run.n_points, note, len(skipped)))
        if status != "unchanged":
            written += run.n_points
    return written, notes


def ingest_results_dir(
    store: Store,
    results_dir: str | os.PathLike[str],
    *,
    repo: str | os.PathLike[str] | None = None,
    branch: str | None = None,
    batch_size: int = BATCH_FILES,
    progress: Callable[[IngestProgress], None] | None = None,
    replace: bool = False,
) -> IngestReport:
    """Ingest every result file of an asv results directory; each file is all or nothing.

    Args:
        store: the destination store.
        results_dir: an asv results directory (with benchmarks.json and one folder per machine).
        repo: optional git checkout to read commit parents, branch, time and subject from.
        branch: optional branch name recorded on commits reachable from it (needs `repo`).
        batch_size: files per transaction (each file in its own savepoint inside it).
        progress: called after each batch of files with an `IngestProgress`.
        replace: a file holding a different run of a stored (machine, environment, commit) than the
            one stored from another file replaces it (recorded, and noted in the report); without
            it, that file is an error naming both files.

    Returns:
        An IngestReport; a file that cannot be read is an "error" outcome, never a partial run.
        An unreadable machine.json makes every file of its machine an error: the first file
        (in path order) carries the machine.json message, the others name that first file.
        A missing results directory or benchmarks.json raises AsvFormatError (nothing to ingest).
    """
    if not isinstance(store, Store):
        raise TypeError(f"store must be a ci.store.Store, got {type(store).__name__}")
    t0 = time.perf_counter()
    root = Path(results_dir)
    if not root.is_dir():
        raise AsvFormatError(f"{root}: not a directory (expected an asv results directory)")
    if branch and repo is None:
        raise ValueError("--branch needs --repo (the branch is read from git)")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    benchmarks = load_benchmarks_json(root)

    paths = list(iter_result_files(root))
    machine_infos: dict[Path, dict[str, str] | AsvFormatError] = {}
    # A machine.json that cannot be read fails every result file of its machine; its message goes
    # with the first of them only, the others point to that file (one message, no file unaccounted for).
    first_failed: dict[Path, Path] = {}
    for path in paths:
        if path.parent not in machine_infos:
            try:
                machine_infos[path.parent] = load_machine_json(path.parent)
            except AsvFormatError as exc:
                machine_infos[path.parent] = exc
            except Exception as exc:  # noqa: BLE001 - as for result files: one folder never stops the others
                where = quote_path(path.parent / "machine.json")
                machine_infos[path.parent] = AsvFormatError(f"{where}: cannot be read ({error_line(exc)})")

    outcomes: list[FileOutcome] = []
    machines_before = store.machines()
    known = store.run_index()  # one query: a file another runner adds meanwhile is simply not known yet
    known_shas: list[str] = []
    # run key -> (first file in path order holding it, its digest): a second file with the same run
    # and other contents is an error, so two copies of one run never replace each other.
    claims: dict[str, tuple[Path, str]] = {}
    # The branch's log is read once; what it lacks (a commit off the branch, or none given) is asked
    # of git per batch. A commit whose record cannot be read is warned of once, whichever batches name it.
    on_branch = branch_log(repo, branch) if repo is not None and branch else CommitLog()
    problems: dict[str, str] = {}
    replaced: list[str] = []  # notes on runs replaced from another source
    clashes: list[tuple[Path, _Clash]] = []  # stored bytes after another file of their run: decided at the end
    # Files go in batch by batch (parsed runs of one batch in memory, one transaction per batch,
    # one savepoint per file), so memory stays flat however long the history is.
    written = 0
    readable = [p for p in paths if not isinstance(machine_infos[p.parent], AsvFormatError)]
    readable_infos = {d: info for d, info in machine_infos.items() if not isinstance(info, AsvFormatError)}
    # Parsing allocates millions of short-lived objects and none in cycles: the collector's passes
    # over them were ~1 s of 1,000 files' ingest, and more in a forked parser's returns (2026-12-02).
    with contextlib.closing(_read_all(readable, benchmarks, readable_infos, known)) as reads, paused_gc():
        for first in range(0, len(paths), batch_size):
            if progress is not None and first:
                progress(IngestProgress(first, len(paths), written, time.perf_counter() - t0))
            parsed = []
            for path in paths[first : first + batch_size]:
                info = machine_infos[path.parent]
                if isinstance(info, AsvFormatError):
                    carrier = first_failed.setdefault(path.parent, path)
                    message = str(info)
                    if carrier != path:
                        message = f"{quote_path(path)}: skipped, same machine.json error as {quote_path(carrier.name)}"
                    outcomes.append(_outcome(path, "error", message=message))
                    continue
                item = _placed(path, next(reads), info, claims)
                if isinstance(item, _Unchanged):
                    known_shas.append(item.commit_sha)
                    outcomes.append(_outcome(path, "unchanged"))
                elif isinstance(item, _Clash):
                    clashes.append((path, item))
                elif isinstance(item, FileOutcome):
                    outcomes.append(item)
                else:
                    parsed.append(item)
            if not parsed:
                continue
            points, batch_notes = _write_batch(store, parsed, outcomes, repo, branch, on_branch, problems, replace)
            written += points
            replaced.extend(batch_notes)
    # A file whose bytes the store holds came after another file of its run: that file replaced the
    # run (this one is a stale copy, an error), or was refused (this one is still the stored run).
    refused = {f.path for f in outcomes if f.status == "error"}
    for path, clash in clashes:
        if clash.earlier in refused:
            known_shas.append(clash.commit_sha)
            outcomes.append(_outcome(path, "unchanged"))
        else:
            outcomes.append(clash.outcome)

    if repo is not None and known_shas:
        # Commits of files ingested earlier (perhaps without --repo) get their git metadata too.
        git_info = git_commits(repo, known_shas, branch, on_branch)
        problems.update(git_info.problems)
        # A time git could not give stays what is stored (asv's): empty fields never erase known ones.
        store.upsert_commits([git_info.commits[s] for s in sorted(set(known_shas)) if s in git_info.commits])
    outcomes.sort(key=lambda f: f.path)
    notes = tuple(commit_warning(sha, problem) for sha, problem in sorted(problems.items())) + tuple(replaced)
    if repo is not None and (shallow := commit_order_warning(repo, on_branch)) is not None:
        notes += (shallow,)
    if written:
        notes += machine_notes(machines_before, store.machines())
    return IngestReport(tuple(outcomes), time.perf_counter() - t0, notes)


def machine_notes(before: Sequence[Machine], after: Sequence[Machine]) -> tuple[str, ...]:
    """What an ingest says of the machines it added beside others of the same asv machine name.

    Args:
        before: the store's machines before the ingest.
        after: its machines after.

    Returns:
        One line per added machine: a new environment is its own series ("note"); a second host
        under one name is kept apart ("warning", naming both hosts and the fix).
    """
    known = {m.name for m in before}
    by_name: dict[str, list[Machine]] = {}
    for m in after:
        by_name.setdefault(m.machine_name, []).append(m)
    out = []
    for m in after:
        if m.name in known:
            continue
        first = by_name[m.machine_name][0]
        if first.name == m.name:
            continue
        if not same_host(first.host, m.host):
            out.append(printable(
                f"warning: machine {m.machine_name!r}: results from another host ({describe(m.host)}) than the "
                f"first one of that name ({describe(first.host)}: {', '.join(host_differences(first.host, m.host))}) "
                f"are kept apart as machine {m.name!r}, never one series with it; to name the hosts yourself, give "
                "each its own asv machine name (`asv machine --machine NAME` on each host, or a BENCH_MACHINE per "
                "runner in the workflow)"))  # fmt: skip
        else:
            out.append(printable(
                f"note: machine {m.machine_name!r} measured in another environment, {m.env_name!r}: its results "
                f"are their own series, machine {m.name!r} (environment {first.env_name!r} is {first.name!r})"))
    return tuple(out)
