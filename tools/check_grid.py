"""Full correctness grid on CUDA: every model x pruner, fp16, real photos and random images.

For each case, every mode a user can serve with: `triton` eager (decisions recorded), and every
sync-free backend captured as a CUDA graph (`triton`, `fa2_varlen`, `padded_sdpa` padded to the
capacity), plus `triton` compiled and captured with `--compile`; each against `padded_sdpa` eager
replaying the decisions that mode took: max |logit delta| must be < 0.004, and the top-1 class must
agree wherever the reference's top-1/top-2 margin exceeds twice the measured error (the others are
reported). Also reports whether `padded_sdpa` reached the same decisions on its own, and checks that
with keep ratio 1 every pruned backend equals `dense`.

`--calibrated-capacity` builds Threshold-L2 with `max_keep="calibrate"` (per-image caps and the batch
budget learned on the photos): graph mode then runs in tight buffers, and the random images, unlike
the photos, can overflow the budget, which exercises its water-filling on the device.

Usage (on a GPU machine):  python -m tools.check_grid [--models ...] [--pruners ...] [--batch 8]
                           [--calibrated-capacity] [--compile]
Exit status: 0 all pass, 1 a check failed, 2 no CUDA or a bad argument.
"""

from __future__ import annotations

import argparse
import sys

import torch

from pruners import MODELS, PRUNERS, build_pruned_model, create_pruner, synthetic_images
from pruners.sample_images import sample_photos

TOL = 0.004
KEEP_ALL = {"dynamicvit": {"rho": 1.0}, "evit": {"keep_rate": 1.0}, "threshold_l2": {"thresholds": float("-inf")}}


