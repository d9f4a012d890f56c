"""Commit metadata from a git checkout for ingest: each commit's parents, time and subject, the
branch it is on, and its position in git's history (`ci.records.Commit.position`).

What git prints about a commit is data, not a format of ours: a subject may hold any byte but NUL
(0x1e and 0x1f included, which an earlier format used as separators), and bytes that are not UTF-8.
So the fields are separated by NUL, which git keeps out of what it prints of a commit message
(`git commit` refuses a message holding one, and `%s` ends at one: git 2.39, 2026-12-05), git's
output is read as bytes, and a subject's bytes that are not UTF-8 become U+FFFD. Each record ends
with its own sha again, so what cannot be parsed is that commit's alone and every other commit is
read as usual: a time that is no date (git prints the literal `%cI` for a committer line it cannot
read; a time after the year 9999 is no Python date) leaves that commit without a time (ingest
takes asv's), a record that cannot be read at all leaves it out; either way the commit is in
`CommitLog.problems`, which ingest prints as warnings naming it. A branch's log is one `git log`,
not one process per commit: 20,000 commits took 0.22 s of git and 0.13 s of parsing, against 0.39 s
and 0.10 s with the earlier 0x1e/0x1f format (best of 9, 2026-12-05).

A commit's position is its generation in git's graph (a root is 0, any other commit 1 more than its
highest parent): it grows along every line of history, so the store's history order follows git's
topology (a branch's first-parent line in order) whatever the committers' clocks said, and it is
the same for a commit whichever branch or ingest read it. The parents come from the branch's log
and, for commits off it (or without `--branch`), from one `git rev-list --parents` per batch of
result files, which stops at what was read before. A shallow clone knows only part of the graph:
its commits get no position (the store orders them by time) and ingest says so.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

from ci.records import Commit
from ci.text import clip, printable, redact_text

# sha, parents, committer time, subject, then the sha again: the record's end (`parse_log`).
LOG_FORMAT = "%H%x00%P%x00%cI%x00%s%x00%H"
# What a user's configuration could change in that output, pinned: log.showSignature prints gpg's
# lines before a signed commit's record, i18n.logOutputEncoding re-encodes the subject.
_LOG = ("log", "--no-show-signature", "--no-color", "--encoding=UTF-8", f"--format={LOG_FORMAT}")
_SHA = re.compile(rb"[0-9a-f]{40}|[0-9a-f]{64}")  # SHA-1 or SHA-256 repositories
# A commit's parents: none, or shas one space apart (matched whole, once a record: one regex per parent
# was a fifth of the parse's time, 2026-12-05).
_PARENTS = re.compile(rb"(?:(?:[0-9a-f]{40}|[0-9a-f]{64})(?: (?:[0-9a-f]{40}|[0-9a-f]{64}))*)?")
_NAME = re.compile(r"[0-9a-fA-F]{4,64}")  # how a result file may name a commit (asv writes the full sha)


@dataclass
class CommitGraph:
    """The parents of the commits read from git in one ingest, and their positions (module docstring).

    Attributes:
        parents: sha -> its parents, for every commit read.
        walked: commits every ancestor of which is in `parents` (a later walk stops at them).
        shallow: the checkout is a shallow clone (None: not asked yet): no positions then.
    """

    parents: dict[str, tuple[str, ...]] = field(default_factory=dict)
    walked: list[str] = field(default_factory=list)
    shallow: bool | None = None
    _positions: dict[str, int | None] = field(default_factory=dict)

    def add(self, parents: dict[str, tuple[str, ...]]) -> None:
        """Take the parents of commits read with all their ancestors; they are `walked` from now on."""
        self.parents.update(parents)
        below = {p for ps in parents.values() for p in ps}
        self.walked.extend(sha for sha in parents if sha not in below)

    def position(self, sha: str) -> int | None:
        """`sha`'s generation (a root 0, else 1 + its highest parent's); None in a shallow clone or
        where an ancestor's record is missing."""
        if self.shallow:
            return None
        known = self._positions
        stack = [sha]
        while stack:  # depth first without recursion: a linear history is 20,000 commits deep
            top = stack[-1]
            if top in known:
                stack.pop()
                continue
            parents = self.parents.get(top)
            if parents is None:
                known[top] = None
                stack.pop()
                continue
            todo = [p for p in parents if p not in known]
            if todo:
                stack.extend(todo)
                continue
            stack.pop()
            ranks = [known[p] for p in parents]
            known[top] = None if None in ranks else 1 + max((r for r in ranks if r is not None), default=-1)
        return known[sha]


