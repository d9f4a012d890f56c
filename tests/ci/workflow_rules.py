"""Where PR code may run in a GitHub Actions workflow, judged from each job's whole situation rather
than its own YAML alone. Pure functions over the parsed workflow (and docs/runner.md's tables).

- The runner: GitHub gives a job to any runner whose labels include every one of the job's
  `runs-on` labels (inside the runner group, when `runs-on` names one). A runner registered for one
  job takes another whose labels are a subset of its own, so two jobs stay apart only when each asks
  for a label the other's runner lacks, or they name different groups.
- The effective environment of a step: the workflow's `env:`, then the job's (its container's), then
  the step's. A job's code reads all of it, and the runner process's, whatever its own YAML names.
- The workspace: `github.workspace` is the runner's, so a job that can land on another job's runner
  works in that job's checkout, and whatever the first left in `.git` (hooks, config) runs in the next.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

Job = dict[str, Any]
Workflow = dict[str, Any]

# The labels `config.sh` gives every self-hosted Linux x64 runner besides `--labels`.
DEFAULT_RUNNER_LABELS = frozenset({"self-hosted", "linux", "x64"})
_GITHUB_HOSTED = re.compile(r"(ubuntu|windows|macos)-[\w.-]+", re.IGNORECASE)

# What runs code from the pull request: asv (inside `ci run`), make, an install of the checkout.
RUNS_PR_CODE = re.compile(r"-m ci run\b|\basv\b|\bmake\b|pip install (-e )?\.|pip install .*-e ")
HEAD_REFS = ("github.event.pull_request.head.sha", "github.event.pull_request.head.ref",
             "github.event.pull_request.head.repo", "github.head_ref",
             "github.event.pull_request.merge_commit_sha", "refs/pull/")
# A git command that puts commits' files on disk (fetching objects alone does not).
_GIT_CHECKOUT = re.compile(r"\bgit\s+(?:-[cC]\s+\S+\s+|--?[\w-]+(?:=\S+)?\s+)*"
                           r"(?:checkout|switch|worktree\s+add|reset\s+--hard|clone|pull|merge(?![\w-])|restore|"
                           r"read-tree|checkout-index|stash\s+(?:apply|pop)|am|apply)\b")

# Credentials in an environment: by value (a secret, the job's token, a URL that names a database
# or carries a password) or by name (what holds a token, a password, a database URL).
_SECRET_REF = re.compile(r"\bsecrets\s*[.\[]|\bgithub\s*(?:\.\s*token\b|\[\s*['\"]token)", re.IGNORECASE)
_DB_URL = re.compile(r"\b(?:postgres(?:ql)?|mysql|mariadb|mssql|oracle|redis|rediss|mongodb(?:\+srv)?|cockroachdb|"
                     r"sqlite)(?:\+\w+)?:/", re.IGNORECASE)
_URL_PASSWORD = re.compile(r"[a-z][\w+.-]*://[^/\s@:]+:[^/\s@]+@", re.IGNORECASE)
_CREDENTIAL_VAR = re.compile(r"\bvars\s*\.\s*\w*(?:DB|DATABASE|DSN|TOKEN|PASSW|SECRET|CREDENTIAL|KEY)", re.IGNORECASE)
_CREDENTIAL_NAME = re.compile(r"TOKEN|PASSW|SECRET|CREDENTIAL|PRIVATE_?KEY|API_?KEY|ACCESS_?KEY|AUTH(?!OR)|COOKIE|"
                              r"(?:^|_)(?:DB|DSN|DATABASE)(?:_|$)|^PG[A-Z]+$", re.IGNORECASE)

# A path that climbs out of the job's own workspace.
_PARENT = re.compile(r"(?:^|[/\s\"'=])\.\.(?:/|$|[\s\"'])")
_WORKSPACE_PARENT = re.compile(r"(?:github\.workspace\s*\}\}|GITHUB_WORKSPACE\}?|runner\.workspace\s*\}\}|"
                               r"RUNNER_WORKSPACE\}?)(?:\\?[\"'])?/\.\.", re.IGNORECASE)
# A runner's folders named by absolute path: another runner's checkouts (the job's own are reached
# through github.workspace / runner.temp, never spelled out).
_RUNNER_FOLDER = re.compile(r"/_work/|/actions-runner/|/_temp/")
_EMPTIES_WORKSPACE = re.compile(r"(?:GITHUB_WORKSPACE|github\.workspace)")
_REMOVES = re.compile(r"\brm\s+-[a-zA-Z]*[rR][a-zA-Z]*\b|\s-delete\b")


@dataclass(frozen=True)
class Runner:
    """Which runners may take a job: every one of `labels` (lower case), inside `group` when named;
    `dynamic` when an expression decides at run time (then any runner)."""

    labels: frozenset[str]
    group: str | None = None
    dynamic: bool = False

    @property
    def persistent(self) -> bool:
        """A runner that outlives the job: anything but one GitHub-hosted image label (a fresh VM)."""
        if self.dynamic or self.group is not None or len(self.labels) != 1:
            return True
        return not _GITHUB_HOSTED.fullmatch(next(iter(self.labels)))


def runner_of(job: Job) -> Runner:
    """A job's `runs-on`: one label, a list, or `{group, labels}`."""
    spec, group = job.get("runs-on", ()), None
    if isinstance(spec, dict):
        group, spec = spec.get("group"), spec.get("labels", ())
    labels = [spec] if isinstance(spec, str) else list(spec or ())
    dynamic = any("${{" in str(x) for x in [*labels, group or ""])
    return Runner(frozenset(str(x).lower() for x in labels), str(group) if group else None, dynamic)


