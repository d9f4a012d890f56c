"""Jobs on a host of another speed that the result files do not record: found across a machine's
series (`ci.ingest.speed_rule`) and kept as their own machine at ingest (`ci.ingest.speed`)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from ci.ingest import ingest_results_dir
from ci.ingest.speed import split_off_speed_jobs
from ci.ingest.speed_rule import SpeedSettings, find_off_speed, job_shifts, off_speed_groups
from ci.records import Outcome
from ci.store import Store
from ci.verdicts import detect_all
from tools.synthetic_history import commit_sha, write_history


def _levels(n_series: int = 30, n_runs: int = 80, noise: float = 0.02, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    base = rng.uniform(1e-4, 1e-1, size=(n_series, 1))
    return base * np.exp(rng.normal(0.0, noise, size=(n_series, n_runs)))


def test_a_fifth_of_the_jobs_on_a_slower_host_is_one_group() -> None:
    levels = _levels()
    slow = np.random.default_rng(1).choice(80, 16, replace=False)
    levels[:, slow] *= 1.15
    (group,) = find_off_speed(levels)
    assert group.runs == tuple(sorted(int(j) for j in slow))
    assert group.ratio == pytest.approx(1.15, abs=0.01)
    assert group.read == 80


def test_a_faster_host_is_a_group_of_its_own_sign() -> None:
    levels = _levels(seed=3)
    slow, fast = np.arange(5, 80, 9), np.arange(8, 80, 11)
    fast = np.setdiff1d(fast, slow)
    levels[:, slow] *= 1.2
    levels[:, fast] /= 1.12
    groups = find_off_speed(levels)
    assert [g.ratio > 1 for g in groups] == [True, False]
    assert set(groups[0].runs) == set(slow.tolist()) and set(groups[1].runs) == set(fast.tolist())


@pytest.mark.parametrize("steps", [(40,), (20, 45, 70)])
def test_steps_of_every_series_are_steps_not_a_host(steps) -> None:
    """A level that holds after a commit (a runner upgrade, a change that slows everything) differs
    from the jobs on one side only: no job is taken for another host, however many such steps."""
    levels = _levels(seed=2)
    for k in steps:
        levels[:, k:] *= 1.25
    shifts = job_shifts(levels)
    assert np.nanmax(np.abs(shifts)) < math.log(1.05)
    assert find_off_speed(levels) == []


def test_quiet_and_noisy_machines_without_such_jobs_have_no_group() -> None:
    for noise in (0.01, 0.05, 0.15):
        assert find_off_speed(_levels(noise=noise, seed=4)) == []


def test_a_few_odd_jobs_are_not_a_host() -> None:
    """Four jobs of 80 each 15% slower (a busy neighbour on the runner) are below `min_jobs`."""
    levels = _levels(seed=5)
    levels[:, [10, 30, 50, 70]] *= 1.15
    assert find_off_speed(levels) == []
    assert len(find_off_speed(levels, SpeedSettings(min_jobs=3))) == 1


def test_what_is_not_read() -> None:
    levels = _levels(n_series=5)  # fewer series than `min_series`
    levels[:, ::5] *= 1.2
    assert np.isnan(job_shifts(levels)).all() and find_off_speed(levels) == []
    counts = np.full((12, 60), 7.0)  # constant series (counts): every job reads 0 off the others
    assert (job_shifts(counts) == 0).all() and find_off_speed(counts) == []
    gappy = _levels()
    gappy[:, 30:] = np.nan
    assert np.isnan(job_shifts(gappy)[30:]).all()
    # A run's shift depends on the runs within `neighbours` of it alone: read from a tail, the same.
    levels = _levels(seed=6)
    assert np.array_equal(job_shifts(levels[:, 40:])[10:], job_shifts(levels)[50:], equal_nan=True)
    assert off_speed_groups([np.nan] * 40) == []
    with pytest.raises(ValueError, match="series x runs"):
        job_shifts(np.ones(10))


def _history(tmp_path, name: str, **kw) -> object:
    args = dict(benchmarks=12, grids=0, commits=60, envs=1, noise=0.01, step=0.25, step_share=0.09, seed=5,
                slow_share=0.2, slow=0.15, hide_host=True)
    args.update(kw)
    write_history(tmp_path / name, **args)
    return tmp_path / name / "results"


def test_ingest_keeps_the_hidden_hosts_jobs_apart(tmp_path) -> None:
    results = _history(tmp_path, "mixed")
    with Store(str(tmp_path / "h.sqlite")) as store:
        report = ingest_results_dir(store, results)
        assert report.ok
        machines = {m.name: m for m in store.machines()}
        assert sorted(machines) == ["runner", "runner [virtualenv-py3.11, slower jobs]"]
        sibling = machines["runner [virtualenv-py3.11, slower jobs]"]
        assert sibling.speed == "slower" and sibling.speed_shift.startswith("+1")
        slow = store.run_commits(sibling.name)
        assert 6 <= len(slow) <= 20
        assert len(store.run_commits("runner")) + len(slow) == 60
        (note,) = [n for n in report.notes if "slower jobs" in n]
        assert f"{len(slow)} of 60 jobs" in note and "asv machine" in note
        # The stepped benchmark's +25% is found on the runner's own series, where its level no longer flips.
        found = [c for c in detect_all(store, floor_for=lambda _k: 0.05) if c.machine == "runner"]
        assert found and all(c.outcome == Outcome.REGRESSED and c.ratio == pytest.approx(1.25, abs=0.05) for c in found)
        order = [c.sha for c in store.commits()]
        step_at = order.index(commit_sha(30))  # `write_history` steps at the middle commit
        first_after = next(sha for sha in store.run_commits("runner") if order.index(sha) >= step_at)
        assert {c.commit_sha for c in found} == {first_after}
        # The dashboard says what that machine holds.
        from ci.site import render_site

        render_site(store, tmp_path / "site")
        overview = (tmp_path / "site" / "index.html").read_text()
        assert f"Machine <b>{sibling.name}</b> holds the jobs whose every series read {sibling.speed_shift}" in overview
        # Reading it again moves nothing; a second ingest of the same files says nothing new.
        assert split_off_speed_jobs(store) == ()
        again = ingest_results_dir(store, results)
        assert not [n for n in again.notes if "slower jobs" in n]


def test_a_level_that_holds_returns_the_jobs_to_their_machine(tmp_path) -> None:
    """The newest jobs 15% up read like the slower host's until the jobs after them stay there: then
    they were a step of the history, and go back to the runner."""
    results = _history(tmp_path, "mixed", step_share=0.0)
    later = _history(tmp_path, "later", step_share=0.0, commits=72, slow_share=0.0)  # the same series' levels

    def add(commits: range) -> list[str]:
        shas = []
        for c in commits:
            path = later / "runner" / f"{commit_sha(c)[:8]}-virtualenv-py3.11.json"
            data = json.loads(path.read_text())
            for value in data["results"].values():
                value[0] = [x * 1.15 for x in value[0]]  # every series 15% up from commit 60 on
            (results / "runner" / path.name).write_text(json.dumps(data))
            shas.append(data["commit_hash"])
        return shas

    sibling = "runner [virtualenv-py3.11, slower jobs]"
    with Store(str(tmp_path / "h.sqlite")) as store:
        first = add(range(60, 62))
        ingest_results_dir(store, results)
        hidden = set(store.run_commits(sibling))
        assert set(first) <= hidden  # newest, they read like the other host's jobs
        rest = add(range(62, 72))
        report = ingest_results_dir(store, results)
        assert report.ok
        assert not set(store.run_commits(sibling)) & set(first + rest)
        assert set(store.run_commits(sibling)) == hidden - set(first)
        assert set(first + rest) <= set(store.run_commits("runner"))
        assert [n for n in report.notes if "slower jobs" in n]


def test_a_machine_without_such_jobs_is_left_alone(tmp_path) -> None:
    results = _history(tmp_path, "plain", slow_share=0.0)
    with Store(str(tmp_path / "h.sqlite")) as store:
        report = ingest_results_dir(store, results)
        assert [m.name for m in store.machines()] == ["runner"]
        assert not [n for n in report.notes if "jobs" in n]
        # What the rule reads: asv's value of every point, by series and run.
        got = store.run_values("runner")
        assert got.levels.shape == (12, 60) and got.commit_shas == tuple(store.run_commits("runner"))
        for r in store.results(machine="runner")[:30]:
            row, col = got.series.index(r.benchmark.key), got.commit_shas.index(r.commit_sha)
            assert got.levels[row, col] == r.value
        tail = store.run_values("runner", runs_after=50)
        assert tail.runs == got.runs and np.isnan(tail.levels[:, :50]).all()
        assert np.array_equal(tail.levels[:, 50:], got.levels[:, 50:])


def test_a_comparison_across_the_two_hosts_says_where_each_side_ran(tmp_path) -> None:
    from ci.verdicts import pick_machines

    results = _history(tmp_path, "mixed", step_share=0.0)
    with Store(str(tmp_path / "h.sqlite")) as store:
        ingest_results_dir(store, results)
        sibling = "runner [virtualenv-py3.11, slower jobs]"
        slow = store.run_commits(sibling)
        order = [c.sha for c in store.commits()]
        head = slow[-1]
        base = next(sha for sha in reversed(order[: order.index(head)]) if sha not in slow)
        with pytest.raises(ValueError) as err:
            pick_machines(store, base, head, "runner")
        text = str(err.value)
        assert f"base measured on 'runner', head on '{sibling}'" in text
        assert "read +1" in text and "python -m ci continuous" in text
        assert pick_machines(store, slow[0], slow[1], None) == [sibling]  # one host's two jobs compare


def _one_at_a_time(tmp_path, name: str, **kw) -> None:
    """Ingest a synthetic history into `<name>.sqlite` one job at a time, oldest first."""
    results = _history(tmp_path, name, step_share=0.0, **kw)
    files = sorted((p for p in results.glob("runner/*.json") if p.name != "machine.json"),
                   key=lambda p: json.loads(p.read_text())["date"])
    held = tmp_path / f"{name}-held"
    held.mkdir()
    for p in files:
        p.rename(held / p.name)
    with Store(str(tmp_path / f"{name}.sqlite")) as store:
        for path in files:
            (held / path.name).rename(path)
            ingest_results_dir(store, results)


@pytest.mark.slow
def test_ingest_one_job_at_a_time_reads_only_the_new_ones_and_decides_alike(tmp_path, monkeypatch) -> None:
    """A machine without a sibling keeps its job shifts: the next ingest reads its new runs and the
    `neighbours` before them and decides as a whole read would; a group that forms among its newest
    jobs is found all the same."""
    import base64

    import ci.ingest.speed as speed

    whole_reads = []
    real = speed.find_off_speed
    monkeypatch.setattr(speed, "find_off_speed", lambda *a, **kw: whole_reads.append(1) or real(*a, **kw))
    _one_at_a_time(tmp_path, "plain", slow_share=0.0, commits=45)
    assert len(whole_reads) <= 21  # until it holds 2 x `neighbours` runs, then from the tail
    with Store(str(tmp_path / "plain.sqlite")) as store:
        kept = np.frombuffer(base64.b64decode(json.loads(store.setting(speed._scan_key("runner")))["shifts"]))
        _keys, _where, levels = speed._levels([("runner", store.run_values("runner"))], {}, set())
        assert kept.size == 45 and np.array_equal(kept, job_shifts(levels), equal_nan=True)
    _one_at_a_time(tmp_path, "mixed", slow_share=0.2, commits=60)
    with Store(str(tmp_path / "mixed.sqlite")) as store, Store(str(tmp_path / "fresh.sqlite")) as fresh:
        ingest_results_dir(fresh, tmp_path / "mixed" / "results")
        got = {m.name: store.run_commits(m.name) for m in store.machines()}
        assert got == {m.name: fresh.run_commits(m.name) for m in fresh.machines()} and len(got) == 2


def test_a_failing_check_is_said_and_the_files_stay_stored(tmp_path, monkeypatch) -> None:
    import ci.ingest.results_dir as results_dir

    def broken(_store):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(results_dir, "split_off_speed_jobs", broken)
    with Store(str(tmp_path / "h.sqlite")) as store:
        report = ingest_results_dir(store, _history(tmp_path, "mixed"))
        assert report.ok and len(store.run_commits("runner")) == 60
        assert any(n.startswith("warning: the results are stored, but the check for jobs") and "disk on fire" in n
                   for n in report.notes)


def test_a_sibling_is_named_after_its_machine() -> None:
    from ci.ingest.speed import _sibling
    from ci.records import Machine

    def base(name: str, env: str = "virtualenv-py3.12") -> Machine:
        return Machine(name=name, asv_name="runner", env_name=env, host=(("cpu", "x"),))

    assert _sibling(base("runner"), 1, 0.1).name == "runner [virtualenv-py3.12, slower jobs]"
    assert _sibling(base("runner [virtualenv-py3.12]"), -1, -0.1).name == "runner [virtualenv-py3.12, faster jobs]"
    assert _sibling(base("runner [virtualenv-py3.12, host 2]"), 1, 0.1).name == \
        "runner [virtualenv-py3.12, host 2, slower jobs]"
    assert _sibling(base("runner", env=""), 1, 0.1).name == "runner [slower jobs]"
    sibling = _sibling(base("runner"), 1, 0.139)
    assert sibling.speed == "slower" and sibling.speed_shift == "+14.9%" and sibling.machine_name == "runner"


def test_a_machine_whose_runs_hold_no_series_has_no_shift():
    """A foreign machine folder whose benchmarks the results' benchmarks.json does not name stores runs
    with no series: its level matrix has no rows, and the check raised IndexError (as a warning) on it."""
    shifts = job_shifts(np.empty((0, 6)))
    assert shifts.shape == (6,) and np.isnan(shifts).all()
    assert find_off_speed(np.empty((0, 6))) == []
