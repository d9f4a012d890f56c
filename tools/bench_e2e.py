"""End-to-end images/s, serving latency and kernels per forward of pruned DeiTs against the fastest
dense model, per model x pruner x backend x batch x mode, side by side in one run.

Modes: `eager`; `graph`, the eager forward captured once as a CUDA graph and replayed; `compile+graph`,
`torch.compile(fullgraph=True)` at the captured capacities (inductor fuses the norms, bias adds, GELUs
and residual adds around the library's custom ops), then captured the same way; with `--fused`,
`graph+fused`: the forward with fused blocks (`pruners.fused`: five launches a block), captured. `dense` (no pruning)
runs in all three, and its fastest reading is what every pruned figure is divided by: a speed-up over
an eager baseline is a speed-up from CUDA graphs, not from pruning. Every sync-free backend runs in
graph mode, so graph-against-graph rows show what the kernel contributes on its own (padded_sdpa then
pads to the captured capacity); nested_sdpa cannot be captured and runs eager.

Timing (`benchmarks.timing`, shared with the asv suite): every configuration is warmed up first
(Triton compiles, capture, at least 0.3 s and until the time per forward is steady), then each repeat
synchronises, runs `iters` forwards back to back, synchronises and reads the host clock; images/s is
the batch over the median. Latency: `--latency-calls` forwards each followed by a synchronize (1,000
by default for captured modes, 200 for eager), p50 and p99, at batches <= `--latency-max-batch`.
Kernels: the nodes of the captured graph (what one replay launches), read through the driver, so no
profiler attaches to the process. Compile time: the first call of a compiled configuration.

Decisions: every configuration of a (model, pruner, batch) replays the keep masks its first
configuration took on the bench images (`PrunedDeiT.keep_override`; the pruner still runs, so its
cost stays in the timing); `--own-decisions` lets each decide for itself. Correctness: each captured
row's logits against `padded_sdpa` eager replaying the same masks (max |delta|, top-1 where the
reference's margin exceeds twice it). Kept counts give each row its token and FLOP ratios (`tools.e2e_stats`).

Usage (on a GPU machine):
    python -m tools.bench_e2e --models deit_small_patch16_224 --batches 1 4 64 256 --calibrated-capacity
    python -m tools.bench_e2e --dry-run            # the planned configurations (works without CUDA)
Exit status: 0 ok, 2 no CUDA or a bad argument (every argument is checked before the CUDA check).
"""

from __future__ import annotations

import argparse
import copy
import functools
import json
import math
import os
import statistics
import sys
import time
import types
from collections.abc import Callable
from dataclasses import asdict

import torch

from benchmarks import timing
from pruners import (
    BACKENDS,
    MODELS,
    PRUNERS,
    CompiledPrunedModel,
    ForwardOptions,
    GraphedPrunedModel,
    PrunedDeiT,
    build_pruned_model,
    create_pruner,
    synthetic_images,
)
from pruners.base import Pruner
from pruners.compiled import CUDAGRAPH_MODES
from pruners.compiled import MODES as COMPILE_MODES
from tools.e2e_plan import Config, describe_skipped, grid_configs, run_plan
from tools.e2e_report import serving_table, target_rows, targets_table, throughput_table
from tools.e2e_stats import BUDGET_MAX, BUDGET_MIN, budget_options, image_size, measure_tokens