def may_share_runner(a: Runner, b: Runner) -> bool:
    """Whether a runner registered for one of the two (exactly its labels, in its group) takes the other."""
    if a.dynamic or b.dynamic:
        return True
    if a.group and b.group and a.group != b.group:
        return False
    return a.labels <= b.labels or b.labels <= a.labels


def effective_env(wf: Workflow, job: Job, step: Mapping[str, Any] | None = None) -> dict[str, str]:
    """What a step's processes find in their environment from the YAML: the workflow's `env:`, the
    job's container's and the job's, then the step's (later wins). An `env:` that is one expression
    (`${{ fromJSON(...) }}`) stands as one entry named after it: its keys are unknown."""
    container = job.get("container")
    layers = (wf.get("env"), container.get("env") if isinstance(container, dict) else None, job.get("env"),
              step.get("env") if step else None)
    env: dict[str, str] = {}
    for layer in layers:
        if isinstance(layer, dict):
            env.update({str(k): "" if v is None else str(v) for k, v in layer.items()})
        elif layer:
            env[f"<{layer}>"] = str(layer)
    return env


def step_envs(wf: Workflow, job: Job) -> list[tuple[str, dict[str, str]]]:
    """(step, its effective environment) for each step; the job's own for a job without steps."""
    steps = job.get("steps") or []
    if not steps:
        return [("(job)", effective_env(wf, job))]
    return [(str(s.get("name") or s.get("id") or s.get("uses") or f"step {i + 1}"), effective_env(wf, job, s))
            for i, s in enumerate(steps)]


def credentials_in(env: Mapping[str, str]) -> list[str]:
    """The entries of an environment that hold or name a credential or a database: "KEY (why)"."""
    out = []
    for key, value in env.items():
        why = []
        if _SECRET_REF.search(value):
            why.append("a secret or the job's token")
        if _DB_URL.search(value) or _URL_PASSWORD.search(value):
            why.append("a database URL or a URL with a password")
        if _CREDENTIAL_VAR.search(value):
            why.append("a repository variable holding a store or credential")
        if _CREDENTIAL_NAME.search(key):
            why.append("named as a credential or database")
        if why:
            out.append(f"{key} ({', '.join(why)})")
    return out


def git_config_from_env(env: Mapping[str, str]) -> dict[str, str]:
    """The git configuration an environment gives every git it starts (`GIT_CONFIG_COUNT` and
    `GIT_CONFIG_KEY_<n>` / `GIT_CONFIG_VALUE_<n>`: above every config file), keys lower case."""
    try:
        count = int(env.get("GIT_CONFIG_COUNT", "0") or 0)
    except ValueError:
        return {}
    return {env.get(f"GIT_CONFIG_KEY_{i}", "").lower(): env.get(f"GIT_CONFIG_VALUE_{i}", "") for i in range(count)}


def is_checkout(step: Mapping[str, Any]) -> bool:
    return str(step.get("uses", "")).startswith("actions/checkout")


def load_workflow(path: Path) -> Workflow:
    """A workflow file parsed, its triggers under "on" (YAML 1.1 reads the bare key `on` as True)."""
    data = yaml.safe_load(path.read_text())
    data["on"] = data.pop(True, data.get("on"))
    return data


def triggers(wf: Workflow) -> set[str]:
    on = wf.get("on", wf.get(True))
    return {on} if isinstance(on, str) else set(on or ())


