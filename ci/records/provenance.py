"""Where and what was measured: the machine of a series (`Machine`), the commit (`Commit`), the job
marker of a run (`JOB_KEY`) and the project whose asv.conf.json the service reads (`Project`).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from functools import cached_property

import regex

from ci.records.series import Benchmark, Direction, Kind

# The key of a run's environment that names the job which measured it: one asv invocation of the
# runner, unique to it (`ci.runner.config.call_marker`). The runner records it in the commit's GPU
# sidecar beside the sha256 of each result file that invocation wrote, and ingest sets it only on a
# run whose file still has that digest (`ci.ingest.asv_files.read_gpu_sidecar`; `ci.verdicts.jobs`).
# Not "job", the key of the markers written before they were bound to their files: a per-commit
# marker that any later `asv run` of the commit inherited, so a store's "job" values prove nothing.
JOB_KEY = "asv_call"


# The host key that marks the jobs of a host of another speed that the result files do not record
# (`ci.ingest.speed`), and the `extra` field with how far they read off the machine's other jobs.
SPEED_KEY = "speed"
SHIFT_KEY = "speed_shift"


@dataclass(frozen=True)
class Machine:
    """Where a series is measured: one asv machine name, one asv environment, one host. asv keys a
    result by machine and environment (`conda-py3.11-...`, `virtualenv-py3.12`), and one machine name
    may be given to several hosts: results of two environments or two hosts are never one series.

    `name` is the store's key of it: asv's machine name for the first environment and host a store
    saw under that name, "<machine> [<environment>]" for another environment and
    "<machine> [<environment>, host <k>]" for another host (`ci.store.hosts`); `label` is what a
    reader is shown. The GPU fields come from the GPU sidecar (asv's machine file has none).
    A record built by hand with only a name is its own asv machine, environment unknown.
    """

    name: str
    gpu: str = ""
    driver: str = ""
    cuda: str = ""
    torch: str = ""
    triton: str = ""
    cpu: str = ""
    extra: tuple[tuple[str, str], ...] = ()
    asv_name: str = ""  # asv's machine name ("": the same as `name`)
    env_name: str = ""  # asv's environment name ("": unknown)
    host: tuple[tuple[str, str], ...] = ()  # `ci.store.hosts.host_fingerprint` of the host

    @property
    def machine_name(self) -> str:
        """asv's machine name."""
        return self.asv_name or self.name

    @property
    def speed(self) -> str:
        """"slower" or "faster" for the jobs of a host the result files do not record, kept apart by their
        speed (`ci.ingest.speed`); "" for a machine as asv recorded it."""
        return dict(self.host).get(SPEED_KEY, "")

    @property
    def speed_shift(self) -> str:
        """The median shift those jobs read off the machine's others, e.g. "+14.8%" ("" for others)."""
        return dict(self.extra).get(SHIFT_KEY, "")


def machine_labels(machines: Sequence[Machine]) -> dict[str, str]:
    """What a reader is shown for each machine key: asv's machine name where that name has one
    environment and one host in `machines`, else the name with the environment (and, for a second
    host under one name, the key's host number).

    Args:
        machines: the store's machines (`StoreReader.machines`).

    Returns:
        machine key -> label.
    """
    by_name: dict[str, list[Machine]] = {}
    for m in machines:
        by_name.setdefault(m.machine_name, []).append(m)
    out = {}
    for name, group in by_name.items():
        for m in group:
            if len(group) == 1 or m.name != name or not m.env_name:
                out[m.name] = name if len(group) == 1 else m.name  # a second one's key names it already
            else:  # the first environment and host seen under the name, among others
                out[m.name] = f"{name} [{m.env_name}]"
    # An asv machine literally named like another's environment ("m1 [envB]" beside m1's envB) got that
    # one's label too (2026-12-07): a label two machines share is each one's key, which is unique.
    shared = Counter(out.values())
    return {key: key if shared[label] > 1 else label for key, label in out.items()}


@dataclass(frozen=True)
class Commit:
    """A commit as the store knows it. `position` is its place in git's history, read by ingest from a
    checkout (`ci.ingest.git`: its generation, which grows along every line of history); None where
    no git metadata was read. History order is by position, by `time` only among commits without one."""

    sha: str
    parents: tuple[str, ...] = ()
    branch: str = ""
    time: datetime | None = None
    subject: str = ""
    position: int | None = None


# How long one `regressions_directions` pattern may take on one series name (`Project.direction_for`;
# as `regressions_thresholds` patterns, `ci.verdicts.settings.MATCH_TIMEOUT_S`):
# a pattern that backtracks catastrophically is named in an error instead of hanging every command.
DIRECTION_MATCH_TIMEOUT_S = 0.25


@dataclass(frozen=True)
class Project:
    """What the project's asv.conf.json says that the service uses: its name, its URLs, the
    thresholds of its regressions and which way is better for series that declare no direction. Kept
    in the store's settings by ingest (`ci.project`), so the commands that decide or write (compare,
    comment, the runner, the dashboard) read one set.

    Attributes:
        name: the project's name (asv's `project`); "" unknown.
        url: its home page (`project_url`); "" none.
        commit_url: prefix of a commit's web page, the sha appended (`show_commit_url`); "" none.
        thresholds: `regressions_thresholds` as (regex, relative change) pairs in the file's order.
        directions: `regressions_directions` as (regex, "lower" / "higher") pairs in the file's order
            (an object of regex -> direction, or a list of [regex, direction] pairs):
            which way is better for a series whose benchmark declares none (asv's `track_` benchmarks
            in a unit the service does not know; `direction_for`). The service's own key: asv reads
            every benchmark as lower-is-better and ignores it.
        source: the file they were read from ("" none: the built-in defaults).
    """

    name: str = ""
    url: str = ""
    commit_url: str = ""
    thresholds: tuple[tuple[str, float], ...] = ()
    source: str = ""
    directions: tuple[tuple[str, str], ...] = ()

    @cached_property
    def _compiled(self) -> list[regex.Pattern[str]]:
        # Compiled once per project: `regex.match` compiled each of 600 patterns again on every series
        # once its cache of 500 was full (71 s for 2,000 series, 2026-12-07).
        return [regex.compile(pattern) for pattern, _ in self.directions]

    def direction_for(self, key: str) -> Direction | None:
        """Which way is better for series `key` (`ci.records.Benchmark.key`: name and parameters) by
        `regressions_directions`: the first entry whose regex matches the key's start, as asv matches
        `regressions_thresholds`; None where none matches.

        Raises:
            ValueError: a pattern ran past `DIRECTION_MATCH_TIMEOUT_S` on the key (named).
        """
        for (pattern, direction), compiled in zip(self.directions, self._compiled, strict=True):
            try:
                hit = compiled.match(key, timeout=DIRECTION_MATCH_TIMEOUT_S)
            except TimeoutError:
                raise ValueError(f"regressions_directions: the pattern {pattern!r} ran past "
                                 f"{DIRECTION_MATCH_TIMEOUT_S:g} s on one series name ({key[:80]!r}): catastrophic "
                                 "backtracking; simplify it") from None
            if hit is not None:
                return Direction(direction)
        return None

    def resolve(self, bench: Benchmark) -> Benchmark:
        """`bench` as the service reads it: where it declares no direction (and is no correctness gate),
        the one `regressions_directions` gives it (`direction_for`), else `bench` itself. A store keeps
        what the files said and reads every series through this, so a project that declares a direction
        later, or changes it, is read so at once, history included.

        Raises:
            ValueError: a pattern ran past `DIRECTION_MATCH_TIMEOUT_S` on its key (named).
        """
        if not self.directions or bench.direction != Direction.UNKNOWN or bench.kind == Kind.CORRECTNESS:
            return bench
        said = self.direction_for(bench.key)
        return bench if said is None else replace(bench, direction=said)

    @property
    def title(self) -> str:
        """What the comment's heading and the dashboard's pages call the project's benchmarks."""
        return f"{self.name} benchmarks" if self.name else "Benchmarks"

    @classmethod
    def from_asv_conf(cls, conf: object, source: str = "") -> Project:
        """The project of an asv.conf.json's parsed content (its other keys are ignored).

        Args:
            conf: the file's top-level object, as asv's loader returns it.
            source: where it came from, named in errors and kept on the record.

        Returns:
            A Project; a URL that is not http(s) (asv's default "#", a relative path) reads as none.

        Raises:
            ValueError: not an object, a name or URL that is not a string, `regressions_thresholds`
                that is not an object of regex -> non-negative finite number, or `regressions_directions`
                that is not an object of regex -> "lower" / "higher".
        """
        where = f"{source}: " if source else ""
        if not isinstance(conf, dict):
            raise ValueError(f"{where}asv.conf.json must hold an object, got {type(conf).__name__}")
        text = {}
        for key in ("project", "project_url", "show_commit_url"):
            value = conf.get(key, "")
            if value is None:
                value = ""
            if not isinstance(value, str):
                raise ValueError(f"{where}{key} must be a string, got {value!r}")
            text[key] = value.strip()
        raw = conf.get("regressions_thresholds") or {}
        if not isinstance(raw, dict):
            raise ValueError(f"{where}regressions_thresholds must be an object of regex -> number, got {raw!r}")
        pairs = []
        for pattern, value in raw.items():
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
                raise ValueError(f"{where}regressions_thresholds: {pattern!r} must map to a non-negative number, "
                                 f"got {value!r}")
            pairs.append((str(pattern), float(value)))
        directions = _directions(conf.get("regressions_directions"), where)

        def link(url: str) -> str:
            return url if url.startswith(("http://", "https://")) else ""

        return cls(name=text["project"], url=link(text["project_url"]), commit_url=link(text["show_commit_url"]),
                   thresholds=tuple(pairs), source=source, directions=directions)  # fmt: skip

    def as_asv_conf(self) -> dict[str, object]:
        """The inverse of `from_asv_conf`: these fields under asv.conf.json's names (and `source`)."""
        conf: dict[str, object] = {"project": self.name, "project_url": self.url, "show_commit_url": self.commit_url,
                                   "regressions_thresholds": dict(self.thresholds), "source": self.source}
        if self.directions:  # a store written before the key existed reads back the same
            # As pairs: the first match decides, and the store's JSON sorts an object's keys.
            conf["regressions_directions"] = [list(pair) for pair in self.directions]
        return conf


def _directions(raw: object, where: str) -> tuple[tuple[str, str], ...]:
    """`regressions_directions` checked: (regex, "lower" / "higher") pairs in the file's order."""
    if raw is None:
        return ()
    items = raw.items() if isinstance(raw, dict) else raw if isinstance(raw, list) else None
    if items is None or not all(isinstance(i, tuple) or (isinstance(i, list) and len(i) == 2) for i in items):
        raise ValueError(f"{where}regressions_directions must be an object of regex -> \"lower\" or \"higher\" "
                         f"(or a list of [regex, direction] pairs), got {type(raw).__name__}")
    pairs = []
    for pattern, value in items:
        if not isinstance(pattern, str) or not pattern:
            raise ValueError(f"{where}regressions_directions: a pattern must be a non-empty regex, got {pattern!r:.80}")
        said = value.strip().lower() if isinstance(value, str) else None
        if said not in (Direction.LOWER, Direction.HIGHER):
            raise ValueError(f"{where}regressions_directions: {pattern[:80]!r} must map to \"lower\" or "
                             f"\"higher\" (which way is better), got {str(value)[:80]!r}")
        try:
            regex.compile(pattern)
        except regex.error as exc:
            raise ValueError(f"{where}regressions_directions: bad regex {pattern[:80]!r}: {exc}") from None
        pairs.append((pattern, str(said)))
    return tuple(pairs)
