"""The kernel candidates of `python -m tools.bench_kernels`: the config sweep (--sweep), the config variants
(--variants, --head-dim, BENCH_VARIANTS) and the structural variants of tools/attention_variants.py
(--structural), each timed against FA2 or the shipping kernel."""

from __future__ import annotations

import math
import os
import time

import torch

from ragged_kernels import ragged_attention
from ragged_kernels.attention.fwd import H200_CONFIGS, AttnConfig, default_scale, ragged_attn_fwd
from tools import bench_kernels_measure as measuring
from tools.bench_kernels_measure import (
    bound_calls,
    fmt_us,
    gpu_points,
    gpu_time,
    lengths_for,
    make_inputs,
    n_sets,
)

SWEEP_POINTS = [(1, 197, 197, True), (32, 40, 197, False), (32, 99, 197, True), (32, 197, 197, True),
                (128, 197, 197, True), (32, 288, 577, True), (32, 577, 577, False)]


def _sweep_points(specs: list) -> list:
    """(batch, tokens, cap, ragged, cu, sets, FA2 GPU time) per point spec, FA2 measured once."""
    points = []
    for batch, tokens, cap, ragged in specs:
        lengths = lengths_for(batch, tokens, cap, ragged)
        cu, sets = make_inputs(lengths, n_sets(lengths))
        points.append((batch, tokens, cap, ragged, cu, sets, gpu_time(bound_calls("fa2", cap, cu, sets))))
    return points


def _config_ratios(cfg: AttnConfig, points: list, rows: list, measure: str) -> list[float]:
    """triton/FA2 GPU time of `cfg` at every point (rows get one entry each); raises if it fails."""
    scale = default_scale(measuring.DIM)
    ratios = []
    for batch, tokens, cap, ragged, cu, sets, t_fa2 in points:
        outs = [torch.empty_like(s[0]) for s in sets]
        calls = [lambda s=s, o=o, cu=cu, cap=cap: ragged_attn_fwd(*s, cu, cap, scale, o, cfg)
                 for s, o in zip(sets, outs, strict=True)]  # fmt: skip
        t = gpu_time(calls)
        ratios.append(t / t_fa2)
        rows.append({"measure": measure, "config": repr(cfg), "batch": batch, "tokens": tokens, "cap": cap,
                     "ragged": ragged, "triton": t, "fa2": t_fa2})  # fmt: skip
    return ratios


def sweep(rows: list):
    """Time every config on a few representative points; FA2 measured once per point."""
    points = _sweep_points(SWEEP_POINTS)
    print("\n## Config sweep: triton/fa2 GPU time per point")
    head = " | ".join(f"B{b} {t}/{c}" for b, t, c, _ in SWEEP_POINTS)
    print(f"| BM | BN | warps | stages | {head} | geomean |")
    print("|---|---|---|---|" + "---|" * (len(SWEEP_POINTS) + 1))
    for bm in (32, 64, 128):
        for bn in (32, 64, 128):
            for warps in (4, 8):
                for stages in (2, 3):
                    try:
                        ratios = _config_ratios(AttnConfig(bm, bn, warps, stages), points, rows, "sweep")
                    except Exception as exc:
                        print(f"| {bm} | {bn} | {warps} | {stages} | failed: {type(exc).__name__}: {exc} |")
                        continue
                    gm = math.exp(sum(map(math.log, ratios)) / len(ratios))
                    cells = " | ".join(f"{r:.2f}" for r in ratios)
                    print(f"| {bm} | {bn} | {warps} | {stages} | {cells} | {gm:.3f} |", flush=True)


VARIANT_POINTS = [(1, 40, 197, False), (1, 99, 197, False), (1, 197, 197, False), (4, 99, 197, False),
                  (4, 197, 197, False), (32, 40, 197, False), (32, 99, 197, False), (32, 99, 197, True),
                  (32, 197, 197, False), (32, 197, 197, True), (128, 99, 197, False), (128, 197, 197, False),
                  (1, 577, 577, False), (4, 577, 577, False), (32, 288, 577, False), (32, 577, 577, False),
                  (128, 577, 577, True)]


