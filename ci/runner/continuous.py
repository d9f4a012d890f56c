"""`python -m ci continuous BASE HEAD`: what `asv continuous` does, decided by the service's rule.

It measures both commits through the real asv CLI in ONE `asv run --interleave-rounds` (as a PR job
does), ingests the results, decides with `ci.verdicts.compare_commits` and the checkout's
asv.conf.json thresholds, prints the PR comment's verdicts as a table and exits as the bot's check
would: 0 clean, 1 a regression or a failed correctness gate, 2 an error. So a user who runs it
locally gets the answer the bot will give (plain `asv continuous` has its own rule: a 1.1 factor
and p < 0.002, and no correctness gates).

Base and head must differ: a fresh clone whose `main` is HEAD would otherwise benchmark a commit
against itself and report "no change". `--aa` asks for exactly that on purpose: one asv call of the
commit, its samples' first half against their second half, labelled as an A/A check (every
difference is noise; a regression there is a false alarm of the rule).
"""

from __future__ import annotations

import argparse
import os
from dataclasses import replace
from pathlib import Path

from ci.exit_codes import EXIT_ERROR, EXIT_OK
from ci.records import Result
from ci.runner.command import job_selection
from ci.runner.config import RunnerConfig, bench_option, check_environment_type, default_machine, nothing_selected
from ci.runner.git import resolve_commit
from ci.runner.progress import say
from ci.text import printable, reader_may_leave

HELP = ("A/B of two commits through the real asv CLI, decided by the PR bot's rule (its table, its exit code): "
        "the local `asv continuous`")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The `continuous` subcommand's options (the parser already has `--db`)."""
    p.add_argument("base", metavar="BASE", help="base commit (a sha, branch or tag: `main`, `HEAD~1`)")
    p.add_argument("head", metavar="HEAD", nargs="?", default="HEAD", help="head commit (default HEAD)")
    p.add_argument("--repo", default=".", help="checkout with asv.conf.json and benchmarks/ (default: .)")
    p.add_argument("--machine", default=None, help="asv machine name (default $ASV_MACHINE or the host name)")
    sel = p.add_mutually_exclusive_group()
    sel.add_argument("--quick", action="store_true", help="only the PR subset (benchmarks.QUICK_REGEX; needs a GPU)")
    sel.add_argument("--cpu", action="store_true",
                     help="only what runs without a GPU (benchmarks.CPU_REGEX; the default on a machine without one)")
    sel.add_argument("--exact", action="store_true",
                     help="only the exact tier (benchmarks.EXACT_REGEX: launches, kernel resources, kept tokens, "
                          "FLOPs; no GPU, no timing, every value exact)")
    sel.add_argument("-b", "--bench", help="asv benchmark regex")
    p.add_argument("--aa", action="store_true",
                   help="BASE and HEAD may be one commit: an A/A check of the rule (first half of the samples "
                        "against the second half of one asv call)")
    p.add_argument("--all", action="store_true", help="list unchanged and new series too")
    p.add_argument("--asv-arg", action="append", default=[], help="extra `asv run` argument (repeatable)")
    p.add_argument("--wheelhouse", default=os.environ.get("RAGGED_WHEELHOUSE"),
                   help="offline host: wheels for asv's environment (default $RAGGED_WHEELHOUSE)")


def _config(args: argparse.Namespace) -> RunnerConfig:
    repo = Path(args.repo).resolve()
    if not (repo / "asv.conf.json").is_file():
        raise ValueError(f"--repo {args.repo}: no asv.conf.json there (point --repo at a checkout of the project)")
    check_environment_type(repo)
    bench, db, env = job_selection(args, repo, cpu_without_gpu=True)
    return RunnerConfig(
        repo=repo, db=db, machine=args.machine or default_machine(), bench=bench, branch=None, resume=False,
        asv_args=tuple(args.asv_arg), env=env, wheelhouse=Path(args.wheelhouse).resolve() if args.wheelhouse else None,
    )  # fmt: skip


def uncommitted_note(repo: Path) -> str:
    """A note when the checkout has uncommitted changes ("" when clean): asv builds each commit as it
    was committed, so a change to the library not yet committed is not measured ("my change shows no
    effect"), while asv reads the benchmarks and asv.conf.json from the working tree, for both sides."""
    from ci.runner.git import git

    changed = [line[3:] for line in git(repo, "status", "--porcelain", "--untracked-files=no").splitlines()
               if len(line) > 3]
    if not changed:
        return ""
    suite = [p for p in changed if p.startswith("benchmarks/") or p == "asv.conf.json"]
    shown = ", ".join(changed[:3]) + (f" and {len(changed) - 3} more" if len(changed) > 3 else "")
    return printable(f"note: uncommitted changes ({shown}): asv measures each commit as committed, so changes to the "
                     "code are not measured" + ("; the benchmarks and asv.conf.json of the working tree are used for "
                                                "both sides" if suite else "") + "; commit them to measure them")


