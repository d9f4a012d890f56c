"""A series is one benchmark on one machine, environment and host: never pooled, never merged
without a word, and an existing store splits its environments on upgrade without losing a point."""

from __future__ import annotations

import math

from sqlalchemy import create_engine

from ci.cli import main
from ci.records import Outcome
from ci.store import Store
from ci.verdicts import detect_all
from tests.ci.conftest import BENCHMARKS, MACHINE, sha_for, write_results

KEY = "bench_attention.GPUTime.time_gpu(dtype=fp16, batch=1)"
PY310, PY312 = "virtualenv-py3.10", "virtualenv-py3.12"


def _level(level: float, n: int = 10):
    """`write_results`' samples: time series at `level` (others at their defaults), n samples."""

    def make(name: str, j: int, c: int) -> list[float]:
        base = (1e-4 * level if j == 0 else 1e-4 * (j + 1)) if "time_" in name else 100.0 + j
        if "max_abs_diff" in name:
            base = 0.001
        return [base * (1 + 0.002 * k) for k in range(n)]

    return make


def test_environments_of_one_machine_are_compared_apart(tmp_path, capsys):
    """Base measured under two Python environments (one 30% slower: another interpreter), head under
    one of them at the same level: each environment is its own series. Pooled, the base's median
    fell between the two levels and the head read "improved"."""
    root = tmp_path / "results"
    write_results(root, [sha_for(0), sha_for(1)], env_name=PY310, samples=_level(1.0), job="one-call/1")
    write_results(root, [sha_for(0)], env_name=PY312, samples=_level(1.3), job="one-call/1")
    db = str(tmp_path / "h.sqlite")
    assert main(["ingest", "--db", db, str(root)]) == 0
    assert f"machine '{MACHINE}' measured in another environment" in capsys.readouterr().err
    # Exit 1: the correctness checks of the environment head did not measure did not run there.
    assert main(["compare", "--db", db, "--base", sha_for(0)[:12], "--head", sha_for(1)[:12], "--no-save"]) == 1
    out = capsys.readouterr().out
    failed = [line for line in out.splitlines() if line.startswith("failed")]
    assert len(failed) == 2 and all(f"[{MACHINE} [{PY312}]]" in line for line in failed), out
    with Store(db) as store:
        machines = {m.name: m for m in store.machines()}
        assert set(machines) == {MACHINE, f"{MACHINE} [{PY312}]"}
        assert machines[MACHINE].env_name == PY310 and machines[f"{MACHINE} [{PY312}]"].env_name == PY312
        assert {r.machine for r in store.results(benchmark_key=KEY)} == set(machines)
        verdicts = [v for v in store.verdicts() if v.benchmark.key == KEY]
    assert not verdicts  # --no-save
    row = [line for line in out.splitlines() if KEY in line]
    assert len(row) == 2, out  # one row per environment, each naming its machine
    assert any(line.startswith("unchanged") and f"[{MACHINE} [{PY310}]]" in line for line in row), out
    assert any(f"[{MACHINE} [{PY312}]]" in line and "missing on head" in line for line in row), out
    assert "improved" not in "\n".join(row)