class ModelCache:
    """Backbones per model and bound (calibrated) pruners per (model, pruner), built once, kept on the
    GPU in fp16; `make` wraps them in a fresh PrunedDeiT per configuration (what `build_pruned_model`
    makes, without rebuilding the backbone). Also keeps each (model, pruner, batch)'s recorded keep
    masks and the reference logits every configuration of it is checked against.

    Args:
        budget: see `budget_options`.
        calibrated_capacity: Threshold-L2 with max_keep="calibrate" (per-stage caps and a batch budget
            learned on the calibration images, so graph mode runs the later blocks below full size).
        same_decisions: replay the first configuration's masks everywhere (see the module docstring).
        compile_mode: the torch.compile mode of compile+graph rows (None: inductor's default).
        eager_numerics: see `CompiledPrunedModel`.
        ats_tiles: ATS's fused kernels compare their targets in tiles (`ATSPruner(search=False)`), the
            default before 2026-12-05; the binary search otherwise.
        evit_dense_view: EViT's fused token from a dense view of the tokens (`extra_token`, the path of
            every backend before 2026-12-02) instead of the pack kernel summing it as it packs; the same
            decisions and packings, the same logits up to rounding. For timing that change on its own.
        gelu_epilogue: every pruned configuration without fused blocks or ragged_linear runs fc1 + GELU as
            cuBLASLt's GELU epilogue (`ForwardOptions.gelu_epilogue`); the dense model is timm's.
    """

    def __init__(self, budget: float, device: str = "cuda", dtype: torch.dtype = torch.float16,
                 calibrated_capacity: bool = False, same_decisions: bool = True,
                 compile_mode: str | None = None, eager_numerics: bool = True, ats_tiles: bool = False,
                 evit_dense_view: bool = False, gelu_epilogue: bool = False) -> None:
        self.budget, self.device, self.dtype = budget, device, dtype
        self.calibrated_capacity = calibrated_capacity
        self.same_decisions = same_decisions
        self.compile_mode = compile_mode
        self.eager_numerics = eager_numerics
        self.ats_tiles = ats_tiles
        self.evit_dense_view = evit_dense_view
        self.gelu_epilogue = gelu_epilogue
        self.decisions: dict[tuple, list[torch.Tensor]] = {}
        self.references: dict[tuple, torch.Tensor] = {}
        self.backbones: dict[str, torch.nn.Module] = {}
        self.pruners: dict[tuple[str, str | None], torch.nn.Module] = {}

    def parts(self, model_name: str, pruner_name: str | None):
        key = (model_name, pruner_name)
        if key not in self.pruners:
            n0 = (image_size(model_name) // 16) ** 2
            options = {} if pruner_name is None else budget_options(pruner_name, self.budget, n0)
            if self.calibrated_capacity and pruner_name == "threshold_l2":
                options["max_keep"] = "calibrate"
            if self.ats_tiles and pruner_name == "ats":
                options["search"] = False
            pr = None if pruner_name is None else create_pruner(pruner_name, **options)
            if self.evit_dense_view and pruner_name == "evit":
                # the base class's answer, none: the model then fuses on the dense view (`extra_token`)
                pr.fusion_weights = types.MethodType(Pruner.fusion_weights, pr)
            built = build_pruned_model(model_name, pr, "dense" if pr is None else "reference")
            if model_name not in self.backbones:
                self.backbones[model_name] = built.backbone.to(self.device, self.dtype)
            self.pruners[key] = built.pruner.to(self.device, self.dtype)
        return self.backbones[model_name], self.pruners[key]

    def inner(self, cfg: Config, backend: str | None = None, sync_free: bool | None = None,
              epilogue: bool | None = None) -> PrunedDeiT:
        backbone, pruner = self.parts(cfg.model, cfg.pruner)
        epilogue = self.gelu_epilogue if epilogue is None else epilogue
        options = ForwardOptions(exact_capacity=cfg.exact, ragged_linear=cfg.rlinear, fused_blocks=cfg.fused,
                                 sync_free=cfg.captured if sync_free is None else sync_free,
                                 gelu_epilogue=epilogue and not (cfg.rlinear or cfg.fused)
                                 and cfg.pruner is not None)
        return PrunedDeiT(backbone, copy.deepcopy(pruner), backend or cfg.backend, options).eval()

    def make(self, cfg: Config) -> tuple[torch.nn.Module, PrunedDeiT]:
        """(the model to time, its eager PrunedDeiT) for a configuration."""
        inner = self.inner(cfg)
        if cfg.mode == "eager":
            return inner, inner
        compiled = (CompiledPrunedModel(inner, mode=self.compile_mode, eager_numerics=self.eager_numerics)
                    if cfg.mode == "compile+graph" else None)
        return GraphedPrunedModel(inner, forward=compiled), inner

    @torch.no_grad()
    def reference(self, cfg: Config, x: torch.Tensor) -> torch.Tensor:
        """fp32 logits of the padded_sdpa eager forward replaying this point's masks (dense: the dense
        eager forward), computed once per (model, pruner, batch); timm's exact GELU throughout."""
        key = (cfg.model, cfg.pruner, cfg.batch)
        if key not in self.references:
            ref = self.inner(Config(cfg.model, cfg.pruner, cfg.batch, cfg.backend),
                             "dense" if cfg.pruner is None else "padded_sdpa", sync_free=False, epilogue=False)
            if cfg.pruner is not None and key in self.decisions:
                ref.keep_override = self.decisions[key]
            self.references[key] = ref(x).float()
        return self.references[key]


def seconds_per_forward(fn: Callable, x: torch.Tensor, repeats: int, min_time: float) -> float:
    """Median seconds per call over `repeats`, each repeat >= min_time long (synchronised host clock)."""
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn(x)
    torch.cuda.synchronize()
    iters = max(1, min(500, int(min_time / max(time.perf_counter() - t0, 1e-6))))
    times = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(iters):
            fn(x)
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) / iters)
    return statistics.median(times)


