"""Alert groups: many series stepping at one commit are one alert, labelled when the recorded
environment changed there."""

from __future__ import annotations

import pytest

from ci.records import Benchmark, Kind, Outcome
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


def test_steps_the_other_way_at_the_next_commit_are_another_change_not_the_crowds() -> None:
    """geocat-comp's history: two interpolation series x3 slower at one commit, eight series faster at
    the next. One crowd of ten named after the second commit blamed it for the x3 slowdowns; the
    slower pair is its own (here two lone regressions at their commit), the faster crowd its own. A
    step the same way one commit off still joins the crowd (the detector placed it there)."""
    cps = [_cp("slow1", "c4", 3.0), _cp("slow2", "c4", 4.8)]
    cps += [_cp(f"fast{i}", "c5", 0.8, outcome=Outcome.IMPROVED) for i in range(8)]
    groups = group_changes(cps, ORDER)
    crowd = next(g for g in groups if g.crowd)
    assert crowd.commit_sha == "c5" and not crowd.regressions and len(crowd.members) == 8
    (slow,) = [g for g in groups if not g.crowd]  # two series: not a crowd, each shown as its own regression
    assert slow.commit_sha == "c4" and sorted(cp.benchmark.key for cp in slow.members) == ["slow1", "slow2"]
    off = group_changes([*cps, _cp("fast-late", "c6", 0.85, outcome=Outcome.IMPROVED)], ORDER)
    assert next(g for g in off if g.crowd).commit_sha == "c5" and len(next(g for g in off if g.crowd).members) == 9
    # Undecided steps count by their direction: a throughput that rose is faster, not "up" like a time.
    from ci.records import Direction

    slow = [_cp(f"lat{i}", "c4", 1.3) for i in range(3)]
    rises = [ChangePoint(Benchmark(f"t.T.track_ips{i}", unit="images/s", direction=Direction.HIGHER), "c5", 1.0, 1.3,
                         1.3, Outcome.INCONCLUSIVE, machine="m") for i in range(4)]
    apart = group_changes([*slow, *rises], ORDER)
    assert sorted((g.commit_sha, len(g.members)) for g in apart) == [("c4", 3), ("c5", 4)]


def test_a_crowd_where_the_recorded_environment_changed_is_labelled_not_blamed() -> None:
    cps = [_cp(k, "c5", 1.2) for k in "abc"]
    envs = {("m", "c4"): {"python": "3.11", "sm_clock_mhz": "1980", "os": "Linux 6.8.0-49"},
            ("m", "c5"): {"python": "3.12", "sm_clock_mhz": "345", "os": "Linux 6.8.0-49"}}
    (g,) = group_changes(cps, ORDER, envs)
    assert g.environment == ("python: 3.11 → 3.12",) and g.environment_change  # clocks are not the environment
    assert g.headline().endswith(": the environment changed: python: 3.11 → 3.12")
    (same,) = group_changes(cps, ORDER, {("m", "c4"): envs[("m", "c5")], ("m", "c5"): envs[("m", "c5")]})
    assert not same.environment_change
    (lone,) = group_changes(cps[:1], ORDER, envs)
    assert lone.environment and not lone.environment_change  # one series: its own alert, the change noted


def test_environment_changes_name_each_key() -> None:
    assert environment_changes({"a": "1", "job": "x/1"}, {"a": "2", "b": "3", "job": "y/2"}) == (
        "a: 1 → 2", "b: (none) → 3")
    assert isinstance(group_changes([], ORDER), list) and AlertGroup("m", "c1", ()).headline().startswith("0 series")


def test_environment_changes_are_bounded_whatever_the_files_record() -> None:
    """A pull request's job writes the head's environment: 700 variables of 100 characters made the
    comment's headline 87,283 characters, over GitHub's limit (2026-12-07)."""
    from ci.verdicts.groups import CHANGE_CHARS, SHOWN_CHANGES

    after = {f"env:V{i:03d}": "x" * 100 for i in range(700)}
    out = environment_changes({}, after)
    assert len(out) == SHOWN_CHANGES + 1 and out[-1] == f"and {700 - SHOWN_CHANGES} more changes"
    assert out[0].startswith("env:V000: (none) → xxx") and all(len(c) <= CHANGE_CHARS for c in out)
    assert environment_changes({"a": "1"}, {"a": "y" * 500})[0].endswith("y…")


@pytest.mark.slow
def test_the_comment_says_when_base_and_head_ran_in_different_environments(tmp_path) -> None:
    from ci.cli import main
    from tests.ci.conftest import sha_for, write_results

    root = tmp_path / "results"
    write_results(root, [sha_for(0)], sidecar={"torch": "2.13.0", "sm_clock_mhz": "1980"}, job="one/1")
    write_results(root, [sha_for(1)], first_commit=1, sidecar={"torch": "2.14.1", "sm_clock_mhz": "345"},
                  job="one/1")
    db = str(tmp_path / "h.sqlite")
    assert main(["ingest", "--db", db, str(root)]) == 0
    out = tmp_path / "c.md"
    main(["comment", "--db", db, "--base", sha_for(0)[:12], "--head", sha_for(1)[:12], "--out", str(out)])
    body = out.read_text()
    assert "**⚠️ Base and head ran in different environments:** torch: 2.13.0 → 2.14.1." in body
    assert "sm\\_clock" not in body.split("### Environment")[0]  # clocks are read at a run's start: not the environment


