"""`python -m ci run`: benchmark commits through the asv suite, store, decide, render, comment.

Three ways to pick what to measure, all on one machine in one job:

- `--range A..B` (or `--commits SHA...`): every commit of a git range, oldest first;
- `--branch NAME` (default): the branch's commits since the newest one this machine already has in
  the store (the first run takes the last `--max-commits`);
- `--pr --base X --head Y`: a pull request's base and head, measured in ONE asv call with
  `--interleave-rounds`, so drift over the job hits both sides alike (asv's `continuous` recipe).

Per commit the runner calls the real asv CLI (`asv run HASHFILE:... --record-samples --machine M`),
streaming asv's own per-benchmark lines; torch is never reinstalled because the suite's
`install_command` only writes a `.pth` (see benchmarks/_asv_install.py). Then it records the GPU
state (the suite's `gpu_env` sidecar, written here when no GPU benchmark wrote it), ingests the
results (idempotent: a re-ingest changes nothing), computes verdicts and change points, renders the
dashboard and writes (with a token: posts) the PR comment.

Resume: history runs pass `--skip-existing` to asv, so a re-run measures only what is missing, and
ingest after every commit keeps the store in step with asv's files; asv saves a commit's file when
the commit (or, interleaved, a round) finishes, so an interruption loses at most the commit in
flight. A PR run measures both sides afresh (an A/B needs them measured together, in one job, by
the same subset): asv's files for them may hold one round of an interrupted job, or results of an
`asv continuous` of another day. Only a PR job that finished measuring (its marker in
`<repo>/.asv/ci-jobs/` names the subset and asv arguments, and the files are unchanged since) is
not measured again; asv rewrites the files and the store replaces the old runs.

Exit codes (`ci.exit_codes`): 0 clean, 1 a regression or a failed correctness gate, 2 an error (asv
could not run, a commit produced no result file, an interrupted run, bad arguments).

By concern: `config` (the job, the host), `git` (which commits), `asv` (the asv CLI), `progress`
(what it prints), `measure` (asv calls and ingest), `publish` (comment and dashboard), `jobs`
(history and PR jobs), `command` (the `run` subcommand).

This package imports no torch: the GPU state comes from a `python -m benchmarks.gpu_env` subprocess.
"""