def _image_sets(size: int, batch: int, seed: int) -> dict[str, torch.Tensor]:
    photos = sample_photos(size)
    reps = -(-batch // photos.shape[0])
    g = torch.Generator().manual_seed(seed)
    return {
        "photos": photos.repeat(reps, 1, 1, 1)[:batch] if batch > photos.shape[0] else photos,
        "smooth-random": synthetic_images(batch, size, seed=seed),
        "randn": torch.randn(batch, 3, size, size, generator=g),
    }


def _top1_report(y: torch.Tensor, ref: torch.Tensor, err: float) -> tuple[int, int, int]:
    """(decisive images, decisive top-1 mismatches, undecided images) for margin > 2 err: each logit may
    move by up to `err`, so a smaller margin can flip the order within the tolerance."""
    top2 = ref.float().topk(2, dim=1)
    margin = top2.values[:, 0] - top2.values[:, 1]
    decisive = margin > 2 * err
    mismatch = (y.float().argmax(1) != top2.indices[:, 0]) & decisive
    return int(decisive.sum()), int(mismatch.sum()), int((~decisive).sum())


GRAPH_BACKENDS = ("triton", "fa2_varlen", "padded_sdpa")


def modes(compile_too: bool) -> list[tuple[str, str]]:
    """(backend, mode) pairs a case checks, in order."""
    out = [("triton", "eager")] + [(b, "graph") for b in GRAPH_BACKENDS]
    return out + [("triton", "compile+graph")] if compile_too else out


def _build(model_name: str, pruner, backend: str, mode: str, opts: dict):
    """(the model to call, the PrunedDeiT whose `record` gives its keep masks)."""
    model = build_pruned_model(model_name, pruner, backend, graph=mode != "eager", compile=mode == "compile+graph",
                               **opts).half().cuda()
    inner = model if mode == "eager" else model.model
    inner.record = True
    return model, inner


@torch.no_grad()
def check_case(model_name: str, pruner_name: str, batch: int, seed: int,
               calibrated_capacity: bool = False, compile_too: bool = False) -> list[dict]:
    """Run one model x pruner over the image sets; returns one row per (image set, backend, mode)."""
    size = 384 if model_name.endswith("384") else 224
    images = _image_sets(size, batch, seed)
    capped = calibrated_capacity and pruner_name == "threshold_l2"
    pruner = create_pruner(pruner_name, **({"max_keep": "calibrate"} if capped else {}))
    calib = images["photos"] if pruner_name == "threshold_l2" else None
    opts = {"seed": seed, "calibration_images": calib} if calib is not None else {"seed": seed}
    built = {bm: _build(model_name, pruner, *bm, opts) for bm in modes(compile_too)}
    pad = build_pruned_model(model_name, pruner, "padded_sdpa", **opts).half().cuda()
    pad.record = True
    rows = []
    for set_name, x in images.items():
        x = x.half().cuda()
        for (backend, mode), (model, inner) in built.items():
            y = model(x)
            keeps = [k.clone() for k in inner.recorded_keeps] if mode == "eager" else model.last_keeps()
            pad.keep_override = None
            y_own = pad(x)
            same_decisions = all(torch.equal(a, b) for a, b in zip(keeps, pad.recorded_keeps, strict=True))
            pad.keep_override = keeps
            ref = pad(x)
            pad.keep_override = None
            err = (y.float() - ref.float()).abs().max().item()
            decisive, mismatch, undecided = _top1_report(y, ref, err)
            counts = [int(k.sum(1).float().mean()) for k in keeps]
            rows.append(
                dict(
                    model=model_name,
                    pruner=pruner_name + ("+cap" if capped else ""),
                    images=set_name,
                    mode=f"{backend} {mode}",
                    max_abs=err,
                    decisive=decisive,
                    top1_mismatch=mismatch,
                    undecided=undecided,
                    same_decisions=same_decisions,
                    own_max_abs=(y_own.float() - ref.float()).abs().max().item(),
                    mean_tokens=counts,
                    ok=err < TOL and mismatch == 0,
                )
            )
    if compile_too:
        torch.compiler.reset()
    return rows


@torch.no_grad()
def check_keep_all(model_name: str, pruner_name: str, seed: int) -> list[dict]:
    """With keep ratio 1 every pruned backend must equal `dense`."""
    if pruner_name not in KEEP_ALL:
        return []
    size = 384 if model_name.endswith("384") else 224
    x = synthetic_images(4, size, seed=seed).half().cuda()
    pruner = create_pruner(pruner_name, **KEEP_ALL[pruner_name])
    dense = build_pruned_model(model_name, pruner, "dense", seed=seed).half().cuda()(x)
    rows = []
    for backend in ("triton", "fa2_varlen", "padded_sdpa", "nested_sdpa"):
        y = build_pruned_model(model_name, pruner, backend, seed=seed).half().cuda()(x)
        err = (y.float() - dense.float()).abs().max().item()
        rows.append(dict(model=model_name, pruner=pruner_name, backend=backend, max_abs=err, ok=err < TOL))
    return rows


def _positive_int(text: str) -> int:
    """argparse type of --batch: an integer >= 1 (argparse names the argument in the error)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}")
    return value


def main(argv: list[str] | None = None) -> int:
    """CLI entry point; see the module docstring. The arguments are checked before the CUDA check."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    ap.add_argument("--pruners", nargs="+", default=list(PRUNERS), choices=sorted(PRUNERS))
    ap.add_argument("--batch", type=_positive_int, default=8, help="images per image set (an integer >= 1)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--calibrated-capacity", action="store_true",
                    help="Threshold-L2 with max_keep='calibrate' (per-image caps and the batch budget)")
    ap.add_argument("--compile", action="store_true",
                    help="also check triton compiled with torch.compile and captured (a compile per case)")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("check_grid needs a CUDA GPU", file=sys.stderr)
        return 2
    failed = 0
    hdr = f"{'model':24} {'pruner':13} {'images':13} {'mode':24} {'max|d|':>8} {'top1 ok':>8} {'undec':>5} "
    print(hdr + f"{'same dec':>8} {'own|d|':>8}  tokens/stage  verdict")
    for model_name in args.models:
        for pruner_name in args.pruners:
            for r in check_case(model_name, pruner_name, args.batch, args.seed, args.calibrated_capacity,
                                args.compile):
                failed += not r["ok"]
                print(
                    f"{r['model']:24} {r['pruner']:13} {r['images']:13} {r['mode']:24} {r['max_abs']:8.5f} "
                    f"{r['decisive'] - r['top1_mismatch']:>4}/{r['decisive']:<3} {r['undecided']:>5} "
                    f"{str(r['same_decisions']):>8} {r['own_max_abs']:8.5f}  {r['mean_tokens']}  "
                    f"{'PASS' if r['ok'] else 'FAIL'}",
                    flush=True,
                )
            torch.cuda.empty_cache()
    print("\nkeep ratio 1 vs dense")
    for model_name in args.models:
        for pruner_name in args.pruners:
            for r in check_keep_all(model_name, pruner_name, args.seed):
                failed += not r["ok"]
                print(
                    f"{r['model']:24} {r['pruner']:13} {r['backend']:12} {r['max_abs']:8.5f} "
                    f"{'PASS' if r['ok'] else 'FAIL'}",
                    flush=True,
                )
    print(f"\n{'ALL PASS' if not failed else f'{failed} FAILED'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
