"""What the store can hold, checked before anything is written, so that SQLite and PostgreSQL give
the same outcome for the same input.

SQLite stores any string in any column; PostgreSQL refuses a string longer than its column's
`String(n)` and a NUL character anywhere in text, and both drivers refuse a string that is not
valid Unicode (a lone surrogate). Without this check the same result file went in on SQLite and
failed on PostgreSQL. The rule, for every text value bound to a column as it is (JSON-encoded
columns escape every character and are free of it): at most the column's length (read from
`ci.store.models`, so the check and the schema cannot drift apart), no NUL, valid Unicode. A
value that breaks it refuses its whole write with `StoreLimitError`, naming what and why: for a
result file, that file (ingest reports it as "FILE: reason" and goes on with the others). Ingest
first takes out of a file what belongs to one benchmark alone (`storable`: a name, a parameter value,
a unit the store cannot hold) and an environment name too long for its column, so that one such value
costs that benchmark, not every file of the history.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import hashlib
from collections.abc import Collection, Iterable
from typing import Any

from sqlalchemy import String

from ci.records import Benchmark, Commit, Machine, ParsedRun
from ci.store.models import AcknowledgementRow, BenchmarkRow, CommitRow, MachineRow, ResultRow, RunRow
from ci.text import redact_text


class StoreLimitError(ValueError):
    """A value the store cannot hold the same way on every database; the message says which and why."""


_LENGTHS: dict[int, int | None] = {}  # id(model attribute) -> its length; the attributes live as long as the models


def column_length(column: object) -> int | None:
    """The `String(n)` length of a mapped column, None for unbounded text (looked up once per
    column: through SQLAlchemy's attribute machinery it was ~0.7 ms of every result file's checks,
    2026-12-02)."""
    key = id(column)
    if key not in _LENGTHS:
        type_ = getattr(column, "type", None)
        _LENGTHS[key] = type_.length if isinstance(type_, String) else None
    return _LENGTHS[key]


def check_text(value: str, column: object, what: str) -> None:
    """StoreLimitError unless `value` fits `column` (a model attribute, e.g. `BenchmarkRow.key`)
    on every database.

    Args:
        value: the text to be written as it is.
        column: the mapped column it goes to.
        what: how messages name the value ("benchmark 'x' series key").
    """
    if not isinstance(value, str):
        raise StoreLimitError(f"{what} is not text: {type(value).__name__}")
    limit = column_length(column)
    if limit is not None and len(value) > limit:
        raise StoreLimitError(f"{what} is {len(value):,} characters long; the store holds at most {limit:,}")
    if "\x00" in value:
        raise StoreLimitError(f"{what} holds a NUL character, which the store does not accept "
                              "(PostgreSQL cannot hold one in text)")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise StoreLimitError(f"{what} is not valid Unicode (it holds a lone surrogate, e.g. from a file name "
                              "that is not UTF-8)") from None


def _short(text: str) -> str:
    """A value quoted for a message, cut so that a 10,000-character name gives a readable line (redacted
    first: a cut credential no longer has the shape that hides it when the message is shown)."""
    text = redact_text(text)
    return repr(text[:80] + "…" if len(text) > 80 else text)


def _checks(run: ParsedRun, machine: Machine, commit: Commit) -> Iterable[tuple[str, object, str]]:
    yield machine.name, MachineRow.name, "machine name"
    for field in ("gpu", "driver", "cuda", "torch", "triton", "cpu"):
        yield getattr(machine, field), getattr(MachineRow, field), f"machine {field}"
    yield commit.sha, CommitRow.sha, "commit sha"
    yield commit.branch, CommitRow.branch, "commit branch"
    yield commit.subject, CommitRow.subject, "commit subject"
    yield run.env_name, RunRow.env_name, "environment name"
    yield run.run_key, RunRow.run_key, "run key (machine/commit/environment)"
    yield str(run.path), RunRow.source, "file name"


@functools.lru_cache(maxsize=65536)
def _check_series(name: str, key: str, unit: str, version: str | None) -> None:
    """One series' texts; cached, since every result file of a history repeats the same series."""
    check_text(name, BenchmarkRow.name, f"benchmark name {_short(name)}")
    check_text(key, BenchmarkRow.key, f"benchmark {_short(name)} series key")
    check_text(unit, BenchmarkRow.unit, f"benchmark {_short(name)} unit")
    if version is not None:
        check_text(version, ResultRow.benchmark_version, f"benchmark {_short(name)} version")


_CHECKED_GRIDS: dict[tuple[int, str | None], tuple[tuple[Benchmark, str], ...]] = {}


def _series_problem(bench: Benchmark, key: str, version: str | None) -> str | None:
    try:
        _check_series(bench.name, key, bench.unit, version)
    except StoreLimitError as exc:
        return str(exc)
    return None


