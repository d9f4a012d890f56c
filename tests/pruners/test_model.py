"""The packed pruned DeiT forward: against a per-image oracle built from timm's own modules, across
backends, batch composition, keep-all settings, seeds/checkpoints, and (GPU) fp16 + graph mode."""

from __future__ import annotations

import functools

import pytest
import torch

from pruners import BACKENDS, build_pruned_model, create_pruner, synthetic_images
from tests.conftest import HAS_CUDA

TINY = "deit_tiny_patch16_224"
# Options chosen so every pruner really prunes on random weights and seeded synthetic images.
PRUNER_CASES = {
    "threshold_l2": {},
    "dynamicvit": {},
    "evit": {},
    "evit-nofuse": {"fuse_token": False},
    "ats": {"num_samples": 120},
}


def _pruner(case: str):
    return create_pruner(case.split("-")[0], **PRUNER_CASES[case])


@functools.cache
def _model(case: str, backend: str):
    """Built once per session: building (timm init + calibration) dominates these CPU tests."""
    return build_pruned_model(TINY, _pruner(case), backend)


def _has_ragged_kernels() -> bool:
    try:
        import ragged_kernels  # noqa: F401
    except ImportError:
        return False
    return True


@torch.no_grad()
def _oracle(model, images: torch.Tensor, keeps: list[torch.Tensor]) -> torch.Tensor:
    """Per image, unbatched: stock timm Block/Attention forwards plus explicit token selection."""
    m, pr = model.backbone, model.pruner
    stage_at = {blk: s for s, blk in enumerate(pr.stages)}
    out = []
    for b in range(images.shape[0]):
        x = m._pos_embed(m.patch_embed(images[b : b + 1]))
        for i, blk in enumerate(m.blocks):
            s = stage_at.get(i)
            if s is None:
                x = blk(x)
                continue
            keep = keeps[s][b, : x.shape[1]]
            assert keeps[s][b, x.shape[1] :].sum() == 0
            if pr.placement == "before_block":
                x = blk(x[:, keep])
                continue
            h = blk.norm1(x)
            a = blk.attn
            qkv = a.qkv(h).reshape(1, x.shape[1], 3, a.num_heads, a.head_dim).permute(2, 0, 3, 1, 4)
            probs = torch.softmax((qkv[0] @ qkv[1].transpose(-2, -1)) * a.scale, -1)[0, :, 0]  # [H, N]
            x = x + blk.attn(h)
            parts = [x[:, keep]]
            drop = ~keep
            drop[0] = False
            if getattr(pr, "fuse_token", False) and drop.any():
                parts.append((probs.mean(0)[drop][:, None] * x[0, drop]).sum(0)[None, None])
            x = torch.cat(parts, 1)
            x = x + blk.mlp(blk.norm2(x))
        out.append(m.head(m.norm(x)[:, 0]))
    return torch.cat(out)


def _backends_cpu() -> list[str]:
    return ["reference", "triton"] if _has_ragged_kernels() else ["reference"]


ORACLE_CASES = [(c, "reference") for c in PRUNER_CASES] + [("threshold_l2", "triton"), ("evit", "triton")]


@pytest.mark.parametrize(("case", "backend"), ORACLE_CASES, ids=[f"{c}-{b}" for c, b in ORACLE_CASES])
def test_packed_forward_matches_per_image_oracle(case, backend):
    if backend != "reference" and not _has_ragged_kernels():
        pytest.skip("ragged_kernels not importable")
    model = _model(case, backend)
    model.record = True
    images = synthetic_images(2, 224, seed=3)
    with torch.no_grad():
        logits = model(images)
    counts = [k.sum(1) for k in model.recorded_keeps]
    assert len(counts) == len(model.pruner.stages)
    assert (counts[-1] < 197).all()  # it really pruned
    if case == "threshold_l2":  # (ATS on random weights keeps ~all samples: counts barely differ)
        assert any((c[0] != c[1]).item() for c in counts), "ragged pruner gave equal counts"
    ref = _oracle(model, images, model.recorded_keeps)
    torch.testing.assert_close(logits, ref, rtol=0, atol=2e-4)