def top1_report(y: torch.Tensor, ref: torch.Tensor, err: float) -> tuple[int, int]:
    """(decisive images, decisive top-1 mismatches): decisive where the reference's top-1/top-2 margin
    exceeds 2 x the measured error `err` (each logit may move by up to `err`, so a margin below 2 err can
    flip the order without either logit leaving the tolerance)."""
    top2 = ref.float().topk(2, dim=1)
    decisive = (top2.values[:, 0] - top2.values[:, 1]) > 2 * err
    mismatch = (y.float().argmax(1) != top2.indices[:, 0]) & decisive
    return int(decisive.sum()), int(mismatch.sum())


@torch.no_grad()
def bench_one(cfg: Config, cache: ModelCache, repeats: int, min_time: float, warmup_s: float,
              latency_calls: int | None, latency_max_batch: int) -> dict:
    """Throughput, latency, kernels, compile time, correctness and kept-count figures of one configuration."""
    torch.cuda.reset_peak_memory_stats()
    model, inner = cache.make(cfg)
    run = None
    try:
        x = synthetic_images(cfg.batch, image_size(cfg.model), seed=1).to(cache.device, cache.dtype)
        decisions = "own"
        key = (cfg.model, cfg.pruner, cfg.batch)
        if cache.same_decisions and cfg.pruner is not None and not cfg.exact:
            if key in cache.decisions:
                inner.keep_override, decisions = cache.decisions[key], "replayed"
            else:
                inner.record, decisions = True, "recorded"
        stats = measure_tokens(inner, x)  # untimed, eager
        if inner.record:  # the first configuration: from now on it replays what it just decided, as the rest do
            cache.decisions[key] = inner.keep_override = [k.clone() for k in inner.recorded_keeps]
            inner.record = False
        t0 = time.perf_counter()
        y = model(x)  # capture (and compile) happen here
        torch.cuda.synchronize()
        setup_s = time.perf_counter() - t0
        ref = cache.reference(cfg, x)
        err = (y.float() - ref).abs().max().item()
        decisive, mismatch = top1_report(y, ref, err)
        run = functools.partial(model, x)
        timing.warm_up(torch, run, warmup_s)
        sec = seconds_per_forward(model, x, repeats, min_time)
        lat = None
        if latency_calls is not None and cfg.batch <= latency_max_batch:
            n = latency_calls if cfg.captured else min(latency_calls, 200)
            lat = timing.synced_calls(torch, run, n)
        peak = torch.cuda.max_memory_allocated() / 2**30
        nodes = model.replay_nodes() if isinstance(model, GraphedPrunedModel) else None
        compiled = model.compiled if isinstance(model, GraphedPrunedModel) else None
        compile_s = next(iter(compiled.compile_seconds.values()), None) if compiled is not None else None
    finally:
        del model, inner, run
        if cfg.mode == "compile+graph":
            torch.compiler.reset()  # dynamo's per-code-object recompile limit: every row compiles anew anyway
        torch.cuda.empty_cache()
    ragged = cfg.pruner is not None and bool(cache.pruners[(cfg.model, cfg.pruner)].ragged)
    return dict(
        table="throughput", model=cfg.model, pruner=cfg.pruner, backend=cfg.backend, mode=cfg.mode_label,
        batch=cfg.batch, img_per_s=cfg.batch / sec, ms=sec * 1e3, ragged=ragged, decisions=decisions, peak_gib=peak,
        p50_ms=None if lat is None else timing.percentile(lat, 50) * 1e3,
        p99_ms=None if lat is None else timing.percentile(lat, 99) * 1e3,
        latency_calls=None if lat is None else len(lat), nodes=nodes,
        kernels=None if nodes is None else sum(nodes.values()), compile_s=compile_s, setup_s=setup_s,
        max_abs=err,
        top1_decisive=decisive, top1_mismatch=mismatch, **stats,
    )


HEADER = (f"{'model':24} {'pruner':13} {'backend':12} {'mode':14} {'batch':>5} {'img/s':>9} {'ms':>8} {'p99 ms':>7} "
          f"{'kern':>5} {'comp s':>6} {'max|d|':>7} {'tokens':>6} {'FLOPx':>6} {'GiB':>5} {'t[s]':>5}")


