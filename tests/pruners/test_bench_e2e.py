"""bench_e2e's pure parts on the CPU: token and FLOP ratios on hand-made lengths, the kept-count hook,
the shared-model cache, the plan order and the time box, the target statuses; one GPU smoke test."""

from __future__ import annotations

import math

import pytest
import torch

from pruners import PRUNERS, build_pruned_model, create_pruner, synthetic_images
from pruners.bench_e2e import (
    ISSUE4_BACKENDS,
    Config,
    ModelCache,
    budget_options,
    describe_skipped,
    forward_flops,
    grid_configs,
    main,
    measure_tokens,
    padded_packed_ratio,
    per_block,
    plan,
    record_packing,
    run_plan,
    target_rows,
    targets_table,
    throughput_table,
    token_stats,
)

TINY = "deit_tiny_patch16_224"


# -- token and FLOP ratios --------------------------------------------------------------------------------
def test_padded_packed_ratio_hand_made():
    # block 0: B=2, lengths 3 and 1 -> padded 2*3 = 6, packed 4; block 1: 2 and 2 -> 4 and 4.
    assert padded_packed_ratio([[3, 1], [2, 2]]) == (10, 8, 1.25)
    assert padded_packed_ratio([[5, 5, 5]]) == (15, 15, 1.0)
    # one long image among short ones: pad to 10 for all four.
    assert padded_packed_ratio([[10, 1, 1, 1]]) == (40, 13, 40 / 13)


def test_forward_flops_hand_made():
    # C = 1: per block 24 * T + 4 * sum(L^2).
    assert forward_flops([[3, 1], [2, 2]], [[3, 1], [2, 2]], 1) == (24 * 4 + 4 * 10) + (24 * 4 + 4 * 8)
    # C = 2: linear 24 C^2 = 96 per token, attention 4 C = 8 per L^2.
    assert forward_flops([[3]], [[3]], 2) == 96 * 3 + 8 * 9
    # attention and MLP on different tokens (after_attention stage block): 8 C^2 A + 16 C^2 M + 4 C A^2.
    assert forward_flops([[3, 3]], [[3, 1]], 1) == 8 * 6 + 16 * 4 + 4 * 18
    # capacity rows replace the token counts in the linear layers only.
    assert forward_flops([[3, 1]], [[3, 1]], 1, attn_rows=[6], mlp_rows=[5]) == 8 * 6 + 16 * 5 + 4 * 10


def test_dense_flops_match_published_deit_small():
    # DeiT-S: 4.6 GMACs per image (DeiT paper, Table 1); the blocks are all but the patch embedding
    # (~0.06 GMACs) and the head.
    macs = forward_flops([[197]] * 12, [[197]] * 12, 384) / 2
    assert 4.45e9 < macs < 4.6e9


def test_per_block_placements():
    attn, mlp = per_block(5, (1, 3), "before_block", "a", ["b", "c"])
    assert attn == mlp == ["a", "b", "b", "c", "c"]
    attn, mlp = per_block(5, (1, 3), "after_attention", "a", ["b", "c"])
    assert attn == ["a", "a", "b", "b", "c"]
    assert mlp == ["a", "b", "b", "c", "c"]
    assert per_block(3, (), "before_block", 7, []) == ([7, 7, 7], [7, 7, 7])
    with pytest.raises(ValueError):
        per_block(3, (1,), "before_block", 7, [])
    with pytest.raises(ValueError):
        per_block(3, (1,), "somewhere", 7, [1])


def test_token_stats_before_block():
    # 2 blocks, 1+N0 = 3, B = 2, C = 1, stage before block 1 keeps 3 and 1 tokens; capacity 5 rows.
    s = token_stats(2, 3, 2, 1, (1,), "before_block", [[3, 1]], [5])
    assert (s["padded_tokens"], s["packed_tokens"]) == (12, 10)
    assert s["token_ratio"] == pytest.approx(1.2)
    dense = 2 * (24 * 6 + 4 * 18)  # 432
    pruned = (24 * 6 + 4 * 18) + (24 * 4 + 4 * 10)  # 216 + 136
    assert (s["flops_dense"], s["flops_pruned"]) == (dense, pruned)
    assert s["flop_ratio"] == pytest.approx(432 / 352)
    assert s["flop_ratio_capacity"] == pytest.approx(432 / (216 + 24 * 5 + 40))
    assert s["token_fraction"] == pytest.approx((6 + 4) / (2 * 2 * 3))
    assert s["tokens_per_block"] == [6, 4] and s["longest_per_block"] == [3, 3] and s["mlp_tokens_per_block"] == [6, 4]


