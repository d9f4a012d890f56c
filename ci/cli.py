"""`python -m ci`: the service's command line.

Exit codes (shared by every command): 0 clean, 1 a regression, a failed correctness gate or a
benchmark that crashed on head, 2 an error (bad arguments, a malformed or truncated input file, a
database problem, an interrupt, or a part of the service that is not available yet).

    python -m ci ingest  [--db DB] [--config FILE] [--repo PATH [--branch NAME]] [--replace] RESULTS_DIR
    python -m ci compare [--db DB] [--config FILE] --base SHA --head SHA [--machine NAME]
    python -m ci comment [--db DB] [--config FILE] --base SHA --head SHA [--machine NAME] [--out FILE]
                         [--dashboard-url URL] [--commit-url URL] [--job-url URL]
                         [--repo OWNER/NAME --pr N [--api-url URL] [--dry-run FILE]]
                         [--structure-only | --keep-structure] [--pr-head SHA]
    python -m ci continuous BASE [HEAD] [--repo PATH] [--cpu | --quick | -b REGEX] [--aa]
    python -m ci dashboard [--db DB] [--config FILE] --out DIR [--title T] [--base-url URL] [--baseline SHA]
                           [--branch NAME]
    python -m ci ack     [--db DB] --benchmark KEY --commit SHA --who NAME --why TEXT
    python -m ci run  (--range A..B | --commits SHA... | --since-last | --pr --base X --head Y) [--quick]
                      [--no-exact]
    python -m ci demo [--commits N] [--cpu | --gpu]

`--db` is a path (an SQLite file, default `.asv/history.sqlite`) or any SQLAlchemy URL. The
project's asv.conf.json (its name, URLs and `regressions_thresholds`) is what `ingest` kept in the
store (found beside RESULTS_DIR, or `--config FILE`); `--config FILE` on the other commands
overrides it (`ci.project.project_settings`: one set of thresholds for every command that decides).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ci.exit_codes import EXIT_ERROR, EXIT_OK
from ci.project import ConfigError, ProjectSettings
from ci.store import DEFAULT_DB, StoreError, StoreLimitError
from ci.text import printable, reader_may_leave, silence_stdout

if TYPE_CHECKING:
    from ci.store import Store, StoreReads
    from ci.verdicts import Comparison, VerdictSettings


def _open(args: argparse.Namespace, *, create: bool = False, read_only: bool = False) -> Store:
    """The store named by --db. Only `ingest` (and `run`) create one: the commands that read a
    history, or add a verdict or an acknowledgement to it, fail on a mistyped path instead of
    working on a new, empty store (and, for `dashboard`, replacing a published site with it). The
    commands that only read (`dashboard`, `compare --no-save`) open it `read_only`: no write lock,
    so they read a read-only file and never queue behind an ingest."""
    from ci.store import Store

    return Store(args.db, create=create, read_only=read_only)


def _comparison(store: StoreReads, args: argparse.Namespace, settings: VerdictSettings | None = None
                ) -> tuple[str, str, list[str], Comparison]:
    """Base/head shas, the machines compared (`ci.verdicts.pick_machines`: one asv machine's
    environments), and their `ci.verdicts.Comparison` (crashed benchmarks included, so the verdicts
    fail them on head instead of never seeing them; the jobs that measured them), decided with
    `settings` (`ci.verdicts.VerdictSettings`, from `_settings`)."""
    from ci.verdicts import compare_commits, pick_machines

    base = store.resolve_commit(args.base)
    head = store.resolve_commit(args.head)
    if base == head:  # one stored result read twice would compare "unchanged" everywhere, a pass by construction
        raise ValueError(f"base {args.base} and head {args.head} are the same commit ({base[:12]}): nothing to compare "
                         "(`python -m ci continuous --aa` measures one commit against itself as an A/A check)")
    machines = pick_machines(store, base, head, args.machine)
    return base, head, machines, compare_commits(store, base, head, machines, settings=settings)


def _order_warning(store: StoreReads, base: str, head: str) -> str | None:
    """A warning when `base` is the newer of the two commits: ratios read head / base, so every change
    the newer commit made reads inverted (a slowdown as an improvement, exit 0). Newer by git's
    generation where ingest read a checkout (a commit's generation exceeds every ancestor's), else by
    the commits' dates; None when in order or unknown."""
    known = {c.sha: c for c in store.commits() if c.sha in (base, head)}
    b, h = known.get(base), known.get(head)
    if b is None or h is None:
        return None
    if b.position is not None and h.position is not None:
        if b.position <= h.position:
            return None
        why = f"comes after head {head[:12]} in git's history (generation {b.position} > {h.position})"
    elif b.time is not None and h.time is not None and b.time > h.time:
        why = f"is dated after head {head[:12]} ({b.time:%Y-%m-%d %H:%M} > {h.time:%Y-%m-%d %H:%M} UTC)"
    else:
        return None
    return (f"warning: base {base[:12]} {why}: ratios read head / base, so a change the newer commit made reads "
            "inverted (a slowdown as an improvement); swap --base and --head unless that is meant")


