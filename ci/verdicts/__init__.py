"""Verdicts: pure functions over `ci.records` that decide whether a change is a regression.

- `ab`: A/B verdicts of a pull request's head against its base (`compare`), each series decided by
  `decide` on `stats`, with `settings` (`VerdictSettings`, asv's default threshold);
- `history`: change points on a branch's history (`detect_all`, `newly_detected`), and `segments`,
  its incremental core (per-series states a new commit extends);
- `suspects`: the newest commits' steps against their recent history, before the detector can see them;
- `gates`: correctness gates, which fail a PR whatever the timing says;
- `exact`: exact series (launches, kernel resources, kept tokens, FLOPs): changed or unchanged, their
  gates, and the commits where they moved, without statistics;
- `inputs`: one commit's results as the verdicts see them, crashes included; one A/B comparison
  read from a store (`compare_commits`), the one path every entry point decides through;
- `jobs`: which job measured a result, and a series' drift between jobs;
- `noise`: each series' job-to-job noise model learned from its machine's history, the allowance of
  the cross-job rule;
- `summary`: counts per outcome and the exit code they give.

No store, no torch.
"""

from ci.verdicts.ab import compare, spread_for, spreads
from ci.verdicts.exact import exact_steps, exact_verdicts, is_exact, series_label
from ci.verdicts.gates import (
    GATES,
    MAX_ABS_DIFF_LIMIT,
    TOP1_AGREEMENT_LIMIT,
    Gate,
    correctness_gates,
    gate_of,
    gate_value,
    passes_gate,
)
from ci.verdicts.groups import AlertGroup, environment_changes, group_changes
from ci.verdicts.history import (
    ChangePoint,
    HistorySettings,
    change_points,
    detect_all,
    newly_detected,
    state_change_points,
)
from ci.verdicts.inputs import (
    Comparison,
    compare_commits,
    machine_keys,
    measured,
    measurement_line,
    not_measured,
    pick_machines,
    results_with_crashes,
    wide_text,
    wide_thresholds,
)
from ci.verdicts.jobs import JobRelation, Jobs, between_job_drift, job_relation
from ci.verdicts.noise import NoiseSettings, SeriesNoise, series_noise
from ci.verdicts.segments import SeriesState
from ci.verdicts.settings import ASV_DEFAULT_THRESHOLD, VerdictSettings
from ci.verdicts.stats import Spread
from ci.verdicts.summary import exit_code, summarize
from ci.verdicts.suspects import (
    JobMove,
    Suspect,
    SuspectSettings,
    SuspectState,
    SuspectTrack,
    by_difference,
    commit_levels,
    expire,
    expire_quiet,
    find_suspects,
    hold_at_job_moves,
    job_moves,
    judge_levels,
    levels_to_judge,
    noise_thresholds,
    suspects_from_levels,
)

__all__ = [
    "ASV_DEFAULT_THRESHOLD",
    "AlertGroup",
    "GATES",
    "Gate",
    "MAX_ABS_DIFF_LIMIT",
    "TOP1_AGREEMENT_LIMIT",
    "ChangePoint",
    "Comparison",
    "JobMove",
    "JobRelation",
    "Jobs",
    "NoiseSettings",
    "SeriesNoise",
    "SeriesState",
    "Spread",
    "HistorySettings",
    "Suspect",
    "SuspectSettings",
    "SuspectState",
    "SuspectTrack",
    "VerdictSettings",
    "between_job_drift",
    "by_difference",
    "change_points",
    "commit_levels",
    "compare",
    "compare_commits",
    "correctness_gates",
    "detect_all",
    "exact_steps",
    "exact_verdicts",
    "exit_code",
    "expire",
    "expire_quiet",
    "environment_changes",
    "find_suspects",
    "gate_of",
    "gate_value",
    "group_changes",
    "hold_at_job_moves",
    "is_exact",
    "job_moves",
    "job_relation",
    "judge_levels",
    "levels_to_judge",
    "machine_keys",
    "measured",
    "measurement_line",
    "newly_detected",
    "noise_thresholds",
    "not_measured",
    "passes_gate",
    "pick_machines",
    "results_with_crashes",
    "series_label",
    "series_noise",
    "spread_for",
    "spreads",
    "state_change_points",
    "summarize",
    "suspects_from_levels",
    "wide_text",
    "wide_thresholds",
]