def test_token_stats_after_attention_and_dense():
    s = token_stats(2, 3, 2, 1, (1,), "after_attention", [[3, 1]])
    assert s["token_ratio"] == 1.0  # every attention saw full images
    assert s["flops_pruned"] == 216 + (8 * 6 + 16 * 4 + 4 * 18)
    assert s["flop_ratio_capacity"] == s["flop_ratio"]  # no capacities given
    d = token_stats(12, 197, 4, 384, (), "before_block", [])
    assert d["token_ratio"] == 1.0 and d["flop_ratio"] == 1.0 and d["token_fraction"] == 1.0


def test_token_stats_uniform_half():
    # Fixed-count pruning to the same length everywhere: no padding gain, FLOP ratio from the counts.
    s = token_stats(12, 197, 8, 384, (0,), "before_block", [[99] * 8])
    assert s["token_ratio"] == 1.0
    expect = (24 * 197 * 384**2 + 4 * 197**2 * 384) / (24 * 99 * 384**2 + 4 * 99**2 * 384)
    assert s["flop_ratio"] == pytest.approx(expect)


# -- the kept-count hook and the model cache (CPU, reference backend) -----------------------------------
@torch.no_grad()
@pytest.mark.parametrize("pruner", ["evit", "threshold_l2"])
def test_measure_tokens_matches_recorded_keeps(pruner):
    model = build_pruned_model(TINY, create_pruner(pruner), "reference")
    x = synthetic_images(3, 224, seed=1)
    orig = model._pack
    s = measure_tokens(model, x)
    assert model._pack is orig  # the hook is gone
    model.record = True
    model(x)
    keeps = model.recorded_keeps
    n = [k.sum(1).tolist() for k in keeps]
    if pruner == "evit":  # the fused token is one more row per image whenever something was dropped
        n = [[c + 1 for c in stage] for stage in n]
    bb, pr = model.backbone, model.pruner
    expect = token_stats(len(bb.blocks), 197, 3, bb.embed_dim, pr.stages, pr.placement, n)
    for k in ("padded_tokens", "packed_tokens", "flops_pruned", "tokens_per_block", "longest_per_block"):
        assert s[k] == expect[k], k
    assert s["packed_tokens"] < 12 * 3 * 197 and s["flop_ratio"] > 1.2


def test_record_packing_logs_capacity_and_restores_on_error():
    model = build_pruned_model(TINY, create_pruner("ats", num_samples=60), "reference")
    x = synthetic_images(2, 224, seed=1)
    with torch.no_grad(), record_packing(model) as rec:
        model(x)
    lens, caps = rec.lengths()
    assert len(lens) == len(caps) == len(model.pruner.stages)
    assert all(len(stage) == 2 and sum(stage) <= cap for stage, cap in zip(lens, caps, strict=True))
    orig = model._pack
    with pytest.raises(ValueError), record_packing(model):
        model(torch.zeros(1, 3, 32, 32))
    assert model._pack is orig


@torch.no_grad()
@pytest.mark.parametrize("pruner", ["threshold_l2", "dynamicvit", None])
def test_model_cache_equals_build_pruned_model(pruner):
    cache = ModelCache(0.5, device="cpu", dtype=torch.float32)
    x = synthetic_images(2, 224, seed=1)
    backend = "dense" if pruner is None else "reference"
    _, inner = cache.make(Config(TINY, pruner, 2, backend))
    opts = budget_options(pruner, 0.5, 196) if pruner else {}
    ref = build_pruned_model(TINY, create_pruner(pruner, **opts) if pruner else None, backend)
    assert not inner.training
    assert torch.equal(inner(x), ref(x))
    _, again = cache.make(Config(TINY, pruner, 2, backend))
    assert again.backbone is inner.backbone and again.pruner is not inner.pruner  # shared weights, own pruner


