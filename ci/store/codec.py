"""How record values become column values and back: UTC datetimes, sample lists as JSON text,
NaN as NULL. Shared by the store's write and read sides so that both agree on every encoding."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime


def utc(dt: datetime | None) -> datetime | None:
    """`dt` in UTC; a naive datetime (SQLite hands those back) is taken to be UTC already."""
    if dt is None:
        return None
    return dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt.astimezone(UTC)


def samples_json(samples: tuple[float, ...]) -> str:
    """JSON text of a sample list, ~4x cheaper than json.dumps for the common all-finite case."""
    text = "[" + ",".join(map(repr, samples)) + "]"
    # repr gives nan/inf, which JSON spells NaN/Infinity: let json do those (rare) lists.
    return json.dumps(list(samples)) if "n" in text else text


def parse_samples(text: str) -> tuple[float, ...]:
    """Samples from their stored JSON list. Always a flat list of numbers (`samples_json`), so
    split + float, which also reads JSON's NaN/Infinity, costs a fifth of json.loads; anything
    else goes through json."""
    if text == "[]":
        return ()
    try:
        return tuple(map(float, text[1:-1].split(",")))
    except ValueError:
        return tuple(json.loads(text))


def nan_to_none(x: float | None) -> float | None:
    """A float for a nullable column: NaN (not computed) is stored as NULL."""
    if x is None:
        return None
    x = float(x)
    return None if math.isnan(x) else x


def none_to_nan(x: float | None) -> float:
    """A nullable column's float back as a record field: NULL reads as NaN."""
    return math.nan if x is None else float(x)