def _row_line(r: dict) -> str:
    def f(v, fmt):
        return "—" if v is None else format(v, fmt)

    return (f"{r['model']:24} {r['pruner'] or '-':13} {r['backend']:12} {r['mode']:14} {r['batch']:>5} "
            f"{r['img_per_s']:9.1f} {r['ms']:8.3f} {f(r['p99_ms'], '7.3f'):>7} {f(r['kernels'], '5d'):>5} "
            f"{f(r['compile_s'], '6.1f'):>6} {r['max_abs']:7.4f} {r['token_fraction']:6.3f} {r['flop_ratio']:6.2f} "
            f"{r['peak_gib']:5.2f} {r['elapsed_s']:5.0f}")


def _arg_type(convert: Callable[[str], float], ok: Callable[[float], bool], expected: str) -> Callable[[str], float]:
    """An argparse `type`: `convert`, then `ok`; argparse names the argument in the error."""

    def parse(text: str) -> float:
        try:
            value = convert(text)
        except ValueError:
            value = None
        if value is None or not ok(value):
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
        return value

    return parse


_positive_int = _arg_type(int, lambda n: n >= 1, "an integer >= 1")
_positive_seconds = _arg_type(float, lambda t: math.isfinite(t) and t > 0, "a finite number of seconds > 0")
_non_negative_seconds = _arg_type(float, lambda t: math.isfinite(t) and t >= 0, "a finite number of seconds >= 0")
_budget = _arg_type(float, lambda b: BUDGET_MIN < b <= BUDGET_MAX, f"a number in ({BUDGET_MIN}, {BUDGET_MAX}]")


def json_path_problem(path: str) -> str | None:
    """Why the results could not be written to `path` (None: they can), checked without creating it."""
    if not path:
        return "empty file name"
    if os.path.isdir(path):
        return "is a folder, not a file name"
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        return f"folder {folder} does not exist"
    if os.path.exists(path) and not os.access(path, os.W_OK):
        return "file is not writable"
    if not os.path.exists(path) and not os.access(folder, os.W_OK | os.X_OK):
        return f"folder {folder} is not writable"
    return None


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="+", default=["deit_small_patch16_224", "deit_base_patch16_224"], choices=MODELS)
    ap.add_argument("--pruners", nargs="+", default=list(PRUNERS), choices=sorted(PRUNERS))
    ap.add_argument("--backends", nargs="+", default=["triton", "fa2_varlen", "padded_sdpa", "dense"], choices=BACKENDS)
    ap.add_argument("--batches", nargs="+", type=_positive_int, default=[1, 4, 64, 256], help="images per forward")
    ap.add_argument("--budget", type=_budget, default=0.5,
                    help=f"mean token fraction per block (0.5 = ~50%% pruning), in ({BUDGET_MIN}, {BUDGET_MAX}]: the "
                    "first 3 of the 12 blocks always see every token, so 0.25 would mean keeping nothing")
    ap.add_argument("--repeats", type=_positive_int, default=7)
    ap.add_argument("--min-time", type=_non_negative_seconds, default=0.2, help="seconds per repeat")
    ap.add_argument("--warmup", type=_non_negative_seconds, default=0.3,
                    help="seconds of untimed forwards at least, then until steady (at most 1 s)")
    ap.add_argument("--eager", action="store_true", help="also time every pruned backend eager")
    ap.add_argument("--compile-batches", nargs="*", type=_positive_int, default=[1, 4],
                    help="batches at which triton also runs compile+graph (each costs a compile)")
    ap.add_argument("--no-dense-compile", action="store_true", help="no dense compile+graph rows")
    ap.add_argument("--compile-mode", default=None, choices=[m for m in COMPILE_MODES if m not in CUDAGRAPH_MODES],
                    help="torch.compile mode of compile+graph rows (default: inductor's default; graph mode captures "
                    "the compiled forward itself, so modes that capture CUDA graphs are not offered)")
    ap.add_argument("--fast-numerics", action="store_true",
                    help="compile without emulate_precision_casts (fused fp16 intermediates stay fp32; see "
                    "pruners.compiled.compile_settings)")
    ap.add_argument("--latency-calls", type=_positive_int, default=1000,
                    help="synchronised forwards for p50/p99 (eager rows: at most 200)")
    ap.add_argument("--latency-max-batch", type=_positive_int, default=4, help="measure latency up to this batch")
    ap.add_argument("--exact-capacity", action="store_true", help="also time eager exact_capacity for ragged pruners")
    ap.add_argument("--ragged-linear", action="store_true",
                    help="also time triton graph mode with ragged_linear=True for ragged pruners (experimental)")
    ap.add_argument("--fused", action="store_true",
                    help="also time graph mode with fused blocks (five launches a block, pruners.fused): dense and "
                    "every capturable backend; dense fused counts as a dense configuration")
    ap.add_argument("--calibrated-capacity", action="store_true",
                    help="Threshold-L2 with max_keep='calibrate': per-stage caps and a batch budget learned on the "
                    "calibration images (every backend shares them, so decisions still agree)")
    ap.add_argument("--ats-tiles", action="store_true",
                    help="ATS's fused kernels compare every CDF target with every score in tiles (the default "
                    "before 2026-12-05) instead of the binary search; same decisions")
    ap.add_argument("--evit-dense-view", action="store_true",
                    help="EViT's fused token from a dense view of the tokens (the path before 2026-12-02) "
                    "instead of the pack kernel; same decisions and packings")
    ap.add_argument("--gelu-epilogue", action="store_true",
                    help="pruned forwards run fc1 + GELU as cuBLASLt's GELU epilogue (tanh GELU, one kernel) on "
                    "packed tokens; same decisions, logits within fp16 rounding")
    ap.add_argument("--own-decisions", action="store_true", help="every backend takes its own keep decisions")
    ap.add_argument("--time-box", type=_positive_seconds, default=None, metavar="SECONDS",
                    help="start no configuration once SECONDS have passed (the running one finishes, then the "
                    "tables print); the ones not started are listed")
    ap.add_argument("--dry-run", action="store_true", help="print the planned configurations in order and exit")
    ap.add_argument("--json", help="write every row and target to this file (its folder must exist; checked first)")
    args = ap.parse_args(argv)
    if args.json is not None and (problem := json_path_problem(args.json)):
        ap.error(f"argument --json: cannot write {args.json!r}: {problem}")
    return args


