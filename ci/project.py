"""The project's own rules: its asv.conf.json, read the way asv reads it, kept in the store at
ingest, and the one function every command that decides takes its settings from.

asv.conf.json says the project's name, its home page, the prefix of a commit's web page and the
thresholds of its regressions (`regressions_thresholds`, which `asv publish` reads too). Ingest
finds the file beside the results directory as asv lays it out (the nearest asv.conf.json above the
folder, whose `results_dir` must be that folder), or is given it (`--config`; the runner gives its
checkout's), and keeps those fields in the store (`ci.store` `save_project`). `project_settings`
then gives compare, comment, the runner, `continuous` and the dashboard the same project and the
same A/B thresholds: an explicit file when one is named, else the store's, else the built-in
defaults, which carry nothing of any one project. A malformed file is an error, never the defaults.
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ci.records import Benchmark, Direction, Kind, Project, ProjectKeeper, ProjectSource

if TYPE_CHECKING:
    from ci.verdicts import VerdictSettings

# The names asv looks for, in its order (`asv.config._get_config_path`).
CONFIG_NAMES = ("asv.conf.json", "asv.conf.jsonc")


class ConfigError(ValueError):
    """An asv.conf.json that cannot be read or says something malformed ("FILE: reason")."""


def load_asv_conf(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The content of an asv.conf.json as asv loads it (`asv.util.load_json` with JavaScript-style
    comments and trailing commas allowed, the format `version` checked).

    Args:
        path: the file.

    Returns:
        Its top-level object.

    Raises:
        ConfigError: the file is missing or unreadable, not JSON as asv reads it, of another format
            version, or not an object.
    """
    from asv import util
    from asv.config import Config

    where = str(path)
    if not Path(where).is_file():
        raise ConfigError(f"{where}: no such file")
    try:
        conf = util.load_json(where, api_version=Config.api_version, js_comments=True)
    except util.UserError as exc:  # its message names the file somewhere: once, first, here
        said = re.sub(rf"\s*(?:in (?:file )?)?'?{re.escape(where)}'?", "", str(exc)).lstrip(": ")
        raise ConfigError(f"{where}: {said}") from None
    except OSError as exc:
        raise ConfigError(f"{where}: cannot be read ({exc.strerror or exc})") from None
    except (ValueError, TypeError, KeyError) as exc:  # json5's syntax errors; a top level that is no object
        raise ConfigError(f"{where}: not valid JSON as asv reads it ({exc})") from None
    if not isinstance(conf, dict):
        raise ConfigError(f"{where}: must hold an object, got {type(conf).__name__}")
    return conf


def read_asv_conf(path: str | os.PathLike[str]) -> Project:
    """The project an asv.conf.json describes, its thresholds checked as the verdicts will take them.

    Args:
        path: the file.

    Returns:
        A Project whose `source` is `path`.

    Raises:
        ConfigError: as `load_asv_conf`, or a field the service uses is malformed (a name that is not
            text, thresholds that are not regex -> number, a regex that does not compile).
    """
    conf = load_asv_conf(path)
    try:
        project = Project.from_asv_conf(conf, source=str(path))
        verdict_settings(project)
    except (TypeError, ValueError) as exc:
        message = str(exc)
        raise ConfigError(message if message.startswith(str(path)) else f"{path}: {message}") from None
    return project


def results_dir_of(path: str | os.PathLike[str], conf: dict[str, Any]) -> Path:
    """The results directory an asv.conf.json names: `results_dir` (asv's default "results") from the
    file's folder, where asv runs (`asv.main` changes into it).

    Args:
        path: the file.
        conf: its content (`load_asv_conf`).

    Returns:
        The folder's path (not resolved).

    Raises:
        ConfigError: `results_dir` is not a non-empty string.
    """
    value = conf.get("results_dir", "results")
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{path}: results_dir must be a folder name, got {value!r}")
    return Path(path).parent / value


