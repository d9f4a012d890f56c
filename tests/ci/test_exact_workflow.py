"""The exact tier's workflows: every pull request, forks included, measured on a GitHub-hosted runner with a
read-only token (exact.yml), its results posted into the sticky comment by a trusted `workflow_run` job that
never runs the PR's code (exact-comment.yml). actionlint clean, and the rules of tests/ci/test_workflow.py
that apply to them."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.ci.test_workflow import actionlint
from tests.ci.workflow_rules import (
    checks_out_pr_code,
    credentials_in,
    is_checkout,
    isolation_violations,
    load_workflow,
    machine_violations,
    machines_table,
    runner_of,
    runs_pr_code,
    step_envs,
)

ROOT = Path(__file__).resolve().parents[2]
MEASURE = ROOT / ".github" / "workflows" / "exact.yml"
COMMENT = ROOT / ".github" / "workflows" / "exact-comment.yml"
RUNNER_DOC = ROOT / "docs" / "runner.md"
# git commands that write files from a commit into the working tree (`merge-base` only reads).
_WRITES_A_TREE = re.compile(r"\bgit (checkout|switch|reset|restore|worktree|stash|merge(?!-base)|rebase|cherry-pick)\b")


@pytest.fixture(scope="module")
def measure() -> dict[str, Any]:
    return load_workflow(MEASURE)


@pytest.fixture(scope="module")
def post() -> dict[str, Any]:
    return load_workflow(COMMENT)


@pytest.mark.parametrize("path", [MEASURE, COMMENT], ids=["exact", "exact-comment"])
def test_passes_actionlint(path, tmp_path):
    findings = actionlint(path, tmp_path)
    assert findings == [], "\n".join(f"{f['line']}:{f['column']} {f['message']} [{f.get('kind')}]" for f in findings)


def _pinned_and_credential_free_checkouts(wf: dict[str, Any]) -> list[str]:
    bad = []
    for name, job in wf["jobs"].items():
        for step in job.get("steps", []):
            uses = str(step.get("uses", ""))
            if uses and not re.fullmatch(r"[\w.-]+/[\w./-]+@[0-9a-f]{40}", uses):
                bad.append(f"{name}: {uses} is not pinned by commit sha")
            if is_checkout(step) and step.get("with", {}).get("persist-credentials") is not False:
                bad.append(f"{name}: a checkout keeps the token on disk")
    return bad


def test_every_pull_request_is_measured_on_a_github_hosted_runner_with_nothing_to_steal(measure):
    assert set(measure["on"]) == {"pull_request"} and measure["permissions"] == {}
    (job,) = measure["jobs"].values()
    assert "if" not in job, "no label, no same-repository condition: forks too"
    assert not runner_of(job).persistent and job["runs-on"] == "ubuntu-latest"
    assert job["permissions"] == {"contents": "read"}
    text = json.dumps(job)
    assert "secrets." not in text and "GITHUB_TOKEN" not in text and "github.token" not in text
    assert all(credentials_in(env) == [] for _, env in step_envs(measure, job))
    assert _pinned_and_credential_free_checkouts(measure) == []
    assert runs_pr_code(job, {"pull_request"})  # it does run the PR's code: which is why it holds nothing
    run = next(s["run"] for s in job["steps"] if s.get("id") == "exact")
    assert "-m ci run --pr" in run and "--exact" in run and "--no-resume" in run and "--machine github-hosted" in run
    upload = next(s for s in job["steps"] if str(s.get("uses", "")).startswith("actions/upload-artifact"))
    assert upload["with"]["name"] == "exact-results"
    verdict = job["steps"][-1]
    assert verdict["if"] == "always()" and 'test "${CODE:-2}" = 0' in verdict["run"]  # a failed gate fails the check


def test_the_comment_job_posts_without_running_pr_code(post):
    assert set(post["on"]) == {"workflow_run"} and post["on"]["workflow_run"] == {"workflows": ["exact"],
                                                                                  "types": ["completed"]}
    assert post["permissions"] == {}
    (job,) = post["jobs"].values()
    assert "github.event.workflow_run.event == 'pull_request'" in job["if"]
    assert job["permissions"] == {"contents": "read", "actions": "read", "pull-requests": "write"}
    assert not runner_of(job).persistent
    assert not checks_out_pr_code(job, {"workflow_run"}) and not runs_pr_code(job, {"workflow_run"})
    (checkout,) = [s for s in job["steps"] if is_checkout(s)]
    assert "ref" not in checkout["with"] and "repository" not in checkout["with"]  # the default branch
    assert _pinned_and_credential_free_checkouts(post) == []
    # The write token: in the posting step's environment, and handed to GitHub's artifact download (which
    # reads another run's artifact); nowhere else.
    holders = [s.get("name") or s.get("uses") for s in job["steps"] if "token" in json.dumps(s).lower()
               or "GITHUB_TOKEN" in json.dumps(s)]
    assert holders == ["Download the measured results (data from the PR's run)",
                       "Structure section of the sticky PR comment (the only step with the write token)"], holders
    download = next(s for s in job["steps"] if str(s.get("uses", "")).startswith("actions/download-artifact"))
    assert download["with"]["run-id"] == "${{ github.event.workflow_run.id }}"
    step = next(s for s in job["steps"] if s.get("id") == "post")
    assert step["env"]["HEAD_SHA"] == "${{ github.event.workflow_run.head_sha }}"  # the event's, not the artifact's
    run = step["run"]
    assert "-m ci ingest" in run and "--config asv.conf.json" in run
    assert '--pr-head "${HEAD_SHA}"' in run and "--structure-only" in run
    assert "tr -cd '0-9'" in run and 'git merge-base --is-ancestor "${base}" "${HEAD_SHA}"' in run
    # No step puts the fetched head's files on disk or installs the checkout (only the default branch's
    # service, from its pinned requirements): the PR's objects are read by git, never run.
    for s in job["steps"]:
        text = str(s.get("run", ""))
        assert not _WRITES_A_TREE.search(text), s
        assert not re.search(r"pip install\s+(-e\s+)?['\"]?\.", text), s


def test_the_gpu_workflow_is_untouched_by_the_exact_tier():
    """The GPU workflow keeps its own triggers and jobs (tests/ci/test_workflow.py); the exact tier reaches the
    GPU runner through the quick subset (benchmarks.QUICK_REGEX), not through a job of its own."""
    gpu = load_workflow(ROOT / ".github" / "workflows" / "benchmarks.yml")
    assert set(gpu["on"]) == {"push", "pull_request_target", "workflow_dispatch"}
    assert set(gpu["jobs"]) == {"history", "deploy-dashboard", "pr-measure", "pr-comment"}


def test_the_repositorys_isolation_and_machine_rules_hold(measure, post):
    """The rules tests/ci/test_workflow.py holds the GPU workflow to (`workflow_rules`): no credential where
    PR code runs, no workspace shared with a trusted job, each GPU job on its own machine name (neither
    job here asks for a GPU, so none applies)."""
    machines = machines_table(RUNNER_DOC.read_text())
    for wf in (measure, post):
        assert isolation_violations(wf) == []
        assert machine_violations(wf, machines) == []


_MUTATIONS = ["measure-reads-a-secret", "measure-has-the-token-in-env", "measure-writes", "measure-on-gpu-host",
              "comment-checks-out-the-head", "comment-installs-the-checkout", "comment-unpinned-action"]


@pytest.mark.parametrize("mutation", _MUTATIONS)
def test_the_checks_catch_each_way_of_crossing_the_boundary(measure, post, mutation):
    """Each change that would hand a fork's code a credential, or run it where the write token is, fails one
    of the checks above."""
    import copy

    m, p = copy.deepcopy(measure), copy.deepcopy(post)
    (mjob,), (pjob,) = m["jobs"].values(), p["jobs"].values()
    run_step = next(s for s in mjob["steps"] if s.get("id") == "exact")
    if mutation == "measure-reads-a-secret":
        run_step["env"]["DB"] = "${{ secrets.BENCH_DB }}"
    elif mutation == "measure-has-the-token-in-env":
        m["env"]["GITHUB_TOKEN"] = "${{ github.token }}"
    elif mutation == "measure-writes":
        mjob["permissions"] = {"contents": "read", "pull-requests": "write"}
    elif mutation == "measure-on-gpu-host":
        mjob["runs-on"] = ["self-hosted", "gpu", "rtx4000ada", "ragged-pr"]
    elif mutation == "comment-checks-out-the-head":
        checkout = next(s for s in pjob["steps"] if is_checkout(s))
        checkout["with"]["ref"] = "${{ github.event.workflow_run.head_sha }}"
    elif mutation == "comment-installs-the-checkout":
        pjob["steps"].insert(3, {"run": "git checkout FETCH_HEAD && pip install -e ."})
    elif mutation == "comment-unpinned-action":
        pjob["steps"][1]["uses"] = "actions/setup-python@v5"
    caught = []
    try:
        test_every_pull_request_is_measured_on_a_github_hosted_runner_with_nothing_to_steal(m)
    except AssertionError as exc:
        caught.append(f"measure: {exc}")
    try:
        test_the_comment_job_posts_without_running_pr_code(p)
    except AssertionError as exc:
        caught.append(f"comment: {exc}")
    caught += isolation_violations(m) + isolation_violations(p)
    assert caught, mutation