def _save_verdicts(store: Any, args: argparse.Namespace, verdicts: Sequence[Any], order: str | None
                   ) -> tuple[str, str | None]:
    """Store a comparison's verdicts unless --no-save, or unless base is the newer commit (`order`) and
    --save-reversed was not passed: a swapped pair's verdicts, once stored, showed on the dashboard as
    regressions of the older commit, against the newer, for good (a later compare in order adds its
    own and removes none). Returns what the order warning adds ("" when nothing is held back) and, where
    the store refused the write (a read-only role or file), the error to print after the verdicts: they
    were decided, and the refusal alone was printed in their place (2026-12-07)."""
    from sqlalchemy.exc import SQLAlchemyError

    from ci.store import StoreError

    if args.no_save:
        return "", None
    if order and not args.save_reversed:
        return "; its verdicts were not saved (--save-reversed saves them)", None
    try:
        store.save_verdicts(verdicts)
    except (SQLAlchemyError, StoreError) as exc:
        return "", (f"the verdicts above were not saved ({_one_line(exc, getattr(args, 'db', None))}); "
                    "--no-save compares without writing")
    return "", None


def _settings(store: StoreReads, args: argparse.Namespace) -> ProjectSettings:
    """The `ci.project.ProjectSettings` a command decides and writes by: `--config`'s, else the store's
    (whose `regressions_directions` the store's reads then follow too)."""
    from ci.project import project_settings

    rules = project_settings(store, args.config)
    if args.config is not None:
        store.use_project(rules.project)
    return rules


def _rules_line(rules: ProjectSettings) -> str:
    """Where the thresholds that decided come from, in one line."""
    from ci.verdicts.settings import ASV_DEFAULT_THRESHOLD

    project = rules.project
    if not project.source:
        return ("thresholds: built in (the store holds no asv.conf.json: ingest with --config FILE, or pass it "
                "here)")
    named = f" of {project.name!r}" if project.name else ""
    if not project.thresholds:  # the file sets none: asv's own default decides, as `asv publish` reads it
        return (f"thresholds: asv's default, {ASV_DEFAULT_THRESHOLD:.0%} ({project.source}{named} sets no "
                "regressions_thresholds)")
    return f"thresholds: regressions_thresholds{named} in {project.source}"


def _machines_line(store: StoreReads, machines: Sequence[str]) -> str:
    """The machines a comparison ran on, as a reader knows them (environments named where several)."""
    from ci.records import machine_labels

    labels = machine_labels(store.machines())
    return ", ".join(labels.get(m, m) for m in machines)