def find_asv_conf(results_dir: str | os.PathLike[str]) -> tuple[Path | None, str]:
    """The asv.conf.json of an asv results directory: the nearest one in the folders above it, when
    its `results_dir` is this folder.

    Args:
        results_dir: the folder being ingested.

    Returns:
        (the file, ""); (None, why) when the nearest asv.conf.json keeps its results elsewhere;
        (None, "") when there is none above the folder.

    Raises:
        ConfigError: the nearest file above cannot be read (a malformed one is never passed over), or
            asv would find two (`asv.conf.json` and `asv.conf.jsonc` side by side).
    """
    root = Path(results_dir).resolve()
    for folder in root.parents:
        found = [folder / name for name in CONFIG_NAMES if (folder / name).is_file()]
        if len(found) > 1:
            raise ConfigError(f"{folder}: both {' and '.join(CONFIG_NAMES)} are there (asv refuses to choose): "
                              "pass --config")
        if not found:
            continue
        path = found[0]
        named = results_dir_of(path, load_asv_conf(path))
        if named.resolve() == root:
            return path, ""
        return None, (f"{path} keeps its results in {named}, not in {root}: not this folder's project "
                      "(pass --config to use it)")
    return None, ""


@dataclass(frozen=True)
class ProjectSettings:
    """The rules one command decides and writes by.

    Attributes:
        project: the project's name, URLs, thresholds and the file they came from.
        verdicts: the A/B verdicts' settings: `project.thresholds` over the built-in knobs.
    """

    project: Project
    verdicts: VerdictSettings

    def floor_for(self, key: str) -> float:
        """Series `key`'s threshold: the smallest relative change the project counts, in A/B verdicts
        and in the history alike (`regressions_thresholds`, the largest entry matching the key, else
        asv's default, 5%, or the built-in floor where no asv.conf.json is known: `verdict_settings`).
        The history's change points and suspicions smaller than it are not reported
        (`ci.verdicts.detect_all(floor_for=...)`), as `asv publish` drops a jump under its threshold."""
        return self.verdicts.floor_for(key)


def verdict_settings(project: Project) -> VerdictSettings:
    """The A/B verdicts' settings of a project: its `regressions_thresholds` as floors
    (`VerdictSettings.from_thresholds`). A series that no entry of a project's asv.conf.json matches
    (every series, where it sets none) takes asv's own default, 5% (`VerdictSettings.for_project`), as
    `asv publish` reads the same file; the built-in defaults apply only where no asv.conf.json is
    known (`Project()`).

    Args:
        project: the project (`Project()`: the defaults).

    Returns:
        VerdictSettings.

    Raises:
        ValueError: a threshold the verdicts cannot take (a regex that does not compile, a number out of range).
    """
    from ci.verdicts import VerdictSettings  # the verdicts' stack (scipy) only for a command that decides

    return VerdictSettings.for_project(project)


def project_settings(store: ProjectSource | None = None, config: str | os.PathLike[str] | None = None
                     ) -> ProjectSettings:
    """The settings every command that decides (compare, comment, run, continuous) or shows
    verdicts (the dashboard) works with, from one place.

    Args:
        store: a store (`ci.records.ProjectSource`, as every `StoreReader` is) whose `project` the last
            ingest kept; None: none.
        config: an asv.conf.json that overrides the store's (the runner's checkout, `--config`).

    Returns:
        ProjectSettings: `config`'s when given, else the store's, else the built-in defaults
        (`Project()`: no name, no URL, no per-series floor).

    Raises:
        ConfigError: `config` is malformed, or the store's thresholds cannot be taken.
    """
    if config is not None:
        project = read_asv_conf(config)
    else:
        project = (store.project() if store is not None else None) or Project()
    try:
        return ProjectSettings(project, verdict_settings(project))
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{project.source or 'the stored asv.conf.json'}: {exc}") from None


def read_project(results_dir: str | os.PathLike[str], config: str | os.PathLike[str] | None = None) -> Project | None:
    """The project `record_project` would keep for `results_dir` (`config`, else the asv.conf.json found
    for the folder), read and checked without writing anything; None where there is none.

    Raises:
        ConfigError: the file given or found is malformed.
    """
    path = Path(config).resolve() if config is not None else find_asv_conf(results_dir)[0]
    return read_asv_conf(path) if path is not None else None


