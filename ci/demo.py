"""`python -m ci demo` (`make demo`): the main job end to end on the embedded default.

1. A throwaway clone of this repository (`git clone --no-hardlinks`) in `.demo/repo`, so the
   demo never touches this checkout's `.asv/` or git state; a second demo refreshes the clone.
2. The last few first-parent commits that carry the asv suite (default 3).
3. The runner (`ci.runner`) on them through the real asv CLI: without a GPU only the suite's CPU
   subset (`benchmarks.CPU_REGEX`: real PyTorch-CPU measurements, small); with a GPU the PR subset
   (`benchmarks.QUICK_REGEX`). The older commits go through the history path (one asv call each);
   HEAD and its parent through the PR path (one asv call, rounds interleaved), as a pull request
   would be measured.
4. Everything lands in `.demo/history.sqlite`, then verdicts and change points, the dashboard in
   `.demo/dashboard/`, and the PR comment for HEAD against its parent in `.demo/pr-comment.md`
   (a dry run: nothing is posted).

Every number comes from this run's asv result files; nothing is invented. Running it again
resumes: commits already measured are skipped (asv `--skip-existing`) and ingest adds nothing twice.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from ci.exit_codes import EXIT_ERROR, EXIT_OK
from ci.runner.config import RunnerConfig, RunnerError, bench_option, default_machine, has_gpu, suite_regex
from ci.runner.git import git
from ci.runner.jobs import print_outcome, run_history, run_pr
from ci.runner.progress import say

REPO_ROOT = Path(__file__).resolve().parents[1]
HELP = "the main job end to end on the embedded default: clone, benchmark, store, dashboard, PR comment"
SUITE_FILES = ("asv.conf.json", "benchmarks/__init__.py")


def default_source(cwd: Path | None = None) -> Path:
    """The repository the demo clones: the git checkout around `cwd` when it holds the asv suite,
    else the checkout this package runs from (an editable install); an installed package has none.

    Args:
        cwd: where to start looking (default: the current directory).

    Returns:
        The checkout's top folder.
    """
    for start in (cwd or Path.cwd(), REPO_ROOT):
        proc = subprocess.run(["git", "-C", str(start), "rev-parse", "--show-toplevel"], capture_output=True,
                              check=False)  # fmt: skip
        # A path as the file system has it: bytes that need not be UTF-8, and spaces at either end
        # that are part of the name; only git's line end is not.
        top = Path(os.fsdecode(proc.stdout.removesuffix(b"\n"))) if proc.returncode == 0 else None
        if top is not None and all((top / f).is_file() for f in SUITE_FILES):
            return top
    raise ValueError("no checkout of the project here: run the demo inside a clone of the repository, or pass --repo")


def prepare_clone(source: Path, dest: Path) -> Path:
    """A throwaway clone of `source`'s current HEAD in `dest` (created, or refreshed if it exists).

    Args:
        source: a git checkout (this repository).
        dest: where the clone lives; must be a clone made by this function if it exists.

    Returns:
        `dest`, checked out at `source`'s HEAD commit.
    """
    head = git(source, "rev-parse", "HEAD").strip()
    if (dest / ".git").is_dir():
        # Our own throwaway clone: fetch the source's HEAD and move the clone's branch there.
        git(dest, "fetch", "-q", str(source), head)
        git(dest, "reset", "-q", "--hard", head)
    elif dest.exists() and any(dest.iterdir()):
        raise ValueError(f"{dest} exists and is not a git clone: remove it or pick another --out")
    else:
        dest.parent.mkdir(parents=True, exist_ok=True)
        proc = subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(source), str(dest)],
                              capture_output=True, text=True, check=False)  # fmt: skip
        if proc.returncode != 0:
            raise RunnerError(f"git clone {source} failed: {proc.stderr.strip()}")
        git(dest, "reset", "-q", "--hard", head)
    return dest


def suite_commits(repo: Path, count: int) -> list[str]:
    """The newest `count` first-parent commits of HEAD that contain the asv suite, oldest first.

    Args:
        repo: a git checkout.
        count: how many (>= 2: the PR comment needs HEAD and its parent).

    Returns:
        Full shas, oldest first; HEAD last.
    """
    if count < 2:
        raise ValueError(f"the demo needs at least 2 commits (HEAD and its parent), got {count}")
    picked: list[str] = []
    for sha in git(repo, "rev-list", "--first-parent", "-n", str(count), "HEAD").split():
        has_suite = all(
            subprocess.run(["git", "-C", str(repo), "cat-file", "-e", f"{sha}:{f}"], capture_output=True).returncode
            == 0
            for f in SUITE_FILES
        )
        if not has_suite:
            break  # older commits predate the suite
        picked.append(sha)
    if len(picked) < 2:
        raise RunnerError(f"{repo}: fewer than 2 recent commits contain the asv suite ({', '.join(SUITE_FILES)})")
    return picked[::-1]


def print_head_summary(cfg: RunnerConfig, parent: str, head: str, gpu: bool) -> None:
    """HEAD's measurements as a table, the exact tier's figures beside the timings
    (`ci.outputs.structure.head_summary`), from the demo's store."""
    from ci.outputs.structure import head_summary
    from ci.store import Store

    with Store(cfg.db) as store:
        lines = head_summary(store.results(commit_sha=head, machine=cfg.machine),
                             store.results(commit_sha=parent, machine=cfg.machine))
    if not lines:
        return
    print()
    print(f"HEAD {head[:8]}: the exact tier (launches, kernel resources, kept tokens, FLOPs: the same on every "
          "machine, no noise) beside the timings" + ("" if gpu else " (CPU: Triton's interpreter and PyTorch's "
                                                               "CPU kernels, which prove nothing about GPU speed)"))
    for line in lines:
        print(f"  {line}")


