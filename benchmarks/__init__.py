"""asv benchmark suite for ragged-vit (see benchmarks/README.md).

asv imports every module in this package during discovery, so modules import torch, triton and
the library lazily (inside `setup`/`setup_cache`): discovery stays fast and works at old commits.
"""

# Benchmark-name regexes for `asv run -b REGEX` / `asv continuous -b REGEX` (documented in README.md).
QUICK_REGEX = (
    r"^bench_attention\.AttentionKernelsPR\.time_gpu|^bench_pack\.PackTokens\.time_gpu"
    r"|^bench_correctness\.(KernelError|ModelCorrectnessPR)\.|^bench_end_to_end\.EndToEndPR\."
)  # GPU only: without a GPU the runner and the demo use CPU_REGEX
CPU_REGEX = r"CPU\."
# The whole suite less the parameter combinations that can never run: asv matches `-b` against
# `name(param, ...)` (each param as its repr) and spawns no process for an unselected combination.
# EndToEnd's padded/nested SDPA in graph mode cannot be captured (setup raises NotImplementedError:
# NaN either way); 24 combinations x 2 methods were ~25 s of process spawns per full run (H200,
# session 5). `python -m ci run` uses it when no subset is given.
FULL_REGEX = r"^(?!bench_end_to_end\.EndToEnd(PR)?\.\w+\(.*'(padded_sdpa|nested_sdpa)', 'graph'\))"