@dataclass(frozen=True)
class CommitLog:
    """Commits read from git (sha -> record; `time` None where git's is no date), and what could not
    be read of some (sha -> what and what is stored instead; such a commit may be in `commits` too);
    `graph`, the parents read so far, which later reads of the same ingest extend."""

    commits: dict[str, Commit] = field(default_factory=dict)
    problems: dict[str, str] = field(default_factory=dict)
    graph: CommitGraph = field(default_factory=CommitGraph)


def commit_warning(sha: str, problem: str) -> str:
    """The line ingest prints for a commit of which git's record could not be read, or not all of it.

    Args:
        sha: the commit as the result files name it.
        problem: `CommitLog.problems[sha]`.

    Returns:
        One printable line starting with "warning: commit SHA: ".
    """
    return printable(f"warning: commit {sha}: {problem}")


def _checkout(repo: str | os.PathLike[str]) -> Path:
    root = Path(repo)
    if not root.is_dir():
        raise ValueError(f"--repo {repo}: no such directory")
    return root


def _git(repo: Path, *args: str, stdin: bytes | None = None) -> bytes:
    proc = subprocess.run(["git", "-C", str(repo), *args], input=stdin, capture_output=True, check=False)
    if proc.returncode != 0:
        why = proc.stderr.decode("utf-8", "replace").strip()
        raise ValueError(printable(f"git {args[0]} failed in {repo}: {why}"))
    return proc.stdout


def refs_named(repo: str | os.PathLike[str], name: str) -> list[str]:
    """The refs that a bare name stands for under git's rules (`refs/NAME`, `refs/tags/NAME`,
    `refs/heads/NAME`, `refs/remotes/NAME`, `refs/remotes/NAME/HEAD`; gitrevisions(7)) and that exist:
    two or more make the name ambiguous, and git picks one. Counted, not read off git's warning, which
    `core.warnAmbiguousRefs=false` silences and a locale translates. [] for anything else (a sha,
    `HEAD~2`, a full ref)."""
    if name.startswith(("refs/", "-")) or not re.fullmatch(r"[A-Za-z0-9._/+-]+", name):
        return []
    wanted = [f"refs/{name}", f"refs/tags/{name}", f"refs/heads/{name}", f"refs/remotes/{name}",
              f"refs/remotes/{name}/HEAD"]
    proc = subprocess.run(["git", "-C", str(repo), "for-each-ref", "--format=%(refname)", *wanted],
                          capture_output=True, text=True, errors="replace", check=False)
    return sorted(set(proc.stdout.split()) & set(wanted)) if proc.returncode == 0 else []


_UNREADABLE = "git's record of it cannot be read ({}): it is stored with its sha and asv's date only"