def suite_note(repo: Path, head: str, head_name: str) -> str:
    """A note when the checkout is not at the head commit ("" when it is): asv reads the benchmarks from
    the working tree, for both sides, so a head's new, changed or removed benchmarks are measured only
    from a checkout of the head (`continuous main feat` from main's checkout showed none of feat's)."""
    from ci.runner.git import git

    at = git(repo, "rev-parse", "HEAD").strip()
    if at == head:
        return ""
    return printable(f"note: the benchmarks come from the checkout's working tree, at {at[:12]}, not from head "
                     f"{head_name} ({head[:12]}): both sides run that suite; check the head out to measure its "
                     "benchmarks")


def _halves(results: list[Result]) -> tuple[list[Result], list[Result]]:
    """Each result's samples split in measurement order: the first half and the second half, as two
    sides of one job (the same commit, so every difference between them is noise)."""
    return ([replace(r, samples=r.samples[: len(r.samples) // 2]) for r in results],
            [replace(r, samples=r.samples[len(r.samples) // 2 :]) for r in results])


def cmd_continuous(args: argparse.Namespace) -> int:
    """`python -m ci continuous BASE [HEAD]`. SIGTERM (a cancelled job, `timeout`, `kill`) stops it as
    Ctrl-C does (`ci.cli.main` makes it KeyboardInterrupt): asv's process group too, exit 2 with a
    one-line reason (it was exit 143, silently)."""
    from ci.outputs.table import render_table
    from ci.runner.asv import ensure_machine, protect_this_process
    from ci.runner.jobs import ab_comparison
    from ci.runner.measure import ingest_results, job_lock, measure
    from ci.store import Store
    from ci.verdicts import compare, exit_code, machine_keys, measurement_line, not_measured, spreads
    from ci.verdicts.inputs import results_with_crashes

    protect_this_process()  # before the checkout's code first runs (`asv` from its folder, its gpu_env probe)
    repo = Path(args.repo).resolve()
    base = resolve_commit(repo, args.base)
    head = resolve_commit(repo, args.head)
    if base == head and not args.aa:
        raise ValueError(
            f"base {args.base} ({base[:12]}) and head {args.head} ({head[:12]}) are the same commit: nothing to "
            "compare (on a fresh clone `main` is HEAD: check out the branch to test, or name its base, e.g. HEAD~1); "
            "--aa measures one commit against itself as an A/A check"
        )
    cfg = _config(args)
    settings = cfg.settings
    for note in (uncommitted_note(repo), suite_note(repo, head, args.head)):
        if note:
            say(note)
    ensure_machine(cfg)
    with job_lock(cfg), Store(cfg.db, create=True) as store:
        if base == head:
            say(f"A/A check of {head[:12]}: one asv call, the first half of each series' samples against the second "
                "half; every difference is noise")
            (run,) = measure(cfg, store, [(head,)], interleave=False)
            ingest_results(cfg, store)
            b, h = _halves([r for m in machine_keys(store, cfg.machine) for r in results_with_crashes(store, head, m)
                            if run.measured is None or r.benchmark.name in run.measured])  # this call's only
            verdicts = compare(b, h, settings=settings)
            sides = spreads(b, h)
            problem = not_measured(h, "commit", head)
            rule = "in-job rule: both halves come from one asv call of one commit"
        else:
            (run,) = measure(cfg, store, [(base, head)], interleave=True)
            ingest_results(cfg, store)
            comparison = ab_comparison(cfg, store, base, head, run.measured)
            verdicts, sides = comparison.verdicts, spreads(comparison.base, comparison.head)
            problem = comparison.problem
            rule = measurement_line(comparison, settings.max_threshold)  # in-job, or cross-job (a marker missing)
        if run.measured is not None and not run.measured:  # asv ran nothing: say why, not "no point on head"
            problem = nothing_selected(cfg.bench)
    label = f"A/A check of {head[:12]}" if base == head else f"base {base[:12]} ({args.base}) -> head {head[:12]} " \
        f"({args.head})"
    code = exit_code(verdicts)
    with reader_may_leave():  # `ci continuous ... | head`: the verdict's exit code stands
        print()
        print(printable(f"{label} on {cfg.machine}, {len(verdicts)} series: {bench_option(cfg.bench)}"))
        print(printable(rule))
        print(render_table(verdicts, spreads=sides, settings=settings, only_changed=not args.all,
                           problem=problem or ""), end="")
        if base == head and code != EXIT_OK:
            print("A/A check: the rule called a difference between two halves of one job's samples of the same "
                  "commit: a false alarm.")
    return EXIT_ERROR if problem else code
