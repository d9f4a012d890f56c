"""Compile every Triton kernel the library launches on a GPU, for a GPU target, on any machine.

CI has no GPU and runs the kernels in Triton's interpreter, which accepts code the GPU compiler
rejects (an unsupported sort dtype, a tile that does not fit shared memory, a layout error). This
compiles the shipping configurations ahead of time for a CUDA target (default sm_90, the H200)
with the installed Triton and its bundled ptxas, and prints one line per kernel with its shared
memory. Exit status 1 if any fails.

Usage: python scripts/compile_check.py [--arch 90] [--variants]
(TRITON_INTERPRET must be unset: interpreted kernels cannot be compiled.)
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SMEM_LIMIT = 227 * 1024  # H100/H200 opt-in shared memory per block


def _attention_jobs(variants: bool) -> list:
    from dataclasses import astuple, replace

    from ragged_kernels.attention.fwd import CONFIGS, _ragged_attn_fwd_kernel

    jobs = []
    dtypes = {"fp16": "*fp16", "bf16": "*bf16", "fp32": "*fp32"}
    cases = [(d, cfg, dt) for d, pair in CONFIGS.items() for cfg in pair for dt in dtypes]
    if variants:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from bench_kernels import variants as sweep_variants  # noqa: PLC0415

        cases += [(d, cfg, "fp16") for d in CONFIGS for cfg in sweep_variants(d)]
    seen = set()
    for head_dim, cfg, dt in cases:
        ident = (head_dim, dt, *astuple(replace(cfg, TAIL_N=cfg.tail_n)))  # AttnConfig compares by identity
        if ident in seen:
            continue
        seen.add(ident)
        heads = 12
        ptr = dtypes[dt]
        args = dict(Q=ptr, K=ptr, V=ptr, Out=ptr, CU="*i32", total_tokens="i32", sm_scale_log2="fp32")
        consts = dict(STRIDE_QT=3 * heads * head_dim, STRIDE_QH=head_dim, STRIDE_KT=3 * heads * head_dim,
                      STRIDE_KH=head_dim, STRIDE_VT=3 * heads * head_dim, STRIDE_VH=head_dim,
                      STRIDE_OT=heads * head_dim, STRIDE_OH=head_dim, HEADS=heads, HEAD_DIM=head_dim,
                      BLOCK_M=cfg.BLOCK_M, BLOCK_N=cfg.BLOCK_N, UPCAST=dt == "fp32", TAIL_N=cfg.tail_n,
                      K_ROWS=cfg.K_ROWS, LAZY_RESCALE=cfg.LAZY_RESCALE)  # fmt: skip
        name = f"attention D{head_dim} {dt} {cfg}"
        jobs.append((name, _ragged_attn_fwd_kernel, args, consts, cfg.compile_options))
    return jobs


def _pack_jobs() -> list:
    from ragged_kernels.pack import _pack_unpack_kernel, _segment_count_kernel

    jobs = []
    args = dict(X="*fp16", Y="*fp16", KEEP="*i1", CU_IN="*i1", CU_OUT="*i32", COUNTS="*i32", n_rows="i32",
                capacity="i32", n_channels="i32", n_segments="i32", fill_value="fp32", keep_len="i32")  # fmt: skip
    # (dense, pack, fill, BLOCK_L, per-position keep, keep_first): the last two are the pruned model's packs.
    for dense, pack, fill, block_l, seg, first in (
        (True, True, True, 256, False, False), (True, True, False, 256, False, False),
        (True, False, False, 256, False, False), (False, True, False, 128, False, False),
        (False, False, False, 128, False, False), (True, True, False, 256, False, True),
        (False, True, False, 256, True, True), (True, False, False, 256, False, False),
    ):  # fmt: skip
        cu_in = "*i1" if dense else "*i32"
        consts = dict(STRIDE_X=768, STRIDE_Y=768, SEG_LEN=197 if dense else 0, DENSE=dense, PACK=pack, FILL=fill,
                      KEEP_SEG=seg, KEEP_FIRST=first, BLOCK_L=block_l, BLOCK_C=128, BLOCK_B=256)  # fmt: skip
        jobs.append((f"pack/unpack dense={dense} pack={pack} fill={fill} per-position={seg} keep_first={first}",
                     _pack_unpack_kernel, {**args, "CU_IN": cu_in}, consts, dict(num_warps=4)))  # fmt: skip
    count_args = dict(KEEP="*i1", CU_IN="*i1", COUNTS="*i32", n_rows="i32", keep_len="i32")
    for dense, seg, first in ((True, False, False), (True, False, True), (False, True, True)):
        jobs.append((f"segment count dense={dense} per-position={seg} keep_first={first}", _segment_count_kernel,
                     {**count_args, "CU_IN": "*i1" if dense else "*i32"},
                     dict(SEG_LEN=197 if dense else 0, DENSE=dense, KEEP_SEG=seg, KEEP_FIRST=first, BLOCK_L=256),
                     dict(num_warps=4)))  # fmt: skip
    return jobs


def _linear_jobs() -> list:
    import inspect

    from ragged_kernels import linear

    kernel = linear._ragged_linear_kernel
    jobs = []
    params = inspect.signature(kernel.fn).parameters
    for blocks, gelu in ((linear.BLOCKS, False), (linear.BLOCKS_GELU, True)):
        bm, bn, bk, warps, stages = blocks
        args, consts = {}, {}
        for name in params:
            if name in ("X", "W", "B", "Y"):
                args[name] = "*fp16"
            elif name == "CU":
                args[name] = "*i32"
            elif name.isupper():
                consts[name] = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GELU": gelu, "HAS_BIAS": True,
                                "DOT_FP32": False, "IEEE": False}.get(name)  # fmt: skip
            else:
                args[name] = "i32"
        if any(v is None for v in consts.values()):
            missing = [k for k, v in consts.items() if v is None]
            raise RuntimeError(f"compile_check does not know ragged_linear's constexprs {missing}")
        jobs.append((f"ragged_linear {blocks} gelu={gelu}", kernel, args, consts,
                     dict(num_warps=warps, num_stages=stages)))  # fmt: skip
    return jobs


def _layer_norm_jobs() -> list:
    from ragged_kernels.linear import _ragged_layer_norm_kernel

    args = dict(X="*fp16", W="*fp16", B="*fp16", Y="*fp16", CU="*i32", n_rows="i32", n_cols="i32", n_segments="i32",
                stride_x="i32", stride_y="i32", eps="fp32")  # fmt: skip
    return [(f"ragged_layer_norm BLOCK_C={c}", _ragged_layer_norm_kernel, args,
             dict(HAS_W=True, HAS_B=True, ROWS=max(1, min(16, 8192 // c)), BLOCK_C=c),
             dict(num_warps=4 if c <= 1024 else 8)) for c in (256, 512, 1024)]  # fmt: skip


def _ats_jobs() -> list:
    from pruners.ats_triton import _CHUNK, _ats_keep_kernel, _ats_stage_kernel

    args = dict(SCORES="*fp32", VALID="*i8", KEEP="*i8", M="i32", R="i32", stride_s="i32", stride_v="i32",
                stride_k="i32", tiny="fp32")  # fmt: skip
    jobs = [(f"ats sampler BLOCK={b}", _ats_keep_kernel, args, dict(BLOCK=b, CHUNK=_CHUNK),
             dict(num_warps=4 if b <= 256 else 8)) for b in (256, 1024)]  # fmt: skip
    stage_args = dict(SCORES="*fp32", VNORM="*fp32", CU="*i32", KEEP="*i8", N="i32", H="i32", R="i32", n_rows="i32",
                      stride_sb="i32", stride_sh="i32", stride_k="i32", tiny="fp32")  # fmt: skip
    jobs += [(f"ats stage H_PAD={h} BLOCK={b}", _ats_stage_kernel, stage_args, dict(H_PAD=h, BLOCK=b, CHUNK=_CHUNK),
              dict(num_warps=4 if b <= 256 else 8)) for h, b in ((16, 256), (8, 256), (4, 64), (16, 1024))]  # fmt: skip
    return jobs


def _threshold_jobs() -> list:
    from pruners.threshold_triton import _threshold_count_kernel, _threshold_keep_kernel

    base = dict(NORMS="*fp32", CU="*i32", THR="*fp32")
    args = dict(**base, KEEP="*i8", COUNTS="*i32", N="i32", n_rows="i32", min_keep="i32", cap="i32", stride_k="i32",
                n_images="i32", budget="i32")  # fmt: skip
    count_args = dict(**base, COUNTS="*i32", N="i32", n_rows="i32", min_keep="i32", cap="i32")
    jobs = []
    for b in (256, 1024):
        warps = dict(num_warps=4 if b <= 256 else 8)
        jobs.append((f"threshold-L2 counts BLOCK={b}", _threshold_count_kernel, count_args, dict(BLOCK=b), warps))
        for budget, block_b in ((False, 1), (True, 64), (True, 256)):
            jobs.append((f"threshold-L2 stage BLOCK={b} budget={budget} BLOCK_B={block_b}", _threshold_keep_kernel,
                         args, dict(BLOCK=b, BUDGET=budget, BLOCK_B=block_b, LEVEL_STEPS=11), warps))  # fmt: skip
    return jobs


def _cls_jobs() -> list:
    from pruners.cls_triton import _cls_scores_kernel

    args = dict(Q="*fp16", K="*fp16", CU="*i32", OUT="*fp32", R="i32", N="i32", scale="fp32", stride_qr="i32",
                stride_qh="i32", stride_kr="i32", stride_kh="i32", stride_ob="i32", stride_oh="i32")  # fmt: skip
    return [(f"CLS scores D{d} BLOCK_N={b}", _cls_scores_kernel, args, dict(HEAD_DIM=d, BLOCK_N=b), dict(num_warps=4))
            for d in (32, 64, 128) for b in (16, 128)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--arch", type=int, default=90, help="CUDA compute capability x10 (90: Hopper)")
    ap.add_argument("--variants", action="store_true", help="also the kernel variants of bench_kernels --variants")
    args = ap.parse_args(argv)
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        print("compile_check: unset TRITON_INTERPRET (interpreted kernels cannot be compiled)", file=sys.stderr)
        return 2
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    target = GPUTarget("cuda", args.arch, 32)
    jobs = _attention_jobs(args.variants) + _pack_jobs() + _linear_jobs() + _ats_jobs() + _threshold_jobs()
    jobs += _cls_jobs() + _layer_norm_jobs()
    failed = 0
    for name, kernel, sig_args, consts, options in jobs:
        signature = {**sig_args, **{k: "constexpr" for k in consts}}
        # As the JIT specialises at launch: pointers 16-byte aligned (every tensor the library allocates or
        # takes on its fast path is), so loads vectorise and pipeline; without it, scalar loads and a
        # different shared-memory figure (the attention kernel: 16 KB instead of the 32 KB it runs with).
        attrs = {(kernel.arg_names.index(a),): [["tt.divisibility", 16]] for a, t in sig_args.items()
                 if t.startswith("*")}  # fmt: skip
        try:
            compiled = triton.compile(ASTSource(fn=kernel, signature=signature, constexprs=consts, attrs=attrs),
                                      target=target, options=options)  # fmt: skip
            smem = compiled.metadata.shared
            ok = smem <= SMEM_LIMIT
            failed += not ok
            print(f"{'ok  ' if ok else 'FAIL'} {name}: {smem} B shared" + ("" if ok else " (over the limit)"))
        except Exception as exc:  # noqa: BLE001 - report every kernel, then fail
            failed += 1
            print(f"FAIL {name}: {type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}")
    print(f"{len(jobs) - failed}/{len(jobs)} kernels compile for sm_{args.arch}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