@torch.no_grad()
def test_model_cache_calibrated_capacity_caps_threshold_l2_only():
    cache = ModelCache(0.5, device="cpu", dtype=torch.float32, calibrated_capacity=True)
    _, inner = cache.make(Config(TINY, "threshold_l2", 2, "reference"))
    caps = inner.pruner.max_keeps
    assert all(isinstance(c, int) for c in caps) and inner.pruner.tokens_bound(2, 197) < 197
    _, evit = cache.make(Config(TINY, "evit", 2, "reference"))  # fixed-count pruners: unchanged
    assert not hasattr(evit.pruner, "max_keeps")


@torch.no_grad()
def test_calibrated_capacity_sizes_a_batch_below_batch_times_the_cap():
    """max_keep="calibrate": a batch's packed buffer is B + the batch budget rows, below B x the
    per-image bound; the budget binds only on overflow, so a batch like the calibration images keeps
    what the uncapped pruner keeps, and a batch that overflows is water-filled into the buffer."""
    cal = synthetic_images(4, 224, seed=0)
    opts = budget_options("threshold_l2", 0.5, 196)
    plain = build_pruned_model(TINY, create_pruner("threshold_l2", **opts), "reference", calibration_images=cal)
    model = build_pruned_model(TINY, create_pruner("threshold_l2", max_keep="calibrate", **opts), "reference",
                               calibration_images=cal)  # fmt: skip
    pr = model.pruner
    assert all(m is not None and 0 < m <= c for m, c in zip(pr.mean_keeps, pr.max_keeps, strict=True))
    x = synthetic_images(8, 224, seed=0)[[0, 1, 2, 3, 0, 1, 2, 3]]  # the calibration images, twice
    with record_packing(model) as rec:
        out = model(x)
    lens, caps = rec.lengths()
    n = 197
    for s, (stage, cap) in enumerate(zip(lens, caps, strict=True)):
        budget = pr.batch_budget(s, 8)
        assert budget is not None and cap == 8 + budget < 8 * pr.tokens_bound(s, n)
        assert sum(stage) <= cap
        n = pr.tokens_bound(s, n)
    plain.record = model.record = True
    torch.testing.assert_close(out, plain(x), rtol=0, atol=1e-5)  # no overflow: the same decisions
    # Force an overflow: a zero-margin budget sized for tokens far below what these images keep.
    pr.mean_keeps = tuple(0.5 * m for m in pr.mean_keeps)
    pr.batch_margin = 0.0
    with record_packing(model) as rec:
        model(x)
    lens, caps = rec.lengths()
    assert all(sum(stage) <= cap for stage, cap in zip(lens, caps, strict=True))
    assert sum(lens[0]) < sum(k.sum().item() for k in plain.recorded_keeps[:1])  # the budget bound


@torch.no_grad()
def test_replaying_model_applies_the_masks_and_still_runs_its_pruner(monkeypatch):
    """keep_override (what bench_e2e's same-decisions replay uses): the masks given are applied, and
    the pruner still decides, so a replaying forward costs what the pruned forward costs."""
    model = build_pruned_model(TINY, create_pruner("threshold_l2"), "reference")
    x = synthetic_images(2, 224, seed=1)
    model.record = True
    model(x)
    own = [k.clone() for k in model.recorded_keeps]
    forced = [k.clone() for k in own]
    forced[0][:, 1:] = True  # keep every token at the first stage
    calls = []
    # Threshold-L2 decides through its packed fast path (decide_packed), which the model tries first.
    decide = model.pruner.decide_packed
    monkeypatch.setattr(model.pruner, "decide_packed", lambda *a: calls.append(a[0]) or decide(*a))
    model.keep_override = forced
    model(x)
    assert calls == list(range(len(own)))  # one decision per stage, unused
    assert torch.equal(model.recorded_keeps[0], forced[0]) and not torch.equal(forced[0], own[0])