def short_env_name(name: str) -> str:
    """`name` as the store holds it: as it is where it fits `RunRow.env_name`, else its start and a hash
    of the whole (asv names such an environment's result file by a hash too): distinct names stay distinct."""
    limit = column_length(RunRow.env_name)
    if limit is None or len(name) <= limit:
        return name
    tag = "…" + hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return name[: limit - len(tag)] + tag


def storable(run: ParsedRun) -> tuple[ParsedRun, tuple[str, ...]]:
    """`run` less what the store cannot hold of single benchmarks, and what was taken out.

    A benchmark any of whose series the store cannot hold (a 10,000-character name, a parameter value
    that makes a series key past its column, a lone surrogate) is left out of the run with a message
    naming it and why; an environment name past its column is shortened (`short_env_name`). What
    concerns the whole run (machine, commit, file name) stays for `check_run` to refuse.

    Returns:
        (the run to write, one message per benchmark left out or name shortened).
    """
    bad: dict[str, str] = {}
    for point in run.points:
        if point.benchmark.name not in bad:
            problem = _series_problem(point.benchmark, point.key, point.benchmark_version)
            if problem is not None:
                bad[point.benchmark.name] = problem
    for block in run.blocks:
        if (id(block.benches), block.benchmark_version) in _CHECKED_GRIDS:
            continue
        for bench, key in block.benches:
            problem = _series_problem(bench, key, block.benchmark_version)
            if problem is not None:
                bad[bench.name] = problem
                break
    # One series, one key: a grid whose values repeat or differ only in quoting ('a' and a), or a
    # benchmark named like another's parameterised series ("X(function=f)": asv's names never hold
    # parentheses), made two points of one file one series. The store refused the whole file
    # ("UNIQUE constraint failed"), or mixed two benchmarks in one series (2026-12-06).
    pairs = [(p.benchmark, p.key) for p in run.points] + [pair for block in run.blocks for pair in block.benches]
    parenthesised = {b.name for b, _ in pairs if "(" in b.name or ")" in b.name}
    counts = collections.Counter(key for bench, key in pairs if bench.name not in parenthesised)
    for bench, key in pairs:
        if bench.name in parenthesised:
            bad.setdefault(bench.name, "a name with parentheses reads as a parameterised series of another benchmark")
        elif counts[key] > 1:
            bad.setdefault(bench.name, f"series {_short(key)} is {counts[key]} points of this file (parameter values "
                                       "that read the same)")
    notes = [f"left out benchmark {_short(name)}: {why}" for name, why in bad.items()]
    env_name = short_env_name(run.env_name)
    changes: dict[str, Any] = {}
    if env_name != run.env_name:
        notes.append(f"environment name of {len(run.env_name):,} characters stored as {env_name!r}")
        prefix = run.run_key[: len(run.run_key) - len(run.env_name)]
        changes.update(env_name=env_name, run_key=prefix + env_name)
    if bad:
        run = without_benchmarks(run, bad)
    return (dataclasses.replace(run, **changes) if changes else run), tuple(notes)


def without_benchmarks(run: ParsedRun, names: Collection[str]) -> ParsedRun:
    """`run` less every point and grid of the benchmarks `names` (asv's names), which it records as left
    out (`skipped_unstorable`)."""
    return dataclasses.replace(run, points=tuple(p for p in run.points if p.benchmark.name not in names),
                               blocks=tuple(b for b in run.blocks if b.benches[0][0].name not in names),
                               skipped_unstorable=(*run.skipped_unstorable, *names))


def check_run(run: ParsedRun, machine: Machine, commit: Commit) -> None:
    """StoreLimitError for the first value of a parsed result file (and its machine and commit
    records) that the store cannot hold alike on SQLite and PostgreSQL (see the module docstring)."""
    for value, column, what in _checks(run, machine, commit):
        check_text(value, column, what)
    for point in run.points:
        _check_series(point.benchmark.name, point.key, point.benchmark.unit, point.benchmark_version)
    for block in run.blocks:
        version = block.benchmark_version
        # A grid checked before with this version passes again: the parse hands a history's files
        # the same tuple of series for the same grid (kept here, so that its id stays its own).
        seen = _CHECKED_GRIDS.get((id(block.benches), version))
        if seen is not None and seen is block.benches:
            continue
        for bench, key in block.benches:
            _check_series(bench.name, key, bench.unit, version)
        if len(_CHECKED_GRIDS) >= 4096:
            _CHECKED_GRIDS.clear()
        _CHECKED_GRIDS[(id(block.benches), version)] = block.benches


def check_acknowledgement(benchmark_key: str, commit_sha: str, who: str) -> None:
    """StoreLimitError unless an acknowledgement's bounded fields fit (its `why` is unbounded text,
    checked for NUL and Unicode by the caller through `check_text`)."""
    check_text(benchmark_key, AcknowledgementRow.benchmark_key, "benchmark key")
    check_text(commit_sha, AcknowledgementRow.commit_sha, "commit sha")
    check_text(who, AcknowledgementRow.who, "who")
