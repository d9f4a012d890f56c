"""Bad inputs to the pruned models and the pruners: a clear TypeError/ValueError naming the argument,
never a silent wrong result (a review's findings, each reproduced here)."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch

from pruners import build_pruned_model, create_pruner, synthetic_images

TINY = "deit_tiny_patch16_224"


@functools.cache
def _evit():
    return build_pruned_model(TINY, "evit", "reference")


@functools.cache
def _images(n: int = 2) -> torch.Tensor:
    return synthetic_images(n, 224, seed=3)


def test_calibration_images_are_checked():
    bad = torch.full((2, 3, 224, 224), float("nan"))
    with pytest.raises(ValueError, match="calibration images must be finite"):
        build_pruned_model(TINY, "threshold_l2", "reference", calibration_images=bad)
    with pytest.raises(TypeError, match="floating point"):
        build_pruned_model(TINY, "threshold_l2", "reference",
                           calibration_images=torch.zeros(2, 3, 224, 224, dtype=torch.uint8))  # fmt: skip
    with pytest.raises(TypeError, match="calibration_images must be"):
        build_pruned_model(TINY, "threshold_l2", "reference", calibration_images=[_images()])
    # fp64 images are fine for calibration: they are converted, as the docstring says (fp32 CPU model)
    model = build_pruned_model(TINY, "threshold_l2", "reference", calibration_images=_images().double())
    assert torch.isfinite(model.pruner.thresholds).all()


@pytest.mark.parametrize(
    ("options", "exc", "match"),
    [
        ({"graph": "no"}, TypeError, "graph must be True or False"),
        ({"exact_capacity": "no"}, TypeError, "exact_capacity must be True or False"),
        ({"ragged_linear": 1}, TypeError, "ragged_linear must be True or False"),
        ({"seed": 2**70}, ValueError, "seed must be in"),
        ({"checkpoint_path": ""}, ValueError, "checkpoint_path is empty"),
        ({"checkpoint_path": 5}, TypeError, "checkpoint_path must be a path"),
        ({"checkpoint_path": "/nonexistent/deit.pth"}, FileNotFoundError, "does not exist"),
        ({"checkpoint_path": "/"}, FileNotFoundError, "is a folder"),
    ],
    ids=lambda v: str(v)[:30],
)
def test_build_options_are_checked(options, exc, match):
    with pytest.raises(exc, match=match):
        build_pruned_model(TINY, "evit", "reference", **options)


def test_a_numpy_seed_is_an_int():
    a = build_pruned_model(TINY, "evit", "reference", seed=np.int64(3))
    b = build_pruned_model(TINY, "evit", "reference", seed=3)
    assert torch.equal(a.backbone.cls_token, b.backbone.cls_token)


@pytest.mark.parametrize("content", ["garbage", "list", "wrong-shapes"])
def test_unloadable_checkpoints_say_which_file(tmp_path, content):
    path = tmp_path / "ckpt.pth"
    if content == "garbage":
        path.write_bytes(b"\x00not a checkpoint" * 64)
    elif content == "list":
        torch.save([1, 2, 3], path)
    else:
        state = build_pruned_model("deit_small_patch16_224", "evit", "reference").backbone.state_dict()
        torch.save(state, path)  # DeiT-S weights into DeiT-tiny
    with pytest.raises(ValueError, match="is not a loadable deit_tiny_patch16_224 checkpoint"):
        build_pruned_model(TINY, "evit", "reference", checkpoint_path=str(path))


def test_images_must_match_the_models_dtype_and_device():
    model = _evit()
    with torch.no_grad():
        with pytest.raises(TypeError, match="model's dtype and device"):
            model(_images().double())
        with pytest.raises(TypeError, match="model's dtype and device"):
            model(torch.zeros(1, 3, 224, 224, device="meta"))


def test_keep_override_that_overflows_the_capacity_is_an_error():
    """EViT at keep 0.7 holds 1 + ceil(0.7 * 196) + 1 tokens after stage 0: an all-True replay does
    not fit, and the packer would silently drop tokens."""
    model = build_pruned_model(TINY, "evit", "reference")
    model.keep_override = [torch.ones(2, n, dtype=torch.bool) for n in (197, 140, 100)]
    with torch.no_grad(), pytest.raises(ValueError, match=r"keep_override\[0\] keeps up to 197 tokens"):
        model(_images())
    # the model's own decisions replay fine, and the check reads the host only on the first forward
    model.keep_override = None
    model.record = True
    with torch.no_grad():
        own = model(_images())
    model.record = False
    model.keep_override = iter([k.clone() for k in model.recorded_keeps])  # any iterable of masks
    with torch.no_grad():
        assert torch.equal(model(_images()), own)
        assert model._override_checked
        assert torch.equal(model(_images()), own)


def test_keep_override_shapes_and_types():
    model = build_pruned_model(TINY, "evit", "reference")
    with pytest.raises(TypeError, match="keep_override must be a list"):
        model.keep_override = torch.ones(2, 197, dtype=torch.bool)
    with pytest.raises(TypeError, match=r"keep_override\[0\] must be a bool \[B, N\] tensor, got list"):
        model.keep_override = [[True] * 197]
    model.keep_override = [torch.ones(2, 197, dtype=torch.bool)] * 4
    with torch.no_grad(), pytest.raises(ValueError, match="4 masks for this model's 3 pruning stages"):
        model(_images())
    dense = build_pruned_model(TINY, None, "dense")
    dense.keep_override = []
    with torch.no_grad(), pytest.raises(ValueError, match="dense backend does not prune"):
        dense(_images())


def test_pruner_options_are_checked():
    ats = create_pruner("ats", num_samples=[8] * 9)  # one per default stage (blocks 3..11 of DeiT)
    model = build_pruned_model(TINY, ats, "reference")
    assert model.pruner.num_samples == (8,) * 9
    with pytest.raises(ValueError, match="8 entries for 9 stages"):
        build_pruned_model(TINY, create_pruner("ats", num_samples=[8] * 8), "reference")
    cases = [
        (lambda: create_pruner("ats", num_samples=1.5), ValueError, "num_samples must be ints >= 2"),
        (lambda: create_pruner("ats", num_samples=[8, True]), TypeError, "num_samples must be numbers"),
        (lambda: create_pruner("ats", max_keep=True), ValueError, "max_keep must be a positive int"),
        (lambda: create_pruner("evit", keep_rate=["a", "b", "c"]), TypeError, "keep_rate must be numbers"),
        (lambda: create_pruner("threshold_l2", thresholds=[1, "x", 3]), TypeError, "thresholds must be numbers"),
        (lambda: create_pruner("dynamicvit", rho=True), ValueError, "rho must be in"),
        (lambda: create_pruner("dynamicvit", min_keep=True), ValueError, "min_keep must be an int"),
        (lambda: create_pruner("dynamicvit", rho=0.5, keep_ratios=[0.5, 0.4, 0.3]), ValueError, "not both"),
    ]
    for make, exc, match in cases:
        with pytest.raises(exc, match=match):
            make()


def test_exact_capacity_replays_any_mask():
    """exact_capacity sizes every buffer from the mask itself: an all-True replay keeps every token,
    nothing is dropped, and the forward is the dense one."""
    model = build_pruned_model(TINY, "evit", "reference", exact_capacity=True)
    model.keep_override = [torch.ones(2, 197, dtype=torch.bool) for _ in range(3)]
    dense = build_pruned_model(TINY, None, "dense")
    with torch.no_grad():
        torch.testing.assert_close(model(_images()), dense(_images()), atol=1e-4, rtol=1e-4)