# -- plan, order, time box -------------------------------------------------------------------------------
PR = list(PRUNERS)


def test_grid_order_and_dense_first_and_last():
    g = grid_configs(["m"], ["evit", "ats"], [1, 64], ["triton", "padded_sdpa", "dense"])
    assert g[:4] == [
        Config("m", None, 1, "dense"),
        Config("m", "evit", 1, "triton"),
        Config("m", "evit", 1, "triton", "graph"),
        Config("m", "evit", 1, "padded_sdpa"),
    ]
    dense = [Config("m", None, 1, "dense"), Config("m", None, 64, "dense")]
    again = [Config("m", None, 1, "dense", reread=True), Config("m", None, 64, "dense", reread=True)]
    assert [c for c in g if c.backend == "dense"] == dense + again
    assert g[-2:] == again  # read again after the model's pruned configurations
    assert len(g) == 4 + 2 * 2 * 3
    exact = grid_configs(["m"], ["evit", "ats"], [1], ["triton", "dense"], exact_capacity=True)
    assert [c for c in exact if c.exact] == [Config("m", "ats", 1, "triton", "eager", True)]  # ragged only
    by_batch = grid_configs(["m"], ["evit", "ats"], [1, 64], ["triton"], nesting="batch")
    assert [(c.batch, c.pruner) for c in by_batch[::2]] == [(1, "evit"), (1, "ats"), (64, "evit"), (64, "ats")]


def test_the_faster_dense_reading_counts():
    from pruners.bench_e2e import best_dense

    rows = [dict(model="m", batch=64, backend="dense", img_per_s=v) for v in (9000.0, 10500.0)]
    rows.append(dict(model="m", batch=64, backend="triton", img_per_s=20000.0))
    assert best_dense(rows)[("m", 64)]["img_per_s"] == 10500.0
    assert best_dense(list(reversed(rows)))[("m", 64)]["img_per_s"] == 10500.0


def test_plan_issue4_first():
    models, batches, backends = ["deit_small_patch16_224", "deit_base_patch16_224"], [1, 4, 64, 256], None
    from pruners import BACKENDS

    backends = list(BACKENDS)
    grid = plan("grid", models, PR, batches, backends)
    first = plan("issue4-first", models, PR, batches, backends)
    assert len(set(first)) == len(first)
    assert set(grid) <= set(first)
    # (model, batch) points x (dense + pruners x 4 configs + dense again)
    n_first = 2 * (1 + 4 * 4 + 1) + 4 * (1 + 4 * 4 + 1)
    head = first[:n_first]
    assert {(c.model, c.batch) for c in head} == {
        ("deit_base_patch16_224", 64),
        ("deit_base_patch16_224", 256),
        ("deit_base_patch16_384", 1),
        ("deit_base_patch16_384", 4),
        ("deit_base_patch16_384", 16),
        ("deit_base_patch16_384", 64),
    }
    assert {c.backend for c in head} == set(ISSUE4_BACKENDS)
    assert {c.mode for c in head if c.backend == "triton"} == {"eager", "graph"}
    assert {c.pruner for c in head} == {None, *PR}
    assert not any(c.exact for c in head)
    assert first[n_first:] == [c for c in grid if c not in set(head)]
    # --exact-capacity: the first set gets triton eager+exact for the ragged pruners only
    with_exact = plan("issue4-first", models, PR, batches, backends, exact_capacity=True)
    exact_first = [c for c in with_exact[: n_first + 12] if c.exact]
    assert {(c.backend, c.pruner) for c in exact_first} == {("triton", p) for p in PR if PRUNERS[p].ragged}
    assert len(exact_first) == 2 * 6  # threshold_l2 and ats at 6 (model, batch) points
    assert set(plan("grid", models, PR, batches, backends, exact_capacity=True)) <= set(with_exact)
    # the backend filter still applies
    only = plan("issue4-first", ["deit_base_patch16_224"], ["evit"], [64], ["triton", "fa2_varlen"])
    assert {c.backend for c in only} == {"triton", "fa2_varlen"}
    with pytest.raises(ValueError):
        plan("random", models, PR, batches, backends)


