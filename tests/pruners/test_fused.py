"""Fused blocks (`pruners.fused`, `fused_blocks=True`): the same logits as the unfused forward on the same
keep decisions, for every pruner and the dense model, with four fused launches per block and one for the
head; clear errors where a backbone or an option cannot be fused; (GPU) fp16 eager and graph mode."""

from __future__ import annotations

import pytest
import timm
import torch

from pruners import ForwardOptions, PrunedDeiT, build_pruned_model, create_pruner, synthetic_images
from pruners.base import ModelInfo
from pruners.fused import unfusable
from tests.conftest import HAS_CUDA

DEV = "cuda" if HAS_CUDA else "cpu"
# A DeiT-tiny cut to 4 blocks at 64 x 64 pixels (17 tokens): every code path of the full model, at a size
# the Triton interpreter runs in seconds.
SMALL = dict(img_size=64, depth=4)
CASES = {
    "dense": (None, "dense"),
    "evit-reference": (("evit", dict(stages=(1, 2), keep_rate=0.6)), "reference"),
    "evit-triton": (("evit", dict(stages=(1, 2), keep_rate=0.6)), "triton"),  # the pack kernel's fused row
    "evit-nofuse-triton": (("evit", dict(stages=(1, 2), keep_rate=0.6, fuse_token=False)), "triton"),
    "dynamicvit-triton": (("dynamicvit", dict(stages=(1, 3), keep_ratios=(0.7, 0.5))), "triton"),
    "ats-reference": (("ats", dict(stages=(1, 2, 3), num_samples=10)), "reference"),
    "threshold_l2-triton": (("threshold_l2", dict(stages=(1, 2))), "triton"),
}


def _small(case: str, fused: bool, seed: int = 0) -> PrunedDeiT:
    spec, backend = CASES[case]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        backbone = timm.create_model("deit_tiny_patch16_224", pretrained=False, **SMALL).eval()
    pruner = create_pruner(spec[0], **spec[1]) if spec is not None else create_pruner("evit", keep_rate=1.0, stages=())
    pruner.bind(ModelInfo(depth=len(backbone.blocks), num_patches=backbone.patch_embed.num_patches,
                          embed_dim=backbone.embed_dim, num_heads=backbone.blocks[0].attn.num_heads, seed=seed))
    model = PrunedDeiT(backbone, pruner.eval(), backend, ForwardOptions(fused_blocks=fused)).eval()
    if getattr(pruner, "calibrated", True) is False:
        model.calibrate(synthetic_images(4, SMALL["img_size"], seed=seed))
    return model.to(DEV)


def _count_fused_launches(model: PrunedDeiT) -> list[dict]:
    calls = []
    real = model._fused.linear

    def counting(*args, **kw):
        calls.append({k: v is not None and v is not False for k, v in kw.items() if k in ("norm", "gelu", "residual",
                                                                                          "rows")})
        return real(*args, **kw)

    model._fused.linear = counting
    return calls


@pytest.mark.parametrize("case", list(CASES))
def test_fused_forward_equals_the_unfused_forward_on_the_same_decisions(case, monkeypatch):
    base, fused = _small(case, False), _small(case, True)
    images = synthetic_images(3, SMALL["img_size"], seed=4).to(DEV)
    with torch.no_grad():
        base.record = True
        expect = base(images)
        if base.backend != "dense":
            assert base.recorded_keeps[-1].sum(1).lt(17).all(), "the case must really prune"
            fused.keep_override = base.recorded_keeps
        calls = _count_fused_launches(fused)
        # Nothing of timm's block or head forwards may run: the fused path computes them itself.
        for blk in fused.backbone.blocks:
            for m in (blk.norm1, blk.norm2, blk.attn, blk.mlp):
                monkeypatch.setattr(m, "forward", lambda *a, **k: pytest.fail("an unfused block module ran"))
        monkeypatch.setattr(fused.backbone.head, "forward", lambda *a, **k: pytest.fail("the unfused head ran"))
        got = fused(images)
    torch.testing.assert_close(got, expect, rtol=0, atol=3e-5)
    depth = len(fused.backbone.blocks)
    assert len(calls) == 4 * depth + 1  # norm1+qkv, proj+residual, norm2+fc1+GELU, fc2+residual; the head
    assert sum(c.get("residual", False) for c in calls) == 2 * depth
    assert sum(c.get("gelu", False) for c in calls) == depth
    assert calls[-1] == {"norm": True, "rows": True}  # the class rows, gathered, normed, through the head
    assert "fused_blocks=True" in repr(fused)


def test_fused_model_takes_the_unfused_models_decisions_by_itself():
    """In fp32 the fused activations equal the unfused ones to rounding: a pruner deciding for itself picks
    the same tokens (EViT: top-k of the class attention)."""
    base, fused = _small("evit-reference", False), _small("evit-reference", True)
    images = synthetic_images(2, SMALL["img_size"], seed=6).to(DEV)
    base.record = fused.record = True
    with torch.no_grad():
        torch.testing.assert_close(fused(images), base(images), rtol=0, atol=3e-5)
    for a, b in zip(fused.recorded_keeps, base.recorded_keeps, strict=True):
        assert torch.equal(a, b)


