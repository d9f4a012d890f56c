"""What a runner job publishes: the PR comment (written, and posted with a token) and the dashboard."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from ci.runner.config import RunnerConfig
from ci.runner.progress import say

if TYPE_CHECKING:
    from ci.store import Store, StoreReads
    from ci.verdicts import Comparison


class CommentNotPosted(RuntimeError):
    """Posting the PR comment failed (`ci.outputs.github.GitHubError`'s message); the job's results stand."""


def write_comment(
    cfg: RunnerConfig, store: StoreReads, comparison: Comparison, base: str, head: str
) -> tuple[Path | None, str | None]:
    """Render the PR comment; write it to `cfg.comment_path`; post it when a PR and a token are given.

    Args:
        cfg: runner configuration.
        store: the store (machine, environment and commit rows).
        comparison: the `ci.verdicts.Comparison` (verdicts, both sides' results, their jobs).
        base: base sha.
        head: head sha.

    Returns:
        (the file written or None, the posted comment's URL or None).
    """
    from ci.outputs.comment import comment_context, comment_environment, github_urls, render_comment
    from ci.outputs.structure import SECTION_ROOM

    env = comment_environment(store, comparison.machines or cfg.machine, [r for r in comparison.head if r.samples])
    commit_url, job_url = github_urls(os.environ)
    rules = cfg.project_settings
    context = comment_context(store, comparison, env, commit_url=commit_url, job_url=job_url, settings=rules.verdicts,
                              project=rules.project)  # fmt: skip
    body = render_comment(list(comparison.verdicts), [], base_sha=base, head_sha=head, environment=env,
                          dashboard_url=cfg.dashboard_url, context=context, section_room=SECTION_ROOM)  # fmt: skip
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


def render_dashboard(cfg: RunnerConfig, store: Store) -> Path | None:
    """Render the site into `cfg.dashboard_dir` through the dashboard's one entry point (None: skipped);
    the store keeps the history detector's states it extends (`ci.verdicts.detect_all`)."""
    if cfg.dashboard_dir is None:
        return None
    from ci.site import render_site

    stats = render_site(store, cfg.dashboard_dir, branch=cfg.dashboard_branch, project=cfg.project_settings.project)
    say(f"dashboard: {stats.pages_written} pages written, {stats.pages_unchanged} unchanged -> {cfg.dashboard_dir}")
    return cfg.dashboard_dir
