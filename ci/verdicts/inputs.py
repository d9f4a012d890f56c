"""What the verdicts see of one commit: its results on one machine, crashes included; and one A/B
comparison of two commits from a store, with the jobs that measured them."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ci.records import (
    FAILED_BOTH,
    FAILED_ON_HEAD,
    MISSING_MACHINE,
    MISSING_ON_HEAD,
    NEW_SERIES,
    NOT_ON_BASE,
    WITHHELD_OTHER_JOB,
    Acknowledgement,
    ComparisonSource,
    Kind,
    MachineHistory,
    Outcome,
    Result,
    RunWindowSource,
    Verdict,
    machine_labels,
)
from ci.verdicts.decide import band_text
from ci.verdicts.jobs import JobRelation, Jobs, drift_for, job_relation
from ci.verdicts.noise import NoiseSettings, SeriesNoise, job_window, series_noise

if TYPE_CHECKING:
    from ci.verdicts.settings import VerdictSettings


def results_with_crashes(store: ComparisonSource, sha: str, machine: str) -> list[Result]:
    """One commit's results on one machine, plus a sample-less Result for every point that did not
    run, so that the verdicts see it: a point asv recorded as failed (crashed), and a correctness
    point recorded as skipped (asv's NaN: the check returned NaN, or skipped itself) whose series has
    a value at another commit on this machine (it can run here, so not running is not a pass). A
    correctness gate or a benchmark that crashed on head FAILS instead of vanishing. Other skipped
    points (asv's NaN for "not on this machine": no GPU, a baseline not installed) stay out.

    Args:
        store: a `ci.records.ComparisonSource` (its `results` and `failures`), e.g. `ci.store.Store`.
        sha: full commit sha.
        machine: machine key.

    Returns:
        Result records in the store's order, the points that did not run last.
    """
    rs = store.results(commit_sha=sha, machine=machine)
    for f in store.failures(commit_sha=sha, machine=machine):
        if f.status == "failed" or (f.benchmark.kind == Kind.CORRECTNESS and any(
                r.commit_sha != sha and any(math.isfinite(x) for x in r.samples)
                for r in store.results(benchmark_key=f.benchmark.key, machine=machine))):  # fmt: skip
            rs.append(Result(f.benchmark, f.commit_sha, f.machine, (), run_id=f.run_id))
    return rs


def measured(results: Sequence[Result]) -> list[Result]:
    """The results holding at least one finite sample (what was measured, crashes left out)."""
    return [r for r in results if any(math.isfinite(x) for x in r.samples)]


def not_measured(results: Sequence[Result], side: str, sha: str) -> str | None:
    """Why one side of a comparison (or one commit of a history job) decides nothing: not one of
    its points was measured. None when something was.

    Args:
        results: the side's results, crashes included (`results_with_crashes`).
        side: "base", "head" or "commit", for the message.
        sha: its commit.

    Returns:
        A one-line reason naming what failed, or None.
    """
    if measured(results):
        return None
    failed = sorted({r.benchmark.name for r in results})
    if not failed:
        return f"nothing was measured on {side} {sha[:12]}: no benchmark point"
    shown = ", ".join(failed[:3]) + (f" and {len(failed) - 3} more" if len(failed) > 3 else "")
    return (f"nothing was measured on {side} {sha[:12]}: all {len(results)} benchmark points failed to run "
            f"({shown}); see the job log (asv's output) for why")


def not_judged(verdicts: Sequence[Verdict]) -> str | None:
    """Why a comparison whose sides were both measured still decides nothing: of the series measured on both
    sides, not one performance series (a time, a peak memory, a tracked value) was judged. Every one
    was withheld (base and head not measured in one job, and no between-job noise model in the
    history: a cross-job compare on a young history). Such a comparison used to exit 0 with "no
    regression confirmed" (2026-12-06). A series of unknown direction counts as judged when it was
    (changed or not: which is better is not asked), and correctness or exact series that passed beside
    withheld performance series do not make it a performance comparison; a failure found (a gate
    failed, a crash on head, a regression) does, and its exit 1 stands. None when something was
    judged.

    Args:
        verdicts: one comparison's verdicts (`ci.verdicts.compare`).

    Returns:
        A one-line reason, or None.
    """
    if any(v.outcome in (Outcome.FAILED, Outcome.REGRESSED) for v in verdicts):
        return None  # a failure was found (a gate, a crash on head): exit 1 says so, the withheld rows are listed
    one_side = (NEW_SERIES, MISSING_ON_HEAD, MISSING_MACHINE, NOT_ON_BASE, FAILED_ON_HEAD)
    both = [v for v in verdicts if not v.reason.startswith(one_side)]
    measured = [v for v in both if v.benchmark.kind not in (Kind.CORRECTNESS, Kind.EXACT)]
    if measured and all(v.reason == WITHHELD_OTHER_JOB for v in measured):
        return (f"no performance series was judged: all {len(measured)} were withheld. Base and head were not measured "
                "in one job, and this machine's history holds too few jobs besides theirs (which a noise model "
                f"leaves out) for a between-job noise model of any of them, which needs {NoiseSettings().min_jobs}; "
                "measure both in one job with python -m ci continuous")
    return None


@dataclass(frozen=True)
class Comparison:
    """One A/B comparison read from a store: what was compared, how it was measured, the verdicts."""

    base: list[Result]
    head: list[Result]
    jobs: Jobs
    verdicts: list[Verdict]
    drift_known: int = 0  # series with a noise model of the history (when not measured in one job)
    machines: tuple[str, ...] = ()  # the machines compared (keys: asv machine x environment x host)
    base_sha: str = ""
    head_sha: str = ""

    @property
    def problem(self) -> str | None:
        """Why this comparison decides nothing (a side with not one measured point): every entry
        point then exits 2 with this as its headline, never "no regression". None otherwise."""
        for side, rs, sha in (("head", self.head, self.head_sha), ("base", self.base, self.base_sha)):
            why = not_measured(rs, side, sha or (rs[0].commit_sha if rs else "?"))
            if why is not None:
                return why
        return not_judged(self.verdicts)


def machine_keys(store: ComparisonSource, name: str) -> list[str]:
    """The store's machines that `name` stands for: every machine (environment, host) of that asv
    machine name, else the one machine with that key.

    An asv machine's first environment is stored under the plain asv name, so a key lookup first
    took the name for that environment alone: on a history of two Python environments, `--machine
    GH-Actions` compared 71 of its 84 series and a regression of the other environment passed
    (2026-12-06). Another environment (or host) alone is named by its key ("GH-Actions
    [conda-py3.11-python]").

    Args:
        store: a `ci.records.ComparisonSource` (its `machines`).
        name: an asv machine name or a machine key (`ci.records.Machine.name`).

    Returns:
        Machine keys, sorted; [] when the store knows neither.
    """
    machines = store.machines()
    if any(m.name == name and m.machine_name != name for m in machines):
        # the key of another asv machine's environment, whatever asv machine bears that name as well
        # ("m1 [envB]" beside an asv machine literally named so, whose own key is then "m1 [envB] #2")
        return [name]
    every = sorted(m.name for m in machines if m.machine_name == name)
    if every:
        return every
    return [name] if any(m.name == name for m in machines) else []


def measured_on(store: ComparisonSource, sha: str) -> set[str]:
    """The machines with results or recorded failures for commit `sha`."""
    return {r.machine for r in store.results(commit_sha=sha)} | {f.machine for f in store.failures(commit_sha=sha)}


def pick_machines(store: ComparisonSource, base: str, head: str, machine: str | None) -> list[str]:
    """The machines to compare base and head on: those of one asv machine name that measured
    either side, provided one measured both (an environment measured on one side only is compared
    too: its series are new on head, or missing there).

    Args:
        store: a `ci.records.ComparisonSource` (its `machines`, `results` and `failures`).
        base: full sha of the base commit.
        head: full sha of the head commit.
        machine: a machine key or asv machine name (None: the one asv machine name that measured
            both commits).

    Returns:
        Machine keys, sorted; ValueError when no machine measured both, or several asv machine
        names did and none was chosen.
    """
    on_base, on_head = measured_on(store, base), measured_on(store, head)
    names = {m.name: m.machine_name for m in store.machines()}
    if machine is not None:
        wanted = set(machine_keys(store, machine))
        if not wanted:
            known = sorted(set(names.values()))
            raise ValueError(f"unknown machine {machine!r} (the store knows {', '.join(map(repr, known)) or 'none'})")
    else:
        both = {names.get(k, k) for k in on_base & on_head}
        if len(both) > 1:
            raise ValueError(f"several machines measured both commits ({', '.join(sorted(both))}): pass --machine")
        wanted = {k for k in on_base | on_head if names.get(k, k) in both}
    if not wanted & on_base & on_head:
        pair = f"both {base[:12]} (base) and {head[:12]} (head)"
        raise ValueError((f"no machine has results for {pair}" if machine is None
                          else f"machine {machine!r} has no results for {pair}") + _apart(store, on_base, on_head))
    return sorted(wanted & (on_base | on_head))


def _apart(store: ComparisonSource, on_base: set[str], on_head: set[str]) -> str:
    """Where each side was measured, when both were, on machines of one asv machine name that the store
    keeps apart: another host, or the jobs of a host of another speed that the files do not record."""
    machines = {m.name: m for m in store.machines()}
    names_base = {machines[k].machine_name for k in on_base if k in machines}
    if names_base.isdisjoint(machines[k].machine_name for k in on_head if k in machines):
        return ""

    def listed(keys: set[str]) -> str:
        return ", ".join(map(repr, sorted(keys)))

    text = f": base measured on {listed(on_base)}, head on {listed(on_head)}"
    fast = [machines[k] for k in sorted(on_base | on_head) if k in machines and machines[k].speed]
    if fast:
        m = fast[0]
        text += (f"; {m.name!r} holds the jobs whose every series read {m.speed_shift or 'far'} off the jobs around "
                 "them (a host of another speed that the result files do not record), and two hosts' levels are not "
                 "one series: measure both commits in one job (`python -m ci continuous BASE HEAD`)")
    return text


def noise_history(store: ComparisonSource, machine: str, base: str, head: str, window: int
                  ) -> Sequence[Result] | MachineHistory:
    """What a comparison's noise model of `machine` learns from (`ci.verdicts.noise.series_noise`): the
    `window` runs of its history nearest the base (`ci.verdicts.noise.job_window`), base's and head's
    own runs among them for the model to leave out. A store (`ci.records.RunWindowSource`) reads only
    those runs, as columns: one comparison's cost is bounded by the window, not by the history
    (a whole 20,000-commit history as `Result` records was 2.8 GB, 2026-12-06). Another source's
    results are read whole and cut to the same runs.

    Args:
        store: a `ci.records.ComparisonSource`; a `ci.records.RunWindowSource` too for the bounded read.
        machine: a machine key.
        base: full sha of the base commit.
        head: full sha of the head commit.
        window: how many runs (`ci.verdicts.noise.NoiseSettings.window`).

    Returns:
        The machine's series as columns (a `MachineHistory`), or its results in history order.
    """
    if isinstance(store, RunWindowSource):
        start, stop = job_window(store.run_commits(machine), (base, head), window)
        found = store.series_columns(machine=machine, runs_after={machine: start}, runs_before={machine: stop})
        return found[0] if found else MachineHistory(machine, (), ())
    results = store.results(machine=machine)
    run_of = [r.run_id or r.commit_sha for r in results]
    runs = list(dict.fromkeys(run_of))  # each run once, history order
    shas = dict(zip(run_of, (r.commit_sha for r in results), strict=True))
    start, stop = job_window([shas[run] for run in runs], (base, head), window)
    if (start, stop) == (0, len(runs)):
        return results
    inside = set(runs[start:stop])
    return [r for r, run in zip(results, run_of, strict=True) if run in inside]


def compare_commits(store: ComparisonSource, base: str, head: str, machine: str | Sequence[str], *,
                    settings: VerdictSettings | None = None, noise: NoiseSettings | None = None) -> Comparison:
    """A/B verdicts of `head` against `base` on one machine (or several environments of one), as
    every entry point decides them.

    When the two were not recorded as measured in one job (`ci.verdicts.jobs.job_relation`), each
    series' noise model is learned from its machine's other commits nearest the base (`ci.verdicts.noise`,
    `noise_history`) and its allowance is the series' threshold; series without a model are withheld.

    Args:
        store: a `ci.records.ComparisonSource` (its `results` and `failures`), e.g. `ci.store.Store`.
        base: full sha of the base commit.
        head: full sha of the head commit.
        machine: a machine key, or several (`pick_machines`): each series is compared within its own.
        settings: `ci.verdicts.VerdictSettings` (None: the defaults).
        noise: the noise model's `ci.verdicts.NoiseSettings`, its window included (None: the defaults).

    Returns:
        A Comparison (verdicts sorted by series key, then machine; not saved).
    """
    from ci.verdicts.ab import compare

    machines = (machine,) if isinstance(machine, str) else tuple(machine)
    b = [r for m in machines for r in results_with_crashes(store, base, m)]
    h = [r for m in machines for r in results_with_crashes(store, head, m)]
    if not h:
        raise ValueError(f"no results for head {head[:12]} on {', '.join(machines)}")
    jobs = job_relation([r for r in b if r.samples], [r for r in h if r.samples])
    drift: dict[tuple[str, str], SeriesNoise] | None = None
    if not jobs.together:
        drift = {}
        noise = noise or NoiseSettings()
        # The family a false alarm is counted over: the series this comparison judges by the allowance,
        # on every machine.
        judged = {(r.machine, r.benchmark.key) for r in h if r.benchmark.judged}
        histories: dict[str, Sequence[Result] | MachineHistory] = {}  # the compared machines' and their twins'

        def history(m: str) -> Sequence[Result] | MachineHistory:
            if m not in histories:
                histories[m] = noise_history(store, m, base, head, noise.window)
            return histories[m]

        def models(family: int) -> dict[tuple[str, str], SeriesNoise]:
            out: dict[tuple[str, str], SeriesNoise] = {}
            for m in machines:
                found = drift_for(jobs, history(m), exclude_commits={base, head}, settings=noise, family=family)
                out.update(((m, key), d) for key, d in (found or {}).items())
            lacking = judged - out.keys()
            if lacking:
                out.update(_borrowed_drift(store, lacking, base, head, noise, family, history))
            return out

        drift = models(len(judged))
        # Withheld series (no model) raise no false alarm: the family is the series judged by an allowance.
        # 208 of OpenBLAS's 222 series had none, and the 14 judged shared a rate "over 222" (2026-12-07).
        # Which series have a model does not depend on the family; the rate does only past
        # family_false_alarm / false_alarm series (100 by default).
        modelled = len(drift.keys() & judged)
        if 0 < modelled < len(judged) and noise.rate(modelled) != noise.rate(len(judged)):
            drift = models(modelled)
    # An environment whose every point at head was skipped ran there: its series are missing, not it (a PR
    # that makes an environment's benchmarks skip read as the job not running it, 2026-12-07).
    ran = {r.machine for r in h}
    ran |= {m for m in machines if m not in ran and store.failures(commit_sha=head, machine=m)}
    verdicts = compare(b, h, settings=settings, between_jobs=drift, ran_at_head=ran)
    acks = getattr(store, "acknowledgements", None)  # a store's; an in-memory reader holds none
    if acks is not None and any(v.reason == FAILED_BOTH for v in verdicts):
        verdicts = known_broken(store, verdicts, base, acks())
    return Comparison(b, h, jobs, verdicts, len(drift or {}), machines, base, head)


def not_run_since(store: ComparisonSource, key: str, machine: str, since: str, until: str | None = None,
                  orders: dict[str, list[str]] | None = None) -> bool:
    """Whether series `key` failed to run (asv recorded an error) at every run of `machine` from commit
    `since` through `until` (None: at `since`), both among the machine's runs: `known_broken`'s test. A
    run without the benchmark, or with it skipped, breaks the streak (counted as "not run", an ack of a
    one-off failure on one machine silenced another machine's failure that started later, 2026-12-07).
    `orders`: each machine's runs read so far, kept across calls."""
    orders = {} if orders is None else orders
    if machine not in orders:
        orders[machine] = list(dict.fromkeys(store.run_commits(machine)))  # type: ignore[attr-defined]
    order = orders[machine]
    at = {sha: i for i, sha in enumerate(order)}
    start, end = at.get(since), at.get(until if until is not None else since)
    if start is None or end is None or end < start:
        return False
    failed = {f.commit_sha for f in store.failures(benchmark_key=key, machine=machine) if f.status == "failed"}
    return all(sha in failed for sha in order[start:end + 1])


def known_broken(store: ComparisonSource, verdicts: Sequence[Verdict], base: str,
                 acks: Sequence[Acknowledgement]) -> list[Verdict]:
    """The verdicts, those of series that failed on both sides (`FAILED_BOTH`) and that a maintainer
    acknowledged as broken (`ci ack --commit C`) not compared instead of failed: the acknowledgement
    covers the base where the series failed at every run of its machine from C through the base
    (`not_run_since`). A
    benchmark failing at every commit made every comparison of a real history fail (astropy's, 20 of 20
    adjacent pairs; geocat-comp's likewise, 2026-12-07), and nothing could silence it; it is still
    listed, with who acknowledged it and why, and fails again once the streak broke (it ran in between).

    Args:
        store: the store (its results and `run_commits`).
        verdicts: the comparison's verdicts.
        base: full sha of the base.
        acks: the store's acknowledgements.
    """
    by_key: dict[str, list[Acknowledgement]] = {}
    for a in acks:
        by_key.setdefault(a.benchmark_key, []).append(a)
    out = []
    orders: dict[str, list[str]] = {}  # each machine's runs, read once
    for v in verdicts:
        covering = None
        if v.reason == FAILED_BOTH and v.benchmark.key in by_key:
            covering = next((a for a in reversed(by_key[v.benchmark.key])  # the newest that covers it
                             if not_run_since(store, v.benchmark.key, v.machine, a.commit_sha, base, orders)), None)
        if covering is None:
            out.append(v)
            continue
        out.append(dataclasses.replace(v, outcome=Outcome.INCONCLUSIVE, reason=(
            f"{NOT_ON_BASE}, nor on head: known broken, not run since {covering.commit_sha[:10]} (acknowledged by "
            f"{covering.who}: {covering.why})")))
    return out


def _borrowed_drift(store: ComparisonSource, lacking: set[tuple[str, str]], base: str, head: str,
                    noise: NoiseSettings, family: int, history: Callable[[str], Sequence[Result] | MachineHistory],
                    ) -> dict[tuple[str, str], SeriesNoise]:
    """Noise models for series whose own history is too short for one, learned from the same benchmark
    in another environment of the same host (same asv machine name and host, not a host of another
    speed) that measured both compared commits, its window as its own comparison would read it: one
    runner pool's job-to-job drift. A new environment beside a long one was blind to x3 and x4.8 steps
    (geocat-comp's py3.10 beside its py3.13, 2026-12-07: "withheld", where its py3.13 twin read
    "regressed"). The one with the most jobs wins; none: the series stays withheld.

    Args:
        store: a `ci.records.ComparisonSource`.
        lacking: (machine key, series key) of the series without a model.
        base: full sha of the base commit.
        head: full sha of the head commit.
        noise: the noise settings of the comparison.
        family: the comparison's family of series (`ci.verdicts.noise.series_noise`).
        history: a machine's noise window (`noise_history` of the same pair), cached by the caller.

    Returns:
        (machine key, series key) -> the borrowed model (`SeriesNoise.learned_on` names its machine as
        readers know it, `machine_labels`).
    """
    machines = {m.name: m for m in store.machines()}
    labels = machine_labels(list(machines.values()))
    out: dict[tuple[str, str], SeriesNoise] = {}
    for name in sorted({m for m, _ in lacking}):
        me = machines.get(name)
        if me is None or me.speed:
            continue
        twins = [k for k, m in sorted(machines.items()) if k != name and not m.speed
                 and m.machine_name == me.machine_name and m.host == me.host
                 and all(results_with_crashes(store, sha, k) for sha in (base, head))]
        for twin in twins:
            found = series_noise(history(twin), exclude_commits={base, head}, settings=noise, family=family)
            for (m, key) in lacking:
                model = found.get(key)
                if m == name and model is not None and model.jobs > getattr(out.get((m, key)), "jobs", 0):
                    out[(m, key)] = dataclasses.replace(model, learned_on=labels.get(twin, twin))
    return out


def wide_thresholds(verdicts: Sequence[Verdict], max_threshold: float) -> list[float]:
    """The thresholds past `max_threshold` of a comparison's decided performance series (withheld ones
    have none): across jobs a young or jumpy history's drift can allow ±69% (8 jobs of a real history,
    2026-12-07), and "unchanged" there rules out no smaller change, so the comment and the terminal say
    how many and how wide."""
    return [v.threshold for v in verdicts
            if v.benchmark.kind not in (Kind.CORRECTNESS, Kind.EXACT) and math.isfinite(v.threshold)
            and v.threshold > max_threshold and v.reason != WITHHELD_OTHER_JOB]


def wide_text(wide: Sequence[float], max_threshold: float) -> str:
    """How many thresholds are past the cap and how far the widest goes (`wide_thresholds`), the words
    the comment and the terminal share: "10 series' thresholds are wider than ±25% (up to +68.9% /
    -40.8%)"."""
    return (f"{len(wide)} series' thresholds are wider than ±{max_threshold * 100:g}% (up to "
            f"{band_text(max(wide))})")


def measurement_line(comparison: Comparison, max_threshold: float | None = None) -> str:
    """One line of plain text on how base and head were measured and so which rule decided the
    verdicts (`Jobs.rule`): what `python -m ci compare`, `python -m ci continuous` and the runner's
    PR summary print.

    Args:
        comparison: from `compare_commits`.
        max_threshold: the settings' cap on an in-job threshold (`VerdictSettings.max_threshold`):
            across jobs, the series whose thresholds are wider are counted (`wide_thresholds`).

    Returns:
        "in-job rule: ..." or "warning: cross-job rule: ..." (one line, markers as recorded).
    """
    jobs = comparison.jobs
    if jobs.together:
        return (f"in-job rule: base and head were measured in one job, one asv call ({jobs.head}), rounds "
                "interleaved: in-job statistics apply")
    empty = [side for side, rs in (("head", comparison.head), ("base", comparison.base)) if rs and not measured(rs)]
    if empty:  # no job to compare: a side whose every point failed has no job marker to read (a broken build)
        return f"no rule applies: nothing was measured on {' and '.join(empty)} (below)"
    withheld = sum(v.reason.startswith("withheld:") for v in comparison.verdicts)
    if jobs.relation == JobRelation.DIFFERENT:
        which = f"different asv calls: {jobs.base} and {jobs.head}"
    else:
        which = ("a side has no verified job marker: measured by asv outside this service's runner, as every "
                 "commit of an ingested asv history is, rewritten since the runner measured it, or marked before "
                 "markers were bound to their result files")
    line = (f"warning: cross-job rule: base and head were not measured in one job ({which}): thresholds widened by "
            f"the between-job drift of {comparison.drift_known} series, {withheld} series withheld")
    if max_threshold is not None and (wide := wide_thresholds(comparison.verdicts, max_threshold)):
        line += f"; {wide_text(wide, max_threshold)}: a smaller change there cannot be told from the drift"
    return line