def variants(head_dim: int = 64) -> list[AttnConfig]:
    """The table's configs first (the reference rows), then candidates for the points they miss.

    Sweeps of 2026-11-29 (docs/performance.md "Tried and refuted"; logs in docs/device-logs-2026-11.tar.xz).
    The first variant sweep chose the tables' 16-key tails. The next (2026-11-29-s5-run2-*)
    ruled out smaller tiles for the 99-token points: 16-key blocks, 2 warps, 32-row query tiles,
    8 warps on 64 rows and lazy rescaling all lost (geomean 0.72-1.22 of FA2 against 0.68); a fourth
    stage tied. The next (2026-11-29-s6-run1-*) ruled out FA2's own tiling: 128-row tiles
    with 64- or 128-key blocks lose 20-30% at <= 99 tokens (geomean 0.88-1.15 against 0.69), and
    32-key tails tie 16-key ones. At these sizes both kernels are latency-bound (B 32 x 99 tokens is
    ~2.4 us of tensor-core work against 13-16 us measured). Next: fewer pipeline stages (a shorter
    prologue for 2-4 key steps) and wider tails on 64-key blocks (fewer dependent steps).

    Then (2026-11-29-s8-run3-*, -s8-run6-*): a register cap of 80 on the 64 x 32 config
    (6 programs per SM instead of 5) wins where the programs need two waves at 5 per SM (B 32 x 99:
    0.82 -> 0.73) and loses 3-15% at B 1-4: the table's bucket 2. Handing programs out pair-first
    (every pair's first query tile before any second one; the same grid) lost: B 4 x 99 0.84 -> 0.87,
    B 128 x 197 0.71 -> 0.89 (a pair's tiles no longer share K/V in L2); removed. Splitting each tile's
    keys over 2-4 programs merged in the kernel (partials in a workspace, an acq_rel counter, the last
    program merges; commit 41bd1de, log 2026-11-29-s8-run8-*) was correct and lost everywhere: B 1 x 40 0.53 -> 0.83,
    B 4 x 99 0.85 -> 1.07-1.09; removed."""
    # The shipping pair (once where both buckets use the same config; AttnConfig compares by identity).
    table = list({repr(c): c for c in H200_CONFIGS[head_dim]}.values())  # the sweeps were of the H200 table
    if head_dim == 128:
        # Head dim 128 keeps the first config of 2026-11-29 (64, 64, 4 warps, 2 stages) with a full-width
        # tail: never swept since. Twice the bytes per key row: fewer stages fit, so tails and 8 warps first.
        return table + [
            AttnConfig(64, 64, 4, 2, TAIL_N=16),
            AttnConfig(64, 32, 4, 3, TAIL_N=16),
            AttnConfig(64, 64, 4, 3, TAIL_N=16),
            AttnConfig(64, 64, 8, 2, TAIL_N=16),
            AttnConfig(128, 64, 8, 2, TAIL_N=16),
            AttnConfig(128, 32, 8, 3, TAIL_N=16),
            AttnConfig(64, 128, 8, 2, TAIL_N=32),
        ]
    # H200, 2026-11-29: the table's configs are register-bound on sm_90 (64 x 32: 93 registers, 5 programs per SM;
    # 64 x 64: 120, 4 per SM), and B 32 x 99 tokens needs 768 programs against 660 slots: two waves.
    # A register cap of 80 (no spill in ptxas) gives 6 per SM (792 slots); 96 on 64 x 64 gives 5 where
    # shared memory allows it (2 stages).
    capped = [
        AttnConfig(64, 32, 4, 3, TAIL_N=16, maxnreg=80),
        AttnConfig(64, 32, 4, 2, TAIL_N=16, maxnreg=80),
        AttnConfig(64, 32, 4, 3, TAIL_N=16, maxnreg=72),
        AttnConfig(64, 64, 4, 3, TAIL_N=16, maxnreg=96),
        AttnConfig(64, 64, 4, 2, TAIL_N=16, maxnreg=96),
        AttnConfig(64, 64, 4, 2, TAIL_N=16),
    ]
    if os.environ.get("BENCH_VARIANTS") == "maxnreg":
        return table + capped
    candidates = capped + [
        AttnConfig(64, 32, 4, 2, TAIL_N=16),
        AttnConfig(64, 64, 4, 2, TAIL_N=16),
        AttnConfig(64, 64, 4, 2, TAIL_N=32),
        AttnConfig(64, 64, 4, 2),
        AttnConfig(64, 64, 4, 3),
        AttnConfig(64, 32, 4, 3, TAIL_N=32),
    ]
    return table + candidates


def variant_sweep(rows: list, time_box: float = 240.0):
    """Kernel variants (tail width, K layout) x configs on the uniform points of VARIANT_POINTS, per bucket."""
    t_start = time.perf_counter()
    points = _sweep_points(VARIANT_POINTS)
    print(f"\n## Variant sweep: triton/fa2 GPU time per point (u: uniform, r: ±30%), "
          f"{measuring.HEADS} heads x {measuring.DIM}")
    head = " | ".join(f"B{b} {t}/{c}{'r' if r else 'u'}" for b, t, c, r in VARIANT_POINTS)
    print(f"| config | {head} | gm 197 | worst 197 | gm 577 | worst 577 | gm <=99 |")
    print("|---|" + "---|" * (len(VARIANT_POINTS) + 5))
    gm = lambda xs: math.exp(sum(map(math.log, xs)) / len(xs))  # noqa: E731
    for cfg in variants(measuring.DIM):
        if time.perf_counter() - t_start > time_box:
            print(f"(time box of {time_box:.0f} s reached: remaining variants not run)")
            break
        name = (f"{cfg.BLOCK_M}/{cfg.BLOCK_N}/{cfg.num_warps}w/{cfg.num_stages}s tail{cfg.tail_n}"
                f"{f' r{cfg.maxnreg}' * bool(cfg.maxnreg)}")
        try:
            ratios = _config_ratios(cfg, points, rows, "variant")
        except Exception as exc:  # noqa: BLE001 - a config that does not compile: say so, go on
            print(f"| {name} | failed: {type(exc).__name__}: {str(exc)[:200]} |")
            continue
        r197 = [r for r, p in zip(ratios, VARIANT_POINTS, strict=True) if p[2] == 197]
        r577 = [r for r, p in zip(ratios, VARIANT_POINTS, strict=True) if p[2] == 577]
        small = [r for r, p in zip(ratios, VARIANT_POINTS, strict=True) if p[1] <= 99]
        cells = " | ".join(f"{r:.2f}" for r in ratios)
        print(f"| {name} | {cells} | {gm(r197):.3f} | {max(r197):.2f} | {gm(r577):.3f} | {max(r577):.2f} | "
              f"{gm(small):.3f} |", flush=True)


