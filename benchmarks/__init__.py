"""asv benchmark suite for ragged-vit (see benchmarks/README.md).

Benchmark modules import the library lazily (inside `setup`/`setup_cache`), so discovery works at
old commits. torch and triton are imported here, once: asv.conf.json's `launch_method` is
`forkserver`, whose server imports this package before it forks one process per benchmark, so each
process starts with torch loaded (import torch + CUDA init cost ~4 s per process on the H200 VM,
and the full suite runs ~150 processes per round). Nothing here may touch CUDA: a CUDA context in
the server would be inherited, broken, by every forked child; each child initialises its own.
"""

try:  # absent torch/triton (a docs-only checkout): the benchmarks then skip in setup
    import torch  # noqa: F401
    import triton  # noqa: F401
except ImportError:  # pragma: no cover
    pass

# Benchmark-name regexes for `asv run -b REGEX` / `asv continuous -b REGEX` (documented in README.md).
QUICK_REGEX = (
    r"^bench_attention\.AttentionKernelsPR\.time_gpu|^bench_pack\.PackTokens\.time_gpu"
    r"|^bench_correctness\.|^bench_end_to_end\.EndToEndPR\.|CPU\."
)
CPU_REGEX = r"CPU\."