@pytest.mark.parametrize("case", list(PRUNER_CASES))
def test_batch_composition_does_not_change_results(case):
    model = _model(case, "reference")
    model.record = True
    images = synthetic_images(3, 224, seed=4)
    with torch.no_grad():
        batched = model(images)
        keeps = model.recorded_keeps
        for b in range(3):
            alone = model(images[b : b + 1])
            torch.testing.assert_close(alone[0], batched[b], rtol=0, atol=1e-4)
            for k_all, k_one in zip(keeps, model.recorded_keeps, strict=True):
                n = k_one.shape[1]
                assert torch.equal(k_all[b, :n], k_one[0]) and not k_all[b, n:].any()


# Tokens per image incl. CLS after each stage of the fixed-count pruners at 196 patches: DynamicViT
# 1 + int(196 * 0.7**s), EViT 1 + ceil(0.7 * M) of the current M patch tokens (+1: the fused token).
EXPECTED_COUNTS = {
    "dynamicvit": [138, 97, 68],
    "evit": [140, 100, 72],
    "evit-nofuse": [139, 98, 69],
}


@pytest.mark.parametrize("case", list(EXPECTED_COUNTS))
def test_fixed_count_pruners_token_counts(case):
    model = _model(case, "reference")
    bounds, n = [], 197
    for s in range(3):
        n = model.pruner.tokens_bound(s, n)
        bounds.append(n)
    assert bounds == EXPECTED_COUNTS[case]


KEEP_ALL = {
    "dynamicvit": {"rho": 1.0},
    "evit": {"keep_rate": 1.0},
    "threshold_l2": {"thresholds": float("-inf")},
}


KEEP_ALL_CASES = [(n, "reference") for n in KEEP_ALL] + [("dynamicvit", "triton"), ("dynamicvit", "padded_sdpa")]


@pytest.mark.parametrize(("name", "backend"), KEEP_ALL_CASES, ids=[f"{n}-{b}" for n, b in KEEP_ALL_CASES])
def test_keep_ratio_one_equals_dense(name, backend):
    if backend != "reference" and not _has_ragged_kernels():
        pytest.skip("ragged_kernels not importable")
    pruner = create_pruner(name, **KEEP_ALL[name])
    dense = build_pruned_model(TINY, pruner, "dense")
    model = build_pruned_model(TINY, pruner, backend)
    images = synthetic_images(2, 224, seed=5)
    with torch.no_grad():
        torch.testing.assert_close(model(images), dense(images), rtol=0, atol=1e-4)


@pytest.mark.parametrize("case", ["threshold_l2", "ats"])
def test_backends_take_identical_decisions_and_replay(case):
    if not _has_ragged_kernels():
        pytest.skip("ragged_kernels not importable")
    tri, pad = _model(case, "triton"), _model(case, "padded_sdpa")
    tri.record = pad.record = True
    images = synthetic_images(2, 224, seed=6)
    with torch.no_grad():
        a, b = tri(images), pad(images)
        assert all(torch.equal(x, y) for x, y in zip(tri.recorded_keeps, pad.recorded_keeps, strict=True))
        torch.testing.assert_close(a, b, rtol=0, atol=1e-4)
        pad.keep_override = [k.clone() for k in tri.recorded_keeps]
        try:
            torch.testing.assert_close(pad(images), b, rtol=0, atol=0)
        finally:
            pad.keep_override = None


@pytest.mark.parametrize("case", ["threshold_l2", "evit", "ats"])
@pytest.mark.parametrize("backend", ["triton", "padded_sdpa"])
def test_padding_rows_never_reach_a_valid_row(case, backend, monkeypatch):
    """The packed blocks leave the padding rows past cu_seqlens[-1] unwritten (pack fill=None). Filled
    with NaN instead, they must not change a single logit: nothing reads them into a valid row."""
    if not _has_ragged_kernels():
        pytest.skip("ragged_kernels not importable")
    from pruners import packing

    model = _model(case, backend)
    images = synthetic_images(2, 224, seed=8)
    with torch.no_grad():
        monkeypatch.setattr(packing, "PADDING_FILL", 0.0)
        zero = model(images)
        monkeypatch.setattr(packing, "PADDING_FILL", float("nan"))
        poisoned = model(images)
    assert torch.isfinite(zero).all()
    torch.testing.assert_close(poisoned, zero, rtol=0, atol=0)