class FakeClock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def _configs(n: int) -> list[Config]:
    return [Config("m", "evit", b, "triton") for b in range(1, n + 1)]


def test_time_box_stops_starting_and_lists_the_rest():
    clock = FakeClock()
    started = []

    def measure(cfg):
        started.append(cfg)
        clock.t += 10.0
        return {"batch": cfg.batch}

    cfgs = _configs(6)
    res = run_plan(cfgs, measure, time_box=25.0, clock=clock)
    # starts at 0, 10, 20 s; at 30 s the box is spent: the third one finished past it (allowed).
    assert started == cfgs[:3]
    assert res.skipped == cfgs[3:]
    assert [r["elapsed_s"] for r in res.rows] == [10.0, 20.0, 30.0]
    assert all(r["config_s"] == 10.0 for r in res.rows)
    assert describe_skipped(res.skipped + [Config("m", None, 4, "dense")]) == [
        "m evit B=4: triton/eager",
        "m evit B=5: triton/eager",
        "m evit B=6: triton/eager",
        "m - B=4: dense/eager",
    ]


def test_time_box_counts_from_start_and_none_means_no_limit():
    clock = FakeClock()

    def measure(cfg):
        clock.t += 1.0
        return {}

    res = run_plan(_configs(4), measure, time_box=10.0, clock=clock, start=clock.t - 9.5)
    assert len(res.rows) == 1 and len(res.skipped) == 3
    res = run_plan(_configs(4), measure, time_box=None, clock=clock)
    assert len(res.rows) == 4 and res.skipped == []


def test_failures_do_not_stop_the_plan():
    errors = []

    def measure(cfg):
        if cfg.batch == 2:
            raise RuntimeError("CUDA out of memory")
        if cfg.batch == 3:
            raise NotImplementedError("no FA2")
        return {}

    res = run_plan(_configs(4), measure, on_error=lambda c, m: errors.append(m))
    assert len(res.rows) == 2 and [c.batch for c, _ in res.failed] == [2, 3]
    assert errors == ["CUDA out of memory", "no FA2"]

    def broken(cfg):
        raise KeyError("a bug")

    with pytest.raises(KeyError):  # bugs are not swallowed
        run_plan(_configs(1), broken)


