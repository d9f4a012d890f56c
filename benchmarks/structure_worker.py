"""The exact tier's measurements, each in a process of its own (`bench_structure` runs this file):

    python benchmarks/structure_worker.py launches --out FILE    # launches per forward (TRITON_INTERPRET=1, no GPU)
    python benchmarks/structure_worker.py tokens --out FILE      # kept tokens and FLOPs on scikit-image's photos
    python benchmarks/structure_worker.py kernels --out FILE     # registers, spills, shared memory, SASS per arch

Each writes one JSON object {key: {"value": number} | {"skip": why} | {"error": text}} and runs the library
that Python resolves here (asv's checkout of the commit under test; `bench_structure` passes its own
`pruners` location first on PYTHONPATH). Nothing here reads a clock: every value is a function of the
commit's code and the installed torch, Triton and timm, the same on every run and machine.

Run as a script (not `-m`): this folder's helpers (`launch_count`, `kernel_resources`, `token_flops`) are
today's suite, the library is the commit's.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import traceback
from collections.abc import Callable, Iterator
from typing import Any

# What the exact tier measures. Model and forward names are what the series read in the PR comment
# ("DeiT-S ATS graph B1"); bench_structure takes its parameters from here.
MODELS = {"DeiT-S": "deit_small_patch16_224", "DeiT-B": "deit_base_patch16_224"}
PRUNERS = {"ATS": "ats", "DynamicViT": "dynamicvit", "EViT": "evit", "Threshold-L2": "threshold_l2"}
BACKENDS = {"": "triton", "+FA2": "fa2_varlen", "+padded": "padded_sdpa"}
# "dense" is the unpruned model (timm's forward; fused: its blocks fused too); "<pruner>" the product's
# triton backend; "<pruner>+FA2" / "+padded" the baselines, captured the same way.
FORWARDS = ["dense", *(p + b for b in BACKENDS for p in PRUNERS)]
MODES = ["graph", "fused"]  # compiled: inductor's kernels are chosen on the device (not counted: see README)
BATCHES = ["B1", "B64"]
BUDGET = 0.5  # ~50% of the tokens, as every table of docs/performance.md; Threshold-L2 with calibrated caps
PHOTOS = ("astronaut", "coffee", "chelsea", "rocket", "cat", "immunohistochemistry", "colorwheel")


def forward_parts(forward: str) -> tuple[str | None, str]:
    """(pruner name or None, backend name) of a FORWARDS entry."""
    if forward == "dense":
        return None, "dense"
    for suffix, backend in BACKENDS.items():
        if suffix and forward.endswith(suffix):
            return PRUNERS[forward.removesuffix(suffix)], backend
    return PRUNERS[forward], BACKENDS[""]


def pruner_options(pruner: str, num_patches: int) -> dict[str, Any]:
    """The pruner options of every exact series: `BUDGET` of the tokens (`token_flops.budget_options`,
    what tools.bench_e2e runs), Threshold-L2 with `max_keep="calibrate"` (its per-stage caps and batch
    budget, as bench_e2e's --calibrated-capacity)."""
    try:
        from token_flops import budget_options  # run as a script: this folder is on sys.path
    except ImportError:
        from benchmarks.token_flops import budget_options

    options = budget_options(pruner, BUDGET, num_patches)
    if pruner == "threshold_l2":
        options["max_keep"] = "calibrate"
    return options


_PRUNERS: dict[tuple[str, str], Any] = {}


def bound_pruner(model_name: str, pruner: str) -> Any:
    """A pruner bound (and for Threshold-L2 calibrated, as the library calibrates at build) for `model_name`,
    built once per process: later builds take a copy and skip the calibration."""
    key = (model_name, pruner)
    if key not in _PRUNERS:
        from pruners import build_pruned_model, create_pruner

        built = build_pruned_model(model_name, create_pruner(pruner, **pruner_options(pruner, 196)), "reference",
                                   seed=0)
        _PRUNERS[key] = built.pruner
    return _PRUNERS[key]


@contextlib.contextmanager
def weights_shared() -> Iterator[None]:
    """Within: a deep copy of a parameter shares its storage instead of cloning it.

    A launch count reads shapes, dtypes and strides only (`launch_count.count_forward` replaces every
    parameter by a fake CUDA tensor before the forward, then converts dtypes on the fakes), so the copy of
    the seeded backbone that each build makes (`pruners.model`'s seeded cache) need not hold its own
    weights: cloning them took ~40% of a point's time (2026-12-05, 2-core box, DeiT-S). The pruners are
    bound and calibrated before any build shares weights (`measure_launches`), so nothing that reads
    values sees a copy that a build may have written to."""
    import torch

    original = torch.nn.Parameter.__deepcopy__

    def share(self, memo):
        if id(self) not in memo:
            memo[id(self)] = type(self)(self.data, self.requires_grad)
        return memo[id(self)]

    torch.nn.Parameter.__deepcopy__ = share
    try:
        yield
    finally:
        torch.nn.Parameter.__deepcopy__ = original


def _launch_point(label: str, forward: str, mode: str, batch: str, detail: bool = False) -> dict[str, Any]:
    """One point of `measure_launches` (`detail`: with every launch, op by op)."""
    import launch_count
    import torch

    from pruners import build_pruned_model

    model_name = MODELS[label]
    pruner, backend = forward_parts(forward)
    options = {"graph": True, **({"fused_blocks": True} if mode == "fused" else {})}
    bound = None if pruner is None else bound_pruner(model_name, pruner)
    try:
        with weights_shared():
            graphed = build_pruned_model(model_name, bound, backend, seed=0, **options)
    except TypeError as exc:  # fused_blocks unknown at this commit
        raise NotImplementedError(f"not at this commit: {exc}") from exc
    inner = getattr(graphed, "model", graphed)
    count = launch_count.count_forward(inner, (int(batch[1:]), 3, 224, 224), torch.float16)
    if count.host_syncs:
        raise RuntimeError(f"host syncs in a captured forward: {count.host_syncs}")
    out = {"value": count.by_kind(), "unmapped": dict(count.unmapped)}
    if detail:
        out["launches"] = [[x.op, x.kind, x.count, x.why, list(x.shape)] for x in count.launches]
    return out


def measure_launches(models: list[str] | None = None, forwards: list[str] | None = None,
                     modes: list[str] | None = None, batches: list[str] | None = None,
                     detail: bool = False) -> dict[str, Any]:
    """Launches per forward of every model x forward x mode x batch (`launch_count`; any subset of each,
    any batch "B<n>"); each model's pruners are built (and calibrated) once. `detail`: every launch too."""
    out: dict[str, Any] = {}
    for label in models or list(MODELS):
        for forward in forwards or FORWARDS:  # every pruner bound before a build shares weights
            pruner = forward_parts(forward)[0]
            if pruner is not None:
                _guard(lambda label=label, pruner=pruner: {"value": bound_pruner(MODELS[label], pruner)})
        for forward in forwards or FORWARDS:
            for mode in modes or MODES:
                for batch in batches or BATCHES:
                    point = (label, forward, mode, batch)
                    out["|".join(point)] = _guard(lambda point=point: _launch_point(*point, detail=detail))
    return out


def _split_by_model(what: str, out: str, jobs: int | None, models: list[str], extra: list[str]) -> dict[str, Any]:
    """`what` measured by one child process of this script per model, `jobs` at a time (default: every CPU
    this process may use), their outputs merged. Children, not a fork of this process: torch's thread pool
    does not survive a fork once it has run (a forked child hung at its first op, 2026-12-05)."""
    import subprocess
    import time

    jobs = max(1, min(jobs or len(os.sched_getaffinity(0)), len(models)))
    pending, running, merged = list(models), [], {}
    while pending or running:
        while pending and len(running) < jobs:
            label = pending.pop(0)
            part = f"{out}.{label}.json"
            cmd = [sys.executable, os.path.abspath(__file__), what, "--out", part, "--models", label, "--jobs", "1",
                   *extra]
            running.append((part, subprocess.Popen(cmd)))
        time.sleep(0.2)
        for part, proc in list(running):
            if proc.poll() is not None:
                running.remove((part, proc))
                if proc.returncode != 0:
                    raise RuntimeError(f"structure_worker {what} for {part} exited {proc.returncode}")
                with open(part) as f:
                    merged.update(json.load(f))
                os.remove(part)
    return merged


def photos(size: int) -> Any:
    """scikit-image's colour photos (`PHOTOS`), resized to size x size and normalised as ImageNet's, float32
    [7, 3, size, size] on the CPU (the same order and pixels everywhere; resized in float64)."""
    import torch
    from skimage import data as skdata

    mean = torch.tensor([0.485, 0.456, 0.406], dtype=torch.float64)[:, None, None]
    std = torch.tensor([0.229, 0.224, 0.225], dtype=torch.float64)[:, None, None]
    out = []
    for name in PHOTOS:
        img = torch.from_numpy(getattr(skdata, name)().copy()).permute(2, 0, 1)[:3].to(torch.float64) / 255.0
        img = torch.nn.functional.interpolate(img[None], size=(size, size), mode="bilinear", align_corners=False)[0]
        out.append((img - mean) / std)
    return torch.stack(out).float()


def measure_tokens() -> dict[str, Any]:
    """Kept tokens after each stage (the rows the next blocks run on: the class token and EViT's fused token
    included), attention and linear FLOPs, and the FLOP ratio to dense, per model x pruner, on the photos in
    float32 on the CPU (the `reference` backend, the decisions every backend replays), on one thread so that
    the summation order, and with it every threshold and sample, is the same on every run. DynamicViT and
    EViT keep fixed counts; ATS's and Threshold-L2's depend on the pixels."""
    import torch

    torch.set_num_threads(1)

    from token_flops import flop_parts, per_block

    from pruners import build_pruned_model

    out: dict[str, Any] = {}
    for label, model_name in MODELS.items():
        x = photos(224)
        batch = x.shape[0]
        for pname in ("dense", *PRUNERS):
            pruner = None if pname == "dense" else PRUNERS[pname]

            def one(model_name=model_name, pruner=pruner, x=x, batch=batch):
                with torch.random.fork_rng(devices=[]):
                    model = build_pruned_model(model_name, None if pruner is None else
                                               bound_pruner(model_name, pruner), "dense" if pruner is None
                                               else "reference", seed=0)
                    model = model.eval()
                    bb = model.backbone
                    depth, n_tokens, dim = len(bb.blocks), 1 + model.num_patches, bb.embed_dim
                    full = [n_tokens] * batch
                    dense_linear, dense_attn = flop_parts([full] * depth, [full] * depth, dim)
                    if pruner is None:
                        return {"kept": [], "linear": dense_linear, "attention": dense_attn, "ratio": 1.0,
                                "version": None}
                    with torch.no_grad(), model.packing_log() as log:
                        model(x)
                    lengths, _ = log.lengths()
                    pr = model.pruner
                    attn, mlp = per_block(depth, pr.stages, pr.placement, full, [list(v) for v in lengths])
                    linear, attention = flop_parts(attn, mlp, dim)
                    version = getattr(type(pr), "decisions_version", None)
                    return {"kept": [sum(v) for v in lengths], "linear": linear, "attention": attention,
                            "ratio": (dense_linear + dense_attn) / (linear + attention), "version": version}

            out["|".join((label, pname))] = _guard(lambda one=one: {"value": one()})
    return out


def measure_kernels(jobs: int | None) -> dict[str, Any]:
    """Every shipping compilation's resources per architecture (`kernel_resources`)."""
    import kernel_resources

    return {"value": kernel_resources.measure_all(jobs=jobs)}


def _guard(fn: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    try:
        return fn()
    except NotImplementedError as exc:
        return {"skip": str(exc)}
    except Exception as exc:  # noqa: BLE001 - each point records its own failure
        return {"error": f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=6)}"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("what", choices=("launches", "tokens", "kernels"))
    ap.add_argument("--out", required=True, help="JSON file to write")
    ap.add_argument("--jobs", type=int, default=None, help="processes (default: every CPU this one may use)")
    ap.add_argument("--models", nargs="+", choices=list(MODELS), help="launches: only these models")
    ap.add_argument("--forwards", nargs="+", choices=FORWARDS, help="launches: only these forwards")
    ap.add_argument("--modes", nargs="+", choices=MODES, help="launches: only these modes")
    ap.add_argument("--batches", nargs="+", help="launches: these batches (B<n>) instead of BATCHES")
    ap.add_argument("--detail", action="store_true", help="launches: every launch of every forward, op by op")
    args = ap.parse_args(argv)
    interpret = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")
    if args.what == "kernels" and interpret:
        print("structure_worker kernels: unset TRITON_INTERPRET (interpreted kernels cannot be compiled)",
              file=sys.stderr)
        return 2
    if args.what == "launches" and not interpret:
        print("structure_worker launches: set TRITON_INTERPRET=1 (the library then launches through kernel[grid])",
              file=sys.stderr)
        return 2
    models = args.models or list(MODELS)
    if args.what == "launches" and len(models) > 1 and (args.jobs or 2) > 1:
        extra = [*(["--forwards", *args.forwards] if args.forwards else []),
                 *(["--modes", *args.modes] if args.modes else []),
                 *(["--batches", *args.batches] if args.batches else []), *(["--detail"] if args.detail else [])]
        result = _split_by_model("launches", args.out, args.jobs, models, extra)
    elif args.what == "launches":
        result = measure_launches(models, args.forwards, args.modes, args.batches, args.detail)
    elif args.what == "tokens":
        result = measure_tokens()
    else:
        result = _guard(lambda: measure_kernels(args.jobs))
    tmp = f"{args.out}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump(result, f)
    os.replace(tmp, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
