"""Alert groups: many series stepping at one commit are one alert, labelled when the recorded
environment changed there."""

from __future__ import annotations

from ci.records import Benchmark, Outcome
from ci.verdicts import AlertGroup, environment_changes, group_changes
from ci.verdicts.history import ChangePoint


def _cp(key: str, sha: str, ratio: float, machine: str = "m", outcome: Outcome = Outcome.REGRESSED) -> ChangePoint:
    return ChangePoint(Benchmark(key), sha, 1.0, ratio, ratio, outcome, machine=machine)


ORDER = {"m": [f"c{i}" for i in range(10)], "n": [f"c{i}" for i in range(10)]}


def test_steps_of_many_series_at_one_commit_are_one_alert_with_its_top_movers() -> None:
    cps = [_cp("a", "c5", 1.1), _cp("b", "c5", 1.5), _cp("c", "c6", 1.2), _cp("d", "c5", 0.8, outcome=Outcome.IMPROVED),
           _cp("e", "c2", 1.3), _cp("f", "c5", 1.4, machine="n")]
    groups = group_changes(cps, ORDER)
    crowd = next(g for g in groups if g.crowd)
    assert crowd.machine == "m" and crowd.commit_sha == "c5"
    assert [c.benchmark.key for c in crowd.members] == ["b", "d", "c", "a"]  # biggest step first
    assert len(crowd.regressions) == 3 and not crowd.environment_change
    assert crowd.headline() == "4 series changed at c5 (3 slower, 1 faster)"
    lone = [g for g in groups if not g.crowd]
    assert sorted((g.machine, g.commit_sha) for g in lone) == [("m", "c2"), ("n", "c5")]  # machines apart
    assert sum(len(g.members) for g in groups) == len(cps)


def test_a_crowd_where_the_recorded_environment_changed_is_labelled_not_blamed() -> None:
    cps = [_cp(k, "c5", 1.2) for k in "abc"]
    envs = {("m", "c4"): {"python": "3.11", "sm_clock_mhz": "1980", "os": "Linux 6.8.0-49"},
            ("m", "c5"): {"python": "3.12", "sm_clock_mhz": "345", "os": "Linux 6.8.0-49"}}
    (g,) = group_changes(cps, ORDER, envs)
    assert g.environment == ("python: 3.11 -> 3.12",) and g.environment_change  # clocks are not the environment
    assert g.headline().endswith(": the environment changed: python: 3.11 -> 3.12")
    (same,) = group_changes(cps, ORDER, {("m", "c4"): envs[("m", "c5")], ("m", "c5"): envs[("m", "c5")]})
    assert not same.environment_change
    (lone,) = group_changes(cps[:1], ORDER, envs)
    assert lone.environment and not lone.environment_change  # one series: its own alert, the change noted


def test_environment_changes_name_each_key() -> None:
    assert environment_changes({"a": "1", "job": "x/1"}, {"a": "2", "b": "3", "job": "y/2"}) == (
        "a: 1 -> 2", "b: (none) -> 3")
    assert isinstance(group_changes([], ORDER), list) and AlertGroup("m", "c1", ()).headline().startswith("0 series")