def test_ats_fused_sampler_gives_the_same_model_decisions_and_logits():
    """The one-kernel ATS sampler in the whole packed forward: every stage keeps the same tokens."""
    if not _has_ragged_kernels():
        pytest.skip("ragged_kernels not importable")
    fused = build_pruned_model(TINY, create_pruner("ats", num_samples=120, sampler="fused"), "triton")
    ref = _model("ats", "triton")
    fused.record = ref.record = True
    images = synthetic_images(2, 224, seed=9)
    with torch.no_grad():
        a, b = fused(images), ref(images)
    assert all(torch.equal(x, y) for x, y in zip(fused.recorded_keeps, ref.recorded_keeps, strict=True))
    torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_exact_capacity_gives_same_logits_with_smaller_buffers():
    pruner = _pruner("threshold_l2")
    eager = _model("threshold_l2", "reference")
    exact = build_pruned_model(TINY, pruner, "reference", exact_capacity=True)
    images = synthetic_images(2, 224, seed=7)
    with torch.no_grad():
        torch.testing.assert_close(exact(images), eager(images), rtol=0, atol=1e-5)


def test_seed_and_checkpoint(tmp_path):
    images = synthetic_images(1, 224, seed=8)
    a = build_pruned_model(TINY, "evit", "reference", seed=1)
    b = build_pruned_model(TINY, "evit", "reference", seed=1)
    c = build_pruned_model(TINY, "evit", "reference", seed=2)
    with torch.no_grad():
        ya, yb, yc = a(images), b(images), c(images)
    assert torch.equal(ya, yb) and not torch.allclose(ya, yc)
    torch.save(c.backbone.state_dict(), tmp_path / "deit.pth")
    state = torch.random.get_rng_state()
    d = build_pruned_model(TINY, "evit", "reference", seed=1, checkpoint_path=str(tmp_path / "deit.pth"))
    build_pruned_model(TINY, "evit", "reference", seed=5)  # a seeded build, first time (not cached)
    assert torch.equal(torch.random.get_rng_state(), state), "building a model must leave the caller's RNG alone"
    with torch.no_grad():
        assert torch.equal(d(images), yc)


def test_real_photos_reference_vs_triton():
    if not _has_ragged_kernels():
        pytest.skip("ragged_kernels not importable")
    from pruners.sample_images import sample_photos

    images = sample_photos(224, ("astronaut", "chelsea"), include_sklearn=False)
    pruner = _pruner("threshold_l2")
    ref = build_pruned_model(TINY, pruner, "reference", calibration_images=images)
    tri = build_pruned_model(TINY, pruner, "triton", calibration_images=images)
    ref.record = True
    with torch.no_grad():
        y = ref(images)
        tri.keep_override = ref.recorded_keeps
        torch.testing.assert_close(tri(images), y, rtol=0, atol=2e-4)


def test_bad_inputs():
    with pytest.raises(ValueError, match="unknown model"):
        build_pruned_model("vit_huge", "evit", "reference")
    with pytest.raises(ValueError, match="unknown backend"):
        build_pruned_model(TINY, "evit", "flash")
    with pytest.raises(TypeError, match="unknown build_pruned_model options"):
        build_pruned_model(TINY, "evit", "reference", sead=1)
    with pytest.raises(ValueError, match="graph mode"):  # padded_sdpa is capturable now (padded to the capacity)
        build_pruned_model(TINY, "evit", "nested_sdpa", graph=True)
    with pytest.raises(ValueError, match="needs a pruner"):
        build_pruned_model(TINY, None, "triton")
    with pytest.raises(TypeError, match="seed"):
        build_pruned_model(TINY, "evit", "reference", seed="0")
    model = build_pruned_model(TINY, "evit", "reference")
    with pytest.raises(ValueError, match=r"\[B, 3, 224, 224\]"):
        model(torch.randn(1, 3, 384, 384))
    with pytest.raises(TypeError, match="floating"):
        model(torch.zeros(1, 3, 224, 224, dtype=torch.int64))
    model.keep_override = [torch.ones(1, 5, dtype=torch.bool)]
    with pytest.raises(ValueError, match="keep_override"):
        model(synthetic_images(1, 224))
    assert set(BACKENDS) == {"triton", "fa2_varlen", "padded_sdpa", "nested_sdpa", "dense"}


