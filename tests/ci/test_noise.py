"""The per-series noise model of cross-job A/B verdicts (`ci.verdicts.noise`): learned from a machine's
history, robust to one outlier commit, honest about a level that flips between two modes, and the
same numbers as a plain per-series loop."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from ci.records import JOB_KEY, Benchmark, Outcome, Result
from ci.verdicts import compare, job_relation
from ci.verdicts.jobs import drift_for
from ci.verdicts.noise import NoiseSettings, SeriesNoise, clip_factor, job_window, series_noise

PACK = Benchmark("bench_pack.PackTokens.time_gpu", (("preset", "deitb384-b32-keep0.5"), ("op", "pack")))
MACHINE = "h200"


def _sha(i: int) -> str:
    return f"{i:040x}"


def _run(i: int, level: float, rng: np.random.Generator, *, n: int = 20, noise: float = 0.002,
         bench: Benchmark = PACK) -> Result:
    """One job of commit i: n samples around `level`, its own job marker."""
    samples = tuple(float(x) for x in level * rng.lognormal(0.0, noise, n))
    return Result(bench, _sha(i), MACHINE, samples, run_id=f"{MACHINE}/{_sha(i)}/env",
                  environment=((JOB_KEY, f"job-{i}"),))


def _verdict(history: list[Result], base: Result, head: Result):
    """The cross-job verdict of head against base, as `compare_commits` decides it."""
    jobs = job_relation([base], [head])
    assert not jobs.together
    model = drift_for(jobs, history, exclude_commits={base.commit_sha, head.commit_sha})
    (v,) = compare([base], [head], between_jobs=model)
    return v


def test_a_bimodal_historys_mode_flip_is_not_a_regression_across_jobs():
    """The H200 history's `PackTokens.time_gpu(deitb384-b32-keep0.5, pack)` (2026-12-02): 6 of 35
    commits 3 % low, 0.2 % noise within a mode. The robust sigma of its job-to-job differences was
    0.19 %, so the return from the low mode read REGRESSED at the 2.5 % floor. The flip is the
    series' noise: it must not be called a regression; a 10 % step past the flip still is."""
    rng = np.random.default_rng(5)
    low = {3, 4, 11, 19, 20, 27}
    levels = [0.97 if i in low else 1.0 for i in range(35)]
    history = [_run(i, 1e-4 * x, rng) for i, x in enumerate(levels)]
    base, head = history[27], history[28]  # low mode, then back
    v = _verdict(history, base, head)
    assert v.ratio == pytest.approx(1.03, abs=0.004)
    assert v.outcome != Outcome.REGRESSED, v.reason
    assert v.threshold > 0.03
    model = series_noise(history, exclude_commits={base.commit_sha, head.commit_sha})[PACK.key]
    assert model.jump == pytest.approx(math.log(1 / 0.97), rel=0.15)
    stepped = _verdict(history, base, _run(28, 1.1e-4, rng))
    assert stepped.outcome == Outcome.REGRESSED, stepped.reason


def test_one_outlier_commit_does_not_inflate_the_allowance():
    """One commit 40 % slow (a preempted job) makes two large differences in a history of 1 %
    job-to-job noise: the allowance stays what the history without it gives (within 10 %), and a
    6 % step is still a regression."""
    rng = np.random.default_rng(11)
    levels = np.exp(rng.normal(0.0, 0.007, 40))
    clean = [_run(i, 1e-4 * float(x), rng) for i, x in enumerate(levels)]
    spiked = list(clean)
    spiked[17] = _run(17, 1.4e-4 * float(levels[17]), rng)
    exclude = {_sha(38), _sha(39)}
    a = series_noise(clean, exclude_commits=exclude)[PACK.key]
    b = series_noise(spiked, exclude_commits=exclude)[PACK.key]
    assert b.jump == 0.0
    assert b.allowance <= 1.10 * a.allowance
    assert a.allowance < 0.05
    head = _run(39, 1.06e-4 * float(levels[38]), rng)
    v = _verdict(spiked, spiked[38], head)
    assert v.outcome == Outcome.REGRESSED, v.reason


