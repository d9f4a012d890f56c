"""Points out of the store's result rows: the `result_blocks` columns a point read takes, and how
they are cut into one row per point (a benchmark's grid is one block row of packed columns,
`ci.store.models.ResultBlockRow`), beside the `results` rows of points stored one by one.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from itertools import repeat
from typing import Any

from ci.store.codec import int64s, split_samples, unpacker

# The `result_blocks` columns the point reads take, and how `block_points` cuts them into points.
# asv's statistics of a point come only where it has no raw samples (one value): raw samples are the
# evidence there, and asv's statistics a function of them (`asv_runner.statistics.compute_stats`);
# read for every point they were +0.9 s of a 2.3 s read of 500,000 records (2026-12-05).
_BLOCK_COLUMNS = ("benchmark_ids", "samples", "lengths", "started_at", "benchmark_version", "stats")


def block_read(columns: str, table: str = "") -> str:
    """The `_BLOCK_COLUMNS` of a point read of `columns` (`table`: "result_blocks." where the query
    joins others); the statistics are NULL unless `columns` asks for them."""
    stats = f"CASE WHEN {table}has_raw_samples THEN NULL ELSE {table}stats END" if "stats" in columns else "NULL"
    return ", ".join(stats if c == "stats" else f"{table}{c}" for c in _BLOCK_COLUMNS)


# A point's asv statistics (`ci.records.STAT_NAMES`): six columns of `results`, one column of
# `result_blocks` (six runs of a float64 per point). A point read asks for them as "stats", last.
_RESULT_STATS = "has_raw_samples, ci_99_a, ci_99_b, q_25, q_75, number, repeat"
_NAN = float("nan")
_NONE6, _NAN6 = (None,) * 6, (_NAN,) * 6
_STRIDED: dict[int, Any] = {}
_SPREAD_OF_ONE = struct.Struct("<16x2d8xd").unpack  # q_25, q_75 and repeat of a one-point block's six
_ONE_ID = struct.Struct("<q").unpack  # a one-point block's benchmark id


def result_columns(columns: str) -> str:
    """The `results` columns of a point read's `columns` ("stats" stands for the six statistics)."""
    return columns.replace("stats", _RESULT_STATS)


def fold_stats(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """A `results` row whose seven last columns are has_raw_samples and the statistics, with them as
    one tuple (NULL: NaN), or None for a point with raw samples."""
    if row[-7]:
        return (*row[:-7], None)
    stats = tuple(row[-6:])
    if stats == _NONE6:  # asv recorded none (a track_ benchmark)
        stats = _NAN6
    elif None in stats:  # some
        stats = tuple(_NAN if x is None else x for x in stats)
    return (*row[:-7], stats)


def _block_stats(blob: bytes | None, n: int) -> Any:
    """Per point of an `n`-point block, its six statistics from the block's `stats` column (None
    each where the block has raw samples: the column is read as NULL)."""
    if blob is None:
        return repeat(None, n)
    blob = bytes(blob)
    if len(blob) != 48 * n:
        raise ValueError(f"a block's statistics are {len(blob)} bytes, its {n} points need {48 * n}")
    values = unpacker(len(blob))(blob)
    if n == 1:  # a benchmark without parameters: most blocks of some histories (MetPy's 7,441 of 7,552)
        return (values,)
    return list(zip(*(values[i * n : (i + 1) * n] for i in range(6)), strict=True))


def _point_stats(blob: bytes | None, n: int, j: int) -> tuple[float, ...] | None:
    """Point `j`'s six statistics from an `n`-point block's `stats` column: one strided unpack."""
    if blob is None:
        return None
    unpack = _STRIDED.get(n)
    if unpack is None:
        unpack = _STRIDED[n] = struct.Struct("<" + f"{8 * (n - 1)}x".join(["d"] * 6) if n > 1 else "<6d").unpack_from
    return unpack(bytes(blob), 8 * j)


def block_points(blocks: Iterable[tuple[Any, ...]], columns: str) -> list[tuple[Any, ...]]:
    """`results`-like rows (run_id, benchmark_id, *columns) of every point of `blocks` (rows of
    run_id and `block_read`); `columns` names some of samples, started_at, benchmark_version, stats."""
    wanted = [c.strip() for c in columns.split(",")]
    out: list[tuple[Any, ...]] = []
    for run_id, ids_blob, samples, lengths, started, version, stats in blocks:
        ids = int64s(bytes(ids_blob))
        n = len(ids)
        per = {"samples": split_samples(bytes(samples), int64s(bytes(lengths))), "started_at": repeat(started, n),
               "benchmark_version": repeat(version, n)}  # fmt: skip
        if "stats" in wanted:
            per["stats"] = _block_stats(stats, n)
        out.extend(zip(repeat(run_id, n), ids, *map(per.__getitem__, wanted), strict=True))
    return out


def block_spreads(blocks: Iterable[tuple[Any, ...]]) -> list[tuple[float, ...]]:
    """(run_id, benchmark_id, q_25, q_75, repeat) of every point of `blocks` (rows of run_id,
    benchmark_ids and a non-NULL stats column: blocks of points asv kept one value of), NaN where asv
    recorded none."""
    out: list[tuple[float, ...]] = []
    for run_id, ids_blob, blob in blocks:
        if len(ids_blob) == 8 and len(blob) == 48:  # a benchmark without parameters: most blocks of some histories
            out.append((run_id, *_ONE_ID(ids_blob), *_SPREAD_OF_ONE(blob)))
            continue
        ids = int64s(bytes(ids_blob))
        n = len(ids)
        blob = bytes(blob)
        if len(blob) != 48 * n:
            raise ValueError(f"a block's statistics are {len(blob)} bytes, its {n} points need {48 * n}")
        values = unpacker(len(blob))(blob)
        out.extend(zip(repeat(run_id, n), ids, values[2 * n:3 * n], values[3 * n:4 * n], values[5 * n:], strict=True))
    return out


def series_in_blocks(blocks: list[tuple[Any, ...]], bid: int, columns: str) -> list[tuple[Any, ...]]:
    """Series `bid`'s points in `blocks` (rows of 7 run columns, run_id, `block_read`, and 3 order
    columns: the commit's position, time and id) as (run columns, `block_points` row, order
    columns). Where the series sits in a block and where its samples lie are worked out once per
    distinct ids / lengths value (a grid's are the same in every run): unpacked per row they were
    most of a series read (2026-12-02)."""
    where: dict[bytes, tuple[int, int]] = {}  # a block's ids -> (the series' position in them (-1: not there), points)
    spans: dict[tuple[bytes, int], tuple[int, int]] = {}  # (lengths, position) -> the samples' byte range
    wanted = [c.strip() for c in columns.split(",")]
    out = []
    for row in blocks:
        ids, samples, lengths = bytes(row[8]), bytes(row[9]), bytes(row[10])
        place = where.get(ids)
        if place is None:
            found = int64s(ids)
            place = where[ids] = (found.index(bid) if bid in found else -1, len(found))
        j, n = place
        if j < 0:
            continue
        span = spans.get((lengths, j))
        if span is None:
            counts = int64s(lengths)
            at = 8 * sum(counts[:j])
            span = spans[lengths, j] = (at, at + 8 * counts[j])
        per = {"samples": samples[span[0] : span[1]], "started_at": row[11], "benchmark_version": row[12]}
        if "stats" in wanted:
            per["stats"] = _point_stats(row[13], n, j)
        out.append((row[:7], (row[7], bid, *map(per.__getitem__, wanted)), row[-3:]))
    return out