def _record(sha: str, body: bytes, branch: str) -> tuple[Commit | None, str]:
    """One record's fields after its sha (parents, time, subject): the Commit (None when the record
    cannot be read) and what could not be read ("" when nothing)."""
    fields = body.split(b"\0", 2)
    if len(fields) != 3:
        return None, _UNREADABLE.format(f"{len(fields)} fields where 3 were asked for")
    parents, when, subject = fields
    if not _PARENTS.fullmatch(parents):
        return None, _UNREADABLE.format(f"parents {clip(parents.decode('utf-8', 'replace'), 120)} are not commit ids")
    text = when.decode("utf-8", "replace")
    problem = ""
    try:
        time: datetime | None = datetime.fromisoformat(text).astimezone(UTC)
    except (ValueError, OverflowError):
        time, problem = None, f"git's commit time {clip(text, 80)} is not a date: it is stored with asv's date"
    # Redacted before it is cut and stored: a cut through a URL's "@" leaves a password's start that no
    # longer has the shape that hides it where the subject is shown.
    text = redact_text(subject[:4 * SUBJECT_CHARS + 1024].decode("utf-8", "replace"))  # a credential past the cut too
    if len(text) > SUBJECT_CHARS:
        text = text[:SUBJECT_CHARS - 1] + "…"
    commit = Commit(sha=sha, parents=tuple(parents.decode().split()), branch=branch, time=time, subject=text)
    return commit, problem


# The most characters of a subject stored. git's %s is the message's whole first paragraph: a message
# without a blank line after its first was one 1 MB "subject", copied into every series page's rows
# (500 series: a 494 MB dashboard, 2026-12-07). GitHub shows 72.
SUBJECT_CHARS = 200


def parse_log(out: bytes, branch: str) -> CommitLog:
    """Commits from `git log --format=LOG_FORMAT` output.

    Args:
        out: git's output as bytes: per commit `sha NUL parents NUL time NUL subject NUL sha LF`.
        branch: recorded on every commit read ("" for none).

    Returns:
        A CommitLog: what cannot be read of a record is in `problems`, and the records after it
        are read as usual. Output that does not start a record with a sha ends the reading: the
        commits after it are simply not in the log (the caller reports what it asked for and lacks).
    """
    log = CommitLog()
    pos = 0
    while pos < len(out):
        head = out.find(b"\0", pos)
        sha = out[pos:head] if head >= 0 else b""
        end = out.find(b"\0" + sha + b"\n", head) if _SHA.fullmatch(sha) else -1
        if end < 0:
            break
        name = sha.decode()
        commit, problem = _record(name, out[head + 1 : end], branch)
        if commit is not None:
            log.commits[name] = commit
        if problem:
            log.problems[name] = problem
        pos = end + len(sha) + 2
    return log


def branch_log(repo: str | os.PathLike[str], branch: str) -> CommitLog:
    """Every commit reachable from `branch`, read with one `git log`.

    Args:
        repo: a git checkout.
        branch: a branch (or any commit name git log takes; not an option).

    Returns:
        A CommitLog whose commits carry `branch`.
    """
    root = _checkout(repo)
    if not branch or branch.startswith("-"):
        raise ValueError(f"--branch {branch!r}: not a branch name")
    if len(clash := refs_named(root, branch)) > 1:  # git would read one of them, say the tag
        raise ValueError(f"--branch {branch!r} names more than one ref in {root} ({', '.join(clash)}): rename or "
                         "delete the one that is not the branch (a tag: `git tag -d NAME`)")
    log = parse_log(_git(root, *_LOG, branch, "--"), branch)
    log.graph.shallow = _is_shallow(root)
    log.graph.add({sha: c.parents for sha, c in log.commits.items()})
    return log


def _is_shallow(root: Path) -> bool:
    return _git(root, "rev-parse", "--is-shallow-repository").strip() == b"true"


def _walk(root: Path, graph: CommitGraph, shas: Iterable[str]) -> None:
    """Read the parents of `shas` and of their ancestors not read before into `graph` (one
    `git rev-list`, which stops at the commits walked before)."""
    if graph.shallow is None:
        graph.shallow = _is_shallow(root)
    new = sorted({s for s in shas if s not in graph.parents})
    if graph.shallow or not new:
        return
    asked = "".join(f"{s}\n" for s in new) + "".join(f"^{s}\n" for s in graph.walked)
    parents = {}
    for line in _git(root, "rev-list", "--parents", "--stdin", stdin=asked.encode()).decode().splitlines():
        sha, *rest = line.split()
        parents[sha] = tuple(rest)
    graph.add(parents)