def test_recurring_jumps_need_more_than_an_outlier_commit_and_a_step():
    """`outliers` (3) large differences are explained by one outlier commit and one real step; a
    fourth makes them recurring."""
    rng = np.random.default_rng(3)
    levels = np.ones(40)
    levels[10] = 1.3  # an outlier commit: two differences
    levels[25:] *= 1.2  # a real step: one
    history = [_run(i, float(x), rng) for i, x in enumerate(levels)]
    assert series_noise(history)[PACK.key].jump == 0.0
    levels[32] = 1.2 * 1.3  # a second outlier commit: four
    history = [_run(i, float(x), rng) for i, x in enumerate(levels)]
    assert series_noise(history)[PACK.key].jump > math.log(1.2)


def test_steps_that_stay_are_not_recurring_jumps():
    """A long history holds many real steps: eight of +-12% that stay 40 jobs, in 1% job-to-job noise, are
    changes, not noise; they must not widen the allowance to their size (they did, 2026-12-06: the
    allowance of every series of a 1,338-commit history covered its fourth-largest step). A +10%
    change is still a regression; the same history with two visits to a 12% mode is covered."""
    rng = np.random.default_rng(8)
    levels = np.exp(rng.normal(0.0, 0.007, 400))
    for at in range(40, 360, 40):  # each stays 40 jobs, longer than `return_within`
        levels[at:] *= 1.12 if (at // 40) % 2 else 1 / 1.12
    history = [_run(i, 1e-4 * float(x), rng) for i, x in enumerate(levels)]
    model = series_noise(history, exclude_commits={_sha(398), _sha(399)})[PACK.key]
    assert model.jump == 0.0 and model.allowance < 0.05
    head = _run(399, 1.1e-4 * float(levels[398]), rng)
    v = _verdict(history, history[398], head)
    assert v.outcome == Outcome.REGRESSED, v.reason
    flips = levels.copy()
    flips[[50, 51, 120, 121, 122]] *= 1.12  # twice at another mode and back: four legs taken back
    history = [_run(i, 1e-4 * float(x), rng) for i, x in enumerate(flips)]
    assert series_noise(history)[PACK.key].jump == pytest.approx(math.log(1.12), rel=0.2)


def test_a_longer_window_is_not_stricter_than_a_short_one():
    """Outlier commits at one rate (a runner's excursions, 1 job in 40 at +8% to +30%) in 1%
    job-to-job noise: a window of 1,000 jobs holds five times the legs of one of 200, so its fourth
    largest is larger, and a count alone made the longer window the stricter one. Past 400
    differences the allowance covers the leg that 1% of them pass (`leg_rate`: the tenth largest of
    999 here, as the plain loop computes it); below, the fourth largest still decides, unchanged."""
    def history(n: int) -> list[Result]:
        rng = np.random.default_rng(n)
        levels = np.exp(rng.normal(0.0, 0.007, n))
        for at in range(20, n - 2, 40):
            levels[at] *= 1.08 + 0.22 * rng.random()
        return [_run(i, 1e-4 * float(x), rng) for i, x in enumerate(levels)]
    short, long = history(200), history(1000)
    a = series_noise(short, exclude_commits={_sha(199)})[PACK.key]
    b = series_noise(long, exclude_commits={_sha(999)})[PACK.key]
    count = series_noise(long, exclude_commits={_sha(999)}, settings=NoiseSettings(leg_rate=0.0))[PACK.key]
    assert a.jump > 0 and b.jump > 0
    assert count.jump > b.jump and count.allowance > b.allowance  # the fourth largest of ~50 legs, not the tenth
    assert b.allowance <= a.allowance * 1.15
    want = _reference(long, {_sha(999)}, NoiseSettings())[PACK.key]
    assert (b.jump, b.allowance) == (pytest.approx(want[1]), pytest.approx(want[3]))
    assert series_noise(short, exclude_commits={_sha(199)}, settings=NoiseSettings(leg_rate=0.0))[PACK.key] == a


def _reference(history: list[Result], exclude: set[str], settings: NoiseSettings) -> dict[str, tuple[float, ...]]:
    """The model computed series by series with plain Python and numpy calls (the module docstring)."""
    from scipy import stats

    runs: dict[str, dict[str, list[float]]] = {}
    for r in history:
        if r.commit_sha in exclude:
            continue
        runs.setdefault(r.benchmark.key, {}).setdefault(r.run_id, []).extend(
            x for x in r.samples if math.isfinite(x) and x > 0)
    out = {}
    for key, per_run in runs.items():
        levels = [float(np.median(s)) for s in per_run.values() if s]
        if len(levels) < settings.min_jobs or len(levels) < 3:
            continue
        d = np.abs(np.diff(np.log(levels)))
        mad = 1.4826 * float(np.median(d))
        inl = d[d <= settings.jump_sigmas * mad]
        sigma = math.sqrt(float(np.mean(inl ** 2))) / clip_factor(settings.jump_sigmas) if inl.size else 0.0
        t = float(stats.t.ppf(1 - settings.false_alarm, max(1.0, inl.size - 1.0)))
        signed = np.diff(np.log(levels))
        at = np.flatnonzero(d > settings.jump_sigmas * mad)
        legs = set()
        for a, b in zip(at, at[1:], strict=False):  # jumps the level takes back: the next one the other way, soon
            if b - a <= settings.return_within and np.sign(signed[a]) != np.sign(signed[b]):
                legs |= {a, b}
        back = sorted((float(d[i]) for i in legs), reverse=True)
        k = max(settings.outliers, math.floor(settings.leg_rate * d.size))
        jump = back[k] if len(back) > k else 0.0
        out[key] = (sigma, jump, len(levels), math.expm1(jump + t * sigma))
    return out


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_vectorised_model_equals_a_plain_loop(seed):
    """Ragged series (some jobs missing a series), two results in one run (asv rounds), non-finite
    and non-positive samples, a sample-less result, one-value points and excluded commits."""
    rng = np.random.default_rng(seed)
    benches = [Benchmark(f"s.B.time_{i}") for i in range(7)]
    history = []
    for c in range(30):
        for j, bench in enumerate(benches):
            if rng.random() < 0.15 * (j % 3):
                continue
            n = 1 if j == 5 else int(rng.integers(3, 9))
            x = np.exp(rng.normal(j * 0.3, 0.02 * (1 + j % 2), n)) * (1.1 if (j == 4 and c % 7 == 0) else 1.0)
            samples = list(map(float, x))
            if j == 6 and c % 5 == 0:
                samples[0] = math.nan if c % 10 else -1.0
            history.append(Result(bench, _sha(c), MACHINE, tuple(samples), run_id=f"r{c}"))
            if j == 3 and c % 4 == 0:
                history.append(Result(bench, _sha(c), MACHINE, tuple(map(float, x * 1.01)), run_id=f"r{c}"))
        if c == 9:
            history.append(Result(benches[0], _sha(c), MACHINE, (), run_id=f"r{c}"))
    exclude = {_sha(28), _sha(29)}
    settings = NoiseSettings()
    got = series_noise(history, exclude_commits=exclude, settings=settings)
    want = _reference(history, exclude, settings)
    assert got.keys() == want.keys()
    for key, (sigma, jump, jobs, allowance) in want.items():
        m = got[key]
        assert (m.sigma, m.jump, m.jobs) == (pytest.approx(sigma, rel=1e-9, abs=1e-15), pytest.approx(jump), jobs)
        assert m.allowance == pytest.approx(allowance, rel=1e-9, abs=1e-15)


def test_a_rise_within_only_the_jumps_a_history_takes_back_is_an_unconfirmed_slowdown():
    """Two one-commit spikes make a series' allowance cover jumps (a real 34-job history's +18.4 %,
    2026-12-07): a +11 % rise past its usual job-to-job noise is then an unconfirmed slowdown, not
    "unchanged"; without the spikes it is a regression, and a fall of the same size stays unchanged."""
    rng = np.random.default_rng(3)
    levels = [1.0] * 34
    levels[8], levels[20] = 1.25, 1.12
    spiky = [_run(i, lv, rng, noise=0.003) for i, lv in enumerate(levels)]
    flat = [_run(i, 1.0, rng, noise=0.003) for i in range(34)]
    base = _run(40, 1.0, rng, noise=0.003)
    for history, want in ((spiky, Outcome.INCONCLUSIVE), (flat, Outcome.REGRESSED)):
        v = _verdict(history, base, _run(41, 1.11, rng, noise=0.003))
        assert v.outcome == want, v.reason
    v = _verdict(spiky, base, _run(41, 1.11, rng, noise=0.003))
    assert v.reason.startswith("unconfirmed slowdown: +11") and "jumps its history takes" in v.reason, v.reason
    assert _verdict(spiky, base, _run(41, 1 / 1.11, rng, noise=0.003)).outcome == Outcome.UNCHANGED


def test_settings_are_checked():
    for bad in ({"false_alarm": 0.0}, {"outliers": -1}, {"jump_sigmas": 0.0}, {"min_jobs": 2}, {"return_within": 0},
                {"leg_rate": 0.5}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            NoiseSettings(**bad)


@pytest.mark.parametrize(
    ("n_runs", "base", "window", "want"),
    [
        pytest.param(8, 6, 10, (0, 7), id="short-history-all-of-it"),
        pytest.param(12, 10, 10, (0, 11), id="window-plus-the-compared-all-of-it"),
        pytest.param(40, 38, 10, (28, 39), id="long-the-runs-just-before-head"),
        pytest.param(40, 3, 10, (0, 4), id="early-base-nothing-after-it"),
        pytest.param(40, 20, 10, (10, 21), id="middle-base"),
    ],
)
def test_job_window_is_the_runs_just_before_the_pair(n_runs, base, window, want):
    """At most `window` runs, the compared commits' own not counted, those just before the head (the
    later compared commit); never a run after it, so a verdict does not change as history grows."""
    commits = [_sha(i) for i in range(n_runs)]
    head = _sha(base + 1)
    assert job_window(commits, (_sha(base), head), window) == want
    start, stop = want
    assert sum(sha not in {_sha(base), head} for sha in commits[start:stop]) == min(window, base)
    # The head first in `compared`, or the base later in history than the head: the same window.
    assert job_window(commits, (head, _sha(base)), window) == want


def test_job_window_without_the_compared_commits_ends_the_history():
    commits = [_sha(i) for i in range(30)]
    assert job_window(commits, ("a" * 40, "b" * 40), 10) == (20, 30)
    with pytest.raises(ValueError, match="window"):
        NoiseSettings(window=4)


def _noisy(name: str, j: int, c: int) -> list[float] | None:
    """`write_results` samples: 2 % job-to-job drift, 0.5 % within a job, one failed point every
    seventh commit (that run's grid is stored point by point, not as a block) and a zero sample of a
    track series every fifth (left out of its level); the first 40 commits are wild (a level that
    jumps 3x between jobs: far from any base here)."""
    rng = np.random.default_rng([c, j, len(name)])
    if "max_abs_diff" in name:
        return [0.001] * 6
    if c % 7 == 3 and j == 1 and "time_" in name:
        return None
    wild = 3.0 ** rng.choice([-1, 1]) if c < 40 else 1.0
    level = (1e-4 * (j + 1) if "time_" in name else 100.0 + j) * wild * float(np.exp(rng.normal(0.0, 0.02)))
    out = [float(x) for x in level * rng.lognormal(0.0, 0.005, 6)]
    if c % 5 == 0 and "track_" in name:
        out[2] = 0.0
    return out


def _stored(tmp_path, commits: range) -> tuple[list[str], str]:
    """A store of commits `commits` (indices into one history: `_noisy` depends on the index only)."""
    from ci.ingest import ingest_results_dir
    from ci.store import Store
    from tests.ci.conftest import sha_for, write_results

    root = tmp_path / f"results-{commits.start}-{commits.stop}"
    root.mkdir()
    shas = [sha_for(i) for i in commits]
    write_results(root, shas, samples=_noisy, first_commit=commits.start)
    db = str(tmp_path / f"h-{commits.start}-{commits.stop}.sqlite")
    with Store(db) as store:
        assert ingest_results_dir(store, root).ok
    return shas, db


class _ResultsOnly:
    """A `ComparisonSource` without the store's windowed read (as `tools.eval_history`'s reader)."""

    def __init__(self, store) -> None:
        self._store = store

    def machines(self):
        return self._store.machines()

    def results(self, **kw):
        return self._store.results(**kw)

    def failures(self, **kw):
        return self._store.failures(**kw)


def test_a_comparison_reads_a_window_of_a_long_history_not_all_of_it(tmp_path, monkeypatch):
    """The noise model of a cross-job comparison learns from the `window` jobs nearest the base: the
    store rows it reads do not grow with the history (the whole history was read as `Result` records:
    28 s and 2.8 GB for one comparison on a 20,000-commit store, 2026-12-06), and what the far part of
    the history holds (here, 40 wild commits) changes nothing: the verdicts of a 100-commit history
    are those of a store of only its last window."""
    import ci.store.series_reads as reads
    from ci.store import Store
    from ci.verdicts import compare_commits

    fetched: list[int] = []
    real = reads.fetch_rows

    def counting(conn, sql, params):
        rows = real(conn, sql, params)
        if "FROM results" in sql or "FROM result_blocks" in sql:
            fetched.append(len(rows))
        return rows

    monkeypatch.setattr(reads, "fetch_rows", counting)
    window = NoiseSettings(window=12)
    got, rows = {}, {}
    for commits in (range(100), range(60, 100), range(86, 100)):
        shas, db = _stored(tmp_path, commits)
        with Store(db, read_only=True) as store:
            fetched.clear()
            got[commits.start] = compare_commits(store, shas[-2], shas[-1], "h200-runner", noise=window)
            rows[commits.start] = sum(fetched)
    # Base's and head's runs are inside the short store's window: the long ones read them apart.
    assert rows[0] == rows[60] <= rows[86], rows
    assert got[0].drift_known == got[86].drift_known > 0
    assert got[0].verdicts == got[86].verdicts


def test_the_windowed_store_read_and_a_results_reader_give_one_model(tmp_path):
    """The store's window read as columns (`noise_history` through `RunWindowSource`) and the same
    window cut from a reader's `Result` records give the same noise models, failed points, zero samples
    and one-point blocks included; with a window past the history's length, both are the whole-history
    model."""
    from ci.store import Store
    from ci.verdicts.inputs import noise_history

    shas, db = _stored(tmp_path, range(30, 60))
    with Store(db, read_only=True) as store:
        for at, size in ((20, 8), (6, 8), (28, 1000)):
            base, head = shas[at], shas[at + 1]
            exclude = {base, head}
            columns = noise_history(store, "h200-runner", base, head, size)
            records = noise_history(_ResultsOnly(store), "h200-runner", base, head, size)
            a = series_noise(columns, exclude_commits=exclude)
            b = series_noise(records, exclude_commits=exclude)
            assert a and a == b
            # the runs before the pair, at most `size` (a series with a failed point: one fewer)
            assert max(m.jobs for m in a.values()) == min(size, at), a
        whole = series_noise(store.results(machine="h200-runner"), exclude_commits=exclude)
        assert a == whole


def _quiet_jobs(n_series: int, n_jobs: int, seed: int) -> list[Result]:
    """`n_series` series measured once a job (one value a point, as most CI histories record), 2 %
    Gaussian job-to-job noise, no step anywhere."""
    rng = np.random.default_rng(seed)
    benches = [Benchmark(f"bench_wide.Suite.time_{i}") for i in range(n_series)]
    base = np.exp(rng.uniform(-10, -3, n_series))
    out = []
    for j in range(n_jobs):
        values = base * np.exp(0.02 * rng.standard_normal(n_series))
        out += [Result(b, _sha(j), MACHINE, (float(v),), run_id=f"{MACHINE}/{_sha(j)}/env",
                       environment=((JOB_KEY, f"job-{j}"),)) for b, v in zip(benches, values, strict=True)]
    return out


def test_the_false_alarm_rate_is_shared_by_the_series_a_comparison_judges():
    """Up to `family_false_alarm / false_alarm` (100) series each keeps the per-series rate; past it,
    the rate per series falls so that the comparison's own stays put."""
    history = _quiet_jobs(3, 40, seed=1)
    default = NoiseSettings()
    for family, rate in ((1, 0.001), (100, 0.001), (1000, 1e-4), (16_000, 0.1 / 16_000)):
        for m in series_noise(history, family=family).values():
            assert m.multiplier == pytest.approx(stats.t.ppf(1 - rate, m.jobs - 2), rel=0.05), family
    one = series_noise(history, family=100)
    wide = series_noise(history, family=2000)
    assert all(wide[k].allowance > one[k].allowance for k in one)
    assert all(wide[k].sigma == one[k].sigma for k in one)
    assert all(m.shared_over == 0 and "shared" not in m.describe for m in one.values())
    assert all(m.shared_over == 2000 and "the false-alarm rate shared over 2,000 series" in m.describe
               for m in wide.values())
    with pytest.raises(ValueError, match="family_false_alarm"):
        NoiseSettings(family_false_alarm=1.0)
    assert default.family_false_alarm == 0.1


def test_a_wide_unchanged_pair_raises_no_false_alarm_across_jobs():
    """2,000 quiet series (2 % noise), the next two jobs unchanged: at 0.001 a series some of them
    read regressed or improved (a wide suite would fail every PR); counted over the comparison's 2,000
    series, none does. A +25% step of 40 of them (8 sigmas of a job-to-job difference) is still found
    in each."""
    history = _quiet_jobs(2000, 42, seed=7)
    jobs = {r.commit_sha for r in history}
    base_sha, head_sha = _sha(40), _sha(41)
    base = [r for r in history if r.commit_sha == base_sha]
    head = [r for r in history if r.commit_sha == head_sha]
    past = [r for r in history if r.commit_sha not in (base_sha, head_sha)]
    assert len(jobs) == 42
    relation = job_relation(base, head)

    def flagged(head_side, family):
        model = drift_for(relation, past, exclude_commits={base_sha, head_sha}, family=family)
        return [v for v in compare(base, head_side, between_jobs=model)
                if v.outcome in (Outcome.REGRESSED, Outcome.IMPROVED)]

    assert len(flagged(head, 1)) > 0  # the per-series rate alone
    assert flagged(head, 2000) == []
    stepped = [Result(r.benchmark, r.commit_sha, r.machine, (r.samples[0] * 1.25,), run_id=r.run_id,
                      environment=r.environment) if i < 40 else r for i, r in enumerate(head)]
    found = flagged(stepped, 2000)
    assert {v.benchmark.key for v in found} == {r.benchmark.key for r in head[:40]}
    assert all(v.outcome == Outcome.REGRESSED for v in found)


def test_compare_commits_counts_every_series_it_judges_as_the_family(tmp_path, monkeypatch):
    """The family of a cross-job comparison is the series measured on head that the allowance judges
    (not correctness or exact series, nor those of unknown direction), on every machine compared."""
    import ci.verdicts.inputs as inputs
    from ci.store import Store
    from ci.verdicts import compare_commits

    seen: list[int] = []
    real = inputs.drift_for

    def spy(*args, **kwargs):
        seen.append(kwargs["family"])
        return real(*args, **kwargs)

    monkeypatch.setattr(inputs, "drift_for", spy)
    shas, db = _stored(tmp_path, range(30))
    with Store(db, read_only=True) as store:
        got = compare_commits(store, shas[-2], shas[-1], "h200-runner")
        head = store.results(commit_sha=shas[-1], machine="h200-runner")
    judged = {r.benchmark.key for r in head if r.benchmark.kind.value not in ("correctness", "exact")
              and r.benchmark.direction.value != "unknown"}
    assert seen == [len(judged)] and 1 < len(judged) < len({r.benchmark.key for r in head})
    assert got.drift_known > 0


def test_a_rise_within_an_allowance_too_wide_to_tell_from_drift_is_an_unconfirmed_slowdown():
    """stingray's 12 jobs gave a series a +31.3 % allowance, and a +23 % step asv lists read "unchanged":
    within an allowance wider than the settings' ±25 % (no recurring jump), a rise past the floor is an
    unconfirmed slowdown; a rise under the floor, and a fall, stay unchanged."""
    rng = np.random.default_rng(5)
    base = _run(40, 1.0, rng, noise=0.003)
    wide = SeriesNoise(sigma=0.08, jump=0.0, jobs=12, multiplier=3.5, allowance=0.313)
    for level, want in ((1.23, Outcome.INCONCLUSIVE), (1.01, Outcome.UNCHANGED), (1 / 1.23, Outcome.UNCHANGED)):
        head = _run(41, level, rng, noise=0.003)
        (v,) = compare([base], [head], between_jobs={PACK.key: wide})
        assert v.outcome == want, (level, v.reason)
        if want == Outcome.INCONCLUSIVE:
            assert v.reason.startswith("unconfirmed slowdown: +23") and "wider than the +25.0%" in v.reason, v.reason