def test_threshold_calibration_runs_the_unfused_reference_path():
    """Thresholds do not depend on the fused path: calibrating a fused model gives the unfused model's."""
    base, fused = _small("threshold_l2-triton", False), _small("threshold_l2-triton", True)
    assert fused._fused is not None and fused.options.fused_blocks
    thresholds = [(a, b) for a, b in zip(base.pruner.buffers(), fused.pruner.buffers(), strict=True)]
    assert thresholds and all(torch.equal(a, b) for a, b in thresholds)


def test_full_size_deit_tiny_through_build_pruned_model():
    """The build option, at DeiT-tiny's 197 tokens (several row tiles per layer, the head's gather from a
    packed buffer past the first tile)."""
    base = build_pruned_model("deit_tiny_patch16_224", "dynamicvit", "triton").to(DEV)
    fused = build_pruned_model("deit_tiny_patch16_224", "dynamicvit", "triton", fused_blocks=True).to(DEV)
    images = synthetic_images(1, 224, seed=2).to(DEV)
    base.record = True
    with torch.no_grad():
        expect = base(images)
        fused.keep_override = base.recorded_keeps
        torch.testing.assert_close(fused(images), expect, rtol=0, atol=3e-5)


def test_backbones_the_fused_block_does_not_compute_are_refused_by_name():
    with torch.random.fork_rng(devices=[]):
        scaled = timm.create_model("deit_tiny_patch16_224", pretrained=False, init_values=1e-5, **SMALL)
        tanh = timm.create_model("deit_tiny_patch16_224", pretrained=False, act_layer="gelu_tanh", **SMALL)
        plain = timm.create_model("deit_tiny_patch16_224", pretrained=False, **SMALL)
    assert "ls1" in unfusable(scaled)
    assert "GELU" in unfusable(tanh)
    assert unfusable(plain) is None
    pruner = create_pruner("evit", stages=(1,))
    pruner.bind(ModelInfo(4, 16, 192, 3))
    with pytest.raises(ValueError, match="fused_blocks: block 0 has ls1"):
        PrunedDeiT(scaled, pruner, "triton", ForwardOptions(fused_blocks=True))


def test_options_that_exclude_fused_blocks():
    with pytest.raises(ValueError, match="fused_blocks=True is the form that compiles"):
        build_pruned_model("deit_tiny_patch16_224", "evit", "triton", ragged_linear=True, compile=True)
    with pytest.raises(ValueError, match="choose one of fused_blocks and ragged_linear"):
        build_pruned_model("deit_tiny_patch16_224", "evit", "triton", fused_blocks=True, ragged_linear=True)
    with pytest.raises(TypeError, match="fused_blocks must be True or False"):
        build_pruned_model("deit_tiny_patch16_224", "evit", "triton", fused_blocks="yes")


@pytest.mark.gpu
@pytest.mark.parametrize("pruner", ["ats", "dynamicvit", "evit", "threshold_l2", None])
def test_gpu_fp16_fused_eager_and_graph_against_the_padded_reference(pruner):
    """DeiT-S fp16: fused eager and fused graph mode within the correctness gate's 0.004 of the padded
    SDPA reference (dense: of timm's dense forward) on the same decisions."""
    model = "deit_small_patch16_224"
    ref = build_pruned_model(model, pruner, "dense" if pruner is None else "padded_sdpa").half().cuda()
    eager = build_pruned_model(model, pruner, "dense" if pruner is None else "triton", fused_blocks=True).half().cuda()
    graph = build_pruned_model(model, pruner, "dense" if pruner is None else "triton", fused_blocks=True,
                               graph=True).half().cuda()
    images = synthetic_images(4, 224, seed=5).half().cuda()
    with torch.no_grad():
        if pruner is not None:
            eager.record = True
            eager(images)
            ref.keep_override = graph.model.keep_override = eager.recorded_keeps
            eager.record, eager.keep_override = False, eager.recorded_keeps
        expect = ref(images).float()
        for got in (eager(images), graph(images), graph(images)):
            assert (got.float() - expect).abs().max().item() <= 0.004


@pytest.mark.parametrize("case", ["dense", "threshold_l2-triton"])
def test_the_fused_forward_compiles_whole_and_computes_the_eager_result(case):
    """`ragged_linear` is a custom op: `torch.compile(fullgraph=True)` traces the fused forward without a
    graph break (aot_eager: the traced graph run unfused on the CPU), so inductor can fuse what lies
    between the fused layers."""
    from pruners import CompiledPrunedModel

    fused = _small(case, True)
    images = synthetic_images(2, SMALL["img_size"], seed=8).to(DEV)
    with torch.no_grad():
        expect = fused(images)
        compiled = CompiledPrunedModel(fused, backend="aot_eager")
        torch.testing.assert_close(compiled(images), expect, rtol=0, atol=1e-5)
    torch.compiler.reset()