def _print_verdicts(verdicts: Sequence[Any], *, several: bool = False, labels: dict[str, str] | None = None) -> None:
    labels = labels or {}
    for v in verdicts:  # a series key comes from benchmark code: printable, so it cannot forge or repaint a line
        ratio = f"{v.ratio:.3f}" if v.ratio == v.ratio else "   -"
        reason = f"  ({v.reason})" if v.reason else ""
        # several environments: each row names its own, as the dashboard and the comment label it (the first
        # environment's bare key read as the whole machine, "[GH-Actions]" beside "[GH-Actions [conda-py3.13]]")
        where = f"  [{labels.get(v.machine, v.machine)}]" if several else ""
        print(printable(f"{v.shown:<12} {ratio:>8}  {v.benchmark.key}{where}{reason}"))


PROGRESS_EVERY_S = 5.0  # a long ingest says where it is this often (on stderr)


def ingest_progress_printer(every_s: float | None = None) -> Callable[[Any], None]:
    """An `ingest_results_dir` progress callback that prints a line to stderr at most every `every_s`
    seconds (default `PROGRESS_EVERY_S`), so a short ingest prints nothing and a long one shows
    files, points and points/s."""
    from ci.ingest import throughput

    every_s = PROGRESS_EVERY_S if every_s is None else every_s
    last = [0.0]

    def show(p: Any) -> None:
        if p.seconds - last[0] >= every_s:
            last[0] = p.seconds
            print(f"ingest: {p.files_done}/{p.files_total} files, {p.points_written:,} points written in "
                  f"{p.seconds:.0f} s ({throughput(p.points_written, p.seconds)})", file=sys.stderr, flush=True)

    return show


def _jobs_line(comparison: Comparison, settings: VerdictSettings | None = None) -> str:
    """One line on how base and head were measured and which rule (in-job or cross-job) decided, with
    the cross-job thresholds wider than the settings' cap counted."""
    from ci.verdicts import measurement_line

    return measurement_line(comparison, settings.max_threshold if settings is not None else None)


def cmd_ingest(args: argparse.Namespace) -> int:
    from ci.ingest import AsvFormatError, ingest_results_dir
    from ci.ingest.results_dir import SAME_MACHINE_ERROR
    from ci.project import direction_notes, read_project, record_project
    from ci.records import Project

    with _open(args, create=True) as store:
        store.require_writable()  # a read-only store: one error naming it, not one per file
        # First: a malformed asv.conf.json stops the ingest before any result goes in.
        read_project(args.results_dir, args.config)
        try:
            report = ingest_results_dir(store, args.results_dir, repo=args.repo, branch=args.branch,
                                        progress=ingest_progress_printer(), replace=args.replace,
                                        redefine=args.redefine or ())  # fmt: skip
        except AsvFormatError as exc:  # benchmarks.json, which every file needs: "FILE: reason", as for any file
            print(f"error: {printable(str(exc))}", file=sys.stderr)
            return EXIT_ERROR
        # Kept after the files, so that one its `regressions_directions` cannot be matched with (a pattern
        # past its time limit on a series' name) is refused after the report, not instead of it.
        try:
            note = record_project(store, args.results_dir, args.config)
            directions = direction_notes(store.project() or Project(), store.benchmarks(), store.declared_keys())
        except (ValueError, RuntimeError) as exc:  # ConfigError; a damaged stored setting (StoreError)
            note, directions = "", [f"error: {exc}; the files above went in, the store keeps its earlier settings"]
    with reader_may_leave():
        # The files skipped for their machine's unreadable machine.json: one line per machine, not per file
        # (59 near-identical lines for one missing machine.json, 2026-12-07).
        same: dict[str, int] = {}
        for f in report.files:  # each message is one line: file names in it are quoted where unusual
            if f.status == "error" and f" {SAME_MACHINE_ERROR} " in f.message:
                carrier = f.message.rsplit(f" {SAME_MACHINE_ERROR} ", 1)[1]
                same[carrier] = same.get(carrier, 0) + 1
            elif f.status == "error":
                print(f"error: {f.message}", file=sys.stderr)
        for line in report.warnings():  # benchmarks skipped or left out: one line per distinct warning
            print(line, file=sys.stderr)
        for carrier, count in same.items():
            print(f"error: {count} more result file(s) of that machine {SAME_MACHINE_ERROR} {carrier}",
                  file=sys.stderr)
        for line in (*report.notes, *([printable(note)] if note else []), *map(printable, directions)):
            print(line, file=sys.stderr)
        print(report.summary())
        if not report.files:  # a mistyped or empty folder: nothing was read, which is not a pass
            print(printable(f"error: no asv result files under {args.results_dir}: asv writes each run as "
                            "MACHINE/COMMIT-ENVIRONMENT.json beside benchmarks.json and MACHINE/machine.json"),
                  file=sys.stderr)
            return EXIT_ERROR
        if report.stored_nothing:  # every benchmark skipped: nothing of the files is in the store
            # Whatever skipped them (the warnings above say which): missing from benchmarks.json, of another
            # version, or more than the store holds (a 30,000-character series key read "missing from its
            # benchmarks.json", 2026-12-07).
            print(printable(f"error: no result of the files under {args.results_dir} was stored: every benchmark "
                            "they hold was skipped (the warnings above say why: missing from its benchmarks.json, of "
                            "another benchmark version, or more than the store holds; is benchmarks.json the one "
                            "`asv run` wrote beside these files?); ingest again once that is fixed, and the files "
                            "are read again"), file=sys.stderr)
            return EXIT_ERROR
    # A malformed file is an error even though every other file went in.
    return EXIT_OK if report.ok and not any(line.startswith("error:") for line in directions) else EXIT_ERROR


