"""asv benchmark suite for ragged-vit (see benchmarks/README.md).

asv imports every module in this package during discovery, so modules import torch, triton and
the library lazily (inside `setup`/`setup_cache`): discovery stays fast and works at old commits.
Importing the package first lets asv record each track benchmark's `direction` (`declare`).
"""

from .declare import register_with_asv

register_with_asv()

# Benchmark-name regexes for `asv run -b REGEX` / `asv continuous -b REGEX` (documented in README.md).
# The exact tier (bench_structure: launches, kernel resources, kept tokens, FLOPs; no GPU, no noise) runs
# in every subset: on the GPU runner beside the timings, on a machine without one beside the CPU timings,
# and alone (`python -m ci run --exact`) where no timing is wanted (a fork's pull request).
EXACT_REGEX = r"^bench_structure\."
QUICK_REGEX = (
    r"^bench_attention\.AttentionKernelsPR\.time_gpu|^bench_pack\.PackTokens\.time_gpu"
    r"|^bench_correctness\.(KernelError|ModelCorrectnessPR)\.|^bench_end_to_end\.EndToEndPR\."
    r"|^bench_structure\."
)  # GPU timings: without a GPU the runner and the demo use CPU_REGEX
CPU_REGEX = r"CPU\.|^bench_structure\."
# The whole suite less the parameter combinations that can never run: asv matches `-b` against
# `name(param, ...)` (each param as its repr) and spawns no process for an unselected combination
# (24 never-running combinations x 2 methods were ~25 s of process spawns per full run on the H200,
# 2026-11-29). Never running: nested_sdpa captured or compiled (it reads the kept total on the host),
# compile for a backend other than triton and dense (bench_end_to_end.COMPILED_BACKENDS), a compile
# time of a case that does not compile, latency percentiles of a preset above the serving batches
# (batch > 4). A literal, because the runner reads it as text from any checkout (ci.runner.config);
# tests/benchmarks/test_presets.py checks it against the presets and those rules.
FULL_REGEX = (
    r"^(?!bench_end_to_end\.EndToEnd(PR)?\.\w+\(.*'nested_sdpa', '(graph|compile|fused)'\)"
    r"|bench_end_to_end\.EndToEnd(PR)?\.\w+\(.*'(fa2_varlen|padded_sdpa)', '(compile|fused)'\)"
    r"|bench_end_to_end\.EndToEnd(PR)?\.track_compile_seconds\(.*'(eager|graph|fused)'\)"
    r"|bench_end_to_end\.EndToEnd(PR)?\.track_latency_p(50|99)\('(deits224-b32|deitb224-b32|deitb384-b8|deitt224-b8)')"
)
