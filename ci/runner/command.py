"""`python -m ci run`: the subcommand's options, the job configuration they make, and the job
they start; an interrupt or a runner error is exit 2 with a one-line reason."""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

from ci.exit_codes import EXIT_ERROR
from ci.runner.config import RunnerConfig, bench_option, check_environment_type, default_machine, has_gpu, suite_regex
from ci.runner.git import commits_in_range, git, git_has_parent, new_branch_commits, resolve_commit
from ci.runner.jobs import print_outcome, run_history, run_pr
from ci.runner.progress import say
from ci.text import redact_text, shows_credential

HELP = "benchmark commits (a range, a branch's new commits, or a PR's base and head) and publish the results"


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1 (a count or a number that cannot be zero or negative)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value}")
    return value


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The `run` subcommand's options (the parser already has `--db`)."""
    # One mode is required: a bare `run` would start a long benchmark job by surprise.
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--range", help="git range A..B: every first-parent commit in it, oldest first")
    what.add_argument("--commits", nargs="+", metavar="SHA", help="these commits, in this order")
    what.add_argument("--since-last", action="store_true",
                      help="the new commits of --branch since the last run stored for this machine")
    what.add_argument("--pr", action="store_true", help="A/B of --base and --head, interleaved in one asv call")
    p.add_argument("--base", help="PR base commit (with --pr)")
    p.add_argument("--head", help="PR head commit (with --pr)")
    p.add_argument("--branch", default="main", help="branch recorded on ingested commits; walked by --since-last")
    p.add_argument("--max-commits", type=positive_int, default=10,
                   help="cap on a branch run's new commits, at least 1 (default 10)")
    p.add_argument("--repo", default=".", help="checkout with asv.conf.json (default: current directory)")
    p.add_argument("--machine", default=None, help="asv machine name (default $ASV_MACHINE or the host name)")
    sel = p.add_mutually_exclusive_group()
    sel.add_argument("--quick", action="store_true", help="only the PR subset (benchmarks.QUICK_REGEX)")
    sel.add_argument("--cpu", action="store_true", help="only what runs without a GPU (benchmarks.CPU_REGEX)")
    sel.add_argument("--exact", action="store_true",
                     help="only the exact tier (benchmarks.EXACT_REGEX: launches, kernel resources, kept tokens, "
                          "FLOPs; no GPU, no timing, every value exact)")
    sel.add_argument("-b", "--bench", help="asv benchmark regex")
    p.add_argument("--no-exact", action="store_true",
                   help="leave the exact tier (benchmarks.EXACT_REGEX) out of the selection: a pull request's GPU job, "
                        "whose exact tier the exact workflow measures on a CPU runner")
    p.add_argument("--dashboard", default=None, help="dashboard folder (default <repo>/.asv/dashboard; '' to skip)")
    p.add_argument("--dashboard-branch", default=None,
                   help="only this branch's history judged and on the dashboard (default: a history job's "
                   "--branch where the store holds its commits, else every commit)")
    p.add_argument("--comment-out", default=None, help="PR comment file (--pr; default <repo>/.asv/pr-comment.md)")
    p.add_argument("--github-repo", help="owner/name: post the sticky comment there (needs GITHUB_TOKEN)")
    p.add_argument("--pr-number", type=positive_int, help="pull request number to post to")
    p.add_argument("--api-url", default=os.environ.get("GITHUB_API_URL", "https://api.github.com"),
                   help="GitHub REST API root (default $GITHUB_API_URL or https://api.github.com)")
    p.add_argument("--dashboard-url", help="link from the comment to the published dashboard")
    p.add_argument("--no-resume", action="store_true", help="re-measure commits asv already has results for")
    p.add_argument("--asv-arg", action="append", default=[], help="extra `asv run` argument (repeatable)")
    p.add_argument("--wheelhouse", default=os.environ.get("RAGGED_WHEELHOUSE"),
                   help="offline host: wheels for asv's environment (default $RAGGED_WHEELHOUSE)")
    p.add_argument("--lock", default=os.environ.get("RAGGED_GPU_LOCK"),
                   help="lock file that jobs on this host take turns on (default $RAGGED_GPU_LOCK, else one per "
                        "checkout: <repo>/.asv/runner.lock)")


def without(bench: str | None, exclude: str) -> str:
    """An `asv run -b` regex for what `bench` selects (None: everything) less what `exclude` selects.

    asv keeps a benchmark when `re.search(regex, name)` finds a match; both regexes keep that meaning
    (unanchored parts match anywhere in the name, `^` at its start).

    Args:
        bench: the selection, or None for the whole suite.
        exclude: the names to leave out.

    Returns:
        One regex: at the name's start, `exclude` found nowhere in it, then `bench` found in it.
    """
    keep = f"(?:{bench})" if bench else ""
    combined = f"^(?!(?s:.*?)(?:{exclude}))(?s:.*?){keep}"  # (?s: a parameter's repr may hold a newline
    try:
        re.compile(combined)
    except re.error as exc:  # e.g. a global flag such as (?i) inside: it must be scoped, (?i:...)
        raise ValueError(f"-b {bench!r} cannot be combined with --no-exact: {exc} "
                         "(scope its flags: (?i:...))") from None
    return combined