def cmd_compare(args: argparse.Namespace) -> int:
    from ci.records import machine_labels
    from ci.verdicts import exit_code
    with _open(args, read_only=args.no_save) as store:
        with store.snapshot():  # one state of the history for every read, whatever an ingest writes meanwhile
            rules = _settings(store, args)
            base, head, machines, comparison = _comparison(store, args, rules.verdicts)
            where = _machines_line(store, machines)
            labels = machine_labels(store.machines())
            order = _order_warning(store, base, head)
        saved, unsaved = _save_verdicts(store, args, comparison.verdicts, order)
    problem = comparison.problem
    with reader_may_leave():
        if order:
            print(printable(order + saved), file=sys.stderr)
        print(printable(f"base {base[:12]}  head {head[:12]}  machine {where}: {len(comparison.verdicts)} series"))
        print(printable(_rules_line(rules)))
        print(printable(_jobs_line(comparison, rules.verdicts)))
        _print_verdicts(comparison.verdicts, several=len(machines) > 1, labels=labels)
        for line in (problem, unsaved):  # a check that did not run is not a pass: never "no regression"
            if line:
                print(printable(f"error: {line}"), file=sys.stderr)
    return EXIT_ERROR if problem or unsaved else exit_code(comparison.verdicts)


def cmd_comment(args: argparse.Namespace) -> int:
    from ci.outputs.comment import GITHUB_MAX_CHARS, comment_context, comment_environment, github_urls, render_comment
    from ci.outputs.structure import SECTION_ROOM
    from ci.verdicts import exit_code

    if (args.repo is None) != (args.pr is None):
        raise ValueError("--repo and --pr go together (post the comment to that pull request)")
    if args.keep_structure and args.structure_only:
        raise ValueError("--keep-structure and --structure-only exclude each other: a job either measured the exact "
                         "tier alone or left it to another")
    commit_url, job_url = github_urls(os.environ)
    if args.repo is not None and "GITHUB_REPOSITORY" not in os.environ:
        commit_url = github_urls({**os.environ, "GITHUB_REPOSITORY": args.repo})[0]
    with _open(args, read_only=args.no_save) as store:
        with store.snapshot():  # the comparison and the comment's context from one state of the history
            rules = _settings(store, args)
            # Decided afresh (compare is deterministic), not read back: older stored verdicts carry no
            # machine, base-less ones (gates, new series) would pass for this pair's, and "missing on
            # head" ones have no head sha to find them by.
            base, head, machines, comparison = _comparison(store, args, rules.verdicts)
            order = _order_warning(store, base, head)
            # the same table and context as `python -m ci run --pr` posts
            env = comment_environment(store, machines, [r for r in comparison.head if r.samples])
            context = comment_context(store, comparison, env, commit_url=args.commit_url or commit_url,
                                      job_url=args.job_url or job_url, settings=rules.verdicts,
                                      project=rules.project)  # fmt: skip
        saved, unsaved = _save_verdicts(store, args, comparison.verdicts, order)
    if order:
        with reader_may_leave():
            print(printable(order + saved), file=sys.stderr)
    verdicts = comparison.verdicts
    body = render_comment(verdicts, [], base_sha=base, head_sha=head, environment=env, dashboard_url=args.dashboard_url,
                          context=context, section_room=SECTION_ROOM)  # fmt: skip
    merge: Callable[[str], str] | None = None
    if args.keep_structure:  # the exact workflow measures this head's exact tier: its section, or "pending"
        from ci.outputs.structure import keep_section

        own = body
        merge = lambda existing: keep_section(existing, own, head, GITHUB_MAX_CHARS)
        body = merge("")
    elif args.structure_only:  # this job measured the exact tier only: the rest of the comment stays
        from ci.outputs.structure import merge_section

        own = body
        merge = lambda existing: merge_section(existing, own, GITHUB_MAX_CHARS)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            fh.write(body)
    elif args.repo is None:
        with reader_may_leave():
            print(body)
    if args.repo is not None:
        from ci.outputs.github import post_sticky_comment as post

        posted: list[str] = []

        def merged(existing: str) -> str:
            assert merge is not None
            posted.append(merge(existing))
            return posted[-1]

        url = post(args.repo, args.pr, body, api_url=args.api_url, dry_run=args.dry_run,
                   merge=merged if merge is not None else None, head_sha=args.pr_head)
        if args.out and posted:  # the file holds what was posted, the kept or merged parts included
            with open(args.out, "w", encoding="utf-8") as fh:
                fh.write(posted[-1])
        with reader_may_leave():
            print(url)
    for line in (comparison.problem, unsaved):  # the comment's headline says the problem; the check fails
        if line:
            print(printable(f"error: {line}"), file=sys.stderr)
    return EXIT_ERROR if comparison.problem or unsaved else exit_code(verdicts)