def structural(rows: list, quick: bool, time_box: float = 420.0):
    """The structural variants (tools/attention_variants.py) against the shipping kernel at every point of
    the GPU grid, in one run: GPU time per call (graph replay) as variant / shipping, each output checked
    against the shipping kernel's first. Then, per variant, where it wins, and what the grid's FA2 targets
    read if the variant were kept exactly where it wins."""
    from tools.attention_variants import variants

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    scale = default_scale(measuring.DIM)
    t_start = time.perf_counter()
    per_variant: dict[str, list] = {}
    print("\n## 7. Structural variants: GPU time per call / the shipping kernel's (graph replay); "
          "FA2 and shipping in µs")
    for batch, tokens, cap, ragged in gpu_points(quick):
        if time.perf_counter() - t_start > time_box:
            print(f"(time box of {time_box:.0f} s reached at B {batch} x {tokens}/{cap}: remaining points not run)")
            break
        lengths = lengths_for(batch, tokens, cap, ragged)
        cu, sets = make_inputs(lengths, n_sets(lengths))
        ship_calls = bound_calls("triton_out", cap, cu, sets)
        t_ship = gpu_time(ship_calls)
        t_fa2 = gpu_time(bound_calls("fa2", cap, cu, sets))
        ref = ragged_attention(*sets[0], cu, cap)
        cells = []
        for name, call in variants(cap, sms).items():
            outs = [torch.empty_like(s[0]) for s in sets]
            calls = [lambda s=s, o=o, call=call, cu=cu, cap=cap: call(*s, cu, cap, scale, o)
                     for s, o in zip(sets, outs, strict=True)]
            try:
                calls[0]()
                torch.cuda.synchronize()
                err = (outs[0].float() - ref.float()).abs().max().item()
                if not err <= 2e-2:
                    raise AssertionError(f"max |diff| {err:.3g} against the shipping kernel")
                t = gpu_time(calls)
            except Exception as exc:  # noqa: BLE001 - a variant that does not compile or is wrong: say so, go on
                from benchmarks.timing import restore_rng_after_failed_capture

                restore_rng_after_failed_capture(torch)
                cells.append(f"{name}: {type(exc).__name__}")
                print(f"<!-- B{batch} {tokens}/{cap} {name}: {type(exc).__name__}: {str(exc)[:300]} -->", flush=True)
                continue
            per_variant.setdefault(name, []).append((batch, tokens, cap, ragged, t / t_ship, t_ship, t_fa2, t))
            rows.append({"measure": "structural", "variant": name, "batch": batch, "tokens": tokens, "cap": cap,
                         "ragged": ragged, "variant_s": t, "triton": t_ship, "fa2": t_fa2, "max_diff": err})
            cells.append(f"{name} {t / t_ship:.2f}")
        print(f"| B{batch} {tokens}/{cap} {'r' if ragged else 'u'} | ship {fmt_us(t_ship)} fa2 {fmt_us(t_fa2)} "
              f"| {' · '.join(cells)} |", flush=True)
        del sets
    gm = lambda xs: math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")  # noqa: E731
    print("\n| variant | points | geomean / shipping | wins (< 0.97) | best | worst | "
          "worst / FA2 kept where it wins | geomean <= 99 tokens / FA2 |")
    print("|---|---|---|---|---|---|---|---|")
    for name, pts in per_variant.items():
        ratios = [p[4] for p in pts]
        wins = [p for p in pts if p[4] < 0.97]
        kept = [min(p[5], p[7]) / p[6] for p in pts]
        small = [min(p[5], p[7]) / p[6] for p in pts if p[1] <= 99]
        where = ", ".join(f"B{p[0]}x{p[1]}{'r' if p[3] else 'u'} {p[4]:.2f}" for p in wins[:8])
        print(f"| {name} | {len(pts)} | {gm(ratios):.3f} | {len(wins)}{f' ({where})' if wins else ''} | "
              f"{min(ratios):.2f} | {max(ratios):.2f} | {max(kept):.2f} | {gm(small):.3f} |")
