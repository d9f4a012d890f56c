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
