"""The pruned forwards whose outputs `forward_reference.json` holds bit for bit, and how each is run.

Every case builds one model and runs it on fixed images, on the CPU with one thread (Triton kernels in
the interpreter); `run_case` returns what the forward produced: the logits as `float.hex` (or, for the
full-size builds, a SHA-256 of their bytes and the first values), the keep mask each stage applied
(`record=True`, as packed bits), and each packing's per-image lengths and capacity (`packing_log`).
The same code wrote the file (`make_forward_reference.py`, 2026-12-05, with `pruners/model.py` before
it was split) and reads today's forward (`tests/pruners/test_forward_reference.py`).

Two kinds of case:
- `tiny-*`: a DeiT-tiny cut to 4 blocks at 64 x 64 pixels and 10 classes, assembled as
  `build_pruned_model` assembles a model (seeded timm init, `PatchGemm`, a bound pruner, `PrunedDeiT`
  with the forward's flags, calibration), so the kernel paths (packers, ragged attention, ragged linear,
  fused blocks) run in the interpreter in well under a second each;
- `build-*`: `build_pruned_model` itself on the full DeiT-tiny at 224 pixels (its option checks, seeded
  backbone cache, calibration), with the backends that run in plain PyTorch plus one Triton one.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np
import timm
import torch

from pruners import ForwardOptions, PrunedDeiT, build_pruned_model, create_pruner, synthetic_images
from pruners.base import ModelInfo
from pruners.model import PatchGemm

TINY_BACKBONE = dict(img_size=64, depth=4, num_classes=10)
# Stage settings under which every pruner really prunes the 17-token tiny model.
PRUNER_SPECS: dict[str, tuple[str, dict]] = {
    "evit": ("evit", dict(stages=(1, 2), keep_rate=0.6)),
    "evit-nofuse": ("evit", dict(stages=(1, 2), keep_rate=0.6, fuse_token=False)),
    "dynamicvit": ("dynamicvit", dict(stages=(1, 3), keep_ratios=(0.7, 0.5))),
    "ats": ("ats", dict(stages=(1, 2, 3), num_samples=10)),
    "threshold_l2": ("threshold_l2", dict(stages=(1, 2))),
}


@dataclass(frozen=True)
class Case:
    """One model: a pruner spec (None: the dense model), a backend, the model's flags, and whether the
    forward replays the keep masks of the same model (same flags) on the reference backend."""

    pruner: str | None  # a PRUNER_SPECS key (tiny) or a pruner name (build)
    backend: str
    flags: dict = field(default_factory=dict)
    build: bool = False  # build_pruned_model at 224 pixels instead of the tiny model
    replay: bool = False


def _cases() -> dict[str, Case]:
    out = {"tiny-dense": Case(None, "dense"), "tiny-dense-fused": Case(None, "dense", {"fused_blocks": True})}
    for spec in PRUNER_SPECS:
        for backend in ("reference", "triton"):
            out[f"tiny-{spec}-{backend}"] = Case(spec, backend)
    out |= {
        "tiny-evit-triton-torchpacker": Case("evit", "triton", {"packer": "torch"}),
        "tiny-ats-reference-kernelpacker": Case("ats", "reference", {"packer": "ragged_kernels"}),
        "tiny-evit-padded_sdpa": Case("evit", "padded_sdpa"),
        "tiny-evit-padded_sdpa-syncfree": Case("evit", "padded_sdpa", {"sync_free": True}),
        "tiny-evit-triton-exact": Case("evit", "triton", {"exact_capacity": True}),
        "tiny-threshold_l2-reference-exact": Case("threshold_l2", "reference", {"exact_capacity": True}),
        "tiny-threshold_l2-triton-raggedlinear": Case("threshold_l2", "triton", {"ragged_linear": True}),
        "tiny-evit-triton-raggedlinear": Case("evit", "triton", {"ragged_linear": True}),
        "tiny-dynamicvit-triton-fused": Case("dynamicvit", "triton", {"fused_blocks": True}),
        "tiny-evit-triton-fused": Case("evit", "triton", {"fused_blocks": True}),
        "tiny-ats-reference-fused": Case("ats", "reference", {"fused_blocks": True}),
        "tiny-evit-triton-replay": Case("evit", "triton", replay=True),
        "tiny-threshold_l2-triton-replay-exact": Case("threshold_l2", "triton", {"exact_capacity": True}, replay=True),
        "build-threshold_l2-reference": Case("threshold_l2", "reference", build=True),
        "build-evit-triton": Case("evit", "triton", build=True),
        "build-dense": Case(None, "dense", build=True),
        "build-dynamicvit-padded_sdpa-exact-seed1": Case("dynamicvit", "padded_sdpa", {"exact_capacity": True,
                                                                                     "seed": 1}, build=True),
    }
    return out


CASES = _cases()


def tiny_model(spec: str | None, backend: str, seed: int = 0, **flags) -> PrunedDeiT:
    """The tiny DeiT with pruner `spec`, assembled as `build_pruned_model` assembles a model."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        backbone = timm.create_model("deit_tiny_patch16_224", pretrained=False, **TINY_BACKBONE).eval()
    backbone.patch_embed.proj = PatchGemm.replacing(backbone.patch_embed.proj)
    name, options = PRUNER_SPECS[spec] if spec is not None else ("evit", dict(keep_rate=1.0, stages=()))
    pruner = create_pruner(name, **options)
    pruner.bind(ModelInfo(depth=len(backbone.blocks), num_patches=backbone.patch_embed.num_patches,
                          embed_dim=backbone.embed_dim, num_heads=backbone.blocks[0].attn.num_heads, seed=seed))
    model = PrunedDeiT(backbone, pruner.eval(), backend, ForwardOptions(**flags)).eval()
    if getattr(pruner, "calibrated", True) is False:
        model.calibrate(synthetic_images(4, TINY_BACKBONE["img_size"], seed=seed))
    return model