def commit_order_warning(repo: str | os.PathLike[str], log: CommitLog) -> str | None:
    """The line ingest prints when it could not read git's topology (a shallow clone), else None."""
    if not log.graph.shallow:
        return None
    return printable(f"warning: {repo} is a shallow clone: git's history is not all there, so the commits are "
                     "ordered by their time, not by git's topology; fetch the whole history (git fetch --unshallow, "
                     "or fetch-depth: 0 in actions/checkout)")


def git_commits(
    repo: str | os.PathLike[str],
    shas: Iterable[str],
    branch: str | None = None,
    on_branch: CommitLog | None = None,
) -> CommitLog:
    """Commit metadata from a git checkout for the commits result files name.

    Args:
        repo: a git checkout.
        shas: commit names as result files hold them: full shas (as asv writes them), also in
            capitals or abbreviated.
        branch: a branch name; commits reachable from it get `branch` set, others get "".
        on_branch: the branch's log when the caller already has it (`branch_log`).

    Returns:
        A CommitLog keyed by the names given, each Commit's sha the full sha git resolved the name to
        (ingest stores an abbreviated name's run under it, so that it is the commit other files name in
        full and its parents'); a name git does not know as a commit is in neither mapping, one whose
        record cannot be read (or not all of it) is in `problems`.
    """
    root = _checkout(repo)
    if on_branch is None:
        on_branch = branch_log(root, branch) if branch else CommitLog()
    found = CommitLog(graph=on_branch.graph)
    rest = []
    for name in sorted(set(shas)):
        if name in on_branch.commits or name in on_branch.problems:
            _take(found, name, on_branch, name)
        elif _NAME.fullmatch(name):  # a name holding a line break would shift every answer after it
            rest.append(name)
    if not rest:
        return _placed(root, found, {name: name for name in found.commits})
    # One line per name asked, in order: "<full sha> commit" for a commit, "<name> missing" (or
    # "ambiguous", or another object type) otherwise.
    answers = _git(root, "cat-file", "--batch-check=%(objectname) %(objecttype)",
                   stdin="".join(f"{n}\n" for n in rest).encode()).splitlines()  # fmt: skip
    full = {n: a.split()[0].decode() for n, a in zip(rest, answers, strict=True) if a.split()[1:] == [b"commit"]}
    need = sorted({s for s in full.values() if s not in on_branch.commits and s not in on_branch.problems})
    log = CommitLog()
    if need:
        asked = "".join(f"{s}\n" for s in need).encode()
        log = parse_log(_git(root, *_LOG, "--no-walk=unsorted", "--stdin", stdin=asked), "")
    for name, sha in full.items():
        source = on_branch if sha in on_branch.commits or sha in on_branch.problems else log
        if sha not in source.commits and sha not in source.problems:
            source = CommitLog(problems={sha: _UNREADABLE.format("git log printed no record of it")})
        _take(found, name, source, sha)
    return _placed(root, found, {name: full.get(name, name) for name in found.commits})


def _placed(root: Path, found: CommitLog, full: dict[str, str]) -> CommitLog:
    """`found` with each commit's position (`CommitGraph.position`); `full`: name -> full sha."""
    graph = found.graph
    _walk(root, graph, full.values())
    for name, commit in found.commits.items():
        found.commits[name] = replace(commit, position=graph.position(full[name]))
    return found


def _take(found: CommitLog, name: str, log: CommitLog, sha: str) -> None:
    """Put what `log` holds of commit `sha` into `found` under the name the result files use."""
    commit = log.commits.get(sha)
    if commit is not None:
        found.commits[name] = commit
    if sha in log.problems:
        found.problems[name] = log.problems[sha]