# -- GPU ----------------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("case", list(PRUNER_CASES))
def test_gpu_fp16_triton_eager_and_graph_vs_padded(case):
    pruner = _pruner(case)
    dev = "cuda"
    tri = build_pruned_model("deit_small_patch16_224", pruner, "triton").half().to(dev)
    pad = build_pruned_model("deit_small_patch16_224", pruner, "padded_sdpa").half().to(dev)
    graphed = build_pruned_model("deit_small_patch16_224", pruner, "triton", graph=True).half().to(dev)
    graphed.model.record = tri.record = True
    for seed in (0, 1):
        images = synthetic_images(4, 224, seed=seed).half().to(dev)
        with torch.no_grad():
            y_tri = tri(images)
            pad.keep_override = tri.recorded_keeps
            y_pad = pad(images)
            y_graph = graphed(images)
        assert (y_tri.float() - y_pad.float()).abs().max().item() < 0.004
        assert all(torch.equal(a, b) for a, b in zip(graphed.last_keeps(), tri.recorded_keeps, strict=True))
        torch.testing.assert_close(y_graph, y_tri, rtol=0, atol=1e-3)
    assert graphed.captured_batch_sizes == [4]


@pytest.mark.skipif(HAS_CUDA, reason="CPU-only check")
def test_graph_mode_refuses_cpu_images():
    model = build_pruned_model(TINY, "evit", "triton", graph=True) if _has_ragged_kernels() else None
    if model is None:
        pytest.skip("ragged_kernels not importable")
    with pytest.raises(ValueError, match="CUDA"):
        model(synthetic_images(1, 224))


@pytest.mark.parametrize("case", ["threshold_l2", "evit"])
def test_ragged_linear_gives_the_same_logits(case):
    """The experimental ragged linear layers (rows past cu_seqlens[-1] skipped) change no logit."""
    if not _has_ragged_kernels():
        pytest.skip("ragged_kernels not importable")
    if not HAS_CUDA:
        import os

        if os.environ.get("TRITON_INTERPRET") != "1":
            pytest.skip("needs the Triton interpreter on the CPU")
    dev = "cuda" if HAS_CUDA else "cpu"
    base = _model(case, "triton").to(dev)
    fast = build_pruned_model(TINY, _pruner(case), "triton", ragged_linear=True).to(dev)
    assert fast.options.ragged_linear and "ragged_linear=True" in repr(fast)
    calls = []
    real = fast._layers.linear_fn
    fast._layers.linear_fn = lambda *a, **k: (calls.append(k.get("gelu", False)), real(*a, **k))[1]
    images = synthetic_images(2, 224, seed=3).to(dev)
    base.record = True
    with torch.no_grad():
        y = base(images)
        fast.keep_override = base.recorded_keeps
        torch.testing.assert_close(fast(images), y, rtol=0, atol=2e-4)
    # Packed from the first stage on: its attention too when the pruner runs before the block.
    mlps = len(fast.backbone.blocks) - fast.pruner.stages[0]
    attns = mlps - (fast.pruner.placement == "after_attention")
    assert sum(calls) == mlps and len(calls) == 2 * attns + 2 * mlps  # qkv + proj, fc1+GELU + fc2
    base.to("cpu")


def test_ragged_linear_needs_packed_tokens():
    with pytest.raises(ValueError, match="ragged_linear"):
        build_pruned_model(TINY, None, "dense", ragged_linear=True)


@pytest.mark.gpu
@pytest.mark.parametrize("case", ["threshold_l2", "ats"])
def test_gpu_ragged_linear_graph_mode_matches_eager(case):
    pruner = _pruner(case)
    tri = build_pruned_model("deit_small_patch16_224", pruner, "triton").half().cuda()
    fast = build_pruned_model("deit_small_patch16_224", pruner, "triton", graph=True, ragged_linear=True).half().cuda()
    tri.record = True
    images = synthetic_images(8, 224, seed=5).half().cuda()
    with torch.no_grad():
        y = tri(images)
        fast.model.keep_override = tri.recorded_keeps
        torch.testing.assert_close(fast(images), y, rtol=0, atol=4e-3)