def test_the_asv_machine_name_stands_for_every_environment_of_it(tmp_path, capsys):
    """`--machine NAME` with an asv machine name compares every environment of it, not only the one
    stored under the plain name (a regression of the other environment passed so, exit 0, before
    2026-12-06); another environment's key names it alone."""
    from ci.verdicts import machine_keys

    root = tmp_path / "results"
    write_results(root, [sha_for(0), sha_for(1)], env_name=PY310, samples=_level(1.0), job="one-call/1")
    write_results(root, [sha_for(0)], env_name=PY312, samples=_level(1.0), job="one-call/1")
    write_results(root, [sha_for(1)], env_name=PY312, samples=_level(1.5), job="one-call/1")
    db = str(tmp_path / "h.sqlite")
    assert main(["ingest", "--db", db, str(root)]) == 0
    with Store(db) as store:
        assert machine_keys(store, MACHINE) == sorted([MACHINE, f"{MACHINE} [{PY312}]"])
        assert machine_keys(store, f"{MACHINE} [{PY312}]") == [f"{MACHINE} [{PY312}]"]
        assert machine_keys(store, "elsewhere") == []
    capsys.readouterr()
    compare = ["compare", "--db", db, "--base", sha_for(0)[:12], "--head", sha_for(1)[:12], "--no-save"]
    assert main([*compare, "--machine", MACHINE]) == 1
    out = capsys.readouterr().out
    assert any(line.startswith("regressed") and f"[{MACHINE} [{PY312}]]" in line for line in out.splitlines()), out
    # The first environment's rows name it too, as the dashboard and the comment do (its bare key read as the
    # whole machine beside the other's).
    assert any(line.startswith("unchanged") and f"[{MACHINE} [{PY310}]]" in line for line in out.splitlines()), out
    assert main([*compare, "--machine", f"{MACHINE} [{PY312}]"]) == 1
    assert f"[{MACHINE}]" not in capsys.readouterr().out  # that environment alone


def test_an_asv_machine_named_like_another_machines_environment_is_told_apart(tmp_path, capsys):
    """An asv machine literally named "m [py312]" beside machine m's environment py312, whose key that
    is: both were labelled "m [py312]" and `--machine "m [py312]"` reached only the literal one
    (2026-12-07). A key names its machine; a label two machines share is each one's key."""
    from ci.records import machine_labels
    from ci.verdicts import machine_keys

    twin = f"{MACHINE} [{PY312}]"
    root = tmp_path / "results"
    write_results(root, [sha_for(0), sha_for(1)], env_name=PY310, samples=_level(1.0), job="one-call/1")
    write_results(root, [sha_for(0), sha_for(1)], env_name=PY312, samples=_level(1.0), job="one-call/1")
    write_results(root, [sha_for(0)], machine=twin, env_name=PY310, samples=_level(1.0), job="one-call/1")
    write_results(root, [sha_for(1)], machine=twin, env_name=PY310, samples=_level(1.5), job="one-call/1")
    db = str(tmp_path / "h.sqlite")
    assert main(["ingest", "--db", db, str(root)]) == 0
    with Store(db) as store:
        machines = store.machines()
        keys = sorted(m.name for m in machines)
        labels = machine_labels(machines)
        assert len(set(labels.values())) == len(keys) == 3, labels
        literal = next(m.name for m in machines if m.machine_name == twin)
        assert literal != twin and machine_keys(store, twin) == [twin] and machine_keys(store, literal) == [literal]
    compare = ["compare", "--db", db, "--base", sha_for(0)[:12], "--head", sha_for(1)[:12], "--no-save"]
    assert main([*compare, "--machine", twin]) == 0  # m's py312: unchanged
    assert main([*compare, "--machine", literal]) == 1  # the machine named "m [py312]": slower
    capsys.readouterr()


def test_the_comment_names_each_rows_environment(tmp_path):
    root = tmp_path / "results"
    write_results(root, [sha_for(0), sha_for(1)], env_name=PY310, samples=_level(1.0), job="one-call/1")
    write_results(root, [sha_for(0), sha_for(1)], env_name=PY312, samples=_level(1.3), job="one-call/1")
    db = str(tmp_path / "h.sqlite")
    assert main(["ingest", "--db", db, str(root)]) == 0
    out = tmp_path / "c.md"
    assert main(["comment", "--db", db, "--base", sha_for(0)[:12], "--head", sha_for(1)[:12], "--out", str(out)]) == 0
    body = out.read_text()
    assert "| Benchmark | Params | Machine |" in body
    assert f"`{MACHINE} [{PY310}]`" in body and f"`{MACHINE} [{PY312}]`" in body
    assert f"| environments | `{PY310}, {PY312}` |" in body