def _model(case: Case) -> tuple[torch.nn.Module, torch.Tensor]:
    if case.build:
        # the pruner by name: its default options, DeiT's default stages
        return build_pruned_model("deit_tiny_patch16_224", case.pruner, case.backend, **case.flags), \
            synthetic_images(2, 224, seed=4)
    return tiny_model(case.pruner, case.backend, **case.flags), synthetic_images(3, TINY_BACKBONE["img_size"], seed=4)


def _bits(mask: torch.Tensor) -> dict:
    return {"shape": list(mask.shape), "bits": np.packbits(mask.numpy().ravel()).tobytes().hex()}


def _logits(y: torch.Tensor, full: bool) -> dict:
    values = y.detach().numpy()
    if full:
        return {"shape": list(values.shape), "hex": [float(v).hex() for v in values.ravel().tolist()]}
    return {"shape": list(values.shape), "sha256": hashlib.sha256(values.tobytes()).hexdigest(),
            "first": [float(v).hex() for v in values.ravel()[:4].tolist()]}


@torch.no_grad()
def run_case(name: str) -> dict:
    """What case `name`'s forward produces (see the module docstring), on one CPU thread."""
    case = CASES[name]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the summation order of CPU kernels may depend on the thread count
    try:
        model, images = _model(case)
        if case.replay:
            ref = tiny_model(case.pruner, "reference", **case.flags)
            ref.record = True
            ref(images)
            model.keep_override = [k.clone() for k in ref.recorded_keeps]
        with model.packing_log() as log:
            plain = model(images)
        model.record = True
        recorded = model(images)
        keeps = [_bits(k) for k in model.recorded_keeps]
    finally:
        torch.set_num_threads(threads)
    lengths, capacities = log.lengths()
    out = {"logits": _logits(plain, not case.build), "keeps": keeps, "lengths": lengths, "capacities": capacities}
    if not torch.equal(recorded, plain):  # recording takes another branch of a stage: both are kept
        out["logits_recorded"] = _logits(recorded, not case.build)
    return out