def cmd_dashboard(args: argparse.Namespace) -> int:
    from ci.site import render_site  # here, not at the top: jinja2 and scipy load only for this command

    if not args.out.strip():
        raise ValueError("--out must name the dashboard's folder")
    with _open(args, read_only=True) as store, store.snapshot():  # one state of the history for the whole site
        if args.branch is not None and not store.commits(branch=args.branch):
            known = sorted({c.branch for c in store.commits() if c.branch})
            raise ValueError(f"no commits of branch {args.branch!r} in the store (branches: "
                             f"{', '.join(known) or 'none recorded; ingest with --repo and --branch'})")
        # The project compare and comment decide by (the title, the commits' links).
        stats = render_site(store, args.out, title=args.title, base_url=args.base_url, baseline_sha=args.baseline,
                            branch=args.branch, project=_settings(store, args).project)  # fmt: skip
    with reader_may_leave():
        print(f"dashboard in {args.out}: {stats.pages_written} pages written, {stats.pages_unchanged} unchanged, "
              f"{stats.series} series, {stats.commits} commits")
    return EXIT_OK


def cmd_ack(args: argparse.Namespace) -> int:
    from ci.records import AlertState, Kind, machine_labels
    from ci.verdicts.inputs import not_run_since

    with _open(args) as store:
        ack = store.acknowledge(args.benchmark, args.commit, args.who, args.why)
        this = (ack.benchmark_key, ack.commit_sha, ack.when)
        closed = [a for a in store.alerts(state=AlertState.ACKNOWLEDGED)
                  if (a.benchmark.key, a.commit_sha, a.acknowledged_at) == this]
        labels = machine_labels(store.machines())
        gate = any(b.key == ack.benchmark_key and b.kind == Kind.CORRECTNESS for b in store.benchmarks())
        broken = [] if gate else [labels.get(m.name, m.name) for m in store.machines()  # a gate fails whatever
                                  if not_run_since(store, ack.benchmark_key, m.name, ack.commit_sha)]
        found = bool(closed) or broken or _regression_at(store, ack.benchmark_key, ack.commit_sha)
    with reader_may_leave():
        print(printable(f"acknowledged {ack.benchmark_key} at {ack.commit_sha[:12]} by {ack.who}: {ack.why}"))
        if broken:  # `ci.verdicts.inputs.known_broken`
            print(printable(f"it has not run at {ack.commit_sha[:12]} or since on {', '.join(broken)} (it failed): a "
                            "comparison there whose base it has not run at since then (failing on both sides) lists it "
                            "as not compared instead of failed, until it runs again"))
        if closed:
            print(printable(f"closed {len(closed)} alert(s): " + ", ".join(
                f"{a.kind.value} on {a.machine}" for a in closed)))
        elif not found:  # stored all the same: a regression the history finds there later is acknowledged
            print(printable(f"warning: the history shows no regression of {ack.benchmark_key} at "
                            f"{ack.commit_sha[:12]} now, so this acknowledges nothing yet (the dashboard shows "
                            "an acknowledgement beside the regression it closes); check the series and commit"),
                  file=sys.stderr)
    return EXIT_OK


