"""`tools.null_series`: the service and asv's `step_detect` on the same seeded series, side by side."""

from __future__ import annotations

import numpy as np
import pytest

from tools import null_series


def test_every_kind_is_seeded_and_has_no_step() -> None:
    """The same seed gives the same values; no kind drifts by a step (its halves' medians within 3%)."""
    for kind, gen in null_series.KINDS.items():
        a = gen(np.random.default_rng([7, 0]), 400)
        assert np.array_equal(a, gen(np.random.default_rng([7, 0]), 400)), kind
        if kind.startswith("random walk"):
            continue  # a walk may wander; it is there for that
        assert abs(np.median(a[:200]) - np.median(a[200:])) < 0.03, kind


def test_measure_counts_both_detectors_on_the_same_values() -> None:
    """A quiet kind: neither detector invents a step, both find the injected +20% step."""
    got = null_series.measure("Gaussian 2%", series=3, seed=1, threshold=0.05, step=0.20)
    assert got["commits"] >= 3 * 40
    assert got["service_false"] == 0 and got["asv_false"] == 0 and got["suspicions"] == 0
    assert got["service_found"] == 3 and got["asv_found"] == 3


def test_the_command_prints_one_row_per_kind_and_refuses_bad_options(capsys) -> None:
    assert null_series.main(["--series", "2", "--kinds", "Gaussian 2%", "5% outliers at +30%"]) == 0
    out = capsys.readouterr().out
    assert "| Gaussian 2% |" in out and "| 5% outliers at +30% |" in out and "Student" not in out
    with pytest.raises(SystemExit):
        null_series.main(["--series", "0"])


def test_series_at_zero_are_measured_by_difference() -> None:
    """A counter at 0: no false step from either detector, and both find a count going up by 5."""
    got = null_series.measure_zero("counter at 0", series=3, seed=1)
    assert got["service_false"] == 0 and got["asv_false"] == 0
    assert got["service_found"] == 3 and got["asv_found"] == 3