def test_a_second_host_under_one_machine_name_is_kept_apart_and_named(tmp_path, capsys):
    """Every runner of a workflow named its results alike: the second host (another CPU, another
    RAM size, 25% slower) is its own machine, ingest says so and how to name hosts, and the history
    shows no regression at the commit where the host changed (before: x1.25 "regressed")."""
    root = tmp_path / "results"
    first = [sha_for(i) for i in range(8)]
    second = [sha_for(i) for i in range(8, 16)]
    write_results(root, first, samples=_level(1.0))
    write_results(root, second, samples=_level(1.25), first_commit=8,
                  host={"cpu": "AMD EPYC 7763", "ram": "64G", "num_cpu": "4"})
    db = str(tmp_path / "h.sqlite")
    assert main(["ingest", "--db", db, str(root)]) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert f"warning: machine '{MACHINE}': results from another host" in err
    assert "AMD EPYC 7763" in err and "Xeon 8480" in err and "asv machine --machine NAME" in err
    with Store(db) as store:
        machines = {m.name: m for m in store.machines()}
        assert len(machines) == 2
        other = next(m for m in machines.values() if m.name != MACHINE)
        assert other.machine_name == MACHINE and ", host 2]" in other.name
        assert dict(other.host)["cpu"] == "AMD EPYC 7763" and dict(machines[MACHINE].host)["cpu"] == "Xeon 8480"
        by_machine = {m: {r.commit_sha for r in store.results(benchmark_key=KEY, machine=m)} for m in machines}
        assert by_machine[MACHINE] == set(first) and by_machine[other.name] == set(second)
        assert not [c for c in detect_all(store) if c.benchmark.key == KEY and c.outcome == Outcome.REGRESSED]
    # Ingested again: nothing new, nothing said.
    assert main(["ingest", "--db", db, str(root)]) == 0
    assert "another host" not in capsys.readouterr().err


def test_one_host_through_kernel_updates_and_ram_readings_stays_one_machine(tmp_path, capsys):
    """A host's kernel version, and RAM read in kB by an older asv and in bytes by a newer one, are
    its environment, not another host (a real Jenkins history went through 5 kernels in 59 runs)."""
    root = tmp_path / "results"
    write_results(root, [sha_for(0)], host={"os": "Linux 4.18.0-553.56.1.el8_10.x86_64", "ram": "395591804"})
    write_results(root, [sha_for(1)], first_commit=1,
                  host={"os": "Linux 4.18.0-553.123.1.el8_10.x86_64", "ram": "405086031872"})
    db = str(tmp_path / "h.sqlite")
    assert main(["ingest", "--db", db, str(root)]) == 0
    assert "another host" not in capsys.readouterr().err
    with Store(db) as store:
        assert [m.name for m in store.machines()] == [MACHINE]


def test_an_existing_store_splits_its_environments_on_upgrade(tmp_path):
    """A store written before machines had environments (revision 0005: one machine row, runs of
    two environments) upgrades to one machine per environment, every point kept."""
    from alembic import command
    from alembic.config import Config

    from ci.store.schema import MIGRATIONS_DIR

    root = tmp_path / "results"
    write_results(root, [sha_for(0), sha_for(1)], env_name=PY310, samples=_level(1.0))
    write_results(root, [sha_for(0), sha_for(1)], env_name=PY312, samples=_level(1.3))
    db = tmp_path / "h.sqlite"
    with Store(db) as store:
        from ci.ingest import ingest_results_dir

        ingest_results_dir(store, root)
        before = sorted((r.commit_sha, r.benchmark.key, r.samples) for r in store.results())
    engine = create_engine(f"sqlite:///{db}")
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0005")
    with engine.connect() as conn:
        assert [r[0] for r in conn.exec_driver_sql("SELECT name FROM machines")] == [MACHINE]
        assert conn.exec_driver_sql("SELECT count(DISTINCT env_name) FROM runs").scalar() == 2
    engine.dispose()
    with Store(db) as store:  # opening migrates to head
        assert sorted(m.name for m in store.machines()) == [MACHINE, f"{MACHINE} [{PY312}]"]
        after = sorted((r.commit_sha, r.benchmark.key, r.samples) for r in store.results())
        assert after == before
        assert {r.machine for r in store.results() if "py3.12" in r.run_id} == {f"{MACHINE} [{PY312}]"}