def _regression_at(store: Store, key: str, sha: str) -> bool:
    """Whether the history of series `key`, on any machine, has a regression at commit `sha` (the change
    points the dashboard shows): an acknowledgement elsewhere closes nothing, which `ack` said nothing of
    (2026-12-07)."""
    from ci.project import project_settings
    from ci.records import Outcome
    from ci.verdicts import change_points

    floor = project_settings(store).floor_for(key)
    by_machine: dict[str, list[Any]] = {}
    for r in store.results(benchmark_key=key):
        by_machine.setdefault(r.machine, []).append(r)
    return any(cp.commit_sha == sha and cp.outcome == Outcome.REGRESSED
               for rs in by_machine.values() for cp in change_points(rs, floor=floor))


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser of `python -m ci` (exposed for docs and tests)."""
    from ci.ingest import BATCH_FILES

    parser = argparse.ArgumentParser(
        prog="python -m ci",
        description="Continuous performance-regression service: asv results -> store -> verdicts -> "
        "PR comment -> dashboard. Exit codes: 0 clean, 1 regression or correctness failure, 2 error.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    parser.add_argument("--version", action="version", version=f"%(prog)s (ragged-vit {_version()})")

    def add(
        name: str, help_: str, fn: Callable[[argparse.Namespace], int], *, db: str | None = None,
        description: str | None = None,
    ) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_, description=description or help_)
        if db is not None:
            p.add_argument("--db", default=DEFAULT_DB,
                           help=f"SQLite file path or SQLAlchemy URL (default {DEFAULT_DB}); {db}")
        p.set_defaults(func=fn, subparser=p)
        return p

    reads = "it must already hold a store (made by ingest or run)"

    def add_config(p: argparse.ArgumentParser, help_: str | None = None) -> None:
        p.add_argument("--config", metavar="FILE", help=help_ or "the project's asv.conf.json (its name, URLs and "
                       "regressions_thresholds) instead of the one ingest kept in the store")


    p = add(
        "ingest", f"ingest an asv results directory into the store (idempotent; each file is stored whole or not "
        f"at all, {BATCH_FILES} files per transaction; a bad file is reported and skipped)", cmd_ingest,
        db="created when missing",
        description="Ingest an asv results directory into the store. Idempotent: files ingested before are "
        "skipped unread. Each result file is all or nothing (stored whole in its own savepoint, or not at all), "
        f"{BATCH_FILES} files per transaction: an interrupted or killed ingest keeps the batches committed before "
        "it, never part of a file, and the same command run again writes the rest. A bad file is reported as one "
        "'error: FILE: reason' line and skipped; every other file goes in. Prints points/s at the end, and a "
        f"progress line every {PROGRESS_EVERY_S:.0f} s on stderr while a long ingest runs.",
    )  # fmt: skip
    p.add_argument("results_dir", metavar="RESULTS_DIR", help="asv results directory (with benchmarks.json)")
    add_config(p, "the project's asv.conf.json, kept in the store for the commands that decide (default: the "
                  "nearest asv.conf.json above RESULTS_DIR whose results_dir is that folder)")
    p.add_argument("--repo", help="git checkout to read commit parents, branch, time and subject from")
    p.add_argument("--branch", help="branch name recorded on commits reachable from it (needs --repo)")
    p.add_argument("--replace", action="store_true",
                   help="let a file holding a different run of a stored machine, environment and commit than the one "
                   "ingested from another file replace it (recorded in the store); without it such a file is an "
                   "error naming both files. asv rewriting the stored run's own file replaces it either way")
    p.add_argument("--redefine", action="append", metavar="BENCHMARK",
                   help="a benchmark whose unit or declared direction changed on purpose: its stored series keep their "
                   "history under 'BENCHMARK [UNIT until DATE]' and this suite's results start new series under the "
                   "name (without it such a benchmark is left out of every file, with a warning); repeatable; run it "
                   "while no runner writes the store")

    for name, help_, fn in (
        ("compare", "A/B verdicts between a base and a head commit (saved to the store)", cmd_compare),
        ("comment", "render (and optionally post) the PR comment for a base/head pair", cmd_comment),
    ):
        p = add(name, help_, fn, db=reads)
        add_config(p)
        p.add_argument("--base", required=True, help="base commit sha (or unique prefix)")
        p.add_argument("--head", required=True, help="head commit sha (or unique prefix)")
        p.add_argument("--machine", help="asv machine name (every environment and host of it), or one other "
                       "environment as the dashboard names it ('NAME [ENV]'); needed when several machines "
                       "measured both commits")
        p.add_argument("--no-save", action="store_true",
                       help="do not store the verdicts (opens the store read-only: a copied or read-only database)")
        p.add_argument("--save-reversed", action="store_true",
                       help="store the verdicts even when base is the newer commit (by git's history where ingest "
                       "read a checkout, else by date), which are otherwise only shown")
        if name == "comment":
            p.add_argument("--out", help="write the markdown here instead of stdout")
            p.add_argument("--dashboard-url", help="link to the dashboard (http/https)")
            p.add_argument("--commit-url", help="prefix of a commit's web page, e.g. https://github.com/o/r/commit/ "
                           "(default: from GITHUB_SERVER_URL and GITHUB_REPOSITORY, or --repo)")
            p.add_argument("--job-url", help="the job log's web page (default: the GitHub Actions run, from "
                           "GITHUB_SERVER_URL, GITHUB_REPOSITORY and GITHUB_RUN_ID)")
            p.add_argument("--repo", help="owner/name: post the sticky comment to this repository's PR")
            p.add_argument("--pr", type=int, help="pull request number (with --repo)")
            p.add_argument("--structure-only", action="store_true",
                           help="replace only the sticky comment's Structure section (a job that measured the exact "
                                "tier alone keeps the timings another job posted)")
            p.add_argument("--keep-structure", action="store_true",
                           help="this job did not measure the exact tier (the exact workflow does): keep the sticky "
                                "comment's Structure section of this head, or say it is pending")
            p.add_argument("--pr-head", help="post only if the pull request's head is this full sha (a PR number "
                                             "read from an untrusted artifact must name the measured pull request)")
            p.add_argument("--api-url", default=os.environ.get("GITHUB_API_URL", "https://api.github.com"),
                           help="GitHub REST API root (default $GITHUB_API_URL or https://api.github.com)")
            p.add_argument("--dry-run", help="write the body to this file instead of calling GitHub")

    p = add("dashboard", "render the static HTML dashboard from the store", cmd_dashboard, db=reads)
    add_config(p)
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--title", help="page title (default: '<project> benchmarks', the name in asv.conf.json)")
    p.add_argument("--base-url", default="", help="absolute URL prefix for links ('' = relative)")
    p.add_argument("--baseline", help="commit the overview compares against")
    p.add_argument("--branch", help="only this branch's history")

    p = add("ack", "acknowledge an expected regression of one series at one commit", cmd_ack, db=reads)
    p.add_argument("--benchmark", required=True, help="series key, e.g. 'bench_x.T.time_y(dtype=fp16)'")
    p.add_argument("--commit", required=True, help="commit sha (or unique prefix)")
    p.add_argument("--who", required=True, help="who acknowledges")
    p.add_argument("--why", required=True, help="why the change is expected")

    from ci import demo
    from ci.runner import command as runner
    from ci.runner import continuous

    # The runner's default store lives in the checkout measured (--repo), not in the current directory.
    in_repo = "created when missing; the default path is inside --repo"
    runner.add_arguments(add("run", runner.HELP, runner.run_main, db=in_repo))
    continuous.add_arguments(add("continuous", continuous.HELP, continuous.cmd_continuous, db=in_repo))
    demo.add_arguments(add("demo", demo.HELP, demo.cmd_demo))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `python -m ci`.

    Args:
        argv: arguments without the program name; None reads sys.argv.

    Returns:
        0 clean, 1 regression or correctness failure, 2 error.
    """
    parser = build_parser()
    try:
        args, extra = parser.parse_known_args(argv)
        if extra:  # reported with the subcommand's usage, not the top level's
            args.subparser.error(f"unrecognized arguments: {' '.join(extra)}")
    except SystemExit as exc:  # --help (0) or a usage error (2): return instead of exiting
        return exc.code if isinstance(exc.code, int) else EXIT_ERROR
    # SIGTERM (a cancelled CI job, `timeout`, `kill`) stops every command as Ctrl-C does, with its
    # message and exit 2; it ended `ingest` with status 143 and no word (2026-12-07).
    previous = _on_sigterm_interrupt()
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        # Every write is one transaction (ingest: one per batch of BATCH_FILES files, each file whole
        # or not at all): what was not committed is not in the store, and the same command writes it next time.
        print(f"error: interrupted; nothing half-written was kept: run the same {args.command} command again",
              file=sys.stderr)
        return EXIT_ERROR
    except BrokenPipeError:  # output closed before the command's own printing (which `reader_may_leave` covers)
        silence_stdout()
        with contextlib.suppress(BrokenPipeError):
            print("error: the output pipe was closed before the command finished", file=sys.stderr)
        return EXIT_ERROR
    except (StoreError, StoreLimitError, ConfigError) as exc:
        print(f"error: {printable(str(exc))}", file=sys.stderr)
        return EXIT_ERROR
    except Exception as exc:  # every failure is exit 2 with a one-line reason; CI_DEBUG=1 shows the traceback
        if os.environ.get("CI_DEBUG"):
            raise
        print(f"error: {printable(_one_line(exc, getattr(args, 'db', None)))}", file=sys.stderr)
        return EXIT_ERROR
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _on_sigterm_interrupt() -> Any:
    """Make SIGTERM raise KeyboardInterrupt; the handler it replaces, or None where no handler can be set
    (not the main thread)."""
    def raise_interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    try:
        return signal.signal(signal.SIGTERM, raise_interrupt)
    except ValueError:
        return None


def _one_line(exc: BaseException, db: str | None = None) -> str:
    """An exception as one line; a database error names the database (without a password)."""
    from sqlalchemy.exc import SQLAlchemyError

    from ci.store import display_url, error_line

    if isinstance(exc, SQLAlchemyError):
        return f"database {display_url(str(db))}: {error_line(exc)}" if db else f"database: {error_line(exc)}"
    if type(exc) is ValueError and str(exc).strip():  # the service's own refusals: the message says it all
        return " / ".join(line.strip() for line in str(exc).splitlines() if line.strip())
    return error_line(exc)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("ragged-vit")
    except PackageNotFoundError:
        return "unknown (not installed)"
