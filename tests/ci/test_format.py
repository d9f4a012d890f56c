"""The one value formatter the PR comment and the dashboard share."""

from __future__ import annotations

import math

import pytest

from ci.format import display_scale, format_change, format_value
from ci.outputs import comment


@pytest.mark.parametrize(("value", "unit", "text"), [
    (1.23e-5, "seconds", "12.3 µs"),
    (7.234e-4, "seconds", "723 µs"),  # read "0.7234 ms" on the dashboard before the two shared this
    (0.5, "seconds", "500 ms"),
    (2.5, "seconds", "2.5 s"),
    (3e-10, "seconds", "0.3 ns"),
    (0.0, "seconds", "0 ns"),
    (9.996e-4, "seconds", "1 ms"),  # rounds to 1000 µs: the next scale, not "1e+03 µs"
    (999.7 * 2**10, "bytes", "0.976 MiB"),
    (1.5 * 2**30, "bytes", "1.5 GiB"),
    (1870.4, "images/s", "1,870 images/s"),
    (0.9991, "top-1 agreement", "0.9991 top-1 agreement"),
    (0.0025, "max abs diff", "0.0025 max abs diff"),
], ids=lambda x: str(x))
def test_format_value(value: float, unit: str, text: str) -> None:
    assert format_value(value, unit) == text


def test_missing_values() -> None:
    assert format_value(math.nan, "seconds") == "n/a"
    assert format_value(None, "seconds") == "n/a"
    assert format_value(math.inf, "bytes", missing="—") == "—"


def test_the_comment_uses_it() -> None:
    assert comment.format_value is format_value


def test_display_scale_and_change() -> None:
    assert display_scale("seconds", 7.2e-4) == (1e-6, "µs")
    assert display_scale("seconds", math.nan) == (1.0, "s")
    assert display_scale("bytes", 3 * 2**20) == (2.0**20, "MiB")
    assert display_scale("images/s", 5.0) == (1.0, "images/s")
    assert format_change(1.041) == "+4.1%"
    assert format_change(0.997) == "−0.3%"
    assert format_change(1.0002) == "±0.0%"
    assert format_change(math.nan) == "—"