def test_seeded_backbones_are_cached_copies_with_fresh_init_weights():
    """A rebuilt model has exactly the weights of a fresh seeded init, and its own parameters."""
    import timm

    from pruners import backbones as pm
    from pruners import clear_backbone_cache

    clear_backbone_cache()
    a = build_pruned_model(TINY, None, "dense", seed=3)
    b = build_pruned_model(TINY, None, "dense", seed=3)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(3)
        fresh = timm.create_model(TINY, pretrained=False)
    for (name, pa), pb, pf in zip(a.backbone.named_parameters(), b.backbone.parameters(), fresh.parameters(),
                                  strict=True):
        assert torch.equal(pa, pf) and torch.equal(pb, pf), name
        assert pa.data_ptr() != pb.data_ptr()  # not shared: mutating one model leaves the other alone
    with torch.no_grad():
        next(a.backbone.parameters()).add_(1.0)
    c = build_pruned_model(TINY, None, "dense", seed=3)
    assert torch.equal(next(c.backbone.parameters()), next(fresh.parameters()))
    other = build_pruned_model(TINY, None, "dense", seed=4)
    assert not torch.equal(next(other.backbone.parameters()), next(fresh.parameters()))
    build_pruned_model("deit_small_patch16_224", None, "dense", seed=3)
    assert len(pm._seeded) == pm._SEEDED_CACHE_SIZE  # bounded: the oldest entry went
    clear_backbone_cache()
    assert not pm._seeded


