"""The charts' data files: compact JSON that round-trips, NaN as null, text kept as text."""

from __future__ import annotations

import json
import math

import pytest

from ci.site.data import series_json, unwrap, wrap, wrap_json


def test_series_json_round_trips() -> None:
    body = series_json(meta={"name": 'b.x</script>"', "gate": None}, x=[0, 2, 3],
                       values=[1.2345678e-5, math.nan, 2e-5], lows=[1.2e-5, math.nan, 1.9e-5],
                       highs=[1.3e-5, math.inf, 2.1e-5], counts=[10, 10, 10], div=1e-6,
                       marks=[(2, "suspect", "suspected <b>x</b>")])
    key, got = unwrap(wrap_json("abc", body))
    assert key == "abc"
    assert got == {"name": 'b.x</script>"', "gate": None, "div": 1e-6, "x": [0, 2, 3],
                   "v": [12.3457, None, 20.0], "lo": [12.0, None, 19.0], "hi": [13.0, None, 21.0], "n": 10,
                   "marks": [[2, "suspect", "suspected <b>x</b>"]]}
    assert json.loads(body) == got
    assert unwrap(wrap("k", {"n": [1, 2]})) == ("k", {"n": [1, 2]})


@pytest.mark.parametrize("text", ["", "alert(1)", 'raggedDashboard.put("k" {});', "raggedDashboard.put(1,2"])
def test_unwrap_rejects_other_text(text: str) -> None:
    with pytest.raises(ValueError):
        unwrap(text)


def test_arrays_of_reads_back_series_arrays_and_refuses_anything_else() -> None:
    from ci.site.data import arrays_of, series_arrays

    arrays = series_arrays([0, 2, 3], [1.5, float("nan"), 2e-7], [1.0, 1.0, 1.0], [2.0, 2.0, 2.0], 1.0)
    body = series_json(meta={"name": '"x":[ ],"v":[', "gate": None}, x=[0, 2, 3], values=[1.5, float("nan"), 2e-7],
                       lows=[1.0] * 3, highs=[2.0] * 3, counts=[5, 5, 5], div=1.0, marks=[(2, "cp", ']"n":')])
    assert arrays_of(wrap_json("k", body)) == arrays == ("0,2,3", "1.5,null,2e-07", "1,1,1", "2,2,2")
    extended = series_arrays([0, 2, 3, 4], [1.5, float("nan"), 2e-7, 3.0], [1.0] * 4, [2.0] * 4, 1.0, kept=(arrays, 3))
    assert extended == series_arrays([0, 2, 3, 4], [1.5, float("nan"), 2e-7, 3.0], [1.0] * 4, [2.0] * 4, 1.0)
    assert arrays_of(wrap_json("k", body.replace('"x":[0,', '"x":[alert(1),'))) is None
    assert arrays_of("not a data file") is None


def test_a_whole_number_in_its_own_unit_is_written_whole() -> None:
    """A count shown in its own unit (div 1: mujoco-warp's device memory in "unit") kept 6 digits, so the
    tooltip read 3,189,770,000 beside the table's 3,189,768,192; a fraction and a scaled value keep 6."""
    from ci.site.data import series_arrays

    values = [3189768192.0, 9.0345, -0.0, 2.0**60, float("nan")]
    assert series_arrays([0, 1, 2, 3, 4], values, values, values, 1.0)[1] == "3189768192,9.0345,0,1.15292e+18,null"
    assert series_arrays([0], [3189768192.0], [1.0], [1.0], 1e-3)[1] == "3.18977e+12"
