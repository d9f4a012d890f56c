"""How record values become column values and back: UTC datetimes, sample lists as packed
little-endian float64 bytes, NaN as NULL. Shared by the store's write and read sides (and the
migration that packed the older JSON text) so that all of them agree on every encoding."""

from __future__ import annotations

import json
import math
import struct
import sys
from array import array
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from itertools import chain
from typing import cast, overload

# One compiled Struct per sample count (a history has a handful): pack and unpack are one C call,
# ~0.5 us for 10 samples against ~3 us to write or parse their JSON text (2026-12-01, 2-core box).
_STRUCTS: dict[int, struct.Struct] = {}


def _struct(n: int) -> struct.Struct:
    s = _STRUCTS.get(n)
    if s is None:
        s = _STRUCTS[n] = struct.Struct(f"<{n}d")
    return s


@overload
def utc(dt: datetime) -> datetime: ...
@overload
def utc(dt: datetime | None) -> datetime | None: ...


def utc(dt: datetime | None) -> datetime | None:
    """`dt` in UTC; a naive datetime (SQLite hands those back) is taken to be UTC already."""
    if dt is None:
        return None
    return dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt.astimezone(UTC)


def pack_samples(samples: Sequence[float]) -> bytes:
    """A sample list as its column value: 8 bytes per sample, IEEE 754 float64, little-endian
    (NaN and infinities kept bit for bit; an int sample is stored as its float, as JSON read it)."""
    return _struct(len(samples)).pack(*samples)


def pack_int64s(values: Sequence[int]) -> bytes:
    """Ints as their column value: 8 bytes each, little-endian signed (a block's series ids and sample counts)."""
    return struct.pack(f"<{len(values)}q", *values)


def int64s(blob: bytes) -> tuple[int, ...]:
    """Ints from their column value (`pack_int64s`)."""
    n, rest = divmod(len(blob), 8)
    if rest:
        raise ValueError(f"a packed int list is a multiple of 8 bytes, got {len(blob)}")
    return struct.unpack(f"<{n}q", blob)


def pack_block(values: Sequence[float], samples: Sequence[Sequence[float]], stats: Sequence[Sequence[float | None]],
               ) -> tuple[bytes, bytes, bytes, bytes]:
    """A benchmark's grid as `result_blocks` column values: (value, samples, lengths, stats).
    Samples are every point's `pack_samples` bytes one after the other; a statistic asv did not
    record is NaN (a recorded one never is)."""
    flat = array("d", chain.from_iterable(samples))  # in C, not a Python loop over ~100 samples
    if any(None in column for column in stats):
        stat_values = array("d", [math.nan if x is None else x for column in stats for x in column])
    else:
        # no None in any column (checked above), which the type cannot say
        stat_values = array("d", chain.from_iterable(cast("Sequence[Sequence[float]]", stats)))
    if sys.byteorder == "big":
        flat.byteswap()
        stat_values.byteswap()
    return pack_samples(values), flat.tobytes(), pack_int64s(list(map(len, samples))), stat_values.tobytes()


def split_samples(blob: bytes, lengths: Sequence[int]) -> list[bytes]:
    """A block's samples column cut into each point's `pack_samples` bytes."""
    if not lengths:
        return []
    n = lengths[0]
    if len(blob) == 8 * n * len(lengths) and len(set(lengths)) == 1:
        step = 8 * n
        return [blob[i : i + step] for i in range(0, len(blob), step)]
    out, at = [], 0
    for k in lengths:
        out.append(blob[at : at + 8 * k])
        at += 8 * k
    if at != len(blob):
        raise ValueError(f"a block's samples are {len(blob)} bytes, its lengths say {at}")
    return out


_UNPACKERS: dict[int, Callable[[bytes | memoryview], tuple[float, ...]]] = {}


def unpacker(nbytes: int) -> Callable[[bytes | memoryview], tuple[float, ...]]:
    """The function that unpacks an `nbytes`-long `pack_samples` value (cached: bulk reads call
    it per row, and a dict lookup is a third of `unpack_samples`'s cost)."""
    fn = _UNPACKERS.get(nbytes)
    if fn is None:
        n, rest = divmod(nbytes, 8)
        if rest:
            raise ValueError(f"a packed sample list is a multiple of 8 bytes, got {nbytes}")
        fn = _UNPACKERS[nbytes] = _struct(n).unpack
    return fn


def unpack_samples(blob: bytes | memoryview) -> tuple[float, ...]:
    """Samples from their column value (`pack_samples`)."""
    return unpacker(len(blob))(blob)


def float64s(blob: bytes) -> array:
    """Packed samples (one or several `pack_samples` values joined) as an array of floats, native order."""
    out = array("d", blob)
    if sys.byteorder == "big":
        out.byteswap()
    return out


def samples_json(samples: tuple[float, ...]) -> str:
    """JSON text of a sample list (revision 0003's column format; the 0004 migration reads it)."""
    text = "[" + ",".join(map(repr, samples)) + "]"
    # repr gives nan/inf, which JSON spells NaN/Infinity: let json do those (rare) lists.
    return json.dumps(list(samples)) if "n" in text else text


def parse_samples(text: str) -> tuple[float, ...]:
    """Samples from their JSON list text (revision 0003's column format). Always a flat list of
    numbers (`samples_json`), so split + float, which also reads JSON's NaN/Infinity, costs a fifth
    of json.loads; anything else goes through json."""
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
