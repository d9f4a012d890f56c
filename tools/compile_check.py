"""Ahead-of-time resource report: every shipping Triton kernel compiled for sm_80, sm_89 and sm_90 on
any machine, with its registers, spills, shared memory and programs per SM.

CI has no GPU and runs the kernels in Triton's interpreter, which accepts code the GPU compiler
rejects, and no GPU of each architecture the product serves (the runner's RTX 4000 Ada is sm_89,
A100s sm_80, the H200 sm_90). This compiles each kernel module's `compile_specs` (`ragged_kernels.aot`)
with the installed Triton and its bundled ptxas and prints one line per kernel and architecture.
Exit status 1 when a compilation fails, spills, needs more shared memory per block than the
architecture has, or fits no program on an SM; 2 on a bad argument or under TRITON_INTERPRET.

Usage: python -m tools.compile_check [--arch 80 89 90] [--variants] [--jobs N]
(`--variants`: also the attention candidates of `tools.bench_kernels --variants`, for sm_90.)
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from concurrent.futures import ProcessPoolExecutor

# Spills that ship on purpose: (architecture, spec name) -> the bytes it may spill, each a config measured
# fastest as it is although ptxas spills it. Empty since 2026-12-04: the pack/unpack and ragged_linear
# entries of 2026-12-01 (272-494 and 208 B on sm_90) came from compiles that left the widths and unit
# strides unspecialised; compiled as the JIT specialises them, nothing spills. Re-measure before adding one.
KNOWN_SPILLS: dict[tuple[int, str], int] = {}


@functools.cache  # per process: ragged_linear's specs compile while they are fitted to the architecture
def specs_for(capability: int, variants: bool) -> list:
    import torch

    from pruners.kernels import compile_specs as pruner_specs
    from ragged_kernels.aot import library_specs
    from ragged_kernels.attention.fwd import attention_spec

    specs = library_specs(capability) + pruner_specs(capability)
    if variants:
        from tools.bench_kernels import variants as sweep_variants

        specs += [attention_spec(d, torch.float16, cfg) for d in (32, 64, 128) for cfg in sweep_variants(d)]
    return specs


def _line(args: tuple[int, bool, int]) -> tuple[bool, str]:
    """Compile spec number `index` of `capability` in a worker process; (ok, the report's line)."""
    capability, variants, index = args
    from ragged_kernels.aot import report

    spec = specs_for(capability, variants)[index]
    try:
        r = report(spec, capability)
    except Exception as exc:  # noqa: BLE001 - report every kernel, then fail
        text = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
        return False, f"FAIL sm_{capability} {spec.name}: {type(exc).__name__}: {text}"
    budget = KNOWN_SPILLS.get((capability, spec.name), 0)
    problems = [p for p in r.problems if not (p.startswith("spills") and r.spill_bytes <= budget)]
    ok = not problems
    known = " (a known spill, see KNOWN_SPILLS)" if r.spill_bytes and ok else ""
    return ok, (f"{'ok  ' if ok else 'FAIL'} sm_{capability} {spec.name}: {r.registers} registers, "
                f"{r.spill_bytes} B spilled{known}, {r.shared_bytes} B shared, {r.programs_per_sm} programs/SM "
                f"({r.limit})" + ("" if ok else " -- " + "; ".join(problems)))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--arch", type=int, nargs="+", default=[80, 89, 90], choices=(80, 89, 90),
                    help="compute capabilities x10 (80: A100, 89: Ada, 90: H100/H200)")
    ap.add_argument("--variants", action="store_true", help="also the kernel variants of bench_kernels --variants")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="compile processes")
    args = ap.parse_args(argv)
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        print("compile_check: unset TRITON_INTERPRET (interpreted kernels cannot be compiled)", file=sys.stderr)
        return 2
    if args.jobs < 1:
        ap.error("argument --jobs: expected an integer >= 1")
    work = [(c, args.variants, i) for c in args.arch for i in range(len(specs_for(c, args.variants)))]
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        results = list(pool.map(_line, work))
    for _, line in results:
        print(line)
    failed = sum(not ok for ok, _ in results)
    archs = ", ".join(f"sm_{c}" for c in args.arch)
    print(f"{len(results) - failed}/{len(results)} compilations fit without spilling ({archs})")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
