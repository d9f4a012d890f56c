"""`tools.synthetic_history`: a seeded asv results directory the service reads as asv wrote it."""

from __future__ import annotations

import pytest

from ci.ingest import ingest_results_dir
from ci.store import Store
from tools.synthetic_history import commit_sha, main, write_history


def _files(root):
    return {p.relative_to(root): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_a_small_history_ingests_whole_and_the_same_seed_writes_the_same_bytes(tmp_path):
    kw = dict(benchmarks=3, grids=1, commits=12, envs=2, noise=0.02, step=0.2, step_share=1.0, seed=3)
    counts = write_history(tmp_path / "a", **kw)
    assert counts == {"series per environment": 23, "stepped series per environment": 23, "result files": 24,
                      "jobs on the slower host": 0}
    write_history(tmp_path / "b", **kw)
    assert _files(tmp_path / "a") == _files(tmp_path / "b")
    with Store(str(tmp_path / "h.sqlite")) as store:
        report = ingest_results_dir(store, tmp_path / "a" / "results")
        assert report.ok
        results = store.results(machine=next(m.name for m in store.machines()))
    assert len({r.benchmark.key for r in results}) == 23
    before = [r.samples[0] for r in results if r.commit_sha == commit_sha(5) and r.benchmark.name.endswith("plain_0")]
    after = [r.samples[0] for r in results if r.commit_sha == commit_sha(6) and r.benchmark.name.endswith("plain_0")]
    assert len(before) == len(after) == 1 and 1.05 < after[0] / before[0] < 1.4  # +20% at the middle commit


def test_bad_arguments_are_refused_and_nothing_is_overwritten(tmp_path, capsys):
    write_history(tmp_path / "a", benchmarks=1, grids=0, commits=2, envs=1, noise=0.0, step=0.0,
                  step_share=0.0, seed=0)
    with pytest.raises(SystemExit):
        main([str(tmp_path / "a")])
    assert "exists" in capsys.readouterr().err
    for bad in (["--commits", "1"], ["--benchmarks", "0", "--grids", "0"], ["--noise", "-1"], ["--step", "-1"]):
        with pytest.raises(SystemExit):
            main([str(tmp_path / "new"), *bad])
        assert "error" in capsys.readouterr().err


def test_jobs_on_a_slower_host_record_its_cpu_and_are_their_own_series(tmp_path):
    """`--slow-share`: those jobs are slower in every series and record another `cpu`, as a shared
    runner of mixed hardware does; the store keeps each host's results as their own series."""
    counts = write_history(tmp_path / "h", benchmarks=2, grids=0, commits=40, envs=1, noise=0.0, step=0.0,
                           step_share=0.0, seed=5, slow_share=0.5, slow=0.15)
    assert 0 < counts["jobs on the slower host"] < 40
    with Store(str(tmp_path / "h.sqlite")) as store:
        assert ingest_results_dir(store, tmp_path / "h" / "results").ok
        machines = sorted(m.name for m in store.machines())
        levels = {m: {r.samples[0] for r in store.results(machine=m) if r.benchmark.name.endswith("plain_0")}
                  for m in machines}
    assert len(machines) == 2, machines
    fast, slow = sorted(levels.values(), key=min)
    assert len(fast) == len(slow) == 1  # no noise: one level per host
    assert next(iter(slow)) / next(iter(fast)) == pytest.approx(1.15)
    with pytest.raises(ValueError, match="slow"):
        write_history(tmp_path / "bad", benchmarks=1, grids=0, commits=2, envs=1, noise=0.0, step=0.0,
                      step_share=0.0, seed=0, slow_share=1.5)


def test_a_hidden_slower_host_records_the_same_cpu(tmp_path):
    """`--hide-host`: the same jobs are slower, but nothing in the files tells the hosts apart."""
    kw = dict(benchmarks=2, grids=0, commits=40, envs=1, noise=0.0, step=0.0, step_share=0.0, seed=5,
              slow_share=0.5, slow=0.15)
    write_history(tmp_path / "h", hide_host=True, **kw)
    with Store(str(tmp_path / "h.sqlite")) as store:
        assert ingest_results_dir(store, tmp_path / "h" / "results").ok
        (machine,) = store.machines()
        values = sorted({r.samples[0] for r in store.results(machine=machine.name)
                         if r.benchmark.name.endswith("plain_0")})
    assert len(values) == 2 and values[1] / values[0] == pytest.approx(1.15)