def run_demo(
    out: Path, *, source: Path = REPO_ROOT, commits: int = 3, gpu: bool | None = None, machine: str | None = None
) -> int:
    """The demo: clone, measure, store, decide, render, comment; prints where everything is.

    Args:
        out: the demo's folder (`.demo/`): clone, store, dashboard, comment.
        source: the repository to clone (this one).
        commits: how many recent commits to measure (>= 2).
        gpu: force the GPU (True) or CPU (False) subset; None detects a GPU with nvidia-smi.
        machine: asv machine name (default `$ASV_MACHINE` or the host name).

    Returns:
        0 when the job ran through (whatever the verdicts say; they are in the comment), 2 on error
        and when a commit measured nothing (every benchmark failed: a check that did not run).
    """
    if isinstance(commits, bool) or not isinstance(commits, int) or commits < 2:
        raise ValueError(f"the demo needs at least 2 commits (HEAD and its parent), got {commits!r}")
    t0 = time.monotonic()
    out = out.resolve()
    clone = prepare_clone(source, out / "repo")
    shas = suite_commits(clone, commits)
    use_gpu = has_gpu() if gpu is None else gpu
    bench = suite_regex(clone, "quick" if use_gpu else "cpu")
    head_name = git(clone, "rev-parse", "--abbrev-ref", "HEAD").strip()
    branch = None if head_name == "HEAD" else head_name
    say(f"demo: {len(shas)} commits of {source} ({shas[0][:8]}..{shas[-1][:8]}), "
        f"{'GPU: PR subset' if use_gpu else 'no GPU: CPU subset'} {bench_option(bench)}")  # fmt: skip
    cfg = RunnerConfig(
        repo=clone, db=str(out / "history.sqlite"), machine=machine or default_machine(), bench=bench, branch=branch,
        dashboard_dir=out / "dashboard", comment_path=out / "pr-comment.md",
        # Without a GPU the library's Triton ops run in Triton's interpreter (as the tests do).
        env=() if use_gpu or "TRITON_INTERPRET" in os.environ else (("TRITON_INTERPRET", "1"),),
        wheelhouse=Path(os.environ["RAGGED_WHEELHOUSE"]) if os.environ.get("RAGGED_WHEELHOUSE") else None,
    )  # fmt: skip
    history_code = EXIT_OK
    if shas[:-2]:
        history = run_history(cfg, shas[:-2])
        print_outcome(history)
        history_code = history.exit_code
    pr = run_pr(cfg, shas[-2], shas[-1])
    print_outcome(pr)
    minutes = (time.monotonic() - t0) / 60
    print_head_summary(cfg, shas[-2], shas[-1], use_gpu)
    print()
    print(f"Demo done in {minutes:.1f} min. Measured on machine {cfg.machine!r}:")
    print(f"  store:      {cfg.db}")
    print(f"  dashboard:  {out / 'dashboard' / 'index.html'}")
    print(f"  PR comment: {out / 'pr-comment.md'}  (HEAD {shas[-1][:8]} vs parent {shas[-2][:8]}, not posted)")
    print(f"  verdict exit code for HEAD: {pr.exit_code} (0 clean, 1 regression or correctness failure, "
          "2 nothing measured)")
    if EXIT_ERROR in (history_code, pr.exit_code):
        # Benchmarks that did not run (no torch in this environment, say) are not a pass: the demo fails.
        print("error: the demo measured nothing on some commit (see the errors above and asv's output): "
              "it did not run, so it passes nothing", file=sys.stderr)
        return EXIT_ERROR
    return EXIT_OK


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The `demo` subcommand's options (it has no `--db`: the demo's store is `history.sqlite` in --out)."""
    p.add_argument("--repo", default=None,
                   help="the checkout to clone and measure (default: the git checkout around the current directory)")
    p.add_argument("--out", default=None, help="demo folder (default .demo/ in the checkout)")
    p.add_argument("--commits", type=int, default=3, help="recent commits to measure (default 3, at least 2)")
    dev = p.add_mutually_exclusive_group()
    dev.add_argument("--cpu", action="store_true", help="CPU subset even when a GPU is present")
    dev.add_argument("--gpu", action="store_true", help="GPU (PR) subset; fails without a GPU")
    p.add_argument("--machine", help="asv machine name (default $ASV_MACHINE or the host name)")


def cmd_demo(args: argparse.Namespace) -> int:
    """`python -m ci demo` (no --db: its store is `history.sqlite` in --out)."""
    gpu = True if args.gpu else (False if args.cpu else None)
    if gpu and not has_gpu():
        raise ValueError("--gpu given but nvidia-smi lists no GPU")
    source = Path(args.repo).resolve() if args.repo else default_source()
    if args.repo and not all((source / f).is_file() for f in SUITE_FILES):
        raise ValueError(f"--repo {args.repo}: no asv suite there ({', '.join(SUITE_FILES)})")
    out = Path(args.out) if args.out else source / ".demo"
    try:
        return run_demo(out, source=source, commits=args.commits, gpu=gpu, machine=args.machine)
    except KeyboardInterrupt:
        print("error: interrupted; run `make demo` again to resume", file=sys.stderr)
        return EXIT_ERROR