def job_selection(
    args: argparse.Namespace, repo: Path, *, cpu_without_gpu: bool = False
) -> tuple[str | None, str, tuple[tuple[str, str], ...]]:
    """What a job measures and where it stores it, from `--quick` / `--cpu` / `-b` and `--db`.

    Args:
        args: parsed options (quick, cpu, exact, bench, db).
        repo: the checkout (its suite's regexes; the default store lives in its `.asv/`).
        cpu_without_gpu: no subset given and no GPU here: the CPU subset instead of the whole suite.

    Returns:
        (the `asv run -b` regex or None for the whole suite, the store path or URL, extra
        environment for asv: Triton's interpreter where there is no GPU).
    """
    from ci.store import DEFAULT_DB

    gpu = has_gpu()
    if args.quick and not gpu:
        raise ValueError("--quick is the GPU subset (benchmarks.QUICK_REGEX) and this machine has no GPU "
                         "(nvidia-smi lists none): pass --cpu for the subset that runs on the CPU")
    bench: str | None
    if args.quick:
        bench = suite_regex(repo, "quick")
    elif getattr(args, "exact", False):
        bench = suite_regex(repo, "exact")
    elif args.cpu or (cpu_without_gpu and args.bench is None and not gpu and suite_regex(repo, "cpu",
                                                                                      declared_only=True)):
        # Without a GPU, the CPU subset of a suite that declares one (`CPU_REGEX`, as this project's does);
        # another project's suite runs whole: this project's regex selected none of its benchmarks.
        bench = suite_regex(repo, "cpu")
        if not args.cpu:
            say(f"no GPU here: the CPU subset ({bench_option(bench)}); its timings show the pipeline, not kernel speed")
    else:
        bench = args.bench if args.bench is not None else (suite_regex(repo, "full") or None)
    if getattr(args, "no_exact", False):
        if getattr(args, "exact", False):
            raise ValueError("--no-exact with --exact selects nothing")
        bench = without(bench, suite_regex(repo, "exact"))
    db = args.db
    if db == DEFAULT_DB:
        db = str(repo / DEFAULT_DB)
    elif "://" not in str(db):
        db = str(Path(db).resolve())
    env: tuple[tuple[str, str], ...] = ()
    if not gpu and "TRITON_INTERPRET" not in os.environ:
        # The library's pack/unpack and kernel are Triton: without a GPU they run only in Triton's
        # interpreter (the CPU subset's cases fail with "0 active drivers" otherwise).
        env = (("TRITON_INTERPRET", "1"),)
    return bench, db, env


def config_from_args(args: argparse.Namespace) -> RunnerConfig:
    """RunnerConfig from parsed `run` arguments (paths relative to --repo)."""
    repo = Path(args.repo).resolve()
    if not (repo / "asv.conf.json").is_file():
        raise ValueError(f"--repo {args.repo}: no asv.conf.json there")
    check_environment_type(repo)
    if not args.pr and (args.comment_out or args.github_repo or args.pr_number):
        raise ValueError("--comment-out, --github-repo and --pr-number go with --pr (history runs write no comment)")
    # Before anything is measured: these were refused only once the benchmarks had run.
    if args.dashboard_url is not None and not args.dashboard_url.startswith(("http://", "https://")):
        raise ValueError(f"--dashboard-url must be an http(s) URL, got {redact_text(args.dashboard_url)!r}")
    if args.dashboard_url is not None and shows_credential(args.dashboard_url):
        raise ValueError(f"--dashboard-url must not hold a credential, got {redact_text(args.dashboard_url)!r}: the "
                         "PR comment that links it is public")
    if args.github_repo:
        from ci.outputs.github import check_api_url

        check_api_url(args.api_url)
    bench, db, env = job_selection(args, repo)

    def under(p: str | None, default: str) -> Path | None:
        # Defaults live in the checkout's .asv/; a path given on the command line is the user's (cwd-relative).
        if p is None:
            return repo / default
        return Path(p).resolve() if p else None

    return RunnerConfig(
        repo=repo, db=db, machine=args.machine or default_machine(), bench=bench, branch=args.branch,
        dashboard_dir=under(args.dashboard, ".asv/dashboard"), dashboard_branch=args.dashboard_branch,
        comment_path=under(args.comment_out, ".asv/pr-comment.md") if args.pr else None,
        github_repo=args.github_repo, pr_number=args.pr_number, api_url=args.api_url,
        dashboard_url=args.dashboard_url, resume=not args.no_resume, asv_args=tuple(args.asv_arg), env=env,
        wheelhouse=Path(args.wheelhouse).resolve() if args.wheelhouse else None,
        lock=Path(args.lock).resolve() if args.lock else None,
    )  # fmt: skip