def test_the_dashboard_says_a_machine_has_several_environments(tmp_path):
    root = tmp_path / "results"
    write_results(root, [sha_for(0), sha_for(1)], env_name=PY310)
    write_results(root, [sha_for(0), sha_for(1)], env_name=PY312)
    db = str(tmp_path / "h.sqlite")
    assert main(["ingest", "--db", db, str(root)]) == 0
    assert main(["dashboard", "--db", db, "--out", str(tmp_path / "site")]) == 0
    index = (tmp_path / "site" / "index.html").read_text()
    assert f"Machine <b>{MACHINE}</b> measured in 2 environments" in index
    for label in (f"{MACHINE} [{PY310}]", f"{MACHINE} [{PY312}]"):
        assert f'<option value="m:{label}">' in index  # the reader chooses one in the filter
        assert f'data-machine="{label}"' in index


# -- a check that did not run is not a pass --------------------------------------------------------


def _failing_head(name: str, j: int, c: int) -> list[float] | None:
    if c == 1:
        return None  # asv recorded every point of head as failed (null)
    return _level(1.0)(name, j, c)


def test_a_comparison_whose_head_measured_nothing_exits_2_naming_what_failed(tmp_path, capsys):
    root = tmp_path / "results"
    write_results(root, [sha_for(0), sha_for(1)], samples=_failing_head)
    db = str(tmp_path / "h.sqlite")
    assert main(["ingest", "--db", db, str(root)]) == 0
    base, head = sha_for(0)[:12], sha_for(1)[:12]
    assert main(["compare", "--db", db, "--base", base, "--head", head, "--no-save"]) == 2
    out, err = capsys.readouterr()
    assert f"error: nothing was measured on head {head}: all 7 benchmark points failed to run" in err
    assert "bench_attention.GPUTime.time_gpu" in err and "job log" in err
    # No job to compare (a broken build leaves no marker): no "cross-job rule" claimed.
    assert "no rule applies: nothing was measured on head" in out and "cross-job" not in out, out
    out = tmp_path / "c.md"
    assert main(["comment", "--db", db, "--base", base, "--head", head, "--out", str(out)]) == 2
    body = out.read_text()
    assert "**❌ Nothing was compared:** nothing was measured on head" in body
    assert "No regression" not in body


def test_series_that_failed_on_both_sides_fail(tmp_path, capsys):
    """A series that crashed on base and on head did not run on head: it fails, whoever broke it. asv runs
    the head's suite on base too, so a benchmark a pull request adds that crashes fails on both sides, and
    it passed as "not compared" with exit 0 before 2026-12-07."""
    def both_fail(name: str, j: int, c: int) -> list[float] | None:
        return None if "Throughput" in name else _level(1.0)(name, j, c)

    root = tmp_path / "results"
    write_results(root, [sha_for(0), sha_for(1)], samples=both_fail, job="one-call/1")
    db = str(tmp_path / "h.sqlite")
    assert main(["ingest", "--db", db, str(root)]) == 0
    out = tmp_path / "c.md"
    assert main(["comment", "--db", db, "--base", sha_for(0)[:12], "--head", sha_for(1)[:12],
                 "--out", str(out)]) == 1  # fmt: skip
    body = out.read_text()
    headline = body.splitlines()[3]
    assert headline.startswith("**❌ Performance check failed:**"), headline
    assert "1 benchmark(s) failed to run on head (all of them failed on base too)" in headline
    assert "failed to run on head, and on base" in body


