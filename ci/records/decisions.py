"""Decision records: the outcome of a comparison (`Outcome`) and the reasons the verdict code gives,
one series' verdict (`Verdict`), a maintainer's acknowledgement and the alerts of a history job.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from ci.records.series import Benchmark


class Outcome(StrEnum):
    REGRESSED = "regressed"
    IMPROVED = "improved"
    UNCHANGED = "unchanged"
    INCONCLUSIVE = "inconclusive"  # not enough evidence either way: ask for more samples
    FAILED = "failed"  # a correctness gate failed, or a benchmark failed to run on head: no statistics apply
    CHANGED = "changed"  # an exact series moved (any size is a change); not a regression by itself


# Reasons of the verdicts on series measured on one side only, or crashed, or of unknown direction
# (`ci.verdicts`); the PR comment groups by them.
NEW_SERIES = "new series: no base measurement to compare with"
MISSING_ON_HEAD = "missing on head: removed, renamed or skipped"
# Every series of a machine (an environment or host) missing at head: that environment did not run there,
# which is not a benchmark that head removed (a retired or failed environment read as 36 benchmarks
# "removed, renamed or skipped" on a real two-environment history, 2026-12-07).
MISSING_MACHINE = "missing on head: nothing of this environment and host was measured at head"
FAILED_ON_HEAD = "failed to run on head: asv recorded an error (see the job log)"
UNKNOWN_DIRECTION = "unknown direction: the benchmark declares no `direction` and its unit is not one the service knows"
# A series with no measurement on base (it failed there, on head too or not): nothing to compare it
# with. Not a pass: the comment lists it as not compared.
NOT_ON_BASE = "not compared: failed to run on base"
# A series that crashed on head and on base: the check did not run on head, whoever broke it, so it fails
# (a benchmark a pull request added that crashes was run on both sides by asv, which runs the head's suite
# on base too, and passed as "not compared" with exit 0, 2026-12-07).
FAILED_BOTH = "failed to run on head, and on base: asv recorded an error on both (see the job log)"
NO_BASE_SAMPLES = f"{NOT_ON_BASE}: base has no finite samples (benchmark failed or skipped there)"
# A slower tail (the upper quartile or the mean past the threshold) that the rule cannot confirm as a
# regression (`ci.verdicts.ab`): a slowdown shown as such, never "unchanged", whatever the median says.
UNCONFIRMED_SLOWDOWN = "unconfirmed slowdown"
# A series whose base and head were not measured in one job, and whose between-job drift the
# history cannot tell (`ci.verdicts.jobs`: too few jobs, or an allowance wider than a change of
# `ci.verdicts.decide.UNKNOWN_DRIFT_FACTOR`, which no model at all allows): no in-job test can judge it.
WITHHELD_OTHER_JOB = (
    "withheld: base and head were not measured in one job and this series' between-job drift is unknown "
    "(too few jobs, or wider than 3x)"
)


@dataclass(frozen=True, kw_only=True)
class Verdict:
    """The decision about one series between a base and a head (A/B) or at a change point."""

    benchmark: Benchmark
    outcome: Outcome
    base_value: float
    head_value: float
    ratio: float  # head / base (for either direction; the outcome applies the direction)
    ci_low: float = math.nan  # confidence interval of the ratio
    ci_high: float = math.nan
    p_value: float = math.nan
    threshold: float = math.nan  # the relative change this series needed, adapted to its noise
    base_sha: str = ""
    head_sha: str = ""
    reason: str = ""
    # The machine whose results were judged ("" for a verdict stored before verdicts had one,
    # which applies to every machine's series). Fields are keyword-only: 13 of them read wrongly by position.
    machine: str = ""

    @property
    def shown(self) -> str:
        """Its outcome as a reader is shown it: "new" for a series with no base measurement (stored as
        unchanged, which decides nothing; `ci compare` and the series pages read "unchanged" for a series
        nothing was compared with, 2026-12-07), "withheld" for a series the rule withheld (not measured in one
        job, no noise model: astropy's early pairs printed 175 rows "inconclusive 1.00" that judged nothing,
        2026-12-07), else the outcome's name."""
        if self.outcome == Outcome.UNCHANGED and self.reason == NEW_SERIES:
            return "new"
        if self.outcome == Outcome.INCONCLUSIVE and self.reason == WITHHELD_OTHER_JOB:
            return "withheld"
        return self.outcome.value


@dataclass(frozen=True)
class Acknowledgement:
    """A maintainer's note that a regression is expected (or fixed elsewhere)."""

    benchmark_key: str
    commit_sha: str
    who: str
    why: str
    when: datetime


class AlertKind(StrEnum):
    """What a history job alerts on."""

    REGRESSION = "regression"  # a change point of the history detector that made a series worse
    GATE = "gate"  # a failed correctness gate at one commit
    CRASH = "crash"  # a benchmark that failed to run at a commit, where it ran at the commit before


class AlertState(StrEnum):
    """Where an alert is: found and kept until a job exits 1 with it (reported), or closed by `ci ack`."""

    DETECTED = "detected"
    REPORTED = "reported"
    ACKNOWLEDGED = "acknowledged"


@dataclass(frozen=True)
class Alert:
    """A regression change point or a failed correctness gate of a history, kept by the store from
    the moment it is found until a history job has reported it (exit 1) or a maintainer has
    acknowledged it, so that a job that stops after ingesting loses none (`ci.runner.alerts`).

    One per (kind, series, machine, commit): a step the detector moves to another commit as more
    commits are measured is another alert.
    """

    kind: AlertKind
    benchmark: Benchmark
    machine: str  # the machine key whose series it is (`Machine.name`)
    commit_sha: str  # the first commit after the step (a regression), the commit judged (a gate)
    state: AlertState = AlertState.DETECTED
    previous_sha: str = ""  # a regression: the last commit before the step ("" for a gate)
    ratio: float = math.nan  # a regression: after / before; a gate: worst value / limit
    p_value: float = math.nan
    reason: str = ""  # what was found, in words
    detected_at: datetime | None = None  # set by the store
    reported_at: datetime | None = None
    acknowledged_at: datetime | None = None

    @property
    def key(self) -> tuple[str, str, str, str]:
        """(kind, series key, machine, commit): what makes two alerts the same one."""
        return (str(self.kind), self.benchmark.key, self.machine, self.commit_sha)