def measured_on_branch(cfg: RunnerConfig, branch: str) -> set[str]:
    """Commits of `branch`'s first-parent line this machine already measured.

    Both the store and asv's result files count, so a run interrupted between asv and ingest is
    not measured again.

    Args:
        cfg: runner configuration.
        branch: branch or commit name.

    Returns:
        Full shas.
    """
    from ci.store import Store

    with Store(cfg.db) as store:
        # The machine's jobs that ingest kept apart as a host of another speed (`ci.ingest.speed`) were
        # measured by it too.
        keys = [cfg.machine, *(m.name for m in store.machines() if m.speed and m.machine_name == cfg.machine)]
        stored = {r.commit_sha for k in keys for r in store.results(machine=k)}
        stored |= {f.commit_sha for k in keys for f in store.failures(machine=k)}
    d = cfg.results_dir / cfg.machine
    files = {p.name.split("-", 1)[0] for p in d.glob("*-*.json") if not p.name.startswith("gpu-env")}
    line = git(cfg.repo, "rev-list", "--first-parent", resolve_commit(cfg.repo, branch)).split()
    return {s for s in line if s in stored or s[:8] in files}


def cmd_run(args: argparse.Namespace) -> int:
    """`python -m ci run`."""
    cfg = config_from_args(args)
    if args.pr:
        if not args.base or not args.head:
            raise ValueError("--pr needs --base and --head")
        out = run_pr(cfg, resolve_commit(cfg.repo, args.base), resolve_commit(cfg.repo, args.head))
    else:
        if args.base or args.head:
            raise ValueError("--base/--head go with --pr")
        if args.range:
            commits = commits_in_range(cfg.repo, args.range)
            if not commits:  # a range typed the wrong way round selects nothing: not a run that passed
                lo, _, hi = args.range.partition("..")  # `..B` is never empty: `lo` is given
                hi = hi or "HEAD"
                raise ValueError(f"--range {args.range}: no commit is in it (every commit of {hi} is in {lo} too); "
                                 f"did you mean {hi}..{lo}?")
        elif args.commits:
            commits = [resolve_commit(cfg.repo, c) for c in args.commits]
        else:  # --since-last (argparse requires one mode)
            done = measured_on_branch(cfg, args.branch)
            older: list[str] = []
            commits = new_branch_commits(cfg.repo, args.branch, done, max_commits=args.max_commits, older=older)
            line = f"{args.branch}: {len(commits)} new commit(s) since the last stored run on {cfg.machine}"
            if older:
                # `..B`: every commit up to B, where the oldest left out is the root (a machine's first run).
                lower = f"{older[0][:12]}~1" if git_has_parent(cfg.repo, older[0]) else ""
                line += (f"; {len(older)} older one(s) left out by --max-commits {args.max_commits} and not measured "
                         f"by a later --since-last either: `--range {lower}..{older[-1][:12]}` measures them")
            say(line)
        if not commits:
            say("nothing new to measure")
        out = run_history(cfg, commits)
    # PR mode decided with these settings already (a history job reads no thresholds here).
    print_outcome(out, cfg.settings.max_threshold if out.comparison is not None else None)
    return out.exit_code


def run_main(args: argparse.Namespace) -> int:
    """Wrap `cmd_run`: an interrupt or a runner error is exit 2 with a one-line reason. A cancelled
    GitHub job's SIGTERM is the same interrupt (`ci.cli.main` makes it one), so asv's process group is
    stopped too instead of running on after the job is gone."""
    from ci.runner.asv import protect_this_process

    protect_this_process()  # before the checkout's code first runs (`asv` from its folder, its gpu_env probe)
    try:
        return cmd_run(args)
    except KeyboardInterrupt:
        # asv writes a commit's result file only when that commit is finished: commits completed
        # before the interrupt are stored, the one in progress is measured again on resume.
        if getattr(args, "pr", False):
            how = "run the same command again: a PR job measures both sides again unless it had finished measuring"
        elif getattr(args, "no_resume", False):
            how = "run it again without --no-resume to measure only what is missing"
        else:
            how = ("run the same command again to resume (commits finished before the interrupt are stored; "
                   "the commit in progress starts over)")
        print(f"error: interrupted; {how}", file=sys.stderr)
        return EXIT_ERROR
