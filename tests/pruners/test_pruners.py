"""Unit tests of the four pruners' keep decisions against direct ports of the reference formulas."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from pruners import PRUNERS, AttnInfo, ModelInfo, create_pruner
from pruners._ops import cls_attention, pack_dense_torch, rank_desc, to_dense
from pruners.ats import ats_keep, nearest_cdf_index

INFO = ModelInfo(depth=12, num_patches=196, embed_dim=64, num_heads=4, seed=0)


def _bound(name: str, **opts):
    p = create_pruner(name, **opts)
    p.bind(INFO)
    return p


# -- shared ops ---------------------------------------------------------------------------------
@pytest.mark.parametrize("lens", [[1, 5, 3], [7], [4, 4, 4, 4], [13, 1, 2]], ids=lambda v: "L" + "-".join(map(str, v)))
def test_pack_and_to_dense_roundtrip_exact(lens):
    B, N, C = len(lens), max(lens) + 2, 6
    x = torch.randn(B, N, C)
    keep = torch.arange(N)[None] < torch.tensor(lens)[:, None]
    keep = keep[:, torch.randperm(N)]  # scattered kept positions
    cap = sum(lens) + 3
    packed, cu = pack_dense_torch(x, keep, cap)
    assert cu.tolist() == [0, *torch.tensor(lens).cumsum(0).tolist()]
    assert torch.equal(packed[sum(lens) :], torch.zeros(3, C))
    expect = torch.cat([x[b][keep[b]] for b in range(B)])
    assert torch.equal(packed[: sum(lens)], expect)
    packed[sum(lens) :] = float("nan")  # padding garbage must not leak into the dense view
    dense, valid = to_dense(packed, cu, N)
    for b in range(B):
        assert torch.equal(dense[b, : lens[b]], x[b][keep[b]])
        assert torch.equal(dense[b, lens[b] :], torch.zeros(N - lens[b], C))
        assert valid[b].sum().item() == lens[b]


def test_pack_matches_ragged_kernels_pack_tokens():
    ragged_kernels = pytest.importorskip("ragged_kernels")
    x = torch.randn(3, 17, 8)
    keep = torch.rand(3, 17) > 0.4
    keep[:, 0] = True
    a, cu_a = pack_dense_torch(x, keep, 51)
    b, cu_b = ragged_kernels.pack_tokens(x, keep, capacity=51)
    assert torch.equal(cu_a, cu_b)
    assert torch.equal(a, b)


def test_rank_desc_matches_argsort_and_puts_invalid_last():
    s = torch.randn(4, 30)
    valid = torch.rand(4, 30) > 0.3
    r = rank_desc(s, valid)
    for b in range(4):
        order = torch.argsort(torch.where(valid[b], s[b], -torch.inf), descending=True, stable=True)
        assert torch.equal(r[b][order], torch.arange(30))
        assert (r[b][~valid[b]] >= valid[b].sum()).all()


def test_cls_attention_equals_row0_of_full_softmax():
    B, N, H, D = 2, 11, 3, 8
    q, k = torch.randn(B, N, H, D), torch.randn(B, N, H, D)
    valid = torch.ones(B, N, dtype=torch.bool)
    valid[1, 7:] = False
    got = cls_attention(q[:, 0], k, valid, D**-0.5)
    for b, n in [(0, N), (1, 7)]:
        full = torch.softmax(torch.einsum("nhd,mhd->hnm", q[b, :n], k[b, :n]) * D**-0.5, -1)
        torch.testing.assert_close(got[b, :, :n], full[:, 0], rtol=1e-5, atol=1e-6)
        assert (got[b, :, n:] == 0).all()


# -- DynamicViT ---------------------------------------------------------------------------------
def _predictor_ref(p, x):
    """The reference PredictorLG.forward with an all-ones policy (eval path)."""
    h = p.in_conv(x)
    c = h.shape[-1]
    glob = h[:, :, c // 2 :].mean(1, keepdim=True)
    return p.out_conv(torch.cat([h[:, :, : c // 2], glob.expand_as(h[:, :, c // 2 :])], -1))


@pytest.mark.parametrize("rho", [0.7, 0.5, 0.9])
def test_dynamicvit_keeps_reference_topk_set(rho):
    p = _bound("dynamicvit", rho=rho)
    x = torch.randn(3, 197, 64)
    valid = torch.ones(3, 197, dtype=torch.bool)
    with torch.no_grad():
        keep = p.decide(0, x, valid, None)
        logp = p.predictors[0](x, valid[:, 1:], skip_first=True)  # what decide() runs
        torch.testing.assert_close(logp, _predictor_ref(p.predictors[0], x[:, 1:]), rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(logp, p.predictors[0](x[:, 1:], valid[:, 1:]), rtol=1e-5, atol=1e-6)
        score = logp[..., 0]
    K = int(196 * rho)
    assert keep[:, 0].all()
    for b in range(3):
        # Random predictors give many exactly equal scores: compare the kept score multiset (tie-proof).
        ref = torch.sort(score[b], descending=True).values[:K]
        assert torch.equal(torch.sort(score[b][keep[b, 1:]], descending=True).values, ref)
    assert p.tokens_bound(0, 197) == 1 + K
    assert [int(196 * rho ** (s + 1)) for s in range(3)] == [p._count(s) for s in range(3)]


def test_dynamicvit_seeded_predictors_and_checkpoint(tmp_path):
    a, b = _bound("dynamicvit"), _bound("dynamicvit")
    for pa, pb in zip(a.state_dict().values(), b.state_dict().values(), strict=True):
        assert torch.equal(pa, pb)
    other = create_pruner("dynamicvit")
    other.bind(ModelInfo(12, 196, 64, 4, seed=5))
    assert not torch.equal(other.predictors[0].in_conv[1].weight, a.predictors[0].in_conv[1].weight)
    state = {f"score_predictor.{k}": v for k, v in other.predictors.state_dict().items()}
    torch.save({"model": state}, tmp_path / "dyvit.pth")
    loaded = create_pruner("dynamicvit", checkpoint_path=str(tmp_path / "dyvit.pth"))
    loaded.bind(INFO)
    assert torch.equal(loaded.predictors[2].out_conv[4].weight, other.predictors[2].out_conv[4].weight)
    torch.save({"model": {"head.weight": torch.zeros(1)}}, tmp_path / "bad.pth")
    with pytest.raises(ValueError, match="score_predictor"):
        create_pruner("dynamicvit", checkpoint_path=str(tmp_path / "bad.pth")).bind(INFO)


def test_dynamicvit_threshold_mode_is_per_image():
    p = _bound("dynamicvit", mode="threshold", min_keep=3)
    x = torch.randn(4, 197, 64) * torch.linspace(0.2, 3, 4)[:, None, None]
    with torch.no_grad():
        keep = p.decide(1, x, torch.ones(4, 197, dtype=torch.bool), None)
        logp = p.predictors[1](x[:, 1:], torch.ones(4, 196, dtype=torch.bool))
    expect = logp[..., 0] > logp[..., 1]
    top3 = rank_desc(logp[..., 0], torch.ones(4, 196, dtype=torch.bool)) < 3
    assert torch.equal(keep[:, 1:], expect | top3)
    assert p.tokens_bound(1, 197) == 197


# -- EViT ---------------------------------------------------------------------------------------
def _attn(B, N, H=4, D=16, valid=None):
    q, k = torch.randn(B, N, H, D) * 2, torch.randn(B, N, H, D) * 2
    valid = torch.ones(B, N, dtype=torch.bool) if valid is None else valid
    return AttnInfo(cls_attention(q[:, 0], k, valid, D**-0.5), torch.randn(B, N, H * D)), valid


@pytest.mark.parametrize("rate", [0.7, 0.5, 0.25])
def test_evit_topk_and_fused_token_match_reference(rate):
    p = _bound("evit", keep_rate=rate)
    B, N, C = 3, 140, 32
    attn, valid = _attn(B, N)
    x = torch.randn(B, N, C)
    keep = p.decide(0, x, valid, attn)
    K = math.ceil(rate * (N - 1))
    cls_attn = attn.cls_probs.mean(1)[:, 1:]
    idx = torch.topk(cls_attn, K, dim=1).indices
    for b in range(B):
        assert set(torch.nonzero(keep[b, 1:]).flatten().tolist()) == set(idx[b].tolist())
    fused, present = p.extra_token(0, x, valid, keep, attn)
    compl = ~keep[:, 1:]
    ref = torch.stack([(cls_attn[b][compl[b]][:, None] * x[b, 1:][compl[b]]).sum(0) for b in range(B)])
    torch.testing.assert_close(fused[:, 0], ref, rtol=1e-5, atol=1e-6)
    assert present.all()
    assert p.tokens_bound(0, N) == 1 + K + 1


def test_evit_keep_rate_one_keeps_all_and_fuses_nothing():
    p = _bound("evit", keep_rate=1.0)
    attn, valid = _attn(2, 50)
    keep = p.decide(0, torch.randn(2, 50, 8), valid, attn)
    assert keep.all()
    _, present = p.extra_token(0, torch.randn(2, 50, 8), valid, keep, attn)
    assert not present.any()
    assert p.tokens_bound(0, 50) == 50 and p.is_noop(0, 50)


# -- ATS ----------------------------------------------------------------------------------------
def test_nearest_cdf_index_equals_bruteforce_argmin_with_ties():
    g = torch.Generator().manual_seed(1)
    for _ in range(20):
        c = torch.sort(torch.randint(0, 40, (3, 50), generator=g).float() / 40, dim=1).values  # many ties
        ys = torch.rand(3, 60, generator=g) * 1.1 - 0.05
        ys[:, :5] = c[:, 10:15]  # exact hits
        ys[:, 5:8] = (c[:, 20:23] + c[:, 21:24]) / 2  # exact midpoints: tie between neighbours
        brute = torch.min((ys[:, :, None] - c[:, None, :]).abs(), dim=2)[1]
        assert torch.equal(nearest_cdf_index(c, ys), brute)


def _ats_reference(scores: torch.Tensor, n_ref_tokens: int) -> list[set[int]]:
    """Port of ATS score normalisation + inverse_transform_sampling + get_unique_indices (no padding)."""
    B, M = scores.shape
    s = scores / scores.sum(1, keepdim=True)
    sorted_scores, sorted_indices = torch.sort(s, dim=1)
    cdf = torch.cumsum(sorted_scores, 1)
    ncdf = (cdf - cdf.min(1)[0][:, None]) / (cdf.max(1)[0] - cdf.min(1)[0])[:, None]
    n = n_ref_tokens
    ys = torch.linspace(0, 1.0, n - 1)[None].repeat(B, 1)
    start = torch.min(ncdf + (ncdf == 0).float() * 1e8, dim=1)[0][:, None].expand_as(ys)
    steps = torch.arange(0, n - 1).float()[None].expand_as(start)
    ys = start + (((ys * (n - 2)) - start * steps) / (n - 2))
    diff = ys.shape[1] - M
    pick = torch.min(torch.abs(ys[:, :, None] - F.pad(ncdf[:, None, :], (diff, 0))), dim=2)[1] - diff
    return [set((sorted_indices[b][pick[b].unique()]).tolist()) for b in range(B)]


@pytest.mark.parametrize("M", [196, 120, 60, 9])
def test_ats_keep_matches_reference_port(M):
    # The reference always draws n_ref_tokens - 1 = 196 samples while N shrinks stage by stage.
    n_ref = 197
    scores = torch.rand(4, M) ** 3 + 1e-4  # peaked enough that duplicates occur
    keep = ats_keep(scores, torch.ones(4, M, dtype=torch.bool), n_ref - 1)
    ref = _ats_reference(scores, n_ref)
    for b in range(4):
        assert set(torch.nonzero(keep[b]).flatten().tolist()) == ref[b]
    assert (keep.sum(1) < M).all()  # the lowest-score token is never picked


def test_ats_fewer_samples_than_tokens_is_nearest_cdf_point():
    # num_samples < M (the paper's K; the released code never runs it): still argmin over all CDF points.
    scores = torch.rand(3, 196) ** 3 + 1e-4
    keep = ats_keep(scores, torch.ones(3, 196, dtype=torch.bool), 64)
    s = scores / scores.sum(1, keepdim=True)
    srt, order = torch.sort(s, 1)
    c = torch.cumsum(srt, 1)
    c = (c - c[:, :1]) / (c[:, -1:] - c[:, :1])
    start = c[:, 1:2]
    ys = start + ((torch.linspace(0, 1, 64)[None] * 63) - start * torch.arange(64.0)[None]) / 63
    pick = torch.min((ys[:, :, None] - c[:, None, :]).abs(), dim=2)[1]
    for b in range(3):
        assert set(torch.nonzero(keep[b]).flatten().tolist()) == set(order[b][pick[b]].tolist())
    assert (keep.sum(1) <= 64).all()


def test_ats_ragged_rows_are_independent_of_padding():
    scores = torch.rand(3, 80) ** 4 + 1e-4
    valid = torch.ones(3, 80, dtype=torch.bool)
    valid[1, 50:] = False
    valid[2, 9:] = False
    keep = ats_keep(scores, valid, 196)
    for b, m in [(0, 80), (1, 50), (2, 9)]:
        alone = ats_keep(scores[b : b + 1, :m], torch.ones(1, m, dtype=torch.bool), 196)
        assert torch.equal(keep[b, :m], alone[0])
        assert not keep[b, m:].any()


def test_ats_decide_uses_cls_attention_times_value_norm_and_max_keep():
    p = _bound("ats", max_keep=40)
    assert p.stages == tuple(range(3, 12)) and p.num_samples == (196,) * 9
    attn, valid = _attn(2, 120)
    keep = p.decide(0, torch.randn(2, 120, 64), valid, attn)
    sig = attn.cls_probs.sum(1) * attn.v.norm(dim=-1)
    uncapped = ats_keep(sig[:, 1:], valid[:, 1:], 196)
    assert keep[:, 0].all() and (keep[:, 1:] <= uncapped).all()
    assert (keep[:, 1:].sum(1) == torch.minimum(uncapped.sum(1), torch.tensor(40))).all()
    assert p.tokens_bound(0, 120) == 41


def _ats_cases(seed: int, m: int, device: str):
    """Scores with continuous values, a row of repeated values (sort ties), and degenerate rows."""
    g = torch.Generator().manual_seed(seed)
    scores = torch.rand(4, m, generator=g) ** 3
    valid = torch.rand(4, m, generator=g) < 0.8
    valid[0] = True
    scores[1] = torch.rand(7, generator=g)[torch.randint(0, 7, (m,), generator=g)]
    if seed % 2:
        valid[2] = False
        valid[2, m // 2] = True  # one valid token
        scores[3] = 0.0  # all-zero significance
    else:
        scores[3, m // 3] = float("nan")
    return scores.to(device), valid.to(device)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the interpreter's numpy on the NaN row
@pytest.mark.parametrize(("m", "r"), [(196, 120), (50, 10), (13, 2), (100, 300), (5, 7), (256, 256)])
@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("search", [False, True], ids=["tiles", "binary-search"])
def test_ats_fused_sampler_takes_the_reference_decisions(seed, m, r, search, device):
    """Both target searches (comparison tiles, binary search + histogram) keep what the port keeps: ties,
    degenerate rows, more samples than tokens, and M a power of two (the search's last step)."""
    from pruners.kernels.ats_sampling import ats_keep_fused

    scores, valid = _ats_cases(seed, m, device)
    expect = ats_keep(scores, valid, r)
    assert torch.equal(ats_keep_fused(scores, valid, r, search=search), expect)
    # Into columns 1: of a wider mask, from strided rows, over pre-set values: every position is written.
    for fill in (True, False):
        full = torch.full((scores.shape[0], m + 1), fill, dtype=torch.bool, device=device)
        wide_s = torch.cat([torch.zeros_like(scores[:, :1]), scores], 1)
        wide_v = torch.cat([torch.ones_like(valid[:, :1]), valid], 1)
        assert ats_keep_fused(wide_s[:, 1:], wide_v[:, 1:], r, out=full[:, 1:]).data_ptr() == full[:, 1:].data_ptr()
        assert torch.equal(full[:, 1:], expect) and (full[:, 0] == fill).all()


@pytest.mark.gpu
def test_gpu_ats_fused_sampler_takes_the_reference_decisions():
    from pruners.kernels.ats_sampling import ats_keep_fused

    for seed in range(6):
        for m, r in [(196, 196), (196, 120), (576, 576), (288, 100), (13, 2), (100, 300)]:
            scores, valid = _ats_cases(seed, m, "cuda")
            expect = ats_keep(scores, valid, r)
            for search in (False, True):
                assert torch.equal(ats_keep_fused(scores, valid, r, search=search), expect), (seed, m, r, search)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_ats_fused_sampler_in_the_pruner_and_bad_inputs():
    from pruners.kernels.ats_sampling import ats_keep_fused

    scores, valid = _ats_cases(3, 60, "cpu")
    with pytest.raises(ValueError, match="n_samples"):
        ats_keep_fused(scores, valid, 1)
    with pytest.raises(ValueError, match="bool valid mask"):
        ats_keep_fused(scores, valid.int(), 5)
    assert ats_keep_fused(scores[:0], valid[:0], 5).shape == (0, 60)
    with pytest.raises(ValueError, match="out must be bool"):
        ats_keep_fused(scores, valid, 5, out=torch.zeros(2, 60, dtype=torch.int8))
    with pytest.raises(ValueError, match="out must be bool"):
        ats_keep_fused(scores, valid, 5, out=torch.zeros(60, 4, dtype=torch.bool).t())
    with pytest.raises(ValueError, match="one device"):
        ats_keep_fused(scores, valid.to("meta"), 5)
    with pytest.raises(ValueError, match="sampler"):
        create_pruner("ats", sampler="numpy")
    fused, ref = _bound("ats", sampler="fused"), _bound("ats")
    x, ok = torch.randn(2, 60, 8), torch.ones(2, 60, dtype=torch.bool)
    attn = AttnInfo(torch.softmax(torch.randn(2, 3, 60), -1), torch.randn(2, 60, 8))
    assert torch.equal(fused.decide(0, x, ok, attn), ref.decide(0, x, ok, attn))



def test_ats_auto_sampler_picks_by_device_and_token_count():
    """auto: the fused kernel for CUDA significance rows of <= FUSED_MAX_TOKENS tokens, else the port."""
    from pruners.ats import ATSPruner

    auto, torch_only, fused = (create_pruner("ats", sampler=s) for s in ("auto", "torch", "fused"))
    assert create_pruner("ats").sampler == "auto"
    small = torch.empty(2, 1 + ATSPruner.FUSED_MAX_TOKENS, device="meta")
    large = torch.empty(2, 2 + ATSPruner.FUSED_MAX_TOKENS, device="meta")
    assert not auto.uses_fused(torch.empty(2, 197))  # CPU: the port (the kernel needs CUDA or the interpreter)
    assert fused.uses_fused(torch.empty(2, 197)) and not torch_only.uses_fused(torch.empty(2, 197))
    # meta tensors are not CUDA either; the CUDA branch is the GPU test's below
    assert not auto.uses_fused(small) and not auto.uses_fused(large)


@pytest.mark.gpu
def test_gpu_ats_auto_sampler_is_fused_up_to_the_limit_only():
    from pruners.ats import ATSPruner

    auto = create_pruner("ats")
    assert auto.uses_fused(torch.empty(2, 197, device="cuda"))
    assert auto.uses_fused(torch.empty(2, 1 + ATSPruner.FUSED_MAX_TOKENS, device="cuda"))
    assert not auto.uses_fused(torch.empty(2, 577, device="cuda"))

# -- Threshold-L2 -------------------------------------------------------------------------------
def test_threshold_l2_threshold_and_min_keep_guard():
    p = _bound("threshold_l2", thresholds=(5.0, 6.0, 7.0), min_keep=2)
    x = torch.randn(3, 50, 16)
    x[2] *= 0.01  # every norm below tau: only the guard keeps tokens
    keep = p.decide(1, x, torch.ones(3, 50, dtype=torch.bool), None)
    norms = x[:, 1:].norm(dim=-1)
    top2 = rank_desc(norms, torch.ones(3, 49, dtype=torch.bool)) < 2
    assert torch.equal(keep[:, 1:], (norms > 6.0) | top2)
    assert keep[2, 1:].sum() == 2


def test_threshold_l2_thresholds_stay_fp32_under_half():
    p = _bound("threshold_l2", thresholds=(10.0001, 20.0003, 30.0007))
    p.half()
    assert p.thresholds.dtype == torch.float32
    assert p.thresholds.tolist() == torch.tensor([10.0001, 20.0003, 30.0007]).tolist()


def test_threshold_l2_uncalibrated_raises():
    p = _bound("threshold_l2")
    with pytest.raises(ValueError, match="not calibrated"):
        p.decide(0, torch.randn(1, 10, 4), torch.ones(1, 10, dtype=torch.bool), None)


def test_threshold_l2_per_stage_caps_and_bad_cap_options():
    p = _bound("threshold_l2", thresholds=(-1.0, -1.0, -1.0), max_keep=(30, 20, 10))
    x, valid = torch.randn(2, 50, 16), torch.ones(2, 50, dtype=torch.bool)
    assert [int(p.decide(s, x, valid, None)[:, 1:].sum(1).max()) for s in range(3)] == [30, 20, 10]
    assert [p.tokens_bound(s, 50) for s in range(3)] == [31, 21, 11] and p.max_keep is None
    assert _bound("threshold_l2", thresholds=(1.0, 2.0, 3.0), max_keep=7).max_keep == 7
    for bad, match in [("auto", "'calibrate'"), ((5, 6), "entries"), (0, "min_keep"), (True, "max_keep"),
                       (2.5, "min_keep")]:
        with pytest.raises((ValueError, TypeError), match=match):
            create_pruner("threshold_l2", max_keep=bad)
    for margin in (-0.1, float("inf"), "1"):
        with pytest.raises(ValueError, match="capacity_margin"):
            create_pruner("threshold_l2", max_keep="calibrate", capacity_margin=margin)


def test_threshold_l2_calibrated_capacity_bounds_the_packed_buffer_without_changing_results():
    """max_keep="calibrate": per-stage caps learned with the thresholds; on the calibration images
    no image reaches its cap, so decisions and logits equal the uncapped model's, while the packed
    buffers after each stage shrink from every token to the cap."""
    from pruners import build_pruned_model, synthetic_images

    images = synthetic_images(4, 224, seed=3)
    name = "deit_tiny_patch16_224"
    plain = build_pruned_model(name, create_pruner("threshold_l2"), "reference", calibration_images=images)
    capped = build_pruned_model(name, create_pruner("threshold_l2", max_keep="calibrate", capacity_margin=0.1),
                                "reference", calibration_images=images)  # fmt: skip
    pr = capped.pruner
    assert pr.calibrated and all(isinstance(c, int) for c in pr.max_keeps)
    # Stages 2-3 calibrate on tokens that went through the reference attention at another padded
    # length (fp32 differences ~1e-7, below), so a threshold may differ in its last bit.
    torch.testing.assert_close(pr.thresholds, plain.pruner.thresholds, rtol=1e-6, atol=0)
    plain.record = capped.record = True
    with torch.no_grad():
        # Same decisions; fp32 differences (~1e-7) only from the reference attention's padded length.
        torch.testing.assert_close(capped(images), plain(images), rtol=0, atol=1e-5)
    n, bounds = 197, []
    for s, (keep, keep_capped) in enumerate(zip(plain.recorded_keeps, capped.recorded_keeps, strict=True)):
        assert torch.equal(keep.sum(1), keep_capped.sum(1))
        most = int(keep[:, 1:].sum(1).max())
        assert most <= pr.max_keeps[s] <= math.ceil(most * 1.1) + 1
        n = pr.tokens_bound(s, n)
        bounds.append(n)
    assert bounds == [1 + c for c in pr.max_keeps] and bounds[-1] < 197 * 0.7
    given = _bound("threshold_l2", thresholds=(1.0, 2.0, 3.0), max_keep="calibrate")  # caps still to learn
    with pytest.raises(ValueError, match="capacity caps are not calibrated"):
        given.decide(0, torch.randn(1, 10, 4), torch.ones(1, 10, dtype=torch.bool), None)
    taus = tuple(plain.pruner.thresholds.tolist())
    kept_taus = build_pruned_model(name, create_pruner("threshold_l2", thresholds=taus, max_keep="calibrate"),
                                   "reference", calibration_images=images).pruner  # fmt: skip
    assert tuple(kept_taus.thresholds.tolist()) == taus  # given thresholds are kept, only caps learned
    assert kept_taus.calibrated and all(isinstance(c, int) and c < 197 for c in kept_taus.max_keeps)


# -- registry and validation --------------------------------------------------------------------
def test_registry_and_bad_options():
    assert set(PRUNERS) == {"threshold_l2", "dynamicvit", "evit", "ats"}
    with pytest.raises(ValueError, match="unknown pruner"):
        create_pruner("tome")
    with pytest.raises(TypeError):
        create_pruner(3)
    with pytest.raises(TypeError):
        create_pruner("evit", keep=0.5)
    with pytest.raises(ValueError, match="keep_rate"):
        create_pruner("evit", keep_rate=1.5)
    with pytest.raises(ValueError, match="ascending"):
        create_pruner("dynamicvit", stages=(6, 3))
    with pytest.raises(ValueError, match="entries"):
        create_pruner("threshold_l2", thresholds=(1.0, 2.0))
    with pytest.raises(ValueError, match="mode"):
        create_pruner("dynamicvit", mode="gumbel")
    with pytest.raises(ValueError, match="past the last block"):
        create_pruner("evit", stages=(3, 12)).bind(INFO)
    with pytest.raises(ValueError, match="num_samples"):
        create_pruner("ats", stages=(3,), num_samples=1)


DEGENERATE_ATS = {
    "all-zero-scores": (torch.zeros(2, 10), torch.ones(2, 10, dtype=torch.bool)),
    "nan-scores": (torch.full((2, 10), float("nan")), torch.ones(2, 10, dtype=torch.bool)),
    "inf-score": (torch.tensor([[float("inf")] + [1.0] * 9] * 2), torch.ones(2, 10, dtype=torch.bool)),
    "one-token-M1": (torch.rand(2, 1), torch.ones(2, 1, dtype=torch.bool)),
}


@pytest.mark.parametrize("case", list(DEGENERATE_ATS), ids=list(DEGENERATE_ATS))
def test_ats_degenerate_rows_keep_valid_tokens_within_the_sample_budget(case):
    """No CDF to sample from: keep the valid tokens (never index out of bounds), at most n_samples of them,
    so `tokens_bound` (which sizes the packed buffer) still holds."""
    scores, valid = DEGENERATE_ATS[case]
    scores = torch.cat([scores, torch.rand(1, scores.shape[1]) + 0.1])  # a normal image alongside
    valid = torch.cat([valid, torch.ones(1, valid.shape[1], dtype=torch.bool)])
    n_samples = 4
    keep = ats_keep(scores, valid, n_samples)
    expect = valid[:2] & (valid[:2].cumsum(1) <= n_samples)
    assert torch.equal(keep[:2], expect)
    alone = ats_keep(scores[2:], valid[2:], n_samples)
    assert torch.equal(keep[2:], alone) and 1 <= int(keep[2].sum()) <= n_samples


def test_ats_max_keep_one_runs_every_stage():
    """max_keep=1 leaves one non-CLS token per image: the next stages see M = 1 and must not fail."""
    p = _bound("ats", max_keep=1)
    n = 120
    for stage in range(3):
        attn, valid = _attn(2, n)
        keep = p.decide(stage, torch.randn(2, n, 64), valid, attn)
        assert keep[:, 1:].sum(1).tolist() == [1, 1]
        n = p.tokens_bound(stage, n)
        assert n == 2


@pytest.mark.parametrize("stages", [None, (3, 6)], ids=["default-stages", "given-stages"])
def test_ats_rebinding_to_another_backbone_resizes_default_num_samples(stages):
    p = create_pruner("ats") if stages is None else create_pruner("ats", stages=stages)
    p.bind(INFO)
    assert set(p.num_samples) == {196}
    p.bind(ModelInfo(depth=12, num_patches=576, embed_dim=64, num_heads=4))
    assert set(p.num_samples) == {576} and len(p.num_samples) == len(p.stages)


# -- the CLS attention row on packed rows (pruners.kernels.cls_scores) ----------------------------------
def _packed_qkv(lens, heads, dim, device, pad_rows=3, dtype=torch.float32):
    """q, k, v as strided views of one fused [R, 3, H, D] buffer; NaN in the padding rows."""
    total = sum(lens)
    qkv = torch.randn(total + pad_rows, 3, heads, dim).to(device, dtype)
    qkv[total:] = float("nan")
    cu = torch.tensor([0, *torch.tensor(lens).cumsum(0).tolist()], dtype=torch.int32, device=device)
    return qkv[:, 0], qkv[:, 1], qkv[:, 2], cu


@pytest.mark.parametrize("lens", [[1, 5, 17, 3], [9, 9], [2, 30, 1]], ids=lambda v: "L" + "-".join(map(str, v)))
def test_threshold_l2_decide_packed_equals_decide_on_the_dense_view(lens):
    """Norms taken on the packed rows, gathered as scalars: the same keep masks as `decide` on the gathered
    tokens (NaN padding rows unread), at both a packed stage and the first, dense one."""
    from pruners._ops import dense_index, gather_dense

    p = _bound("threshold_l2", thresholds=[4.0, 4.2, 4.4], max_keep=[6, 4, 3], min_keep=2)
    total = sum(lens)
    x = torch.randn(total + 3, 16)
    x[total:] = float("nan")
    cu = torch.tensor([0, *torch.tensor(lens).cumsum(0).tolist()], dtype=torch.int32)
    n = max(lens) + 2
    index = dense_index(cu, n, x.shape[0])
    for stage in (0, 1):
        expect = p.decide(stage, gather_dense(x, index), index[1], None)
        assert torch.equal(p.decide_packed(stage, x, cu, n), expect)
    xd = torch.randn(3, 11, 16)
    assert torch.equal(p.decide_packed(0, xd, None, 11), p.decide(0, xd, torch.ones(3, 11, dtype=torch.bool), None))


def _threshold_cases(lens, device, seed=0, dim=16):
    g = torch.Generator().manual_seed(seed)
    total = sum(lens)
    x = torch.randn(total + 3, dim, generator=g)
    x[: total // 3] = x[0]  # many equal norms: ties must break by position
    x[total:] = float("nan")
    cu = torch.tensor([0, *torch.tensor(lens).cumsum(0).tolist()], dtype=torch.int32)
    return x.to(device), cu.to(device)


@pytest.mark.parametrize("lens", [[1, 5, 17, 3], [40], [2, 30, 1, 9]], ids=lambda v: "L" + "-".join(map(str, v)))
@pytest.mark.parametrize(("tau", "min_keep", "cap"),
                         [(4.0, 2, 6), (4.2, 1, None), (float("-inf"), 3, 4), (50.0, 2, None)])
def test_threshold_keep_fused_equals_the_torch_decision(lens, tau, min_keep, cap, device):
    """The one-kernel Threshold-L2 stage gives exactly `_keep_by_norms`'s mask on the gathered norms:
    ties by position, min_keep and cap by rank, a width above the longest image, NaN padding rows unread."""
    from pruners._ops import dense_index, gather_dense
    from pruners.kernels.threshold import threshold_keep_fused

    p = _bound("threshold_l2", thresholds=tau, max_keep=cap, min_keep=min_keep)
    x, cu = _threshold_cases(lens, device)
    n = max(lens) + 3
    norms = torch.linalg.vector_norm(x, dim=-1, dtype=torch.float32)
    index = dense_index(cu, n, x.shape[0])
    expect = p._keep_by_norms(0, gather_dense(norms, index), index[1])
    got = threshold_keep_fused(norms, cu, n, p.thresholds[0:1], min_keep, cap)
    assert torch.equal(got, expect)


@pytest.mark.parametrize("budget", [0, 3, 9, 14, 1000])
def test_threshold_keep_fused_with_a_batch_budget_equals_the_torch_decision(budget, device):
    """Under a batch budget both paths water-fill the same way: equal masks, from an empty budget (CLS
    only; the pruner never asks for less than B x min_keep) to one that binds nothing."""
    from pruners._ops import dense_index, gather_dense
    from pruners.kernels.threshold import threshold_keep_fused

    lens = [1, 9, 17, 3, 12]
    p = _bound("threshold_l2", thresholds=3.5, max_keep=10, min_keep=1)
    p.batch_budget = lambda stage, batch: budget  # the budget a calibrated pruner would compute
    x, cu = _threshold_cases(lens, device, seed=1)
    n = max(lens) + 2
    norms = torch.linalg.vector_norm(x, dim=-1, dtype=torch.float32)
    index = dense_index(cu, n, x.shape[0])
    expect = p._keep_by_norms(0, gather_dense(norms, index), index[1])
    got = threshold_keep_fused(norms, cu, n, p.thresholds[0:1], 1, 10, budget)
    assert torch.equal(got, expect)


def test_threshold_l2_batch_budget_water_fills_the_largest_level():
    """Water-filling: the kept total fits the budget; every image keeps its top min(k_i, c) tokens for
    the largest such c (c + 1 would not fit); images at or below c keep exactly their own decision."""
    g = torch.Generator().manual_seed(0)
    B, N = 6, 40
    norms = torch.rand(B, N, generator=g) * 10
    valid = torch.ones(B, N, dtype=torch.bool)
    valid[2, 25:] = False
    p = _bound("threshold_l2", thresholds=2.0, max_keep=30, min_keep=2)
    own = p._keep_by_norms(0, norms, valid)[:, 1:]
    k = own.sum(1)
    for budget in (12, 50, 90, int(k.sum()) - 1):
        p.batch_budget = lambda stage, batch, budget=budget: budget
        got = p._keep_by_norms(0, norms, valid)
        assert got[:, 0].all()
        kept = got[:, 1:]
        assert not (kept & ~own).any()  # only ever drops tokens
        assert int(kept.sum()) <= budget
        c = int(kept.sum(1).max())
        assert torch.equal(kept.sum(1), torch.clamp(k, max=c))
        assert int(torch.clamp(k, max=c + 1).sum()) > budget  # the largest level that fits
        rank = rank_desc(norms[:, 1:], valid[:, 1:])
        assert torch.equal(kept, own & (rank < c))  # each image's top tokens by norm


def test_threshold_l2_batch_budget_sizes_between_the_mean_and_the_cap():
    p = _bound("threshold_l2", thresholds=1.0, max_keep=100, min_keep=1)
    assert p.batch_budget(0, 64) is None and p.rows_bound(0, 197, 64) == 64 * 101  # no calibrated mean
    p.mean_keeps = (60.0,) * 3
    assert p.batch_budget(0, 1) is None  # B = 1: the per-image cap itself
    mu = 66.0  # (1 + batch_margin 0.1) x 60
    for B in (2, 4, 64, 256):
        budget = p.batch_budget(0, B)
        assert budget == math.ceil(B * mu + (100 - mu) * math.sqrt(B) - 1e-9) < B * 100
        assert p.rows_bound(0, 197, B) == B + budget
    assert p.rows_bound(0, 50, 64) == 64 * 50  # images shorter than the budget's level: their length bounds
    p.batch_margin = None
    assert p.batch_budget(0, 64) is None
    for bad in (-0.5, float("nan"), "0.1", True):
        with pytest.raises(ValueError, match="batch_margin"):
            create_pruner("threshold_l2", max_keep="calibrate", batch_margin=bad)


def test_threshold_keep_fused_bad_inputs(device):
    from pruners.kernels.threshold import threshold_keep_fused

    norms = torch.rand(20, device=device)
    cu = torch.tensor([0, 8, 15], dtype=torch.int32, device=device)
    thr = torch.tensor([0.5], device=device)
    with pytest.raises(ValueError, match="norms"):
        threshold_keep_fused(norms.double(), cu, 8, thr, 1, None)
    with pytest.raises(ValueError, match="cu_seqlens"):
        threshold_keep_fused(norms, cu.long(), 8, thr, 1, None)
    with pytest.raises(ValueError, match="threshold"):
        threshold_keep_fused(norms, cu, 8, thr.double(), 1, None)
    with pytest.raises(ValueError, match="cap"):
        threshold_keep_fused(norms, cu, 8, thr, 1, -2)
    with pytest.raises(ValueError, match="budget"):
        threshold_keep_fused(norms, cu, 8, thr, 1, 4, 2.5)
    # Offsets past the rows, or decreasing: clamped; every image keeps CLS and only in-length tokens.
    keep = threshold_keep_fused(norms, torch.tensor([5, 1000, 3], dtype=torch.int32, device=device), 8, thr, 1, None)
    assert keep[:, 0].all() and not keep[1, 1:].any()


@pytest.mark.gpu
def test_gpu_threshold_l2_decide_packed_is_the_kernel_and_equals_decide():
    from pruners._ops import dense_index, gather_dense

    p = _bound("threshold_l2", thresholds=[10.0, 10.5, 11.0], max_keep=[120, 80, 40], min_keep=1).cuda()
    # Without a batch budget, then with one that binds (a calibrated mean far below what these keep).
    for means in ((None,) * 3, (20.0, 15.0, 10.0)):
        p.mean_keeps = means
        for seed in range(3):
            g = torch.Generator().manual_seed(seed)
            lens = torch.randint(2, 197, (64,), generator=g).tolist()
            x, cu = _threshold_cases(lens, "cuda", seed=seed, dim=128)
            x = x.half()
            index = dense_index(cu, 197, x.shape[0])
            expect = p.decide(seed, gather_dense(x, index), index[1], None)
            got = p.decide_packed(seed, x, cu, 197)
            assert torch.equal(got, expect)
            budget = p.batch_budget(seed, 64)
            assert (budget is None) == (means[0] is None)
            if budget is not None:
                assert int(got[:, 1:].sum()) <= budget


def _ats_generic_keep(q, k, v, cu, n, scale, r):
    """ATS's decision through the dense views (`decide` on gathered CLS probabilities and value norms)."""
    from pruners._ops import dense_index, value_norms

    index = dense_index(cu, n, q.shape[0])
    valid = index[1]
    probs = cls_attention(q[cu[:-1].long()].float(), _gather_dense_f32(k, index), valid, scale)
    sig = probs.sum(1) * value_norms(v, index)
    keep = ats_keep(sig[:, 1:], valid[:, 1:], r)
    return torch.cat([torch.ones_like(keep[:, :1]), keep], 1)


def _gather_dense_f32(x, index):
    from pruners._ops import gather_dense

    return gather_dense(x.float(), index)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the interpreter's numpy on one-token images
@pytest.mark.parametrize(("lens", "extra", "r"), [([1, 5, 17, 3], 4, 8), ([40], 0, 40), ([2, 70, 1, 33], 2, 20)],
                         ids=lambda v: "-".join(map(str, v)) if isinstance(v, list) else str(v))
@pytest.mark.parametrize("search", [False, True], ids=["tiles", "binary-search"])
def test_ats_decide_packed_equals_decide_on_dense_views(lens, extra, r, search, device):
    """The fused stage (CLS scores, value norms, one kernel for softmax + head sum + significance + sampling)
    keeps what `decide` keeps on the gathered dense views: strided q/k/v, ragged lengths (1 and 2 included),
    a width above the longest image, NaN padding rows that must stay unread; CLS kept, nothing past a length.
    The pruner's `search` option reaches the kernel (either target search keeps the same)."""
    q, k, v, cu = _packed_qkv(lens, 3, 16, device)
    n, scale = max(lens) + extra, 0.25
    p = _bound("ats", sampler="fused", num_samples=r, search=search)
    assert p.search is search and ("search=False" in repr(p)) is not search
    got = p.decide_packed(0, q, cu, n, (q, k, v), scale)
    assert got.shape == (len(lens), n) and got[:, 0].all()
    for b, length in enumerate(lens):
        assert not got[b, length:].any()
    assert torch.equal(got, _ats_generic_keep(q, k, v, cu, n, scale, r))
    # The first stage: dense [B, N, H, D] q/k/v (every position valid).
    qd, kd, vd = (t[: 2 * 9].unflatten(0, (2, 9)) for t in _packed_qkv([9, 9], 3, 16, device)[:3])
    dense_cu = torch.tensor([0, 9, 18], dtype=torch.int32, device=device)
    expect = _ats_generic_keep(qd.flatten(0, 1), kd.flatten(0, 1), vd.flatten(0, 1), dense_cu, 9, scale, 5)
    p5 = _bound("ats", sampler="fused", num_samples=5)
    assert torch.equal(p5.decide_packed(0, qd, None, 9, (qd, kd, vd), scale), expect)
    # Where it does not apply the model falls back to decide(): the port, or a max_keep cap.
    assert _bound("ats", sampler="torch").decide_packed(0, q, cu, n, (q, k, v), scale) is None
    assert _bound("ats", sampler="fused", max_keep=3).decide_packed(0, q, cu, n, (q, k, v), scale) is None


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the interpreter's numpy on one-token images
@pytest.mark.parametrize(("lens", "r"), [([1, 5, 17, 3], 8), ([2, 70, 1, 33], 20), ([64, 64], 100)])
def test_ats_stage_binary_search_keeps_what_the_tiles_keep(lens, r, device):
    """The stage kernel's binary-search targets (`search=True`) against its comparison tiles, on the same
    packed CLS facts: the same keep mask, bit for bit."""
    from pruners.kernels import cls_scores
    from pruners.kernels.ats_sampling import ats_stage_fused

    q, k, v, cu = _packed_qkv(lens, 3, 16, device)
    n = max(lens) + 1
    scores, value_sq = cls_scores.cls_scores_and_value_squares(q, k, v, cu, n, 0.25)
    tiles = ats_stage_fused(scores, value_sq, cu, q.shape[0], r)
    assert torch.equal(ats_stage_fused(scores, value_sq, cu, q.shape[0], r, search=True), tiles)
    assert tiles[:, 1:].sum() < sum(lens) - len(lens) or r >= max(lens)  # it sampled, where r allows


def test_ats_search_option_must_be_a_bool():
    with pytest.raises(TypeError, match="ats: search must be a bool"):
        create_pruner("ats", search="binary")


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_ats_stage_fused_bad_inputs(device):
    from pruners.kernels.ats_sampling import ats_stage_fused

    scores = torch.randn(2, 3, 8, device=device)
    vsq = torch.rand(2, 3, 8, device=device)
    cu = torch.tensor([0, 8, 15], dtype=torch.int32, device=device)
    with pytest.raises(ValueError, match="fp32"):
        ats_stage_fused(scores.half(), vsq, cu, 20, 4)
    with pytest.raises(ValueError, match="value_sq"):
        ats_stage_fused(scores, vsq[:, :2], cu, 20, 4)
    with pytest.raises(ValueError, match="value_sq"):
        ats_stage_fused(scores, vsq.double(), cu, 20, 4)
    with pytest.raises(ValueError, match="cu_seqlens"):
        ats_stage_fused(scores, vsq, cu[:2], 20, 4)
    with pytest.raises(ValueError, match="n_samples"):
        ats_stage_fused(scores, vsq, cu, 20, 1)
    with pytest.raises(ValueError, match="n_rows"):
        ats_stage_fused(scores, vsq, cu, -1, 4)
    # Offsets past the rows, or decreasing: clamped; every row still keeps CLS and only in-length tokens.
    bad = torch.tensor([5, 1000, 3], dtype=torch.int32, device=device)
    keep = ats_stage_fused(scores, vsq, bad, 20, 4)
    assert keep[:, 0].all() and not keep[1, 1:].any()
    one = ats_stage_fused(scores[:, :, :1], vsq[:, :, :1], cu, 20, 4)
    assert one.shape == (2, 1) and one.all()


@pytest.mark.gpu
def test_gpu_ats_decide_packed_equals_decide_in_fp16():
    g = torch.Generator().manual_seed(1)
    for seed in range(3):
        lens = torch.randint(2, 197, (64,), generator=g).tolist()
        q, k, v, cu = _packed_qkv(lens, 12, 64, "cuda", dtype=torch.float16)
        p = _bound("ats")  # auto: the fused stage on CUDA
        got = p.decide_packed(seed, q, cu, 197, (q, k, v), 0.125)
        expect = _ats_generic_keep(q, k, v, cu, 197, 0.125, p.num_samples[seed])
        # The softmax and the head sum associate differently: a decision may flip only where a CDF target
        # sits on a midpoint. Allow none here (seeded data), but report which image if one does.
        diff = (got != expect).any(1).nonzero().flatten().tolist()
        assert not diff, (seed, diff)


@pytest.mark.parametrize("lens", [[1, 5, 17, 3], [40], [9, 9], [2, 70, 1], [150, 3]],
                         ids=lambda v: "L" + "-".join(map(str, v)))
def test_cls_scores_packed_give_the_dense_cls_attention(lens, device):
    """softmax(cls_scores_packed) equals `cls_attention` on the gathered dense view, for strided q/k,
    ragged lengths, a max_seqlen above the longest image, and NaN padding rows that must stay unread."""
    from pruners._ops import cls_attention_packed, dense_index, gather_dense, value_norms
    from pruners.kernels.cls_scores import cls_scores_and_value_squares, cls_scores_packed

    q, k, v, cu = _packed_qkv(lens, 3, 16, device)
    n, scale = max(lens) + 4, 0.25
    index = dense_index(cu, n, q.shape[0])
    expect = cls_attention(q[cu[:-1].long()], gather_dense(k, index), index[1], scale)
    s = cls_scores_packed(q, k, cu, n, scale)
    assert s.shape == (len(lens), 3, n) and s.dtype == torch.float32
    assert torch.equal(torch.isinf(s), ~index[1][:, None, :].expand_as(s))  # -inf exactly past each length
    torch.testing.assert_close(torch.softmax(s, -1), expect, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(cls_attention_packed(q, k, cu, n, scale, index), expect, rtol=1e-5, atol=1e-6)
    norms = value_norms(v, index)
    torch.testing.assert_close(norms, gather_dense(v, index).flatten(-2).norm(dim=-1), rtol=1e-6, atol=0)
    # The same launch with the values: identical scores, and each head's squared norms, 0 past each length.
    s2, vsq = cls_scores_and_value_squares(q, k, v, cu, n, scale)
    assert torch.equal(s2, s) and vsq.shape == s.shape and vsq.dtype == torch.float32
    assert not vsq[~index[1][:, None, :].expand_as(vsq)].any()
    torch.testing.assert_close(vsq, gather_dense(v, index).square().sum(-1).transpose(1, 2), rtol=1e-6, atol=0)
    torch.testing.assert_close(vsq.sum(1).sqrt(), norms, rtol=1e-6, atol=0)


def test_cls_scores_packed_bad_inputs_and_bad_offsets(device):
    from pruners.kernels.cls_scores import cls_scores_and_value_squares, cls_scores_packed

    q, k, v, cu = _packed_qkv([4, 6], 2, 16, device)
    with pytest.raises(ValueError, match="int32"):
        cls_scores_packed(q, k, cu.long(), 8, 1.0)
    with pytest.raises(ValueError, match="power of two"):
        cls_scores_packed(q[..., :12], k[..., :12], cu, 8, 1.0)
    with pytest.raises(ValueError, match="power of two"):
        cls_scores_packed(q, k[:5], cu, 8, 1.0)
    assert cls_scores_packed(q, k, cu[:1], 8, 1.0).shape == (0, 2, 8)
    # Offsets past the buffer, or decreasing: clamped to [0, R), an end before its start is an empty
    # segment (all -inf); nothing outside the buffers is read (the NaN padding rows are inside them).
    bad = torch.tensor([3, 1000, 2, -7], dtype=torch.int32, device=device)
    s = cls_scores_packed(q, k, bad, 8, 1.0)
    assert s.shape == (3, 2, 8)
    assert torch.isinf(s[1]).all() and torch.isinf(s[2]).all()
    with pytest.raises(ValueError, match="power of two"):
        cls_scores_and_value_squares(q, k, v[:5], cu, 8, 1.0)
    s2, vsq = cls_scores_and_value_squares(q, k, v, bad, 8, 1.0)
    torch.testing.assert_close(s2, s, rtol=0, atol=0, equal_nan=True)  # image 0 reaches the NaN padding rows
    assert not vsq[1].any() and not vsq[2].any()  # empty segments: no value read


@pytest.mark.gpu
def test_gpu_cls_attention_packed_matches_the_gather_path_in_fp16():
    """On CUDA the model's CLS attention row comes from the kernel: same probabilities as the dense
    gather path at DeiT-B's geometry, fp16 inputs (fp32 products either way)."""
    from pruners._ops import cls_attention_packed, dense_index, gather_dense

    g = torch.Generator().manual_seed(0)
    lens = torch.randint(20, 197, (64,), generator=g).tolist()
    q, k, _, cu = _packed_qkv(lens, 12, 64, "cuda", dtype=torch.float16)
    index = dense_index(cu, 197, q.shape[0])
    expect = cls_attention(q[cu[:-1].long()], gather_dense(k, index), index[1], 0.125)
    torch.testing.assert_close(cls_attention_packed(q, k, cu, 197, 0.125, index), expect, rtol=1e-4, atol=1e-6)


def test_cls_attention_full_equals_cls_attention():
    from pruners._ops import cls_attention_full

    q, k = torch.randn(3, 11, 2, 16), torch.randn(3, 11, 2, 16)
    expect = cls_attention(q[:, 0], k, torch.ones(3, 11, dtype=torch.bool), 0.3)
    torch.testing.assert_close(cls_attention_full(q, k, 0.3), expect, rtol=0, atol=0)


@pytest.mark.gpu
def test_gpu_cls_attention_full_uses_the_kernel_on_strided_views():
    from pruners._ops import cls_attention_full

    qkv = torch.randn(8, 197, 3, 12, 64, device="cuda", dtype=torch.float16)
    q, k = qkv[:, :, 0], qkv[:, :, 1]
    expect = cls_attention(q[:, 0], k, torch.ones(8, 197, dtype=torch.bool, device="cuda"), 0.125)
    torch.testing.assert_close(cls_attention_full(q, k, 0.125), expect, rtol=1e-4, atol=1e-6)


def test_fuses_tokens_defaults_to_whether_extra_token_is_overridden():
    from pruners.base import Pruner

    class Plain(Pruner):
        name = "plain-test"

    class WithExtra(Pruner):
        name = "extra-test"

        def extra_token(self, stage, x, valid, keep, attn):
            return None

    assert not Plain(()).fuses_tokens and WithExtra(()).fuses_tokens
    assert create_pruner("evit").fuses_tokens and not create_pruner("evit", fuse_token=False).fuses_tokens
    assert not create_pruner("ats").fuses_tokens
