"""Harnesses and one-off tools: end-to-end and kernel benchmarks, correctness grids, profiles, the
service's scale benches. They import the public API of the product packages (`ragged_kernels`,
`pruners`, `benchmarks`, `ci`, `dashboard`) and are not installed with them; run them from the
repository root, e.g. `python -m tools.bench_e2e --help`."""
