"""Alert groups: the steps of many series at one commit of one machine are one alert, "N series changed
at <commit>", with its top movers, and a group that coincides with a change of the environment the
runs record is labelled as such instead of being blamed on the commit.

On real histories most flagged steps come in crowds: on a GitHub-hosted runner's history
(uxarray's, 2026-12-05) 80 of 92 regressions sat at 16 commits where 3 or more series stepped
together, on a Jenkins container's (MetPy's) 36 of 39 at 4 commits; a runner image, a kernel, a
dependency resolved anew, asv's calibration of `number` move many series at once. Reported one by
one, each reads as a regression of that commit's author.

A crowd also says how many series its machine measured at that commit (`AlertGroup.measured`, where
the caller knows it): half or more of them moving one way with nothing recorded as changed is what a
runner change the files do not record does, and the headline says so rather than leave the commit's
author the only suspect.

Pure functions over `ci.verdicts.history.ChangePoint` records and the runs' recorded environments.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ci.records import Outcome, is_worse
from ci.text import redact_environment, redact_text
from ci.verdicts.history import ChangePoint

# Environment keys that change between any two runs of one environment (GPU clocks and temperature
# read at the run's start, when it was read, which asv call measured it): never an environment change.
VOLATILE_KEYS = frozenset({"sm_clock_mhz", "mem_clock_mhz", "temperature_c", "power_w", "captured_at", "job",
                           "asv_call"})
MIN_GROUP = 3  # series stepping at one commit that make a crowd (fewer: each its own alert)


@dataclass(frozen=True)
class AlertGroup:
    """The change points of one machine at one commit (or its neighbour in that machine's history).

    Attributes:
        machine: the machine.
        commit_sha: the commit most of them step at (the earliest of a tie).
        members: the change points, biggest step first (its top movers).
        environment: what the runs recorded as changed at that commit against the commit before it
            ("python: 3.11 → 3.12", "os: Linux 6.8.0-49 → Linux 6.8.0-51", ...); empty when
            nothing recorded changed.
        measured: how many series of its machine were measured at its commit (0: not known).
    """

    machine: str
    commit_sha: str
    members: tuple[ChangePoint, ...]
    environment: tuple[str, ...] = ()
    measured: int = 0

    @property
    def whole_machine(self) -> bool:
        """A crowd of at least half the series measured at its commit, moving one way, with nothing
        recorded as changed: what a runner change the files do not record (a new runner image, other
        hardware behind one label) does, and a change that slows or speeds every benchmark."""
        return (self.crowd and not self.environment and self.measured > 0
                and max(self._sides()) >= self.measured / 2)

    def _sides(self) -> tuple[int, int]:
        """(slower, faster) members."""
        return len(self.regressions), sum(c.outcome == Outcome.IMPROVED for c in self.members)

    @property
    def crowd(self) -> bool:
        """Enough series stepped together to be one alert."""
        return len(self.members) >= MIN_GROUP

    @property
    def environment_change(self) -> bool:
        """A crowd at a commit whose recorded environment changed: the environment's doing, not the
        commit author's (its members are not open regressions of the commit)."""
        return self.crowd and bool(self.environment)

    @property
    def regressions(self) -> tuple[ChangePoint, ...]:
        return tuple(c for c in self.members if c.outcome == Outcome.REGRESSED)

    def headline(self) -> str:
        """One line: "11 series changed at 510e2990 (8 slower, 3 faster): environment changed: ..."."""
        slower, faster = self._sides()
        parts = [f"{n} {word}" for n, word in ((slower, "slower"), (faster, "faster")) if n]
        other = len(self.members) - slower - faster
        if other:
            parts.append(f"{other} of unknown direction")
        line = f"{len(self.members)} series changed at {self.commit_sha[:10]} ({', '.join(parts)})"
        if self.measured:
            line += f", of the {self.measured} measured there"
        if self.whole_machine:
            # Change points: a level that held. A code change that moves every benchmark is named first
            # (PlasmaPy's x2.2 step, which held, read "as a runner change ... does", 2026-12-07).
            line += ("; most of the machine moved one way and stayed there: a change that moves every benchmark, "
                     "or a runner change the files do not record")
        if self.environment:
            line += ": the environment changed: " + "; ".join(self.environment)
        return line


def environment_changes(before: Mapping[str, str], after: Mapping[str, str]) -> tuple[str, ...]:
    """What two runs' recorded environments differ in, volatile keys (`VOLATILE_KEYS`) left out.

    Args:
        before: the earlier run's environment (`Result.environment` as a dict).
        after: the later run's.

    Returns:
        "key: old → new" per changed key, sorted ("(none)" for a key one side lacks), at most
        `SHOWN_CHANGES` of them, each cut to `CHANGE_CHARS` characters, then "and N more changes".
        The runs' environments come from their result files, which a pull request's job writes:
        700 variables of 100 characters made a comment headline of 87,283 characters, over
        GitHub's limit, and no comment was posted (2026-12-07).
    """
    keys = sorted((before.keys() | after.keys()) - VOLATILE_KEYS)
    changed = [k for k in keys if before.get(k) != after.get(k)]

    def side(run: Mapping[str, str], k: str) -> str:  # a store of before 2026-12-07 may hold a credential
        return redact_environment(k, run[k]) if k in run else "(none)"

    out = [_cut(f"{redact_text(k)}: {side(before, k)} → {side(after, k)}") for k in changed[:SHOWN_CHANGES]]
    if len(changed) > SHOWN_CHANGES:
        out.append(f"and {len(changed) - SHOWN_CHANGES} more changes")
    return tuple(out)


SHOWN_CHANGES = 8
CHANGE_CHARS = 160


def _cut(text: str) -> str:
    text = redact_text(text)  # before the cut, which could leave a credential's start where its shape is gone
    return text if len(text) <= CHANGE_CHARS else text[:CHANGE_CHARS - 1] + "…"


def group_changes(
    changes: Sequence[ChangePoint],
    order: Mapping[str, Sequence[str]],
    environments: Mapping[tuple[str, str], Mapping[str, str]] | None = None,
    measured: Mapping[tuple[str, str], int] | None = None,
) -> list[AlertGroup]:
    """The change points as alert groups: per machine, those at one commit or at neighbouring
    commits of that machine's history (a step the detector places one commit off in some series).

    Args:
        changes: change points of any series (`detect_all`), any outcomes.
        order: machine -> its commits in history order (those it measured).
        environments: (machine, sha) -> the environment its run at that commit recorded (one run's;
            None: nothing known, no group is labelled).
        measured: (machine, sha) -> how many series the machine measured there (`AlertGroup.measured`;
            None: not known).

    Returns:
        Groups, newest commit first within a machine; a group of one is a lone change point.
    """
    by_machine: dict[str, list[tuple[int, ChangePoint]]] = {}
    positions: dict[str, dict[str, int]] = {}
    for cp in changes:
        position = positions.get(cp.machine)
        if position is None:
            position = positions[cp.machine] = {sha: i for i, sha in enumerate(order.get(cp.machine, ()))}
        at = position.get(cp.commit_sha)
        if at is None:
            at = cp.index  # not in the given order: its place in its own series
        by_machine.setdefault(cp.machine, []).append((at, cp))
    out: list[AlertGroup] = []
    for machine, items in sorted(by_machine.items()):
        items.sort(key=lambda t: (t[0], t[1].benchmark.key))
        shas = list(order.get(machine, ()))
        buckets: dict[int, list[tuple[int, ChangePoint]]] = {}
        for item in items:
            buckets.setdefault(item[0], []).append(item)
        clusters: list[list[tuple[int, ChangePoint]]] = []
        merged: set[int] = set()
        for at in sorted(buckets):  # a cluster spans at most two neighbouring commits (no chains)
            if at in merged:
                continue
            cluster = buckets[at]
            # The next commit's steps join only where they move the way this commit's do: the same
            # change placed one commit off in some series. Steps the other way are another change: two
            # interpolation series x3 slower at one commit of geocat-comp's history were shown as
            # members of the next commit's crowd of 8 faster series, and that commit blamed (2026-12-07).
            ahead = buckets.get(at + 1)
            if ahead is not None and _way(cluster) != 0 and _way(cluster) == _way(ahead):
                cluster = cluster + ahead
                merged.add(at + 1)
            clusters.append(cluster)
        for cluster in reversed(clusters):
            counts: dict[str, int] = {}
            for _, cp in cluster:
                counts[cp.commit_sha] = counts.get(cp.commit_sha, 0) + 1
            sha = max(counts, key=lambda s: (counts[s], -next(a for a, c in cluster if c.commit_sha == s)))
            members = tuple(sorted((cp for _, cp in cluster), key=_size, reverse=True))
            env: tuple[str, ...] = ()
            if environments is not None and sha in shas and shas.index(sha) > 0:
                prev = shas[shas.index(sha) - 1]
                now, then = environments.get((machine, sha)), environments.get((machine, prev))
                if now is not None and then is not None:
                    env = environment_changes(then, now)
            out.append(AlertGroup(machine, sha, members, env, measured.get((machine, sha), 0) if measured else 0))
    return out


def _way(items: Sequence[tuple[int, ChangePoint]]) -> int:
    """Which way most of these steps move: 1 worse, -1 better, 0 neither more. A step judged either way
    counts by its outcome; another (inconclusive) by its direction and ratio, and one of a series of
    unknown direction by whether its value rose (+1) or fell (-1)."""
    total = 0
    for _, cp in items:
        if cp.outcome == Outcome.REGRESSED:
            total += 1
        elif cp.outcome == Outcome.IMPROVED:
            total -= 1
        elif cp.ratio > 0 and math.isfinite(cp.ratio) and cp.ratio != 1:
            worse = is_worse(cp.benchmark.direction, cp.ratio)
            total += (1 if worse else -1) if worse is not None else (1 if cp.ratio > 1 else -1)
    return (total > 0) - (total < 0)


def _size(cp: ChangePoint) -> float:
    return abs(math.log(cp.ratio)) if cp.ratio > 0 and math.isfinite(cp.ratio) else math.inf
