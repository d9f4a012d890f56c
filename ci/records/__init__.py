"""Typed records shared by the whole service: ingest writes them, the store mirrors them in
SQLAlchemy models, and the verdict code, the PR comment and the dashboard read them.
`ParsedRun` (one asv result file, as `ci.ingest` parses it) is what the store's write side takes.

Plain frozen dataclasses, no torch, no SQLAlchemy: everything downstream of the store can be
tested on hand-built records.

- `series`: a benchmark (`Benchmark`, its `Direction` and `Kind`), one measurement of it
  (`Result`), and which way is better by its declaration (`declared_semantics`, `is_worse`);
- `provenance`: where and what was measured: `Machine`, `Commit`, the job marker `JOB_KEY`, and
  the `Project` of asv.conf.json;
- `decisions`: `Outcome` and the verdicts' reasons, `Verdict`, `Acknowledgement`, `Alert`;
- `parsed`: ingest's records (`ParsedRun`, `ParsedPoint`, `PointBlock`) and `RunReplacement`;
- `reader`: what the store's readers rely on (`ResultSource`, `StoreReader`, `HistoryStore` and its columns;
  `ComparisonSource` and its `PointFailure`, `ProjectSource`, `ProjectKeeper`).
"""

from ci.records.decisions import (
    FAILED_BOTH,
    FAILED_ON_HEAD,
    MISSING_MACHINE,
    MISSING_ON_HEAD,
    NEW_SERIES,
    NO_BASE_SAMPLES,
    NOT_ON_BASE,
    UNCONFIRMED_SLOWDOWN,
    UNKNOWN_DIRECTION,
    WITHHELD_OTHER_JOB,
    Acknowledgement,
    Alert,
    AlertKind,
    AlertState,
    Outcome,
    Verdict,
)
from ci.records.parsed import ParsedPoint, ParsedRun, PointBlock, RunReplacement
from ci.records.provenance import JOB_KEY, SHIFT_KEY, SPEED_KEY, Commit, Machine, Project, machine_labels
from ci.records.reader import (
    ComparisonSource,
    HistoryStore,
    MachineHistory,
    PointFailure,
    ProjectKeeper,
    ProjectSource,
    ResultSource,
    RunWindowSource,
    SeriesColumns,
    StoreReader,
    run_chain,
)
from ci.records.series import (
    RECORDED_ROUNDING,
    STAT_NAMES,
    UNIT_SEMANTICS,
    Benchmark,
    Direction,
    Kind,
    Result,
    current_version,
    current_versions,
    declared_semantics,
    is_worse,
    is_worse_step,
    recorded_spread,
)

__all__ = [
    "FAILED_BOTH",
    "FAILED_ON_HEAD",
    "JOB_KEY",
    "MISSING_MACHINE",
    "MISSING_ON_HEAD",
    "NEW_SERIES",
    "NOT_ON_BASE",
    "NO_BASE_SAMPLES",
    "RECORDED_ROUNDING",
    "STAT_NAMES",
    "recorded_spread",
    "UNCONFIRMED_SLOWDOWN",
    "UNIT_SEMANTICS",
    "UNKNOWN_DIRECTION",
    "WITHHELD_OTHER_JOB",
    "Acknowledgement",
    "Alert",
    "AlertKind",
    "AlertState",
    "Benchmark",
    "Commit",
    "ComparisonSource",
    "Direction",
    "HistoryStore",
    "Kind",
    "Machine",
    "MachineHistory",
    "Outcome",
    "ParsedPoint",
    "ParsedRun",
    "PointBlock",
    "PointFailure",
    "Project",
    "ProjectKeeper",
    "ProjectSource",
    "Result",
    "RunReplacement",
    "RunWindowSource",
    "SeriesColumns",
    "ResultSource",
    "StoreReader",
    "Verdict",
    "current_version",
    "current_versions",
    "declared_semantics",
    "is_worse",
    "is_worse_step",
    "machine_labels",
    "run_chain",
    "SHIFT_KEY",
    "SPEED_KEY",
]