def main(argv: list[str] | None = None) -> int:
    """CLI entry point; see the module docstring. Every argument is checked before the CUDA check."""
    t_start = time.monotonic()
    args = parse_args(argv)
    configs = grid_configs(
        args.models, args.pruners, args.batches, args.backends, ragged=lambda p: PRUNERS[p].ragged, eager=args.eager,
        compile_batches=args.compile_batches, compile_dense=not args.no_dense_compile,
        exact_capacity=args.exact_capacity, ragged_linear=args.ragged_linear, fused=args.fused,
    )
    if args.dry_run:
        for i, c in enumerate(configs):
            print(f"{i:4} {c}")
        return 0
    if not torch.cuda.is_available():
        print("bench_e2e needs a CUDA GPU", file=sys.stderr)
        return 2
    p = torch.cuda.get_device_properties(0)
    print(f"# {p.name}, torch {torch.__version__}; {len(configs)} configurations, time box {args.time_box or 'none'}")
    print(HEADER)
    cache = ModelCache(args.budget, calibrated_capacity=args.calibrated_capacity,
                       same_decisions=not args.own_decisions, compile_mode=args.compile_mode,
                       eager_numerics=not args.fast_numerics, ats_tiles=args.ats_tiles,
                       evit_dense_view=args.evit_dense_view, gelu_epilogue=args.gelu_epilogue)
    timing.warm_up_device(torch)
    res = run_plan(
        configs,
        lambda c: bench_one(c, cache, args.repeats, args.min_time, args.warmup, args.latency_calls,
                            args.latency_max_batch),
        time_box=args.time_box, start=t_start, on_row=lambda r: print(_row_line(r), flush=True),
        on_error=lambda c, msg: print(f"{c}: failed: {msg.splitlines()[0] if msg else ''}", flush=True),
    )
    targets = target_rows(res.rows)
    print("\n### images/s\n")
    print("\n".join(throughput_table(res.rows)))
    print("\n### serving: latency, kernels per forward (captured graph nodes), compile time\n")
    print("\n".join(serving_table(res.rows)))
    print("\n### targets (tools/e2e_report.py states them)\n")
    print("\n".join(targets_table(targets)))
    if res.failed:
        print(f"\n{len(res.failed)} configurations failed:")
        for c, msg in res.failed:
            print(f"  {c}: {msg.splitlines()[0] if msg else ''}")
    if res.skipped:
        print(f"\ntime box ({args.time_box:.0f} s) reached: {len(res.skipped)} configurations not started:")
        for line in describe_skipped(res.skipped):
            print(f"  {line}")
    print(f"\ntotal {time.monotonic() - t_start:.0f} s")
    if args.json:
        out = list(res.rows) + [dict(table="targets", **t) for t in targets]
        out += [dict(table="skipped", **asdict(c)) for c in res.skipped]
        out += [dict(table="failed", error=msg, **asdict(c)) for c, msg in res.failed]
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