def checks_out_pr_code(job: Job, events: Iterable[str] = ()) -> bool:
    """Whether the job puts the PR's files on disk: a checkout of the head (or of another repository),
    a git command that checks out a PR ref, or a plain checkout under a `pull_request` event (the merge)."""
    pull_request = "pull_request" in set(events)
    for step in job.get("steps") or []:
        with_ = step.get("with") or {}
        text = json.dumps(step)
        if is_checkout(step):
            ref = str(with_.get("ref", ""))
            if any(h in ref for h in HEAD_REFS) or "repository" in with_ or (pull_request and not ref):
                return True
        elif any(h in text for h in HEAD_REFS) and _GIT_CHECKOUT.search(str(step.get("run", ""))):
            return True
    return False


def runs_pr_code(job: Job, events: Iterable[str] = ()) -> bool:
    """A job that has the PR's code on disk and runs the suite, an install or a build of it."""
    return checks_out_pr_code(job, events) and any(RUNS_PR_CODE.search(str(s.get("run", "")))
                                                   for s in job.get("steps") or [])


def empties_workspace_first(job: Job) -> bool:
    """Whether a step before the job's first checkout removes what the workspace holds (`.git` too)."""
    for step in job.get("steps") or []:
        if is_checkout(step):
            return False
        run = str(step.get("run", ""))
        if _EMPTIES_WORKSPACE.search(run) and _REMOVES.search(run):
            return True
    return False


def _paths(job: Job) -> list[tuple[str, str]]:
    """(where, path) for the folders a job's steps work in: checkout paths and working directories."""
    out = [("defaults.run.working-directory", str(((job.get("defaults") or {}).get("run") or {})
                                                   .get("working-directory", "")))]
    for i, step in enumerate(job.get("steps") or []):
        where = str(step.get("name") or step.get("uses") or f"step {i + 1}")
        if is_checkout(step):
            out.append((f"{where}: path", str((step.get("with") or {}).get("path", ""))))
        out.append((f"{where}: working-directory", str(step.get("working-directory", ""))))
    return [(w, p) for w, p in out if p]


def _grouped(found: Iterable[tuple[str, list[str]]]) -> dict[str, list[str]]:
    """{finding: the steps where it was found}, in the order first found."""
    out: dict[str, list[str]] = {}
    for where, items in found:
        for item in items:
            out.setdefault(item, []).append(where)
    return out


def _steps(steps: list[str], total: int) -> str:
    return "every step" if len(steps) == total and total > 1 else "step(s) " + "; ".join(repr(s) for s in steps)


def isolation_violations(wf: Workflow, trusted_dirs: Iterable[str] = ()) -> list[str]:
    """The ways PR code reaches the trusted side of the workflow, as messages.

    A PR job (one that checks out or runs the PR's code) must not: share a runner registration with a
    trusted job on a runner that outlives jobs; carry a secret, the job's token, a database URL or a
    credential in the effective environment of any step, or reach `secrets.*` at all; work in a trusted
    job's workspace (a runner it may share, a path climbing out of its own, a trusted runner's folder).
    A trusted job on such a runner must start each checkout from an empty workspace and run no git hook.

    Args:
        wf: the parsed workflow (`on` under "on" or YAML 1.1's True).
        trusted_dirs: folders of the trusted runners (their users' homes, work folders).

    Returns:
        One line per violation; empty when none.
    """
    events = triggers(wf)
    jobs: dict[str, Job] = wf.get("jobs") or {}
    pr = {n for n, j in jobs.items() if checks_out_pr_code(j, events)}
    runners = {n: runner_of(j) for n, j in jobs.items()}
    trusted = {n for n in jobs if n not in pr and runners[n].persistent}
    bad = []
    for name in sorted(pr):
        job, runner = jobs[name], runners[name]
        for other in sorted(trusted):
            if runner.persistent and may_share_runner(runner, runners[other]):
                bad.append(f"{name}: runs PR code on runners of {other}'s labels ({sorted(runner.labels)} / "
                           f"{sorted(runners[other].labels)}): a runner registered for one takes the other")
                bad.append(f"{name}: works in {other}'s workspace (github.workspace of a runner they share)")
        if _SECRET_REF.search(json.dumps(job)) or job.get("secrets"):
            bad.append(f"{name}: a step of a job with PR code reaches a secret or the job's token")
        envs = step_envs(wf, job)
        for found, steps in _grouped((where, credentials_in(env)) for where, env in envs).items():
            bad.append(f"{name}: {found} in the effective environment of {_steps(steps, len(envs))}")
        for where, path in _paths(job):
            if path.startswith("/") or _PARENT.search(path):
                bad.append(f"{name}: {where} {path!r} leaves the job's own workspace")
        text = json.dumps(job) + json.dumps(wf.get("env") or {})
        if _WORKSPACE_PARENT.search(text):
            bad.append(f"{name}: climbs out of its workspace to the runner's other checkouts")
        for folder in trusted_dirs:
            if folder and folder in text:
                bad.append(f"{name}: names the trusted runner's folder {folder}")
        if _RUNNER_FOLDER.search(text):
            bad.append(f"{name}: names a runner's folder by absolute path, not its own workspace")
        if runner.persistent and not empties_workspace_first(job):
            bad.append(f"{name}: checks out into a workspace an earlier PR job may have written")
    for name in sorted(trusted):
        job = jobs[name]
        if not any(is_checkout(s) for s in job.get("steps") or []):
            continue
        if not empties_workspace_first(job):
            bad.append(f"{name}: its checkout reuses the workspace's .git (hooks, config) from earlier jobs")
        envs = step_envs(wf, job)
        hooks_on = [where for where, env in envs if git_config_from_env(env).get("core.hookspath") != "/dev/null"]
        if hooks_on:
            bad.append(f"{name}: git hooks are not off (core.hooksPath=/dev/null) in {_steps(hooks_on, len(envs))}")
    return bad


