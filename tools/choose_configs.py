"""Choose the attention kernel's configs for an architecture without its card, by a stated rule.

The H200 table (`ragged_kernels.attention.fwd.H200_CONFIGS`) was measured; sm_80 (A100) and sm_89
(RTX 4000 Ada, the product's runner) have no card here. Without a card, the measured choice stands
unless the architecture's limits forbid it, and then the smallest change that fits is taken. For each
head dim and table bucket, from the resources ptxas reports for the architecture:

1. the H200 entry, if it neither spills nor needs more shared memory per block than the architecture
   has;
2. else, at the entry's pipeline stages and then one stage fewer at a time: a register cap (when the
   entry has one) raised to the smallest of 80/96/104 that does not spill and still fits more
   programs per SM than no cap (a cap that adds no program only costs: on the H200 the cap cost 3-15%
   where occupancy did not bind), else no cap; the first that fits.
fp16 and bf16 compile alike (the choice is made on fp16); fp32 (upcast math) falls back to bucket 0's
config as on the H200. The tile (BLOCK_M x BLOCK_N, warps, tail width) never changes: the grid and
the native entry point's bucket rule stay those of the H200.

Prints, per architecture, the candidates' registers, spills, shared memory and programs per SM, the
choice, and the waves of WAVE_POINTS (the kernel tables' grid points) on the reference card (48 SMs for sm_89, 108 for
sm_80). Usage: python -m tools.choose_configs [--arch 80 89]   (no GPU; TRITON_INTERPRET unset)
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import replace

CAPS = (80, 96, 104)
# (batch, tokens per image, capacity): the grid points whose waves are printed
WAVE_POINTS = ((4, 99, 197), (32, 99, 197), (128, 99, 197), (32, 197, 197), (32, 577, 577))


def _report(capability: int, head_dim: int, cfg, verbose: bool):
    import torch

    from ragged_kernels.aot import report
    from ragged_kernels.attention.fwd import attention_spec

    try:
        r = report(attention_spec(head_dim, torch.float16, cfg), capability)
    except Exception as exc:  # noqa: BLE001 - a candidate that does not compile is out
        if verbose:
            print(f"    {cfg}: does not compile ({type(exc).__name__})")
        return None
    if verbose:
        print(f"    {cfg}: {r.registers} registers, {r.spill_bytes} B spilled, {r.shared_bytes} B shared, "
              f"{r.programs_per_sm} programs/SM ({r.limit}){' -- ' + '; '.join(r.problems) if r.problems else ''}")
    return None if r.problems else r


def choose(capability: int, head_dim: int, bucket: int, verbose: bool = True):
    """(the config the rule picks, its report) for one head dim and bucket; see the module docstring."""

    from ragged_kernels.attention.fwd import H200_CONFIGS

    base = H200_CONFIGS[head_dim][bucket]
    r = _report(capability, head_dim, base, verbose)
    if r is not None:
        return base, r
    for stages in range(base.num_stages, 0, -1):
        uncapped = replace(base, num_stages=stages, maxnreg=0)
        r_free = _report(capability, head_dim, uncapped, verbose)
        for cap in (c for c in CAPS if base.maxnreg and c >= base.maxnreg):
            cfg = replace(base, num_stages=stages, maxnreg=cap)
            r = _report(capability, head_dim, cfg, verbose)
            if r is not None and (r_free is None or r.programs_per_sm > r_free.programs_per_sm):
                return cfg, r
        if r_free is not None:
            return uncapped, r_free
    raise RuntimeError(f"no candidate fits sm_{capability} at head dim {head_dim}, bucket {bucket}")


def waves(capability: int, table: dict) -> list[str]:
    from ragged_kernels.aot import ARCHS
    from ragged_kernels.attention.fwd import config_bucket

    arch, out = ARCHS[capability], []
    for batch, tokens, cap in WAVE_POINTS:
        pairs = batch * 12
        bucket = config_bucket(cap, pairs)
        cfg, programs = table[64][bucket]
        tiles = -(-tokens // cfg.BLOCK_M) * pairs
        slots = arch.sms * programs
        out.append(f"B {batch} x {tokens}/{cap}: bucket {bucket}, {tiles} programs with work over {slots} slots "
                   f"({arch.sms} SMs x {programs}) = {tiles / slots:.2f} waves")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--arch", type=int, nargs="+", default=[80, 89], choices=(80, 89, 90))
    args = ap.parse_args(argv)
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        print("choose_configs: unset TRITON_INTERPRET (interpreted kernels cannot be compiled)", file=sys.stderr)
        return 2
    for capability in args.arch:
        print(f"\n## sm_{capability}")
        table = {}
        for head_dim in (32, 64, 128):
            row = []
            for bucket in range(3):
                print(f"  head dim {head_dim}, bucket {bucket}:")
                cfg, r = choose(capability, head_dim, bucket)
                row.append((cfg, r.programs_per_sm))
                print(f"  -> {cfg}")
            table[head_dim] = row
        print("\n".join(["", "waves on the reference card (head dim 64, 12 heads):"] + waves(capability, table)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
