"""The knobs of the A/B decision (`VerdictSettings`) and asv's default threshold (`ASV_DEFAULT_THRESHOLD`).

A project's asv.conf.json `regressions_thresholds` become the floors (`VerdictSettings.from_thresholds`,
`VerdictSettings.for_project`), as `asv publish` reads them. Used by `ci.verdicts.ab.compare` and
`ci.verdicts.decide`; no store, no torch.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

import regex

from ci.records import Project
from ci.verdicts.stats import CORRECTIONS

# How long one `regressions_thresholds` pattern may take on one series name. A pattern that backtracks
# catastrophically ("(.*.*)*X") held compare and the dashboard at 100% CPU with no output until killed
# (2026-12-06); a name of a few hundred characters takes microseconds under any sane pattern.
MATCH_TIMEOUT_S = 0.25


def _matches(pattern: str, key: str) -> bool:
    """`re.match(pattern, key)` (as asv matches `regressions_thresholds`), refused with a ValueError
    naming the pattern where it runs past `MATCH_TIMEOUT_S` (the `regex` module's timeout; the
    standard `re` has none)."""
    try:
        return regex.match(pattern, key, timeout=MATCH_TIMEOUT_S) is not None
    except TimeoutError:
        raise ValueError(f"regressions_thresholds: the pattern {pattern!r} ran past {MATCH_TIMEOUT_S:g} s on one "
                         f"series name ({key[:80]!r}): catastrophic backtracking; simplify it") from None

# asv's regression threshold for a series that `regressions_thresholds` does not match (asv's
# `_GraphDataFilter._get_threshold`; its documentation: "the default threshold is 0.05").
ASV_DEFAULT_THRESHOLD = 0.05


@dataclass(frozen=True)
class VerdictSettings:
    """Knobs of the A/B decision; defaults calibrated with `python -m tools.bench_verdicts` (numbers in
    docs/performance.md "Verdict quality", "Tried and refuted": floor 2 % gave 32 % of 200-series PRs a
    false alarm at n=10).

    Attributes:
        alpha: significance level applied to the corrected p-values.
        correction: multiple-comparison correction over the series of one `compare` call:
            "bh" (Benjamini-Hochberg, false discovery rate), "holm", "bonferroni" or "none".
        floor: smallest relative change ever reported (0.02 = 2 %).
        noise_k: the threshold is `noise_k` robust sigmas of the series' relative noise.
        max_threshold: cap on the noise-adapted part of the threshold, so a very noisy series
            still reports a large change (a floor from `overrides` is never capped: it is a
            deliberate per-series choice).
        confidence: confidence level of the ratio's bootstrap interval. 0.90 makes "interval inside
            the band" a two-one-sided-tests equivalence check at 5 %; a 99 % interval of a median
            from 10 samples spans nearly the whole sample and left 18 % of A/A series inconclusive
            (measured 2026-11-29, synthetic 1 % lognormal noise, n=10).
        n_resamples: bootstrap resamples.
        min_samples: fewer finite samples than this on either side: no test, the verdict is
            UNCHANGED if the ratio is within the floor, else INCONCLUSIVE.
        seed: seed of the bootstrap generator (mixed with the series key), for reproducibility.
        overrides: (regex, floor) pairs; the largest floor whose regex matches the start of the
            series key (`re.match`, as asv matches `regressions_thresholds` against
            `name(params)`) replaces `floor` for that series. None built in: a project sets its
            own in its asv.conf.json (`from_thresholds`, through `ci.project.project_settings`).
        drift_k: base and head measured in different jobs and a series' between-job drift given as
            a plain sigma (`between_jobs` of `compare`): the threshold is at least `drift_k` of it. A
            noise model (`ci.verdicts.noise.SeriesNoise`) brings its own allowance.
        allow_cross_machine: compare results from different machines (meaningless for timing:
            off by default, so a mixed-up CI job fails loudly).
    """

    alpha: float = 0.05
    correction: str = "bh"
    floor: float = 0.025
    noise_k: float = 1.5
    max_threshold: float = 0.25
    confidence: float = 0.90
    n_resamples: int = 1000
    min_samples: int = 5
    seed: int = 0
    overrides: tuple[tuple[str, float], ...] = ()
    allow_cross_machine: bool = False
    drift_k: float = 3.0

    def __post_init__(self) -> None:
        if not 0.0 < self.alpha < 1.0:
            raise ValueError(f"alpha must be in (0, 1), got {self.alpha!r}")
        if self.correction not in CORRECTIONS:
            raise ValueError(f"correction must be one of {CORRECTIONS}, got {self.correction!r}")
        if not 0.0 <= self.floor < 1.0:
            raise ValueError(f"floor must be in [0, 1), got {self.floor!r}")
        if self.noise_k < 0:
            raise ValueError(f"noise_k must be >= 0, got {self.noise_k!r}")
        if not self.floor <= self.max_threshold:
            raise ValueError(f"max_threshold ({self.max_threshold!r}) must be >= floor ({self.floor!r})")
        if not 0.5 <= self.confidence < 1.0:
            raise ValueError(f"confidence must be in [0.5, 1), got {self.confidence!r}")
        if self.n_resamples < 100:
            raise ValueError(f"n_resamples must be >= 100, got {self.n_resamples!r}")
        if self.min_samples < 2:
            raise ValueError(f"min_samples must be >= 2, got {self.min_samples!r}")
        if self.drift_k < 0:
            raise ValueError(f"drift_k must be >= 0, got {self.drift_k!r}")
        for item in self.overrides:
            if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str)):
                raise TypeError(f"overrides must be (regex, floor) pairs, got {item!r}")
            try:
                re.compile(item[0])
                regex.compile(item[0])
            except (re.error, regex.error) as exc:
                raise ValueError(f"overrides: bad regex {item[0]!r}: {exc}") from None
            # A per-series floor may exceed 100 %: 1.0 calls only a halving or a doubling.
            if isinstance(item[1], bool) or not isinstance(item[1], int | float) or not 0.0 <= item[1] < 100.0:
                raise ValueError(f"overrides: floor for {item[0]!r} must be a number in [0, 100), got {item[1]!r}")

    def floor_for(self, key: str) -> float:
        """The threshold floor for series `key` (largest override whose regex matches the key's
        start, else `floor`)."""
        override = self.override_for(key)
        return override[1] if override is not None else self.floor

    def override_for(self, key: str) -> tuple[str, float] | None:
        """The override that sets series `key`'s floor: the (regex, floor) pair of the largest floor
        whose regex matches the key's start (the first of equal ones); None where `floor` applies."""
        matched = [(pattern, f) for pattern, f in self.overrides if _matches(pattern, key)]
        return max(matched, key=lambda pair: pair[1]) if matched else None

    @classmethod
    def for_project(cls, project: Project) -> VerdictSettings:
        """The settings of a project (`ci.records.Project`): its `regressions_thresholds` as floors
        (`from_thresholds`). A series that no entry of a project's asv.conf.json matches (every series,
        where it sets none) takes asv's own default, 5% (`ASV_DEFAULT_THRESHOLD`), as `asv publish`
        reads the same file; the built-in `floor` applies only where no asv.conf.json is known
        (`Project()`, no `source`)."""
        thresholds = dict(project.thresholds)
        if project.source and ".*" not in thresholds:
            return cls.from_thresholds(thresholds, floor=ASV_DEFAULT_THRESHOLD)
        return cls.from_thresholds(thresholds)

    @classmethod
    def from_thresholds(cls, thresholds: Mapping[str, float], **kwargs: object) -> VerdictSettings:
        """Settings whose floors are asv.conf.json's `regressions_thresholds` (the one threshold table
        that `asv publish` and the service both read): `".*"` is the floor, every other entry an override.

        A series' floor is the one `asv publish` takes: the largest of the entries whose regex matches
        it, `".*"` included (so no entry lowers a series below `".*"`); where none matches, the
        built-in `floor` (asv's own default is 5 %). A `".*"` past the noise cap raises the cap to it,
        and one of 100 % or more stays an override (`floor` is a fraction below 1).

        Args:
            thresholds: regex -> relative change (0.025 = 2.5 %).
            **kwargs: other VerdictSettings fields.

        Returns:
            VerdictSettings; an empty mapping keeps the default floors.
        """
        if not isinstance(thresholds, Mapping):
            raise TypeError(f"regressions_thresholds must be an object of regex -> number, got {thresholds!r}")
        if not thresholds:
            return cls(**kwargs)  # type: ignore[arg-type]
        values = {}
        for pattern, value in thresholds.items():
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"regressions_thresholds: {pattern!r} must map to a number, got {value!r}")
            values[str(pattern)] = float(value)
        every = values.pop(".*", None)
        if every is None:
            return cls(overrides=tuple(values.items()), **kwargs)  # type: ignore[arg-type]
        overrides = tuple((p, max(v, every)) for p, v in values.items())
        if not 0.0 <= every < 1.0:
            return cls(overrides=((".*", every), *overrides), **kwargs)  # type: ignore[arg-type]
        kwargs.setdefault("max_threshold", max(cls.max_threshold, every))
        return cls(floor=every, overrides=overrides, **kwargs)  # type: ignore[arg-type]

    def as_thresholds(self) -> dict[str, float]:
        """The inverse of `from_thresholds`: the floors as asv.conf.json writes them."""
        return {".*": self.floor, **dict(self.overrides)}
