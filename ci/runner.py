"""`python -m ci run`: benchmark commits through the asv suite, store, decide, render, comment.

Three ways to pick what to measure, all on one machine in one job:

- `--range A..B` (or `--commits SHA...`): every commit of a git range, oldest first;
- `--branch NAME` (default): the branch's commits since the newest one this machine already has in
  the store (the first run takes the last `--max-commits`);
- `--pr --base X --head Y`: a pull request's base and head, measured in ONE asv call with
  `--interleave-rounds`, so drift over the job hits both sides alike (asv's `continuous` recipe).

Per commit the runner calls the real asv CLI (`asv run HASHFILE:... --record-samples --machine M`),
streaming asv's own per-benchmark lines; torch is never reinstalled because the suite's
`install_command` only writes a `.pth` (see benchmarks/_asv_install.py and
reference/asv-continuous.md). Then it records the GPU state (the suite's `gpu_env` sidecar, written
here when no GPU benchmark wrote it), ingests the results (idempotent: a re-ingest changes nothing),
computes verdicts and change points, renders the dashboard and writes (with a token: posts) the
PR comment.

Resume: history runs pass `--skip-existing` to asv, so a re-run measures only what is missing, and
ingest after every commit keeps the store in step with asv's files; asv saves a commit's file when
the commit (or, interleaved, a round) finishes, so an interruption loses at most the commit in
flight. A PR run measures both sides afresh (an A/B needs them measured together, in one job, by
the same subset): asv's files for them may hold one round of an interrupted job, or results of an
`asv continuous` of another day. Only a PR job that finished measuring (its marker in
`<results>/../ci-jobs/` names the subset and asv arguments, and the files are unchanged since) is
not measured again; asv rewrites the files and the store replaces the old runs.

Exit codes: 0 clean, 1 a regression or a failed correctness gate, 2 an error (asv could not run,
a commit produced no result file, an interrupted run, bad arguments).

This module imports no torch: the GPU state comes from a `python -m benchmarks.gpu_env` subprocess.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ci.records import Outcome, Result, Verdict

EXIT_OK, EXIT_REGRESSION, EXIT_ERROR = 0, 1, 2

# Fallbacks for a checkout whose benchmarks/__init__.py predates the regex constants.
_QUICK_FALLBACK = r"^bench_attention\.AttentionKernels\.time_gpu|^bench_correctness\.|CPU\."
_CPU_FALLBACK = r"CPU\."
_SHA_RE = re.compile(r"^[0-9a-f]{40}$")


class CommentNotPosted(RuntimeError):
    """Posting the PR comment failed (`ci.github.GitHubError`'s message); the job's results stand."""


class RunnerError(RuntimeError):
    """The run cannot go on (asv missing or broken, git error, nothing measured); exit code 2."""


def suite_regex(repo: str | os.PathLike[str], which: str) -> str:
    """A benchmark-name regex documented by the suite (`benchmarks/__init__.py`) of a checkout.

    Read as text, not imported, so the runner works on any checkout and never imports torch.

    Args:
        repo: the checkout holding `benchmarks/`.
        which: "quick" (the PR subset), "cpu" (what runs without a GPU) or "full" (the whole suite
            less the combinations that can never run).

    Returns:
        The regex for `asv run -b` ("" for "full" at a checkout that has none: no filter).
    """
    names = {"quick": ("QUICK_REGEX", _QUICK_FALLBACK), "cpu": ("CPU_REGEX", _CPU_FALLBACK), "full": ("FULL_REGEX", "")}
    if which not in names:
        raise ValueError(f"which must be 'quick', 'cpu' or 'full', got {which!r}")
    const, fallback = names[which]
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


# --------------------------------------------------------------------------------------- git


def _git(repo: Path, *args: str) -> str:
    proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RunnerError(f"git {' '.join(args)} failed in {repo}: {proc.stderr.strip()}")
    return proc.stdout


def resolve_commit(repo: str | os.PathLike[str], name: str) -> str:
    """Full sha of a commit name (sha prefix, branch, tag, HEAD~2, ...).

    Args:
        repo: the git checkout.
        name: anything `git rev-parse` accepts.

    Returns:
        40-hex sha.
    """
    if not isinstance(name, str) or not name.strip() or name.startswith("-"):
        raise ValueError(f"not a commit name: {name!r}")
    proc = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "--verify", "--quiet", f"{name}^{{commit}}"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if proc.returncode != 0:
        raise ValueError(f"unknown commit {name!r} in {repo}")
    return proc.stdout.strip()


def commits_in_range(repo: str | os.PathLike[str], spec: str, *, first_parent: bool = True) -> list[str]:
    """Commits of a git range `A..B`, oldest first (first-parent line by default, like a branch's history).

    Args:
        repo: the git checkout.
        spec: `A..B` (commits reachable from B but not A), or `B` alone for just that commit.

    Returns:
        Full shas, oldest first.
    """
    if not isinstance(spec, str) or not spec.strip() or spec.startswith("-"):
        raise ValueError(f"range must look like A..B, got {spec!r}")
    if ".." not in spec:
        return [resolve_commit(repo, spec)]
    if "..." in spec:
        raise ValueError(f"symmetric ranges (A...B) are not supported, got {spec!r}: use A..B")
    lo, hi = spec.split("..", 1)
    hi_sha = resolve_commit(repo, hi or "HEAD")
    args = ["rev-list", "--reverse"] + (["--first-parent"] if first_parent else []) + [hi_sha]
    if lo:
        args.append(f"^{resolve_commit(repo, lo)}")
    return _git(Path(repo), *args).split()


def new_branch_commits(
    repo: str | os.PathLike[str], branch: str, measured: set[str], *, max_commits: int
) -> list[str]:
    """The branch's commits after the newest one already measured, oldest first, at most `max_commits`.

    Args:
        repo: the git checkout.
        branch: branch (or any commit name) whose first-parent history is walked.
        measured: shas this machine already has results for.
        max_commits: cap; the newest commits are kept when there are more.

    Returns:
        Full shas, oldest first (empty when the branch tip is measured).
    """
    if max_commits < 1:
        raise ValueError(f"max_commits must be >= 1, got {max_commits}")
    tip = resolve_commit(repo, branch)
    new: list[str] = []
    for sha in _git(Path(repo), "rev-list", "--first-parent", tip).split():
        if sha in measured:
            break
        new.append(sha)
        if len(new) == max_commits:
            break
    return new[::-1]


# --------------------------------------------------------------------------------------- config


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

    @property
    def results_dir(self) -> Path:
        """asv's results directory of this checkout (from asv.conf.json)."""
        conf = json.loads((self.repo / "asv.conf.json").read_text(encoding="utf-8"))
        return self.repo / conf.get("results_dir", "results")


@dataclass(frozen=True)
class CommitRun:
    """One asv invocation (one commit, or a PR's base and head interleaved)."""

    shas: tuple[str, ...]
    returncode: int
    seconds: float
    gpu_state: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class RunOutcome:
    """What a runner job did and decided."""

    mode: str  # "history" or "pr"
    commits: tuple[str, ...]
    asv_runs: tuple[CommitRun, ...]
    ingest: str
    verdicts: tuple[Verdict, ...]
    regressions: tuple[Any, ...]  # ci.history.ChangePoint on the commits of this job
    exit_code: int
    dashboard: Path | None = None
    comment: Path | None = None
    comment_url: str | None = None
    notes: tuple[str, ...] = ()


# --------------------------------------------------------------------------------------- output


class _Progress:
    """A rich progress bar on a terminal, plain `[runner]` lines otherwise (CI logs)."""

    def __init__(self, total: int, label: str) -> None:
        self._bar: Any = None
        self.total = total
        self.done = 0
        try:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            console = Console(stderr=True)
            if console.is_terminal:
                self._bar = Progress(
                    TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=console,
                )  # fmt: skip
        except ImportError:  # rich is optional on the GPU host
            self._bar = None
        self._task = None
        self._label = label

    def __enter__(self) -> _Progress:
        if self._bar is not None:
            self._bar.start()
            self._task = self._bar.add_task(self._label, total=self.total)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()

    def line(self, text: str) -> None:
        """Print one line above the bar (asv's own output, or a runner message)."""
        if self._bar is not None:
            self._bar.console.print(text, markup=False, highlight=False, soft_wrap=True)
        else:
            print(text, flush=True)

    def step(self, description: str) -> None:
        """Mark one unit done."""
        self.done += 1
        if self._bar is not None:
            self._bar.update(self._task, advance=1, description=description)
        self.line(f"[runner] {self.done}/{self.total} {description}")


def say(text: str) -> None:
    """A runner message on stdout, flushed (CI logs interleave it with asv's lines)."""
    print(f"[runner] {text}", flush=True)


# --------------------------------------------------------------------------------------- asv


def _asv_env(cfg: RunnerConfig) -> dict[str, str]:
    env = dict(os.environ)
    env.update(dict(cfg.env))
    env["ASV_MACHINE"] = cfg.machine  # read by benchmarks/gpu_env.py for the sidecar's path
    env["PYTHONUNBUFFERED"] = "1"
    # asv's virtualenv plugin looks for `pythonX.Y` on PATH; put the runner's own base interpreter
    # first so a pyenv shim (or none at all) cannot pick another one. Its packages reach the
    # benchmarks through the suite's .pth (RAGGED_ASV_BASE_PYTHON = the interpreter running asv).
    ver = f"python{sys.version_info.major}.{sys.version_info.minor}"
    bindir = cfg.repo / ".asv" / "runner-bin"
    bindir.mkdir(parents=True, exist_ok=True)
    link = bindir / ver
    base = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
    if not link.exists() or os.path.realpath(link) != base:
        link.unlink(missing_ok=True)
        link.symlink_to(base)
    env["PATH"] = f"{bindir}{os.pathsep}{env.get('PATH', '')}"
    env.setdefault("RAGGED_ASV_BASE_PYTHON", cfg.python)
    env.pop("VIRTUAL_ENV", None)
    if cfg.wheelhouse is not None:
        # asv pip-installs its runner (asv_runner, build, wheel, pympler) into each new environment.
        env["PIP_FIND_LINKS"] = str(cfg.wheelhouse.resolve())
        env["PIP_NO_INDEX"] = "1"
    return env


def _asv_cmd(cfg: RunnerConfig, *args: str) -> list[str]:
    return [cfg.python, "-m", "asv", *args, "--config", str(cfg.repo / "asv.conf.json")]


def ensure_machine(cfg: RunnerConfig) -> None:
    """Register `cfg.machine` in asv's machine file (~/.asv-machine.json) once, non-interactively.

    Args:
        cfg: runner configuration.
    """
    env = _asv_env(cfg)
    path = Path(env.get("HOME", str(Path.home()))) / ".asv-machine.json"
    try:
        known = json.loads(path.read_text())
    except (OSError, ValueError):
        known = {}
    if cfg.machine in known:
        return
    proc = subprocess.run(
        _asv_cmd(cfg, "machine", "--yes", "--machine", cfg.machine),
        cwd=cfg.repo, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    if proc.returncode != 0:
        raise RunnerError(f"asv machine failed (is asv installed for {cfg.python}?): {proc.stderr.strip()[-500:]}")


def gpu_state(cfg: RunnerConfig) -> dict[str, str]:
    """The GPU environment now (`python -m benchmarks.gpu_env` of the checkout), {} when it cannot run.

    Args:
        cfg: runner configuration.

    Returns:
        The suite's sidecar keys (gpu, driver, cuda, torch, triton, clocks, ...) as strings.
    """
    try:
        proc = subprocess.run(
            [cfg.python, "-m", "benchmarks.gpu_env"], cwd=cfg.repo, env=_asv_env(cfg),
            capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        data = json.loads(proc.stdout) if proc.returncode == 0 else {}
    except (OSError, subprocess.SubprocessError, ValueError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def _write_sidecar_if_missing(cfg: RunnerConfig, sha: str, state: dict[str, str]) -> None:
    """The suite writes the sidecar from its first GPU benchmark (the warm state); a CPU-only run
    has none, so the state read before the run goes there: torch/triton versions, no GPU."""
    if not state:
        return
    path = cfg.results_dir / cfg.machine / f"gpu-env-{sha[:8]}.json"
    if path.exists():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(state, indent=1) + "\n")
    os.replace(tmp, path)


def _result_files(cfg: RunnerConfig, sha: str) -> list[Path]:
    d = cfg.results_dir / cfg.machine
    return sorted(d.glob(f"{sha[:8]}-*.json")) if d.is_dir() else []


def run_asv(cfg: RunnerConfig, shas: Sequence[str], *, interleave: bool, echo: Callable[[str], None]) -> int:
    """One `asv run` over `shas` (a HASHFILE), streaming asv's per-benchmark lines to `echo`.

    Args:
        cfg: runner configuration.
        shas: full commit hashes.
        interleave: pass `--interleave-rounds` (PR A/B; needs >= 2 commits).
        echo: receives every output line of asv.

    Returns:
        asv's exit status (0 ok, 2 when some benchmark failed; results are saved either way).

    Raises:
        KeyboardInterrupt: after stopping asv's whole process group.
    """
    for s in shas:
        if not _SHA_RE.match(s):
            raise ValueError(f"not a full commit sha: {s!r}")
    # The launch method comes from asv.conf.json (spawn; benchmarks/README.md says why).
    args = ["run", "--machine", cfg.machine, "--record-samples", "--show-stderr"]
    if cfg.bench:
        args += ["-b", cfg.bench]
    if interleave:
        args.append("--interleave-rounds")
    # History: measure only what is missing. A PR job always measures both sides afresh (its first
    # interleaved round replaces what asv had): `_measure` skips the whole call for a finished job.
    if cfg.resume and not interleave:
        args.append("--skip-existing")
    args += list(cfg.asv_args)
    with tempfile.NamedTemporaryFile("w", suffix=".hashes", delete=False) as fh:
        fh.write("".join(f"{s}\n" for s in shas))
        hashfile = fh.name
    cmd = _asv_cmd(cfg, *args, f"HASHFILE:{hashfile}")
    env = _asv_env(cfg)
    # Each setup_cache appends one "[setup]" line (benchmarks._models.report_setup); asv itself shows
    # their output only on failure, so the lines are echoed once asv is done.
    fd, name = tempfile.mkstemp(prefix="ragged-setup-", suffix=".log")
    os.close(fd)
    setup_log = Path(name)
    env["RAGGED_SETUP_LOG"] = str(setup_log)
    try:
        # Its own session, so an interrupt can stop asv and every benchmark process it spawned.
        proc = subprocess.Popen(
            cmd, cwd=cfg.repo, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, bufsize=1, start_new_session=True,
        )  # fmt: skip
        try:
            assert proc.stdout is not None
            for raw in proc.stdout:
                echo(raw.rstrip("\n"))
            return proc.wait()
        except BaseException:
            # SIGINT first: asv turns it into KeyboardInterrupt and closes its forkserver, whose
            # process group (the server and the benchmark it forked) is not asv's own group.
            for sig, wait_s in ((signal.SIGINT, 20), (signal.SIGTERM, 10), (signal.SIGKILL, None)):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, sig)
                try:
                    proc.wait(timeout=wait_s)
                    break
                except subprocess.TimeoutExpired:
                    continue
            raise
    finally:
        os.unlink(hashfile)
        with contextlib.suppress(OSError):
            for line in setup_log.read_text(encoding="utf-8").splitlines():
                echo(line)
        setup_log.unlink(missing_ok=True)



@contextlib.contextmanager
def _job_lock(cfg: RunnerConfig) -> Iterator[None]:
    """One runner job per checkout at a time (the workflow's concurrency group serialises per GPU;
    this guards a maintainer's manual run on the same host)."""
    path = cfg.repo / ".asv" / "runner.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            say(f"another runner job holds {path}; waiting for it")
            fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


# --------------------------------------------------------------------------------------- decide


def ab_verdicts(store: Any, base: str, head: str, machine: str) -> list[Verdict]:
    """A/B verdicts of head against base on one machine, from the store; saved back to it.

    A benchmark that crashed becomes a result without samples (`results_with_crashes`, on both
    sides): one that crashed on head FAILS instead of never being seen.

    Args:
        store: a `ci.store.Store`.
        base: full sha of the base commit.
        head: full sha of the head commit.
        machine: machine name.

    Returns:
        Verdicts sorted by series key.
    """
    from ci.verdicts import compare

    b = results_with_crashes(store, base, machine)
    h = results_with_crashes(store, head, machine)
    if not h:
        raise RunnerError(f"no results for head {head[:12]} on {machine}: nothing to compare")
    verdicts = compare(b, h)
    store.save_verdicts(verdicts)
    return verdicts


def results_with_crashes(store: Any, sha: str, machine: str) -> list[Result]:
    """One commit's results on one machine, plus a sample-less Result for every point asv recorded
    as failed (crashed), so that the verdicts see the crash: a correctness gate or a benchmark that
    crashed on head FAILS instead of vanishing. Skipped points (asv's NaN: "not on this machine")
    stay out; `compare` fails a correctness check that ran on base and not on head.

    Args:
        store: a `ci.store.Store`.
        sha: full commit sha.
        machine: machine name.

    Returns:
        Result records in the store's order, the crashed correctness points last.
    """
    rs = store.results(commit_sha=sha, machine=machine)
    for f in store.failures(commit_sha=sha, machine=machine):
        if f.status == "failed":
            rs.append(Result(f.benchmark, f.commit_sha, f.machine, (), run_id=f.run_id))
    return rs


def _gates_for(store: Any, sha: str, machine: str) -> list[Verdict]:
    from ci.gates import correctness_gates

    return correctness_gates(results_with_crashes(store, sha, machine))


def comment_environment(store: Any, machine: str, head_results: Sequence[Result]) -> dict[str, str]:
    """What the PR comment's environment table shows: the machine's GPU stack, then the head run's clocks,
    temperature, Python and asv environment."""
    env = {"machine": machine}
    row = next((m for m in store.machines() if m.name == machine), None)
    if row is not None:
        env.update({k: getattr(row, k) for k in ("gpu", "driver", "cuda", "torch", "triton") if getattr(row, k)})
    if head_results:
        keep = ("sm_clock_mhz", "mem_clock_mhz", "temperature_c", "python", "env_name")
        env.update({k: v for k, v in head_results[0].environment if k in keep and v})
    return env


def _with_device_note(cfg: RunnerConfig, env: dict[str, str]) -> dict[str, str]:
    """Say in the comment when the job ran without a GPU (its timings show the pipeline, not kernel speed)."""
    interp = dict(cfg.env).get("TRITON_INTERPRET", os.environ.get("TRITON_INTERPRET", "0"))
    if interp not in ("", "0"):
        env = {**env, "device": "CPU only: Triton kernels ran in Triton's interpreter (timings show the pipeline "
                                "working, not kernel speed)"}
    return env


def write_comment(
    cfg: RunnerConfig, store: Any, verdicts: Sequence[Verdict], base: str, head: str
) -> tuple[Path | None, str | None]:
    """Render the PR comment; write it to `cfg.comment_path`; post it when a PR and a token are given.

    Args:
        cfg: runner configuration.
        store: the store (machine and environment rows).
        verdicts: A/B verdicts and correctness gates of head.
        base: base sha.
        head: head sha.

    Returns:
        (the file written or None, the posted comment's URL or None).
    """
    from ci.comment import render_comment

    head_results = store.results(commit_sha=head, machine=cfg.machine)
    body = render_comment(
        list(verdicts), [], base_sha=base, head_sha=head,
        environment=_with_device_note(cfg, comment_environment(store, cfg.machine, head_results)),
        dashboard_url=cfg.dashboard_url,
    )  # fmt: skip
    written = None
    if cfg.comment_path is not None:
        cfg.comment_path.parent.mkdir(parents=True, exist_ok=True)
        cfg.comment_path.write_text(body, encoding="utf-8")
        written = cfg.comment_path
    url = None
    if cfg.github_repo is not None and cfg.pr_number is not None:
        if os.environ.get("GITHUB_TOKEN", "").strip():
            from ci.github import GitHubError, post_sticky_comment

            try:
                url = post_sticky_comment(cfg.github_repo, cfg.pr_number, body, api_url=cfg.api_url)
            except GitHubError as exc:  # the measured job is not lost: verdicts, dashboard and summary go on
                raise CommentNotPosted(str(exc)) from None
        else:
            say("GITHUB_TOKEN is not set: the comment was written, not posted")
    return written, url


def _render_dashboard(cfg: RunnerConfig, store: Any) -> Path | None:
    if cfg.dashboard_dir is None:
        return None
    from dashboard import render_site

    stats = render_site(store, cfg.dashboard_dir, branch=cfg.dashboard_branch)
    say(f"dashboard: {stats.pages_written} pages written, {stats.pages_unchanged} unchanged -> {cfg.dashboard_dir}")
    return cfg.dashboard_dir


def _ingest(cfg: RunnerConfig, store: Any) -> str:
    from ci.ingest import ingest_results_dir

    if not (cfg.results_dir / "benchmarks.json").exists():
        return "no results yet"
    branch = cfg.branch
    if branch is not None:
        try:
            resolve_commit(cfg.repo, branch)
        except ValueError:
            # e.g. a detached CI checkout without a local `main`: commits go in without a branch.
            say(f"branch {branch!r} is not in {cfg.repo}: commits are stored without a branch")
            branch = None
    report = ingest_results_dir(store, cfg.results_dir, repo=cfg.repo, branch=branch)
    for f in report.errors:
        say(f"ingest error: {f.message}")
    if not report.ok:
        raise RunnerError(f"ingest failed for {len(report.errors)} result file(s): {report.summary()}")
    return report.summary()


def _pr_job_marker(cfg: RunnerConfig, shas: Sequence[str]) -> Path:
    return cfg.results_dir.parent / "ci-jobs" / f"{cfg.machine}-{'-'.join(s[:12] for s in shas)}.json"


def _pr_job_record(cfg: RunnerConfig, shas: Sequence[str]) -> dict[str, Any]:
    """What makes a finished PR measurement reusable: the same subset and asv arguments, and asv's
    result files for both sides unchanged since (their sha256)."""
    import hashlib

    files = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for s in shas for p in _result_files(cfg, s)}
    return {"shas": list(shas), "bench": cfg.bench, "asv_args": list(cfg.asv_args), "files": files}


def _pr_job_finished(cfg: RunnerConfig, shas: Sequence[str]) -> bool:
    marker = _pr_job_marker(cfg, shas)
    try:
        recorded = json.loads(marker.read_text())
    except (OSError, ValueError):
        return False
    return recorded == _pr_job_record(cfg, shas) and bool(recorded.get("files"))


def _measure(cfg: RunnerConfig, store: Any, groups: Sequence[tuple[str, ...]], *, interleave: bool) -> list[CommitRun]:
    """Run asv once per group, record the GPU state, ingest after each; returns what ran."""
    runs: list[CommitRun] = []
    total = len(groups)
    with _Progress(total, "benchmarking") as bar:
        for shas in groups:
            label = " vs ".join(s[:8] for s in shas)
            if interleave and cfg.resume and _pr_job_finished(cfg, shas):
                summary = _ingest(cfg, store)
                runs.append(CommitRun(tuple(shas), 0, 0.0, ()))
                bar.step(f"{label} already measured by this job (resumed; --no-resume measures again); {summary}")
                continue
            marker = _pr_job_marker(cfg, shas)
            if interleave:
                marker.unlink(missing_ok=True)
            had_files = all(_result_files(cfg, s) for s in shas)
            state = gpu_state(cfg)
            bar.line(f"[runner] {label}: gpu={state.get('gpu') or 'none'} sm_clock={state.get('sm_clock_mhz') or '-'} "
                     f"torch={state.get('torch') or '?'}")
            t0 = time.monotonic()
            rc = run_asv(cfg, shas, interleave=interleave, echo=bar.line)
            seconds = time.monotonic() - t0
            for s in shas:
                if not _result_files(cfg, s):
                    raise RunnerError(
                        f"asv exited {rc} and wrote no result file for {s[:12]} (see asv's output above)"
                    )
                _write_sidecar_if_missing(cfg, s, state)
            summary = _ingest(cfg, store)
            if interleave:  # measured to the end: a re-run of this job may reuse it
                marker.parent.mkdir(parents=True, exist_ok=True)
                marker.write_text(json.dumps(_pr_job_record(cfg, shas), sort_keys=True))
            runs.append(CommitRun(tuple(shas), rc, seconds, tuple(sorted(state.items()))))
            note = "" if rc == 0 else f", asv exit {rc}: some benchmarks failed"
            if not interleave and cfg.resume and had_files:
                note += " (resumed: asv skipped what it had measured before)"
            bar.step(f"{label} measured in {seconds:.0f} s{note}; {summary}")
    return runs


def run_history(cfg: RunnerConfig, commits: Sequence[str]) -> RunOutcome:
    """Benchmark commits one asv call each (oldest first), then decide on the history.

    Exit 1 when a correctness gate fails on a measured commit, or the change-point detector finds an
    unacknowledged regression that this job's commits made visible (`ci.history.newly_detected`:
    a step shows once a few commits after it are measured, so it may sit at an earlier commit).

    Args:
        cfg: runner configuration.
        commits: full shas, oldest first.

    Returns:
        A RunOutcome.
    """
    from ci.history import newly_detected
    from ci.store import Store

    commits = list(commits)
    ensure_machine(cfg)
    with _job_lock(cfg), Store(cfg.db) as store:
        runs = _measure(cfg, store, [(c,) for c in commits], interleave=False) if commits else []
        ingest = _ingest(cfg, store)
        gates = [v for c in commits for v in _gates_for(store, c, cfg.machine)]
        acked = {(a.benchmark_key, a.commit_sha) for a in store.acknowledgements()}
        on_branch = {c.sha for c in store.commits(cfg.dashboard_branch)} if cfg.dashboard_branch else None
        history = [r for r in store.results(machine=cfg.machine) if on_branch is None or r.commit_sha in on_branch]
        # Steps this job made visible (a step shows only once commits after it are measured), not
        # steps at this job's commits: the commit that caused one was usually measured a job ago.
        steps = [
            cp for cp in newly_detected(history, set(commits))
            if cp.outcome == Outcome.REGRESSED and (cp.benchmark.key, cp.commit_sha) not in acked
        ]  # fmt: skip
        notes = _failure_notes(store, commits, cfg.machine)
        dash = _render_dashboard(cfg, store)
    failed = [v for v in gates if v.outcome == Outcome.FAILED]
    for v in failed:
        say(f"correctness FAILED at {v.head_sha[:8]}: {v.benchmark.key} ({v.reason})")
    for cp in steps:
        say(f"regression at {cp.commit_sha[:8]}: {cp.benchmark.key} x{cp.ratio:.3f} (p={cp.p_value:.2g})")
    code = EXIT_REGRESSION if failed or steps else EXIT_OK
    return RunOutcome("history", tuple(commits), tuple(runs), ingest, tuple(gates), tuple(steps), code, dash,
                      notes=notes)  # fmt: skip


def run_pr(cfg: RunnerConfig, base: str, head: str) -> RunOutcome:
    """A/B of a pull request: base and head in one interleaved asv call, verdicts, comment, dashboard.

    Args:
        cfg: runner configuration.
        base: full sha of the base (merge base or target branch tip).
        head: full sha of the PR head.

    Returns:
        A RunOutcome whose exit code is 1 on a regression or failed gate.
    """
    from ci.store import Store
    from ci.verdicts import exit_code

    if base == head:
        raise ValueError(f"base and head are the same commit ({base[:12]}): nothing to compare")
    ensure_machine(cfg)
    with _job_lock(cfg), Store(cfg.db) as store:
        runs = _measure(cfg, store, [(base, head)], interleave=True)
        ingest = _ingest(cfg, store)
        verdicts = ab_verdicts(store, base, head, cfg.machine)
        code = exit_code(verdicts)
        try:
            comment, url = write_comment(cfg, store, verdicts, base, head)
            posting = ()
        except CommentNotPosted as exc:
            comment, url = cfg.comment_path, None
            posting = (f"error: the PR comment was written to {comment} but not posted: {exc}",)
            code = code or EXIT_ERROR  # a regression (1) stays visible; otherwise the job failed (2)
        notes = posting + _failure_notes(store, [base, head], cfg.machine)
        dash = _render_dashboard(cfg, store)
    return RunOutcome("pr", (base, head), tuple(runs), ingest, tuple(verdicts), (), code, dash,
                      comment, url, notes)  # fmt: skip


def _failure_notes(store: Any, commits: Sequence[str], machine: str) -> tuple[str, ...]:
    """One line per benchmark point asv recorded as failed (not skipped) on the job's commits."""
    notes = []
    for sha in commits:
        for f in store.failures(commit_sha=sha, machine=machine):
            if f.status == "failed":
                notes.append(f"benchmark failed at {sha[:8]}: {f.benchmark.key} (see asv's output above)")
    return tuple(notes)


def print_outcome(out: RunOutcome) -> None:
    """The job's summary: counts per outcome, where the artefacts are, the exit code."""
    from ci.verdicts import summarize

    counts = summarize(out.verdicts)
    told = ", ".join(f"{n} {o.value}" for o, n in counts.items() if n)
    say(f"{out.mode}: {len(out.commits)} commit(s) measured; verdicts: {told or 'none'}")
    for v in out.verdicts:
        if v.outcome in (Outcome.REGRESSED, Outcome.FAILED):
            say(f"  {v.outcome.value}: {v.benchmark.key} ratio {v.ratio:.3f} {v.reason}")
    for note in out.notes:
        say(note)
    if out.dashboard:
        say(f"dashboard: {out.dashboard / 'index.html'}")
    if out.comment:
        say(f"PR comment: {out.comment}")
    if out.comment_url:
        say(f"posted: {out.comment_url}")
    say(f"exit {out.exit_code}")


# --------------------------------------------------------------------------------------- CLI


HELP = "benchmark commits (a range, a branch's new commits, or a PR's base and head) and publish the results"


def default_machine() -> str:
    """`$ASV_MACHINE`, else the host name made safe for a directory name."""
    name = os.environ.get("ASV_MACHINE") or os.uname().nodename or "runner"
    return re.sub(r"[^A-Za-z0-9._-]", "-", name).lstrip("-.") or "runner"


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1 (a count or a number that cannot be zero or negative)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value}")
    return value


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The `run` subcommand's options (the parser already has `--db`)."""
    # One mode is required: a bare `run` would start a long benchmark job by surprise.
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--range", help="git range A..B: every first-parent commit in it, oldest first")
    what.add_argument("--commits", nargs="+", metavar="SHA", help="these commits, in this order")
    what.add_argument("--since-last", action="store_true",
                      help="the new commits of --branch since the last run stored for this machine")
    what.add_argument("--pr", action="store_true", help="A/B of --base and --head, interleaved in one asv call")
    p.add_argument("--base", help="PR base commit (with --pr)")
    p.add_argument("--head", help="PR head commit (with --pr)")
    p.add_argument("--branch", default="main", help="branch recorded on ingested commits; walked by --since-last")
    p.add_argument("--max-commits", type=positive_int, default=10,
                   help="cap on a branch run's new commits, at least 1 (default 10)")
    p.add_argument("--repo", default=".", help="checkout with asv.conf.json (default: current directory)")
    p.add_argument("--machine", default=None, help="asv machine name (default $ASV_MACHINE or the host name)")
    sel = p.add_mutually_exclusive_group()
    sel.add_argument("--quick", action="store_true", help="only the PR subset (benchmarks.QUICK_REGEX)")
    sel.add_argument("--cpu", action="store_true", help="only what runs without a GPU (benchmarks.CPU_REGEX)")
    sel.add_argument("-b", "--bench", help="asv benchmark regex")
    p.add_argument("--dashboard", default=None, help="dashboard folder (default <repo>/.asv/dashboard; '' to skip)")
    p.add_argument("--dashboard-branch", default=None, help="only this branch's history on the dashboard")
    p.add_argument("--comment-out", default=None, help="PR comment file (--pr; default <repo>/.asv/pr-comment.md)")
    p.add_argument("--github-repo", help="owner/name: post the sticky comment there (needs GITHUB_TOKEN)")
    p.add_argument("--pr-number", type=positive_int, help="pull request number to post to")
    p.add_argument("--api-url", default=os.environ.get("GITHUB_API_URL", "https://api.github.com"),
                   help="GitHub REST API root (default $GITHUB_API_URL or https://api.github.com)")
    p.add_argument("--dashboard-url", help="link from the comment to the published dashboard")
    p.add_argument("--no-resume", action="store_true", help="re-measure commits asv already has results for")
    p.add_argument("--asv-arg", action="append", default=[], help="extra `asv run` argument (repeatable)")
    p.add_argument("--wheelhouse", default=os.environ.get("RAGGED_WHEELHOUSE"),
                   help="offline host: wheels for asv's environment (default $RAGGED_WHEELHOUSE)")


def config_from_args(args: argparse.Namespace) -> RunnerConfig:
    """RunnerConfig from parsed `run` arguments (paths relative to --repo)."""
    repo = Path(args.repo).resolve()
    if not (repo / "asv.conf.json").is_file():
        raise ValueError(f"--repo {args.repo}: no asv.conf.json there")
    if not args.pr and (args.comment_out or args.github_repo or args.pr_number):
        raise ValueError("--comment-out, --github-repo and --pr-number go with --pr (history runs write no comment)")
    bench = args.bench
    gpu = has_gpu()
    if args.quick and not gpu:
        raise ValueError("--quick is the GPU subset (benchmarks.QUICK_REGEX) and this machine has no GPU "
                         "(nvidia-smi lists none): pass --cpu for the subset that runs on the CPU")
    if args.quick:
        bench = suite_regex(repo, "quick")
    elif args.cpu:
        bench = suite_regex(repo, "cpu")
    elif bench is None:
        bench = suite_regex(repo, "full") or None

    def under(p: str | None, default: str) -> Path | None:
        # Defaults live in the checkout's .asv/; a path given on the command line is the user's (cwd-relative).
        if p is None:
            return repo / default
        return Path(p).resolve() if p else None

    from ci.store import DEFAULT_DB

    db = args.db
    if db == DEFAULT_DB:
        db = str(repo / DEFAULT_DB)
    elif "://" not in str(db):
        db = str(Path(db).resolve())
    env: tuple[tuple[str, str], ...] = ()
    if not gpu and "TRITON_INTERPRET" not in os.environ:
        # The library's pack/unpack and kernel are Triton: without a GPU they run only in Triton's
        # interpreter (the CPU subset's cases fail with "0 active drivers" otherwise).
        env = (("TRITON_INTERPRET", "1"),)
    return RunnerConfig(
        repo=repo, db=db, machine=args.machine or default_machine(), bench=bench, branch=args.branch,
        dashboard_dir=under(args.dashboard, ".asv/dashboard"), dashboard_branch=args.dashboard_branch,
        comment_path=under(args.comment_out, ".asv/pr-comment.md") if args.pr else None,
        github_repo=args.github_repo, pr_number=args.pr_number, api_url=args.api_url,
        dashboard_url=args.dashboard_url, resume=not args.no_resume, asv_args=tuple(args.asv_arg), env=env,
        wheelhouse=Path(args.wheelhouse).resolve() if args.wheelhouse else None,
    )  # fmt: skip


def measured_on_branch(cfg: RunnerConfig, branch: str) -> set[str]:
    """Commits of `branch`'s first-parent line this machine already measured.

    Both the store and asv's result files count, so a run interrupted between asv and ingest is
    not measured again.

    Args:
        cfg: runner configuration.
        branch: branch or commit name.

    Returns:
        Full shas.
    """
    from ci.store import Store

    with Store(cfg.db) as store:
        stored = {r.commit_sha for r in store.results(machine=cfg.machine)}
        stored |= {f.commit_sha for f in store.failures(machine=cfg.machine)}
    d = cfg.results_dir / cfg.machine
    files = {p.name.split("-", 1)[0] for p in d.glob("*-*.json") if not p.name.startswith("gpu-env")}
    line = _git(cfg.repo, "rev-list", "--first-parent", resolve_commit(cfg.repo, branch)).split()
    return {s for s in line if s in stored or s[:8] in files}


def cmd_run(args: argparse.Namespace) -> int:
    """`python -m ci run`."""
    cfg = config_from_args(args)
    if args.pr:
        if not args.base or not args.head:
            raise ValueError("--pr needs --base and --head")
        out = run_pr(cfg, resolve_commit(cfg.repo, args.base), resolve_commit(cfg.repo, args.head))
    else:
        if args.base or args.head:
            raise ValueError("--base/--head go with --pr")
        if args.range:
            commits = commits_in_range(cfg.repo, args.range)
        elif args.commits:
            commits = [resolve_commit(cfg.repo, c) for c in args.commits]
        else:  # --since-last (argparse requires one mode)
            done = measured_on_branch(cfg, args.branch)
            commits = new_branch_commits(cfg.repo, args.branch, done, max_commits=args.max_commits)
            say(f"{args.branch}: {len(commits)} new commit(s) since the last stored run on {cfg.machine}")
        if not commits:
            say("nothing new to measure")
        out = run_history(cfg, commits)
    print_outcome(out)
    return out.exit_code


def run_main(args: argparse.Namespace) -> int:
    """Wrap `cmd_run`: an interrupt or a runner error is exit 2 with a one-line reason."""
    # A cancelled GitHub job sends SIGTERM: turn it into the same clean stop as Ctrl-C, so asv's
    # process group is stopped too instead of running on after the job is gone.
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        return cmd_run(args)
    except KeyboardInterrupt:
        # asv writes a commit's result file only when that commit is finished: commits completed
        # before the interrupt are stored, the one in progress is measured again on resume.
        if getattr(args, "pr", False):
            how = "run the same command again: a PR job measures both sides again unless it had finished measuring"
        elif getattr(args, "no_resume", False):
            how = "run it again without --no-resume to measure only what is missing"
        else:
            how = ("run the same command again to resume (commits finished before the interrupt are stored; "
                   "the commit in progress starts over)")
        print(f"error: interrupted; {how}", file=sys.stderr)
        return EXIT_ERROR
    finally:
        signal.signal(signal.SIGTERM, previous)


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")
