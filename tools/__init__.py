"""Harnesses and one-off tools; they import the public API of the product packages and are not
installed with them. Run them from the repository root as `python -m tools.<name>`:

- the library: `bench_e2e` (pruned models against the fastest dense one: images/s, latency, kernels per
  forward, compile time), `check_grid` (correctness of every servable mode against the padded
  reference), with `e2e_plan`, `e2e_report` and `e2e_stats` behind bench_e2e;
- the service: `bench_ingest` (ingest and read time of a large synthetic history), `bench_verdicts`
  (false alarm and detection rates of the A/B verdicts, change-point time), `eval_history` (the history
  verdicts on real asv results: injected steps found, delays, false flags, beside asv's own methods),
  `bench_render` (dashboard render time and size); `fixtures` holds the synthetic histories they and the tests build on.
"""