@pytest.mark.slow
def test_the_overview_shows_a_crowd_as_one_alert_and_an_environment_change_as_such(tmp_path) -> None:
    """Five series step at one commit: one alert naming them; where the runs' recorded torch changed
    there, it is labelled an environment change and its steps are not open regressions."""
    from dataclasses import replace

    from ci.site import render_site
    from ci.site.model import load_snapshot
    from tools.fixtures import synthetic_store

    store = synthetic_store(n_commits=40, n_series=8)
    timing = [b for b in store.benchmark_list if b.unit == "seconds"][:5]
    at = {c.sha: i for i, c in enumerate(store.commit_list)}

    def moved(r, env: bool):
        late = at[r.commit_sha] >= 30
        samples = tuple(x * 1.4 for x in r.samples) if late and r.benchmark in timing else r.samples
        environment = (("torch", "2.15.0" if late else "2.14.1"),) if env else r.environment
        return replace(r, samples=samples, environment=environment)

    for env in (False, True):
        crowd = replace(store, result_list=[moved(r, env) for r in store.result_list])
        snap = load_snapshot(crowd)
        (g,) = [g for g in snap.groups if g.commit_sha == store.commit_list[30].sha]
        assert len(g.members) >= 5 and g.environment_change == env
        regs = [r for r in snap.regressions if r.source == "change point" and r.sha == g.commit_sha]
        assert len(regs) >= 5 and all(r.is_open != env for r in regs)
        render_site(crowd, tmp_path / f"site-{env}")
        index = " ".join((tmp_path / f"site-{env}" / "index.html").read_text().split())
        section = index.split('id="groups"')[1].split("</section>")[0]
        assert f"series changed at {store.commit_list[30].sha[:10]}" in section
        assert ("environment changed</span> torch: 2.14.1 → 2.15.0" in section) == env
        # how many series the machine measured there, counted by the dashboard
        measured = sum(1 for s in snap.series if s.machine == g.machine and g.commit_sha in s.shas
                       and s.benchmark.kind not in (Kind.CORRECTNESS, Kind.EXACT))
        assert g.measured == measured > len(g.members) and f", of the {measured} measured there" in section
        assert ('<tr class="flagged"' in section) != env and ('class="banner warn" id="groups"' in index) == env


def test_a_crowd_of_series_that_declare_no_direction_is_shown_never_flagged(tmp_path) -> None:
    """Its steps are neither worse nor better: the overview lists the crowd without the alarm's red
    (mujoco-warp's 18 crowds were red above "Nothing here can be called a regression")."""
    from dataclasses import replace

    from ci.records import Direction
    from ci.site import render_site
    from tools.fixtures import synthetic_store

    store = synthetic_store(n_commits=40, n_series=8)
    timing = [b for b in store.benchmark_list if b.unit == "seconds"][:5]
    undirected = {b: replace(b, direction=Direction.UNKNOWN, kind=Kind.OTHER, unit="unit") for b in timing}
    at = {c.sha: i for i, c in enumerate(store.commit_list)}
    results = [replace(r, benchmark=undirected[r.benchmark],
                       samples=tuple(x * 1.4 for x in r.samples) if at[r.commit_sha] >= 30 else r.samples)
               if r.benchmark in undirected else r for r in store.result_list]
    crowd = replace(store, result_list=results, benchmark_list=[undirected.get(b, b) for b in store.benchmark_list])
    render_site(crowd, tmp_path / "site")
    index = " ".join((tmp_path / "site" / "index.html").read_text().split())
    section = index.split('id="groups"')[1].split("</section>")[0]
    assert f"series changed at {store.commit_list[30].sha[:10]}" in section
    assert '<tr class="changed"' in section and '<tr class="flagged"' not in section
    assert 'class="banner warn" id="groups"' in index


def test_a_crowd_of_most_of_the_machine_says_so_unless_the_environment_changed() -> None:
    """A crowd with the count of series measured there: at least half of them moving one way, with
    nothing recorded as changed, reads as the whole machine moving (a runner change the files do not
    record, or a change that moves every benchmark), not as four regressions of the commit alone."""
    cps = [_cp(k, "c5", 1.3) for k in "abcd"]
    (most,) = group_changes(cps, ORDER, None, {("m", "c5"): 6})
    assert most.measured == 6 and most.whole_machine
    assert most.headline() == ("4 series changed at c5 (4 slower), of the 6 measured there; most of the machine "
                               "moved one way and stayed there: a change that moves every benchmark, or a runner "
                               "change the files do not record")
    (few,) = group_changes(cps, ORDER, None, {("m", "c5"): 40})
    assert not few.whole_machine and few.headline() == "4 series changed at c5 (4 slower), of the 40 measured there"
    envs = {("m", "c4"): {"python": "3.11"}, ("m", "c5"): {"python": "3.12"}}
    (recorded,) = group_changes(cps, ORDER, envs, {("m", "c5"): 6})
    assert recorded.environment_change and not recorded.whole_machine  # the recorded change says why
    assert recorded.headline().endswith("of the 6 measured there: the environment changed: python: 3.11 → 3.12")
    (unknown,) = group_changes(cps, ORDER)
    assert unknown.measured == 0 and not unknown.whole_machine and "measured there" not in unknown.headline()