def test_a_correctness_check_that_returned_nan_fails_where_it_ran_before(tmp_path):
    """asv stores a NaN result as skipped; a correctness series that has a value at another commit
    on this machine and NaN at head is a check that did not run: FAILED, exit 1."""
    from ci.verdicts import correctness_gates, results_with_crashes

    def nan_at_head(name: str, j: int, c: int) -> list[float] | None:
        if "max_abs_diff" in name and c == 1:
            return [math.nan]
        return _level(1.0)(name, j, c)

    root = tmp_path / "results"
    write_results(root, [sha_for(0), sha_for(1)], samples=nan_at_head)
    db = str(tmp_path / "h.sqlite")
    assert main(["ingest", "--db", db, str(root)]) == 0
    with Store(db) as store:
        assert {f.status for f in store.failures(commit_sha=sha_for(1))} == {"skipped"}
        gates = correctness_gates(results_with_crashes(store, sha_for(1), MACHINE))
    assert [g.outcome for g in gates] == [Outcome.FAILED, Outcome.FAILED]
    # Its timing series were withheld (two jobs, no history to learn their drift from), and a failed gate
    # is still a failure found: exit 1, not "nothing was judged".
    assert main(["compare", "--db", db, "--base", sha_for(0)[:12], "--head", sha_for(1)[:12], "--no-save"]) == 1


def test_the_overview_lists_failing_series_and_series_that_stopped_reporting(tmp_path):
    def fails_late(name: str, j: int, c: int) -> list[float] | None:
        return None if ("Throughput" in name and c >= 2) else _level(1.0)(name, j, c)

    root = tmp_path / "results"
    write_results(root, [sha_for(i) for i in range(4)], samples=fails_late)
    db = str(tmp_path / "h.sqlite")
    assert main(["ingest", "--db", db, str(root)]) == 0
    # The next commits' suite no longer has GPUTime (asv's benchmarks.json then lists it no more).
    gone = [b for b in BENCHMARKS if "GPUTime" not in b["name"]]
    write_results(root, [sha_for(4), sha_for(5)], first_commit=4, benchmarks=gone, samples=fails_late)
    assert main(["ingest", "--db", db, str(root)]) == 0
    assert main(["dashboard", "--db", db, "--out", str(tmp_path / "site")]) == 0
    index = " ".join((tmp_path / "site" / "index.html").read_text().split())
    assert "1 series failing" in index and "failing since" in index
    assert f"{sha_for(2)[:10]}</a>" in index.split('id="failing"')[1].split("</section>")[0]
    stopped = index.split('id="stopped"')[1].split("</section>")[0]
    assert "4 series stopped reporting" in index and "no results since" in stopped
    assert f"{sha_for(3)[:10]}</a>" in stopped and "GPUTime" in stopped
    # No regression, and the failures above it; its 6 commits are too few to judge any of the series
    # (each timing series stopped or failed before its sixth), which the banner says instead of "none".
    assert "Too little history to judge yet" in index and "No open regressions" not in index
    assert index.index('id="failing"') < index.index('id="open-regressions"')


def test_an_environment_whose_every_point_was_skipped_at_head_ran_there(tmp_path, capsys):
    """Every series of an environment missing at head reads "nothing of this environment and host was
    measured at head"; one whose every point at head asv recorded as skipped ran there, and its series
    read missing (removed, renamed or skipped), not as a job that did not run it (2026-12-07)."""
    root = tmp_path / "results"
    write_results(root, [sha_for(0), sha_for(1)], env_name="py-a")
    write_results(root, [sha_for(0), sha_for(1)], env_name="py-b",
                  samples=lambda name, j, c: [math.nan] if c == 1 else [1e-4 * (j + 1)] * 6)
    write_results(root, [sha_for(0)], env_name="py-c")  # py-c: not run at head at all
    db = str(tmp_path / "h.sqlite")
    assert main(["ingest", "--db", db, str(root)]) == 0
    capsys.readouterr()
    main(["compare", "--db", db, "--base", sha_for(0), "--head", sha_for(1), "--no-save"])
    rows = [line for line in capsys.readouterr().out.splitlines() if "missing on head" in line]
    b_rows = [line for line in rows if "py-b" in line]
    c_rows = [line for line in rows if "py-c" in line]
    assert b_rows and all("removed, renamed or skipped" in line for line in b_rows), b_rows
    assert c_rows and all("nothing of this environment and host was measured at head" in line for line in c_rows)
