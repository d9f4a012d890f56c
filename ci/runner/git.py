"""The commits a runner job measures, from git: names to shas, ranges, a branch's new commits."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from ci.ingest.git import refs_named
from ci.runner.config import RunnerError


def git(repo: Path, *args: str) -> str:
    """`git -C repo ARGS...`'s output; RunnerError with git's message when it fails.

    What git prints is data: a branch name, a path or a message may hold bytes that are not UTF-8,
    which become U+FFFD here instead of a UnicodeDecodeError in place of git's answer."""
    proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, errors="replace",
                          check=False)  # fmt: skip
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
    if len(clash := refs_named(repo, name)) > 1:
        # git picks one and warns (or not: core.warnAmbiguousRefs): a tag named `main` had --since-last
        # measure the tag's commit and skip the branch's new ones, exit 0 (2026-12-07).
        raise ValueError(ambiguous_ref(repo, name, clash))
    proc = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "--verify", f"{name}^{{commit}}"],
        capture_output=True, text=True, errors="replace", check=False,
        env={**os.environ, "LC_ALL": "C", "LANGUAGE": "C"},  # git's messages read below, untranslated
    )  # fmt: skip
    if proc.returncode != 0:
        if not Path(repo).is_dir():
            raise ValueError(f"--repo {repo}: no such folder")
        inside = subprocess.run(["git", "-C", str(repo), "rev-parse", "--is-inside-work-tree"], capture_output=True,
                                text=True, errors="replace", check=False)
        if inside.returncode != 0:
            raise ValueError(f"--repo {repo}: not a git checkout")
        if "is ambiguous" in proc.stderr:  # a short sha several objects start with
            raise ValueError(f"{name!r} is ambiguous in {repo}: several objects start with it; give more characters")
        shallow = subprocess.run(["git", "-C", str(repo), "rev-parse", "--is-shallow-repository"],
                                 capture_output=True, text=True, errors="replace", check=False).stdout.strip()
        raise ValueError(f"unknown commit {name!r} in {repo}" + (
            " (a shallow clone: its history stops short; `git fetch --unshallow` reads the rest)"
            if shallow == "true" else ""))
    return proc.stdout.strip()


def ambiguous_ref(repo: str | os.PathLike[str], name: str, refs: list[str]) -> str:
    """The error for a name that several refs of `repo` hold (a branch and a tag both called `main`)."""
    return (f"{name!r} names more than one ref in {repo} ({', '.join(refs)}): give the one meant in full "
            f"(refs/heads/{name} for the branch), or rename or delete the other (a tag: `git tag -d {name}`)")


def git_has_parent(repo: str | os.PathLike[str], sha: str) -> bool:
    """Whether commit `sha` has a parent in `repo` (False for a root commit)."""
    proc = subprocess.run(["git", "-C", str(repo), "rev-parse", "--verify", "--quiet", f"{sha}~1^{{commit}}"],
                          capture_output=True, text=True, check=False)
    return proc.returncode == 0


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
    return git(Path(repo), *args).split()


def new_branch_commits(
    repo: str | os.PathLike[str], branch: str, measured: set[str], *, max_commits: int,
    older: list[str] | None = None,
) -> list[str]:
    """The branch's commits after the newest one already measured, oldest first, at most `max_commits`.

    Args:
        repo: the git checkout.
        branch: branch (or any commit name) whose first-parent history is walked.
        measured: shas this machine already has results for.
        max_commits: cap; the newest commits are kept when there are more.
        older: where given, receives the new commits the cap left out, oldest first (the job says so:
            they are not measured by a later `--since-last` either, which starts after the newest).

    Returns:
        Full shas, oldest first (empty when the branch tip is measured).
    """
    if max_commits < 1:
        raise ValueError(f"max_commits must be >= 1, got {max_commits}")
    tip = resolve_commit(repo, branch)
    new: list[str] = []
    for sha in git(Path(repo), "rev-list", "--first-parent", tip).split():
        if sha in measured:
            break
        if len(new) == max_commits:
            if older is None:
                break
            older.append(sha)
            continue
        new.append(sha)
    if older is not None:
        older.reverse()
    return new[::-1]
