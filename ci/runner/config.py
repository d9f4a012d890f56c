"""What one runner job is: its configuration, what it did, how it fails, and the facts about the
checkout and the host that configure it (the suite's subset regexes, whether there is a GPU)."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ci.records import Verdict

# Fallbacks for a checkout whose benchmarks/__init__.py predates the regex constants.
_QUICK_FALLBACK = r"^bench_attention\.AttentionKernels\.time_gpu|^bench_correctness\.|CPU\."
_CPU_FALLBACK = r"CPU\."
_EXACT_FALLBACK = r"^bench_structure\."


class RunnerError(RuntimeError):
    """The run cannot go on (asv missing or broken, git error, nothing measured); exit code 2."""


def suite_regex(repo: str | os.PathLike[str], which: str, *, declared_only: bool = False) -> str:
    """A benchmark-name regex documented by the suite (`benchmarks/__init__.py`) of a checkout.

    Read as text, not imported, so the runner works on any checkout and never imports torch.

    Args:
        repo: the checkout holding `benchmarks/`.
        which: "quick" (the PR subset), "cpu" (what runs without a GPU), "exact" (the exact tier alone:
            no GPU, no timing) or "full" (the whole suite less the combinations that can never run).

        declared_only: "" where the suite does not declare it (instead of this project's regex).

    Returns:
        The regex for `asv run -b` ("" for "full" at a checkout that has none: no filter).
    """
    names = {"quick": ("QUICK_REGEX", _QUICK_FALLBACK), "cpu": ("CPU_REGEX", _CPU_FALLBACK), "full": ("FULL_REGEX", ""),
             "exact": ("EXACT_REGEX", _EXACT_FALLBACK)}
    if which not in names:
        raise ValueError(f"which must be 'quick', 'cpu', 'exact' or 'full', got {which!r}")
    const, fallback = names[which]
    if declared_only:
        fallback = ""
    path = Path(repo) / "benchmarks" / "__init__.py"
    try:
        import ast

        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError):
        return fallback
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == const for t in node.targets):
            try:
                value = ast.literal_eval(node.value)
            except ValueError:
                return fallback
            if isinstance(value, str) and value:
                return value
    return fallback


def check_environment_type(repo: str | os.PathLike[str]) -> None:
    """ValueError where the checkout's asv.conf.json cannot measure commits: `environment_type`
    "existing" runs the benchmarks in the Python already installed, whatever the commit, and asv
    refuses a range or interleaved rounds there ("--interleave-rounds cannot be used ..."), which
    reached the user only as asv's message and "asv exited 1 and wrote no result file"."""
    from ci.project import ConfigError, load_asv_conf

    try:
        kind = load_asv_conf(Path(repo) / "asv.conf.json").get("environment_type")
    except ConfigError:
        return  # asv says what is wrong with the file itself
    if isinstance(kind, str) and kind.strip().lower().startswith("existing"):
        raise ValueError(f"{Path(repo) / 'asv.conf.json'}: environment_type {kind!r} measures the Python already "
                         "installed, not each commit: the runner builds the commits it measures; set it to "
                         "\"virtualenv\" (or conda, mamba)")


def nothing_selected(regex: str | None) -> str:
    """Why an asv call measured nothing: its benchmark selection matched none (asv says "No benchmarks
    selected" and writes no result), named so the user can pick another."""
    return (f"asv measured no benchmark in this call: its selection ({bench_option(regex)}) matched none of the "
            "suite's benchmarks; choose some with -b REGEX (`asv run --bench just-discover` lists them)")


def bench_option(regex: str | None) -> str:
    r"""A benchmark selection as printed for the user: `-b REGEX` quoted for a POSIX shell, so that
    the fragment pasted after `asv run` or `python -m ci continuous` selects what this job did (a
    Python repr, `'CPU\\.'`, selects nothing there).

    Args:
        regex: the `asv run -b` regex; None or "" for the whole suite.

    Returns:
        E.g. `-b 'CPU\.'`, whose `shlex.split` is `["-b", regex]`; "no -b (the whole suite)" for None.
    """
    return f"-b {shlex.quote(regex)}" if regex else "no -b (the whole suite)"


def new_job_id() -> str:
    """This runner job's identity, recorded on every run it measures (`ci.records.JOB_KEY`).

    In GitHub Actions: the workflow run, its attempt and the job (`gha-<run>.<attempt>-<job>`), so a
    run can be traced to its log; elsewhere a random `local-<12 hex>`. Each asv call of the job
    gets its own marker under it (`call_marker`): only results of one asv call were measured together.
    """
    run_id = os.environ.get("GITHUB_RUN_ID", "")
    if re.fullmatch(r"[0-9]{1,20}", run_id):
        attempt = os.environ.get("GITHUB_RUN_ATTEMPT", "1")
        job = re.sub(r"[^A-Za-z0-9_.-]", "-", os.environ.get("GITHUB_JOB", ""))[:64]
        return f"gha-{run_id}.{attempt if attempt.isdigit() else '1'}" + (f"-{job}" if job else "")
    return f"local-{uuid.uuid4().hex[:12]}"


def call_marker(job: str) -> str:
    """The marker of one asv call of job `job`: `<job>/<12 hex>`, random, so no other call has it.

    A counter of the calls would not do: it restarts with each `measure` and each process, and one
    GitHub Actions job (one `job`) may run the runner several times, so two calls measured apart
    would share a marker and pass for one job (`ci.verdicts.jobs`).

    Args:
        job: the runner job's identity (`RunnerConfig.job`).

    Returns:
        The marker the runner records beside each result file the call writes (`ci.records.JOB_KEY`).
    """
    return f"{job}/{uuid.uuid4().hex[:12]}"


def has_gpu() -> bool:
    """True when `nvidia-smi -L` lists a GPU (no torch import; CUDA_VISIBLE_DEVICES="" means none)."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) == "":
        return False
    smi = shutil.which("nvidia-smi")
    if not smi:
        return False
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.SubprocessError):
        return False
    return out.returncode == 0 and "GPU" in out.stdout


@dataclass(frozen=True)
class RunnerConfig:
    """Everything one runner job needs.

    Attributes:
        repo: git checkout holding asv.conf.json and benchmarks/ (today's suite runs on every commit).
        db: store path or SQLAlchemy URL.
        machine: asv machine name (one per GPU host; the history is per machine).
        bench: `asv run -b` regex; None runs the whole suite.
        branch: branch recorded on ingested commits reachable from it.
        dashboard_dir: render the dashboard here (None: skip).
        dashboard_branch: only this branch's history on the dashboard (None: every stored commit).
        comment_path: write the PR comment here (dry run); with `github_repo`, `pr_number` and a
            token in GITHUB_TOKEN it is also posted.
        github_repo: "owner/name" to post to.
        pr_number: pull request number to post to.
        api_url: GitHub REST API root.
        dashboard_url: link from the comment to the published dashboard.
        resume: history runs skip what asv already measured (`--skip-existing`).
        asv_args: extra arguments for `asv run` (e.g. `-a repeat=5`).
        python: interpreter that runs asv (its packages, torch included, are what the suite sees).
        env: extra environment for asv and the benchmarks.
        wheelhouse: folder of wheels for the packages asv installs into its environment (pip,
            wheel, build, asv_runner, ...) on a host without network; None lets pip use its index.
        job: this job's identity (`new_job_id`), written on every run it measures.
        lock: the file whose lock makes jobs on this host take turns (default: per checkout,
            `<repo>/.asv/runner.lock`; the workflow gives one per GPU host).
    """

    repo: Path
    db: str
    machine: str
    bench: str | None = None
    branch: str | None = "main"
    dashboard_dir: Path | None = None
    dashboard_branch: str | None = None
    comment_path: Path | None = None
    github_repo: str | None = None
    pr_number: int | None = None
    api_url: str = "https://api.github.com"
    dashboard_url: str | None = None
    resume: bool = True
    asv_args: tuple[str, ...] = ()
    python: str = sys.executable
    env: tuple[tuple[str, str], ...] = field(default=())
    wheelhouse: Path | None = None
    job: str = field(default_factory=new_job_id)
    lock: Path | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.repo, Path):
            raise TypeError(f"repo must be a pathlib.Path, got {type(self.repo).__name__}")
        if not (self.repo / "asv.conf.json").is_file():
            raise ValueError(f"{self.repo}: no asv.conf.json (the runner needs a checkout of the project)")
        if not isinstance(self.machine, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", self.machine):
            raise ValueError(f"machine must be a plain name (letters, digits, . _ -), got {self.machine!r}")
        if self.bench is not None:
            try:
                re.compile(self.bench)
            except re.error as exc:
                raise ValueError(f"bad benchmark regex {self.bench!r}: {exc}") from None
        if (self.github_repo is None) != (self.pr_number is None):
            raise ValueError("github_repo and pr_number go together (post the comment to that pull request)")
        if self.wheelhouse is not None and not self.wheelhouse.is_dir():
            raise ValueError(f"wheelhouse {self.wheelhouse} is not a folder")
        if self.pr_number is not None and self.pr_number <= 0:
            raise ValueError(f"pr_number must be positive, got {self.pr_number}")
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}", self.job):
            raise ValueError(f"job must be a plain name (letters, digits, . _ -), got {self.job!r}")

    @property
    def conf_path(self) -> Path:
        """This checkout's asv.conf.json: the project's rules for everything this job decides."""
        return self.repo / "asv.conf.json"

    @property
    def results_dir(self) -> Path:
        """asv's results directory of this checkout (from asv.conf.json, read as asv reads it)."""
        from ci.project import ConfigError, load_asv_conf, results_dir_of

        try:
            return results_dir_of(self.conf_path, load_asv_conf(self.conf_path))
        except ConfigError as exc:
            raise RunnerError(str(exc)) from None

    @property
    def project_settings(self) -> Any:
        """The `ci.project.ProjectSettings` of this checkout's asv.conf.json (`regressions_thresholds`,
        which `asv publish` reads too; the project's name and URLs): what `compare` and `comment`
        take from the store this job ingests into."""
        from ci.project import ConfigError, project_settings

        try:
            return project_settings(config=self.conf_path)
        except ConfigError as exc:
            raise RunnerError(str(exc)) from None

    @property
    def settings(self) -> Any:
        """The A/B verdicts' settings of this checkout (`project_settings`)."""
        return self.project_settings.verdicts


@dataclass(frozen=True)
class CommitRun:
    """One asv invocation (one commit, or a PR's base and head interleaved)."""

    shas: tuple[str, ...]
    returncode: int
    seconds: float
    gpu_state: tuple[tuple[str, str], ...] = ()
    # The asv benchmarks (names) this invocation measured, of any of its commits: a result file keeps the
    # results of the benchmarks a call did not select, from earlier calls (`ci.runner.asv.measured_names`).
    # None: not known (a resumed job's call ran earlier).
    measured: frozenset[str] | None = None


@dataclass(frozen=True)
class RunOutcome:
    """What a runner job did and decided."""

    mode: str  # "history" or "pr"
    commits: tuple[str, ...]
    asv_runs: tuple[CommitRun, ...]
    ingest: str
    verdicts: tuple[Verdict, ...]
    regressions: tuple[Any, ...]  # history: the `ci.records.Alert`s this job reported (regressions, failed gates)
    exit_code: int
    dashboard: Path | None = None
    comment: Path | None = None
    comment_url: str | None = None
    notes: tuple[str, ...] = ()
    comparison: Any = None  # PR mode: the `ci.verdicts.Comparison` the verdicts came from


def default_machine() -> str:
    """`$ASV_MACHINE`, else the host name made safe for a directory name."""
    name = os.environ.get("ASV_MACHINE") or os.uname().nodename or "runner"
    return re.sub(r"[^A-Za-z0-9._-]", "-", name).lstrip("-.") or "runner"