def test_patch_embedding_runs_as_one_gemm_with_the_convolutions_weights(tmp_path):
    """Every built model (dense too) embeds patches with PatchGemm: the Conv2d's parameters and
    state_dict keys, its output up to the summation order; any other convolution is left alone."""
    import timm
    from torch import nn

    from pruners.model import PatchGemm

    model = build_pruned_model(TINY, None, "dense", seed=5)
    proj = model.backbone.patch_embed.proj
    assert type(proj) is PatchGemm
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(5)
        stock = timm.create_model(TINY, pretrained=False).eval()
    assert list(model.backbone.state_dict()) == list(stock.state_dict())
    images = synthetic_images(2, 224, seed=1)
    with torch.no_grad():
        torch.testing.assert_close(proj(images), stock.patch_embed.proj(images), rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(model(images), stock(images), rtol=1e-4, atol=1e-4)
        odd = torch.randn(1, 3, 37, 40)  # remainders dropped as the convolution drops them
        torch.testing.assert_close(proj(odd), stock.patch_embed.proj(odd), rtol=1e-5, atol=1e-5)
    for other in (nn.Conv2d(3, 8, 3, 1, padding=1), nn.Conv2d(3, 8, 4, 2), nn.Conv2d(4, 8, 2, 2, groups=2)):
        assert PatchGemm.replacing(other) is other
    # A checkpoint saved from a built model loads back into timm (same keys and shapes).
    path = tmp_path / "w.pth"
    torch.save(model.backbone.state_dict(), path)
    again = build_pruned_model(TINY, None, "dense", checkpoint_path=str(path))
    assert type(again.backbone.patch_embed.proj) is PatchGemm
    assert torch.equal(again.backbone.patch_embed.proj.weight, proj.weight)


@pytest.mark.parametrize("packer", ["ragged_kernels", "torch"])
def test_packer_dense_view_equals_gather_dense(packer, device):
    """The model's one-kernel dense view of packed rows is `gather_dense` exactly (NaN padding rows unread,
    zeros at invalid positions), and `rows` packs what the dense view + the applied mask would."""
    if packer == "ragged_kernels" and not _has_ragged_kernels():
        pytest.skip("ragged_kernels not importable")
    from pruners._ops import dense_index, gather_dense, pack_dense_torch
    from pruners.packing import Packer

    lens = [3, 1, 8, 5]
    total = sum(lens)
    x = torch.randn(total + 4, 32, device=device)
    x[total:] = float("nan")
    cu = torch.tensor([0, *torch.tensor(lens).cumsum(0).tolist()], dtype=torch.int32, device=device)
    index = dense_index(cu, 10, x.shape[0])
    p = Packer(packer)
    dense = p.to_dense(x, cu, index)
    assert torch.equal(dense, gather_dense(x, index))
    keep = torch.rand(4, 10, device=device) < 0.5
    keep[:, 0] = False
    applied = keep & index[1]
    applied[:, 0] = True
    packed, out_cu = p.rows(x, cu, 10, keep, 20)
    expect, expect_cu = pack_dense_torch(dense, applied, 20)
    assert torch.equal(out_cu, expect_cu)
    n = int(expect_cu[-1])
    assert torch.equal(packed[:n], expect[:n])


def test_embedding_and_dense_forward_equal_timm_bitwise():
    """The pruned model's embedding (class token written in place, one add) and its dense forward give
    timm's values exactly, in eval under no_grad (the fused path) and with autograd on (timm's own path)."""
    dense = build_pruned_model(TINY, None, "dense").eval()
    images = synthetic_images(2, 224, seed=4)
    m = dense.backbone
    with torch.no_grad():
        expect = m.norm_pre(m.patch_drop(m._pos_embed(m.patch_embed(images))))
        assert dense._fused_pos_embed
        assert torch.equal(dense._embed(images), expect)
        assert torch.equal(dense(images), m(images))
    assert torch.equal(dense._embed(images), expect)  # autograd on: timm's _pos_embed


def test_graph_mode_warns_when_no_stage_bounds_the_buffers():
    """An uncapped Threshold-L2 captures full-size buffers (no speed-up after its stages): graph mode
    says so and names the option; a capped one and a fixed-count pruner stay quiet."""
    import warnings

    from pruners import GraphedPrunedModel

    plain = build_pruned_model(TINY, create_pruner("threshold_l2"), "reference")
    with pytest.warns(UserWarning, match="max_keep='calibrate'"):
        GraphedPrunedModel(plain)
    capped = build_pruned_model(TINY, create_pruner("threshold_l2", max_keep="calibrate"), "reference")
    evit = build_pruned_model(TINY, create_pruner("evit"), "reference")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        GraphedPrunedModel(capped)
        GraphedPrunedModel(evit)


@pytest.mark.parametrize("packer", ["torch", "ragged_kernels"])
@pytest.mark.parametrize("case", ["dynamicvit", "evit", "evit-nofuse"])
def test_a_decision_that_drops_the_class_token_still_keeps_it(case, packer, monkeypatch):
    """The class token is kept whatever a pruner decides (`applied_mask`, applied by the packers): a pruner
    whose every decision drops it packs the same tokens and gives the same logits as the same pruner keeping
    it, on the fast path (nothing reads the applied mask) and with recorded masks (the model builds it);
    before-block and after-attention stages, with and without EViT's fused token, both packers."""
    if packer == "ragged_kernels" and not _has_ragged_kernels():
        pytest.skip("ragged_kernels not importable")
    pruner = _pruner(case)
    keeps_it = build_pruned_model(TINY, pruner, "reference", packer=packer)
    drops_it = build_pruned_model(TINY, pruner, "reference", packer=packer)  # same weights, same decisions
    decide, dropped = drops_it.pruner.decide, []

    def decide_without_class_token(stage, x, valid, attn):
        keep = decide(stage, x, valid, attn).clone()
        keep[:, 0] = False
        dropped.append(stage)
        return keep

    monkeypatch.setattr(drops_it.pruner, "decide", decide_without_class_token)
    images = synthetic_images(2, 224, seed=12)
    keeps_it.record = True
    with torch.no_grad():
        expect = keeps_it(images)
        with keeps_it.packing_log() as log:
            keeps_it(images)
        with drops_it.packing_log() as dropped_log:
            fast = drops_it(images)
        drops_it.record = True
        recorded = drops_it(images)
    assert dropped == [0, 1, 2] * 2  # every stage's decision went through the dropping pruner
    assert dropped_log.lengths() == log.lengths()
    assert torch.equal(fast, expect) and torch.equal(recorded, expect)
    assert all(k[:, 0].all() for k in drops_it.recorded_keeps)
    assert all(torch.equal(a, b) for a, b in zip(drops_it.recorded_keeps, keeps_it.recorded_keeps, strict=True))


@pytest.mark.parametrize("exact_capacity", [False, True], ids=["capacity-bound", "exact-capacity"])
def test_evit_fused_token_written_by_the_packer_matches_the_dense_view(monkeypatch, exact_capacity):
    """With the library's packer, EViT's fused token is summed by `pack_tokens(fuse_weights=)` from the rows
    it packs: no dense view, no `extra_token`. Against the dense-view path on the same model: the same
    packings (lengths and capacities) and the same logits."""
    if not _has_ragged_kernels():
        pytest.skip("ragged_kernels not importable")
    from pruners.evit import EViTPruner
    from pruners.model import PrunedDeiT

    model = build_pruned_model(TINY, "evit", "triton", exact_capacity=exact_capacity)
    images = synthetic_images(2, 224, seed=5)

    def no_dense_view(*args, **kwargs):
        raise AssertionError("the fused token took the dense-view path")

    with torch.no_grad(), monkeypatch.context() as m:
        m.setattr(PrunedDeiT, "_with_extra_token", no_dense_view)
        with model.packing_log() as log:
            fast = model(images)
    monkeypatch.setattr(EViTPruner, "fusion_weights", lambda self, stage, valid, attn: None)
    with torch.no_grad(), model.packing_log() as dense_log:
        slow = model(images)
    assert log.lengths() == dense_log.lengths()
    assert [set(n) for n in log.lengths()[0]] == [{c} for c in EXPECTED_COUNTS["evit"]]  # fused token included
    torch.testing.assert_close(fast, slow, rtol=0, atol=1e-4)


def test_gelu_epilogue_leaves_cpu_and_fp32_rows_on_timms_exact_mlp(monkeypatch):
    """`gelu_epilogue` takes cuBLASLt's tanh GELU only on CUDA fp16/bf16 rows: elsewhere the forward is the
    exact-GELU one, bit for bit, and the epilogue op is never called."""
    from pruners.layers import epilogue_applies

    calls = []
    real = torch._addmm_activation
    monkeypatch.setattr(torch, "_addmm_activation", lambda *a, **k: calls.append(1) or real(*a, **k))
    images = synthetic_images(2, 224, seed=3)
    plain = build_pruned_model(TINY, _pruner("evit"), "reference")
    epilogue = build_pruned_model(TINY, _pruner("evit"), "reference", gelu_epilogue=True)
    with torch.no_grad():
        assert torch.equal(plain(images), epilogue(images))
    assert calls == []
    mlp = plain.backbone.blocks[0].mlp
    assert not epilogue_applies(mlp, torch.zeros(4, 192))
    assert not epilogue_applies(mlp, torch.zeros(4, 192, dtype=torch.float16))
    assert not epilogue_applies(mlp, torch.zeros(4, 192, device="meta", dtype=torch.float16))


@pytest.mark.gpu
@pytest.mark.parametrize("pruner", ["evit", "threshold_l2"])
def test_gpu_gelu_epilogue_within_the_gate_of_the_exact_gelu_forward(pruner, monkeypatch):
    """DeiT-S fp16, eager and graph mode: fc1 + GELU as cuBLASLt's epilogue (called once per pruned block
    and forward) stays within the correctness gate's 0.004 of the exact-GELU padded reference on the
    same decisions."""
    model = "deit_small_patch16_224"
    ref = build_pruned_model(model, pruner, "padded_sdpa").half().cuda()
    eager = build_pruned_model(model, pruner, "triton", gelu_epilogue=True).half().cuda()
    graph = build_pruned_model(model, pruner, "triton", gelu_epilogue=True, graph=True).half().cuda()
    images = synthetic_images(4, 224, seed=5).half().cuda()
    calls = []
    real = torch._addmm_activation
    monkeypatch.setattr(torch, "_addmm_activation", lambda *a, **k: calls.append(1) or real(*a, **k))
    with torch.no_grad():
        eager.record = True
        eager(images)
        assert calls, "the epilogue path did not run"
        ref.keep_override = graph.model.keep_override = eager.recorded_keeps
        eager.record, eager.keep_override = False, eager.recorded_keeps
        expect = ref(images).float()
        for got in (eager(images), graph(images), graph(images)):
            assert (got.float() - expect).abs().max().item() <= 0.004
