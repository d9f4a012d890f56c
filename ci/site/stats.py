"""Per-run statistics and file names of the dashboard: the median and interquartile range of a
run's samples (one at a time, or numpy over many), and the slugs that name the series and commit
pages (`ci.site.model` re-exports them)."""

from __future__ import annotations

import hashlib
import math
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

_HEX = frozenset("0123456789abcdef")


def series_slug(benchmark_key: str, machine: str) -> str:
    """File-name-safe identity of a series: names can hold any character, so hash them.

    Args:
        benchmark_key: `Benchmark.key`.
        machine: the machine name.

    Returns:
        16 hex characters, stable across processes and runs.
    """
    return hashlib.sha256(f"{benchmark_key}\0{machine}".encode()).hexdigest()[:16]


def commit_slug(sha: str) -> str:
    """File name stem for a commit page: the sha when it is plain hex, else a hash of it.

    Args:
        sha: the commit id as stored.

    Returns:
        The lowercase hex sha itself, or "x" + 16 hex characters for anything else.
    """
    if 4 <= len(sha) <= 64 and _HEX.issuperset(sha):
        return sha
    return "x" + hashlib.sha256(sha.encode()).hexdigest()[:16]


def median_iqr(samples: tuple[float, ...]) -> tuple[float, float, float, int, float, float]:
    """Median, q25, q75, count, min and max of the finite samples (`Result.value` / `Result.spread`).

    Same formulas as `statistics.median` and `statistics.quantiles(n=4, method="inclusive")`,
    written out because the statistics module costs ~10 us per call and a full history has
    500,000 results.

    Args:
        samples: raw samples; NaN and inf are ignored.

    Returns:
        (median, q25, q75, n_finite, min, max); NaNs and 0 when nothing finite was measured.
    """
    data = sorted(samples)
    if not math.isfinite(sum(data)):  # NaN/inf propagate through the sum; filter only then (rare)
        data = [s for s in data if math.isfinite(s)]
    n = len(data)
    if n == 0:
        return math.nan, math.nan, math.nan, 0, math.nan, math.nan
    mid = n // 2
    med = data[mid] if n % 2 else (data[mid - 1] + data[mid]) / 2
    if n < 2:
        return med, med, med, n, med, med
    m = n - 1
    j1, d1 = divmod(m, 4)
    j3, d3 = divmod(3 * m, 4)
    q1 = (data[j1] * (4 - d1) + data[j1 + 1] * d1) / 4 if d1 else data[j1]
    q3 = (data[j3] * (4 - d3) + data[j3 + 1] * d3) / 4 if d3 else data[j3]
    return med, q1, q3, n, data[0], data[-1]


def median_iqr_all(samples: Sequence[tuple[float, ...]]) -> list[tuple[float, float, float, int, float, float]]:
    """`median_iqr` of many sample tuples at once, with numpy for the rows of one length that are
    all finite (the same formulas, so the same bits); the others one at a time.

    Args:
        samples: the results' samples.

    Returns:
        One `median_iqr` tuple per entry, in order.
    """
    out: list[Any] = [None] * len(samples)
    by_len: dict[int, list[int]] = defaultdict(list)
    for i, s in enumerate(samples):
        by_len[len(s)].append(i)
    for n, idx in by_len.items():
        if n < 2:
            for i in idx:
                out[i] = median_iqr(samples[i])
            continue
        for i, row in zip(idx, _median_iqr_rows(np.array([samples[i] for i in idx], dtype=float)), strict=True):
            out[i] = row
    return out


def _median_iqr_rows(data: np.ndarray) -> list[tuple[float, float, float, int, float, float]]:
    """`median_iqr` of each row of a (results x n samples) matrix, n >= 2, as rows."""
    return list(zip(*median_iqr_columns(data), strict=True))


def median_iqr_columns(data: np.ndarray) -> tuple[list[float], list[float], list[float], list[int], list[float],
                                                    list[float]]:
    """`median_iqr` of each row of a (results x n samples) matrix, n >= 2, as six columns: numpy
    for the rows that are all finite (the same formulas as `median_iqr`, so the same bits),
    `median_iqr` for the others."""
    n = data.shape[1]
    ok = np.isfinite(data).all(axis=1)
    good = np.sort(data[ok], axis=1)
    mid, m = n // 2, n - 1
    med = good[:, mid] if n % 2 else (good[:, mid - 1] + good[:, mid]) / 2
    j1, d1 = divmod(m, 4)
    j3, d3 = divmod(3 * m, 4)
    q1 = good[:, j1] if not d1 else (good[:, j1] * (4 - d1) + good[:, j1 + 1] * d1) / 4
    q3 = good[:, j3] if not d3 else (good[:, j3] * (4 - d3) + good[:, j3 + 1] * d3) / 4
    cols = (med.tolist(), q1.tolist(), q3.tolist(), [n] * len(med), good[:, 0].tolist(), good[:, -1].tolist())
    if ok.all():
        return cols
    rows = iter(zip(*cols, strict=True))
    out = [next(rows) if keep else median_iqr(tuple(data[i].tolist())) for i, keep in enumerate(ok.tolist())]
    return tuple(map(list, zip(*out, strict=True)))  # type: ignore[return-value]
