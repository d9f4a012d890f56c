"""What a runner job publishes: the PR comment (written, and posted with a token) and the dashboard."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ci.records import Verdict
from ci.runner.config import RunnerConfig
from ci.runner.progress import say


class CommentNotPosted(RuntimeError):
    """Posting the PR comment failed (`ci.outputs.github.GitHubError`'s message); the job's results stand."""


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
    from ci.outputs.comment import comment_environment, render_comment

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
            from ci.outputs.github import GitHubError, post_sticky_comment

            try:
                url = post_sticky_comment(cfg.github_repo, cfg.pr_number, body, api_url=cfg.api_url)
            except GitHubError as exc:  # the measured job is not lost: verdicts, dashboard and summary go on
                raise CommentNotPosted(str(exc)) from None
        else:
            say("GITHUB_TOKEN is not set: the comment was written, not posted")
    return written, url


def render_dashboard(cfg: RunnerConfig, store: Any) -> Path | None:
    """Render the site into `cfg.dashboard_dir` through the dashboard's one entry point (None: skipped)."""
    if cfg.dashboard_dir is None:
        return None
    from dashboard import render_site

    stats = render_site(store, cfg.dashboard_dir, branch=cfg.dashboard_branch)
    say(f"dashboard: {stats.pages_written} pages written, {stats.pages_unchanged} unchanged -> {cfg.dashboard_dir}")
    return cfg.dashboard_dir
