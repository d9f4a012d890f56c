"""Harnesses and one-off tools; they import the public API of the product packages and are not
installed with them. Run them from the repository root as `python -m tools.<name>`:
`bench_ingest` (ingest and read time of a large synthetic history), `bench_verdicts` (false alarm
and detection rates of the A/B verdicts, change-point time), `bench_render` (dashboard render
time and size); `fixtures` holds the synthetic histories they and the tests build on.
"""