def machine_violations(wf: Workflow, machines: Mapping[str, str]) -> list[str]:
    """Each GPU job's asv machine name is its GPU's, and no two GPUs share one.

    Args:
        wf: the parsed workflow.
        machines: GPU runner label -> asv machine name (docs/runner.md, "The machines").

    Returns:
        One line per violation; empty when none.
    """
    bad = []
    names = list(machines.values())
    for shared in sorted({m for m in names if names.count(m) > 1}):
        bad.append(f"machine name {shared!r} is given to several GPUs")
    jobs: dict[str, Job] = wf.get("jobs") or {}
    gpu_of: dict[str, str] = {}
    for name, job in jobs.items():
        runner = runner_of(job)
        gpus = sorted(runner.labels & set(machines))
        if not runner.persistent or ("gpu" not in runner.labels and not gpus):
            continue
        if len(gpus) != 1:
            bad.append(f"{name}: asks for GPU labels {gpus}, not exactly one of {sorted(machines)}")
            continue
        gpu_of[name] = gpus[0]
    for name, job in jobs.items():
        needs = job.get("needs") or []
        for dep in [needs] if isinstance(needs, str) else needs:
            gpu_of.setdefault(name, gpu_of.get(dep, ""))
    for name, gpu in gpu_of.items():
        if not gpu:
            continue
        envs = step_envs(wf, jobs[name])
        wrong = _grouped((where, [env["BENCH_MACHINE"]]) for where, env in envs
                         if env.get("BENCH_MACHINE", machines[gpu]) != machines[gpu])
        for value, steps in wrong.items():
            bad.append(f"{name}: BENCH_MACHINE {value!r} on the {gpu} runner, whose machine is {machines[gpu]!r}, "
                       f"in {_steps(steps, len(envs))}")
    return bad


@dataclass(frozen=True)
class Registration:
    """One runner registration as docs/runner.md lists it."""

    name: str
    user: str
    labels: frozenset[str]
    ephemeral: bool
    takes: frozenset[str]


def markdown_table(text: str, first_header: str) -> list[dict[str, str]]:
    """The rows of the markdown table whose first header cell is `first_header`, keyed by header
    (lower case); code spans' backticks dropped."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.lstrip().startswith("|") and cells[0].lower() == first_header.lower():
            header = [c.lower() for c in cells]
            rows = []
            for row in lines[i + 2:]:
                if not row.lstrip().startswith("|"):
                    break
                values = [c.strip().replace("`", "") for c in row.strip().strip("|").split("|")]
                rows.append(dict(zip(header, values, strict=False)))
            return rows
    raise ValueError(f"no table headed {first_header!r}")


def _words(cell: str) -> frozenset[str]:
    return frozenset(w.strip().lower() for w in re.split(r"[,\s]+", cell) if w.strip() and w.strip() != "-")


def registrations(text: str) -> list[Registration]:
    """docs/runner.md's registrations table: registration | host | Unix user | labels | kind | takes."""
    out = []
    for row in markdown_table(text, "registration"):
        out.append(Registration(name=row["registration"], user=row["unix user"],
                                labels=DEFAULT_RUNNER_LABELS | _words(row["labels"]),
                                ephemeral="ephemeral" in row["kind"].lower(), takes=_words(row["takes"])))
    return out


def machines_table(text: str) -> dict[str, str]:
    """docs/runner.md's machines table: runner label -> asv machine name."""
    return {row["runner label"]: row["asv machine name"] for row in markdown_table(text, "machine")}


def registrations_taking(job: Job, regs: Iterable[Registration]) -> list[Registration]:
    """The documented registrations GitHub may give this job to."""
    runner = runner_of(job)
    return [r for r in regs if runner.dynamic or runner.labels <= r.labels]