def test_main_dry_run_and_arguments(capsys):
    assert main(["--order", "issue4-first", "--dry-run", "--models", "deit_tiny_patch16_224"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split(None, 1)[1] == "deit_base_patch16_224 - B=64 dense/eager"
    with pytest.raises(SystemExit):
        main(["--time-box", "0", "--dry-run"])
    if not torch.cuda.is_available():
        assert main(["--models", "deit_tiny_patch16_224", "--time-box", "5"]) == 2


BAD_ARGUMENTS = {
    "budget-0.2": (["--budget", "0.2"], "--budget"),  # keep rate 0 for DynamicViT/EViT/Threshold-L2
    "budget-0.25": (["--budget", "0.25"], "--budget"),
    "budget-5": (["--budget", "5"], "--budget"),  # silently no pruning
    "budget-nan": (["--budget", "nan"], "--budget"),  # crashed ATS
    "batches-0": (["--batches", "0"], "--batches"),
    "batches-negative": (["--batches", "4", "-1"], "--batches"),
    "time-box-nan": (["--time-box", "nan"], "--time-box"),
    "time-box-inf": (["--time-box", "inf"], "--time-box"),
    "repeats-0": (["--repeats", "0"], "--repeats"),
    "warmup-negative": (["--warmup", "-1"], "--warmup"),
    "min-time-negative": (["--min-time", "-1"], "--min-time"),
    "min-time-nan": (["--min-time", "nan"], "--min-time"),
    "json-missing-folder": (["--json", "{tmp}/no/such/folder/out.json"], "--json"),
    "json-a-folder": (["--json", "{tmp}"], "--json"),
    "json-under-a-file": (["--json", "{tmp}/file.txt/out.json"], "--json"),
}


@pytest.mark.parametrize("name", list(BAD_ARGUMENTS), ids=list(BAD_ARGUMENTS))
def test_main_bad_arguments_are_argparse_errors_before_the_cuda_check(name, tmp_path, capsys, monkeypatch):
    """Every bad argument exits through argparse (status 2, the argument named) before the CUDA check and
    before anything is written: a user without a GPU sees the argument error, not "needs a CUDA GPU"."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    (tmp_path / "file.txt").write_text("")
    argv, arg = BAD_ARGUMENTS[name]
    argv = [a.format(tmp=tmp_path) for a in argv]
    with pytest.raises(SystemExit) as exc:
        main(["--models", TINY, *argv])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {arg}:" in err and "CUDA" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file.txt"]  # nothing created


def test_main_good_arguments_reach_the_cuda_check_without_creating_the_json(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    out = tmp_path / "rows.json"
    argv = ["--models", TINY, "--batches", "1", "--budget", "1", "--warmup", "0", "--min-time", "0", "--repeats", "1",
            "--time-box", "0.5", "--json", str(out)]
    assert main(argv) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().err and not out.exists()
    assert main(["--models", TINY, "--budget", "0.2501", "--json", "rows.json", "--dry-run"]) == 0  # relative path


def test_budget_help_states_the_range(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "(0.25, 1.0]" in " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize("budget", [0.25 + 1e-9, 0.2501, 0.5, 1.0])
def test_every_budget_in_the_range_builds_every_pruner(budget):
    for name in PRUNERS:
        opts = budget_options(name, budget, 196)
        create_pruner(name, **opts)  # raises on a keep rate of 0 or num_samples < 2
        if name != "ats":
            assert 0 < next(iter(opts.values())) <= 1


@pytest.mark.parametrize("budget", [0.2, 0.25, 1.01, 5, float("nan"), float("inf"), True, "0.5"], ids=str)
def test_budget_options_refuses_a_budget_outside_the_range(budget):
    with pytest.raises(ValueError, match=r"budget must be a number in \(0.25, 1.0\]"):
        budget_options("evit", budget, 196)


# -- targets ---------------------------------------------------------------------------------------------
def _row(model, pruner, batch, backend, mode, ips, token_ratio=1.0, flop_ratio=1.0, ragged=False, **kw):
    return dict(
        table="throughput",
        model=model,
        pruner=pruner,
        backend=backend,
        mode=mode,
        batch=batch,
        img_per_s=ips,
        ragged=ragged,
        token_ratio=token_ratio,
        flop_ratio=flop_ratio,
        flop_ratio_capacity=flop_ratio,
        token_fraction=0.5,
        tokens_per_block=kw.get("tokens", [1]),
        longest_per_block=[1],
        mlp_tokens_per_block=[1],
        flops_pruned=1.0,
    )


def test_target_rows_statuses():
    M, M384 = "deit_base_patch16_224", "deit_base_patch16_384"
    rows = [
        _row(M, None, 256, "dense", "eager", 1000.0),
        # ragged pruner: token ratio 1.5, FLOP ratio 2.0
        _row(M, "ats", 256, "triton", "graph", 1800.0, 1.5, 2.0, True),
        _row(M, "ats", 256, "triton", "eager", 1700.0, 1.5, 2.0, True),
        _row(M, "ats", 256, "fa2_varlen", "eager", 1700.0, 1.5, 2.0, True),
        _row(M, "ats", 256, "padded_sdpa", "eager", 1400.0, 1.5, 2.0, True, tokens=[2]),
        # fixed-count pruner: 2b does not apply; triton loses to fa2 -> 2a MISS
        _row(M, "evit", 256, "triton", "graph", 1600.0, 1.0, 2.0),
        _row(M, "evit", 256, "fa2_varlen", "eager", 1650.0, 1.0, 2.0),
        _row(M, "evit", 256, "padded_sdpa", "eager", 1500.0, 1.0, 2.0),
        # serving batch at 224² (target 1) and 384 (target 3 only)
        _row(M, "evit", 4, "triton", "graph", 900.0),
        _row(M, "evit", 4, "fa2_varlen", "eager", 200.0),
        _row(M, "evit", 4, "padded_sdpa", "eager", 100.0),
        _row(M384, "evit", 4, "triton", "graph", 900.0),
        _row(M384, "evit", 4, "fa2_varlen", "eager", 200.0),
        _row(M384, "evit", 4, "padded_sdpa", "eager", 100.0),
        _row(M384, "evit", 16, "triton", "eager", 500.0),
    ]
    t = {(r["pruner"], r["model"], r["batch"]): r for r in target_rows(rows)}
    ats = t[("ats", M, 256)]
    assert ats["triton_best_mode"] == "graph" and ats["vs_padded"] == pytest.approx(1800 / 1400)
    assert ats["frac_2b"] == pytest.approx(1800 / 1400 / 1.5)  # 0.857 < 0.9
    assert ats["frac_2c"] == pytest.approx(1.8 / 2.0)  # 0.9 >= 0.85
    assert (ats["t1"], ats["t2a"], ats["t2b"], ats["t2c"], ats["t3"]) == ("n/a", "PASS", "MISS", "PASS", "n/a")
    assert ats["same_decisions"] is False  # padded_sdpa's kept counts differ
    ev = t[("evit", M, 256)]
    assert (ev["t2a"], ev["t2b"], ev["t2c"]) == ("MISS", "n/a", "MISS")  # 1.6 < 0.85 * 2.0
    assert ev["same_decisions"] is True
    s4 = t[("evit", M384, 4)]
    assert (s4["t1"], s4["t2a"], s4["t3"]) == ("n/a", "n/a", "PASS")  # target 1 is 224² only; 4.5x fa2
    assert t[("evit", M, 4)]["t1"] == "PASS"  # 4.5x fa2, 9x padded
    s16 = t[("evit", M384, 16)]
    assert (s16["t1"], s16["t3"], s16["fa2_varlen"]) == ("n/a", "no data", None)
    table = targets_table(target_rows(rows))
    assert len(table) == 2 + 5 and all(line.count("|") == 21 for line in table)
    tput = throughput_table(rows)
    assert len(tput) == 2 + 5
    ats_line = next(line for line in tput if "| ats | 256 |" in line)
    assert ats_line.split(" | ")[3:6] == ["1800", "1700", "—"] and "| 1000 | 0.500 |" in ats_line


def test_target_rows_exact_capacity_counts_against_dense_only():
    M = "deit_base_patch16_224"
    rows = [
        _row(M, None, 64, "dense", "eager", 1000.0),
        _row(M, "threshold_l2", 64, "triton", "graph", 1100.0, 1.2, 2.0, True),
        _row(M, "threshold_l2", 64, "triton", "eager+exact", 1800.0, 1.2, 2.0, True),
        _row(M, "threshold_l2", 64, "fa2_varlen", "eager", 1000.0, 1.2, 2.0, True),
        _row(M, "threshold_l2", 64, "fa2_varlen", "eager+exact", 1700.0, 1.2, 2.0, True),
        _row(M, "threshold_l2", 64, "padded_sdpa", "eager", 900.0, 1.2, 2.0, True),
    ]
    (t,) = target_rows(rows)
    assert (t["triton_best_mode"], t["triton_best"], t["fa2_varlen"]) == ("graph", 1100.0, 1000.0)
    assert t["vs_fa2"] == pytest.approx(1.1) and t["vs_dense_mode"] == "eager+exact"
    assert t["vs_dense"] == pytest.approx(1.8) and t["t2c"] == "PASS"  # 1.8 / 2.0 = 0.9
    assert t["frac_2b"] == pytest.approx(1100 / 900 / 1.2) and t["t2b"] == "PASS"
    assert "1.80 (eager+exact)" in targets_table([t])[2]


def test_ratios_nan_safe_when_nothing_packed():
    assert math.isnan(padded_packed_ratio([])[2])


# -- GPU smoke test (run with `pytest -m gpu`): the timed path end to end on a tiny model ---------------------
@pytest.mark.gpu
def test_gpu_bench_one_tiny():
    from pruners.bench_e2e import bench_one

    cache = ModelCache(0.5)
    rows = [
        bench_one(Config(TINY, p, 8, b, m), cache, repeats=1, min_time=0.01, warmup=1)
        for p, b, m in [
            ("threshold_l2", "triton", "eager"),
            ("threshold_l2", "triton", "graph"),
            ("threshold_l2", "padded_sdpa", "eager"),
            (None, "dense", "eager"),
        ]
    ]
    for r in rows:
        assert r["img_per_s"] > 0 and r["peak_gib"] > 0
    eager, graph, padded, dense = rows
    assert eager["ragged"] and not dense["ragged"]
    assert [r["decisions"] for r in rows] == ["recorded", "replayed", "replayed", "own"]
    assert eager["tokens_per_block"] == graph["tokens_per_block"] == padded["tokens_per_block"]
    assert eager["longest_per_block"] == padded["longest_per_block"]
    assert eager["token_ratio"] > 1.0 and eager["flop_ratio"] > 1.0 and dense["flop_ratio"] == 1.0
    for r in rows:
        r["elapsed_s"] = 0.0
    t = target_rows(rows)
    assert len(t) == 1 and t[0]["triton_best"] == max(eager["img_per_s"], graph["img_per_s"])
    # the cached, shared-backbone model computes what build_pruned_model's does
    x = synthetic_images(8, 224, seed=1).half().cuda()
    graphed, _ = cache.make(Config(TINY, "threshold_l2", 8, "triton", "graph"))
    opts = budget_options("threshold_l2", 0.5, 196)
    ref = build_pruned_model(TINY, create_pruner("threshold_l2", **opts), "triton", graph=True).half().cuda()
    with torch.no_grad():
        torch.testing.assert_close(graphed(x), ref(x), atol=2e-3, rtol=0)


def test_ragged_linear_rows_are_planned_for_ragged_pruners_and_count_against_dense_only():
    cfgs = grid_configs(["m"], ["evit", "ats"], [64], ["triton", "fa2_varlen", "dense"], ragged_linear=True)
    rl = [c for c in cfgs if c.rlinear]
    assert rl == [Config("m", "ats", 64, "triton", "graph", rlinear=True)] and rl[0].mode_label == "graph+rlin"
    M = "deit_base_patch16_224"
    rows = [
        _row(M, "threshold_l2", 64, "triton", "graph", 1000.0, 1.2, 2.0, True),
        _row(M, "threshold_l2", 64, "triton", "graph+rlin", 1800.0, 1.2, 2.0, True),
        _row(M, "threshold_l2", 64, "fa2_varlen", "eager", 900.0, 1.2, 2.0, True),
        _row(M, None, 64, "dense", "eager", 1000.0, 1.0, 1.0, False),
    ]
    (t,) = target_rows(rows)
    assert t["triton_best_mode"] == "graph" and t["vs_fa2"] == pytest.approx(1000 / 900)  # 2a: same capacities
    assert t["vs_dense_mode"] == "graph+rlin" and t["vs_dense"] == pytest.approx(1.8)


def test_warm_up_runs_until_steady_within_its_bounds(monkeypatch):
    from types import SimpleNamespace

    from pruners import bench_e2e

    clock = SimpleNamespace(now=0.0)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    monkeypatch.setattr(bench_e2e, "time", SimpleNamespace(perf_counter=lambda: clock.now))
    calls = []

    def ramping(x):  # 10 ms falling to 2 ms over 0.3 s, then steady (a fake clock: no real sleeps)
        calls.append(x)
        clock.now += 0.010 - 0.008 * min(1.0, clock.now / 0.3)

    n = bench_e2e._warm_up(ramping, "x", min_n=5, min_s=0.05)
    assert n == len(calls) >= 5 and 0.3 <= clock.now < 0.5
    clock.now = 0.0
    assert bench_e2e._warm_up(lambda x: setattr(clock, "now", clock.now + 0.002), "x", min_n=7, min_s=0.0) >= 7
    assert clock.now < 0.1