def record_project(store: ProjectKeeper, results_dir: str | os.PathLike[str],
                   config: str | os.PathLike[str] | None = None) -> str:
    """Keep the project's asv.conf.json in the store, as ingest does: `config` when given, else the
    one `find_asv_conf` finds for `results_dir`; the store is written only when it changes.

    Args:
        store: a `ci.records.ProjectKeeper` (its `project` and `save_project`), e.g. `ci.store.Store`.
        results_dir: the results directory being ingested.
        config: the project's asv.conf.json (None: found beside `results_dir`).

    Returns:
        One line for the user: what was kept, or why the asv.conf.json found above the folder was
        not; "" when there is nothing new to say (the same file again, or none above the folder:
        `compare` says then that the built-in thresholds decide).

    Raises:
        ConfigError: the file given or found is malformed (the store is left as it was).
    """
    if config is not None:
        path: Path | None = Path(config).resolve()
        why = ""
    else:
        path, why = find_asv_conf(results_dir)
    try:
        held = store.project()
    except RuntimeError:  # a damaged stored setting (`ci.store.StoreError`): the file read now replaces it
        if path is None:
            raise
        held = None
    if path is None:
        if not why:
            return ""
        kept = f"the store keeps {held.source}'s settings" if held is not None else (
            "the store's commands use the built-in thresholds and names")
        return f"note: {why}; {kept}"
    project = read_asv_conf(path)
    if project == held:
        return ""
    _check_directions(store, project, held, path)
    store.save_project(project)
    floors = ", ".join(f"{p!r}: {v:g}" for p, v in project.thresholds) or "none (asv's default, 0.05)"
    replaced = f"; replaces {held.source}" if held is not None and held.source != project.source else ""
    said = ", ".join(f"{p!r}: {d}" for p, d in project.directions)
    directions = f"; regressions_directions {said}" if said else ""
    return (f"note: project {project.name or '(unnamed)'!r} from {path}: regressions_thresholds "
            f"{floors}{directions}{replaced}")


def _check_directions(store: ProjectKeeper, project: Project, held: Project | None, path: Path) -> None:
    """ConfigError, and the store left as it was, where a `regressions_directions` pattern of `project`
    runs past its time limit on a stored series' name: kept, it stopped every later command (an ingest
    that stored the files printed only the pattern's error), and the store's reads follow the project."""
    use, read = getattr(store, "use_project", None), getattr(store, "benchmarks", None)
    if not project.directions or use is None or read is None:
        return
    use(project)
    try:
        read()
    except ValueError as exc:
        use(held or Project())
        raise ConfigError(f"{path}: {exc}") from None


def direction_notes(project: Project, benchmarks: Sequence[Benchmark], declared: Collection[str] = ()) -> list[str]:
    """What an ingest says of which way is better: an entry of `regressions_directions` that decides
    for no stored series (it matches none, or an earlier entry matches each one it matches: a mistyped
    or shadowed pattern judges nothing, silently otherwise), and how many series are still of unknown
    direction, never judged, with what declares one.

    Args:
        project: the project the store's reads follow.
        benchmarks: the store's series, as read (directions resolved by `project`).
        declared: the keys of those whose benchmark declares a direction of its own (which wins).

    Returns:
        Lines for the user; none where every series has a direction and every entry decides for one.

    Raises:
        ValueError: a pattern ran past its time limit on a series name (named).
    """
    keys = [b.key for b in benchmarks]
    own = set(declared)
    lines = []
    earlier: list[Project] = []
    for pattern, direction in project.directions:
        alone = Project(directions=((pattern, direction),))
        matched = [key for key in keys if alone.direction_for(key) is not None]
        open_ = [key for key in matched if key not in own]
        decides = [key for key in open_ if not any(e.direction_for(key) is not None for e in earlier)]
        earlier.append(alone)
        if decides:
            continue
        if matched and not open_:
            why = (f"each of the {len(matched)} series it matches declares a direction of its own (its benchmark's "
                   "type, unit or `direction`), which wins")
        elif matched:
            why = f"an earlier entry matches each of the {len(open_)} series of unknown direction it matches"
        else:
            example = f" (a series is named like {keys[0]!r})" if keys else ""
            why = f"it matches none of the {len(keys)} stored series{example}: it is matched at the start of the name"
        lines.append(f"warning: regressions_directions: {pattern!r} ({direction}) decides for no series: {why}")
    unknown = [b for b in benchmarks if b.direction == Direction.UNKNOWN and b.kind != Kind.CORRECTNESS]
    if unknown:
        lines.append(f"note: {len(unknown)} of {len(keys)} series declare no direction (e.g. {unknown[0].key!r}): "
                     "their changes are reported, never called better or worse; map their names to \"lower\" or "
                     "\"higher\" in asv.conf.json's regressions_directions, or declare `direction` on the benchmark")
    return lines
