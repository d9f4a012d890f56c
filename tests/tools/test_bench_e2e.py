"""tools.bench_e2e on the CPU: token and FLOP ratios on hand-made lengths, the kept-count log, the
shared-model cache, the plan order and the time box, the target statuses; one eager pass of the timed
path under the interpreter; one GPU smoke test of every mode."""

from __future__ import annotations

import math

import pytest
import torch

from pruners import PRUNERS, build_pruned_model, create_pruner, synthetic_images
from tools.bench_e2e import ModelCache, main
from tools.e2e_plan import Config, describe_skipped, grid_configs, run_plan
from tools.e2e_report import best_dense, serving_table, target_rows, targets_table, throughput_table
from tools.e2e_stats import (
    budget_options,
    forward_flops,
    measure_tokens,
    padded_packed_ratio,
    per_block,
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


def test_ratios_nan_safe_when_nothing_packed():
    assert math.isnan(padded_packed_ratio([])[2])


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
@pytest.mark.slow
def test_measure_tokens_matches_recorded_keeps(pruner):
    model = build_pruned_model(TINY, create_pruner(pruner), "reference")
    x = synthetic_images(3, 224, seed=1)
    s = measure_tokens(model, x)
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


@pytest.mark.slow
def test_packing_log_logs_capacity_and_restores_on_error():
    model = build_pruned_model(TINY, create_pruner("ats", num_samples=60), "reference")
    x = synthetic_images(2, 224, seed=1)
    with torch.no_grad(), model.packing_log() as log:
        model(x)
    lens, caps = log.lengths()
    assert len(lens) == len(caps) == len(model.pruner.stages)
    assert all(len(stage) == 2 and sum(stage) <= cap for stage, cap in zip(lens, caps, strict=True))
    with pytest.raises(ValueError), model.packing_log() as log2:
        model(torch.zeros(1, 3, 32, 32))
    with torch.no_grad():
        model(x)  # the log is detached again: nothing more is recorded
    assert log2.entries == [] and len(log.entries) == len(caps)


@torch.no_grad()
@pytest.mark.parametrize("pruner", ["threshold_l2", "dynamicvit", None])
@pytest.mark.slow
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
@pytest.mark.slow
def test_model_cache_calibrated_capacity_caps_threshold_l2_only():
    cache = ModelCache(0.5, device="cpu", dtype=torch.float32, calibrated_capacity=True)
    _, inner = cache.make(Config(TINY, "threshold_l2", 2, "reference"))
    caps = inner.pruner.max_keeps
    assert all(isinstance(c, int) for c in caps) and inner.pruner.tokens_bound(2, 197) < 197
    _, evit = cache.make(Config(TINY, "evit", 2, "reference"))  # fixed-count pruners: unchanged
    assert not hasattr(evit.pruner, "max_keeps")


@torch.no_grad()
@pytest.mark.slow
def test_evit_dense_view_takes_the_dense_view_path_with_the_same_packings(monkeypatch):
    """--evit-dense-view: EViT's fused token built on the dense view (the path before 2026-12-02) on the
    triton backend, where the pack kernel writes it by default; same packings, same logits up to rounding."""
    from pruners.model import PrunedDeiT

    calls = []
    real = PrunedDeiT._with_extra_token
    monkeypatch.setattr(PrunedDeiT, "_with_extra_token", lambda self, *a: calls.append(1) or real(self, *a))
    x = synthetic_images(2, 224, seed=3)
    outs, logs = [], []
    for dense_view in (False, True):
        cache = ModelCache(0.5, device="cpu", dtype=torch.float32, evit_dense_view=dense_view)
        _, inner = cache.make(Config(TINY, "evit", 2, "triton"))
        calls.clear()
        with inner.packing_log() as log:
            outs.append(inner(x))
        logs.append(log.lengths())
        assert len(calls) == (3 if dense_view else 0)  # EViT's three stages
    assert logs[0] == logs[1]
    torch.testing.assert_close(outs[0], outs[1], rtol=0, atol=1e-4)


@torch.no_grad()
@pytest.mark.slow
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
    with model.packing_log() as log:
        out = model(x)
    lens, caps = log.lengths()
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
    with model.packing_log() as log:
        model(x)
    lens, caps = log.lengths()
    assert all(sum(stage) <= cap for stage, cap in zip(lens, caps, strict=True))
    assert sum(lens[0]) < sum(k.sum().item() for k in plain.recorded_keeps[:1])  # the budget bound


@torch.no_grad()
@pytest.mark.slow
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


def test_grid_order_dense_first_and_last_and_modes():
    g = grid_configs(["m"], ["evit", "ats"], [1, 64], ["triton", "padded_sdpa", "nested_sdpa", "dense"])
    assert g[:7] == [
        Config("m", None, 1, "dense"),
        Config("m", None, 1, "dense", "graph"),
        Config("m", None, 1, "dense", "compile+graph"),
        Config("m", "evit", 1, "triton", "graph"),
        Config("m", "evit", 1, "triton", "compile+graph"),  # batch 1 is a compile batch
        Config("m", "evit", 1, "padded_sdpa", "graph"),
        Config("m", "evit", 1, "nested_sdpa"),  # cannot be captured: eager only
    ]
    b1 = [c for c in g if c.batch == 1]
    assert b1[-2:] == [Config("m", None, 1, "dense", reread=True), Config("m", None, 1, "dense", "graph", reread=True)]
    assert g.index(b1[-1]) < min(g.index(c) for c in g if c.batch == 64)  # each batch completes its set first
    assert not any(c.mode == "compile+graph" for c in g if c.batch == 64 and c.backend == "triton")
    assert Config("m", None, 64, "dense", "compile+graph") in g
    assert len(g) == 2 * (3 + 2) + 2 * 4 + 2 * 3  # dense 3 + 2 again per batch; 4 or 3 rows per pruner
    eager = grid_configs(["m"], ["evit"], [64], ["triton", "fa2_varlen"], eager=True, compile_batches=())
    assert [c.mode for c in eager] == ["graph", "eager", "graph", "eager"]
    none = grid_configs(["m"], ["evit"], [1], ["triton", "dense"], compile_batches=(), compile_dense=False)
    assert not any(c.mode == "compile+graph" for c in none)
    exact = grid_configs(["m"], ["evit", "ats"], [1], ["triton"], ragged=lambda p: p == "ats", exact_capacity=True)
    assert [c for c in exact if c.exact] == [Config("m", "ats", 1, "triton", "eager", True)]  # ragged only
    with pytest.raises(ValueError, match="mode must be one of"):
        Config("m", None, 1, "dense", "graph+compile")


def test_fused_rows_for_dense_and_every_capturable_backend():
    g = grid_configs(["m"], ["evit"], [4], ["triton", "fa2_varlen", "nested_sdpa", "dense"], fused=True,
                     compile_batches=())
    fused = [c for c in g if c.fused]
    assert fused == [Config("m", None, 4, "dense", "graph", fused=True),
                     Config("m", None, 4, "dense", "compile+graph", fused=True),
                     Config("m", "evit", 4, "triton", "graph", fused=True),
                     Config("m", "evit", 4, "fa2_varlen", "graph", fused=True)]  # nested_sdpa cannot be captured
    assert fused[0].mode_label == "graph+fused" and g.index(fused[0]) < g.index(fused[2])  # dense first
    at_compile_batch = grid_configs(["m"], ["evit"], [1], ["triton"], fused=True)
    assert [c.mode_label for c in at_compile_batch] == ["graph", "graph+fused", "compile+graph", "compile+graph+fused"]
    assert not any(c.fused for c in grid_configs(["m"], ["evit"], [4], ["triton", "dense"]))


def test_the_faster_dense_reading_of_any_mode_counts():
    rows = [dict(model="m", batch=64, backend="dense", mode=m, img_per_s=v)
            for m, v in (("eager", 9000.0), ("graph", 10500.0), ("eager+again", 9900.0))]
    rows.append(dict(model="m", batch=64, backend="triton", mode="graph", img_per_s=20000.0))
    assert best_dense(rows)[("m", 64)]["mode"] == "graph"
    assert best_dense(list(reversed(rows)))[("m", 64)]["img_per_s"] == 10500.0


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
    assert errors == ["RuntimeError: CUDA out of memory", "NotImplementedError: no FA2"]

    def broken(cfg):
        raise KeyError("a bug")

    with pytest.raises(KeyError):  # bugs are not swallowed
        run_plan(_configs(1), broken)


def test_main_dry_run_and_arguments(capsys):
    assert main(["--dry-run", "--models", "deit_tiny_patch16_224", "--batches", "4"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split(None, 1)[1] == "deit_tiny_patch16_224 - B=4 dense/eager"
    assert any(line.endswith("triton/compile+graph") for line in out)
    assert main(["--dry-run", "--models", TINY, "--batches", "4", "--compile-batches", "--no-dense-compile"]) == 0
    assert "compile" not in capsys.readouterr().out
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
    "compile-mode-cudagraphs": (["--compile-mode", "reduce-overhead"], "--compile-mode"),
    "latency-calls-0": (["--latency-calls", "0"], "--latency-calls"),
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
def _row(model, pruner, batch, backend, mode, ips, flop_ratio=2.0, p99=None, max_abs=0.001, **kw):
    return dict(
        table="throughput", model=model, pruner=pruner, backend=backend, mode=mode, batch=batch, img_per_s=ips,
        flop_ratio=flop_ratio, token_fraction=0.5, tokens_per_block=kw.get("tokens", [1]), longest_per_block=[1],
        mlp_tokens_per_block=[1], flops_pruned=1.0, p99_ms=p99, max_abs=max_abs, top1_mismatch=kw.get("mismatch", 0),
        nodes=kw.get("nodes"), p50_ms=p99, latency_calls=1000 if p99 else None, compile_s=kw.get("compile_s"),
    )


S, B = "deit_small_patch16_224", "deit_base_patch16_224"


def test_targets_use_the_fastest_dense_of_any_mode_never_eager_alone():
    rows = [
        _row(S, None, 1, "dense", "eager", 250.0, 1.0, p99=4.5),
        _row(S, None, 1, "dense", "graph", 1900.0, 1.0, p99=0.60),
        _row(S, None, 1, "dense", "compile+graph", 2400.0, 1.0, p99=0.45),
        _row(S, "evit", 1, "triton", "graph", 2000.0, p99=0.52),
        _row(S, "evit", 1, "triton", "compile+graph", 3300.0, p99=0.33),
        _row(S, "evit", 1, "fa2_varlen", "graph", 1700.0),
        _row(S, "evit", 1, "padded_sdpa", "graph", 1500.0),
    ]
    (t,) = target_rows(rows)
    assert (t["best"], t["dense_mode"]) == ("triton compile+graph", "compile+graph")
    assert t["speedup"] == pytest.approx(3300 / 2400) and t["p99_ratio"] == pytest.approx(0.33 / 0.45)
    assert t["serving"] == "PASS"  # 1.375 >= 1.3 and 0.73 <= 0.8; against eager it would read 13x
    assert t["vs_fa2_graph"] == pytest.approx(2000 / 1700) and t["vs_padded_graph"] == pytest.approx(2000 / 1500)
    assert t["graph"] == "PASS" and t["correct"] == "PASS" and t["large"] == "n/a"
    rows[4] = _row(S, "evit", 1, "triton", "compile+graph", 3300.0, p99=0.40)  # p99 0.89x dense's
    assert target_rows(rows)[0]["serving"] == "MISS"


def test_a_fused_dense_model_is_a_dense_configuration_and_fused_rows_compare_fused_against_fused():
    rows = [
        _row(S, None, 4, "dense", "compile+graph", 8000.0, 1.0, p99=0.55),
        _row(S, None, 4, "dense", "graph+fused", 9000.0, 1.0, p99=0.50),
        _row(S, "evit", 4, "triton", "graph", 6000.0, p99=0.70),
        _row(S, "evit", 4, "fa2_varlen", "graph", 5000.0),  # 1.2x unfused
        _row(S, "evit", 4, "padded_sdpa", "graph", 4000.0),
        _row(S, "evit", 4, "triton", "graph+fused", 12000.0, p99=0.35),
        _row(S, "evit", 4, "fa2_varlen", "graph+fused", 11500.0),  # 1.04x fused
        _row(S, "evit", 4, "padded_sdpa", "graph+fused", 9000.0),
    ]
    (t,) = target_rows(rows)
    assert (t["dense_mode"], t["dense_img_per_s"]) == ("graph+fused", 9000.0)  # not the compiled dense
    assert t["best"] == "triton graph+fused" and t["speedup"] == pytest.approx(12000 / 9000)
    assert t["graph_mode"] == "graph+fused" and t["vs_fa2_graph"] == pytest.approx(12000 / 11500)
    assert t["graph"] == "MISS"  # 1.2x unfused does not count where the user runs the fused forward
    assert "triton graph+fused" in throughput_table(rows)[0] and "dense graph+fused" in throughput_table(rows)[0]


def test_target_statuses_large_graph_correct_and_missing_rows():
    rows = [
        _row(B, None, 64, "dense", "graph", 1000.0, 1.0),
        _row(B, "ats", 64, "triton", "graph", 1750.0, 2.0),  # 1.75 / 2.0 = 0.875 < 0.9
        _row(B, "ats", 64, "fa2_varlen", "graph", 1500.0, 2.0),  # 1.17x >= 1.1
        _row(B, "ats", 64, "padded_sdpa", "graph", 1500.0, 2.0),  # 1.17x < 1.2
        _row(B, "evit", 64, "triton", "graph", 1900.0, 2.0, max_abs=0.005),
        _row(B, "evit", 4, "triton", "graph", 900.0),
        _row("deit_base_patch16_384", "evit", 4, "triton", "graph", 900.0, mismatch=1),
    ]
    t = {(r["pruner"], r["model"], r["batch"]): r for r in target_rows(rows)}
    ats = t[("ats", B, 64)]
    assert ats["frac_flop"] == pytest.approx(0.875) and ats["large"] == "MISS" and ats["graph"] == "MISS"
    ev = t[("evit", B, 64)]
    assert (ev["large"], ev["graph"], ev["correct"]) == ("PASS", "no data", "MISS")
    assert t[("evit", B, 4)]["serving"] == "no data"  # no dense row at B 4
    r384 = t[("evit", "deit_base_patch16_384", 4)]
    assert r384["serving"] == "n/a" and r384["correct"] == "MISS"  # serving targets are 224² only
    table = targets_table(target_rows(rows))
    assert len(table) == 2 + 4 and all(line.count("|") == 20 for line in table)


def test_tables_name_every_measured_mode_and_the_serving_figures():
    rows = [
        _row(S, None, 1, "dense", "eager", 250.0, 1.0),
        _row(S, None, 1, "dense", "eager+again", 260.0, 1.0),
        _row(S, None, 1, "dense", "graph", 1900.0, 1.0, p99=0.6, nodes={"kernel": 150, "memcpy": 1, "memset": 2}),
        _row(S, "ats", 1, "triton", "compile+graph", 2100.0, p99=0.5, nodes={"kernel": 90, "memcpy": 1},
             compile_s=41.5),
    ]
    tput = throughput_table(rows)
    assert tput[0] == "| model | pruner | batch | dense eager | dense graph | triton compile+graph | tokens |"
    assert tput[2] == f"| {S} | ats | 1 | 260 | 1900 | 2100 | 0.500 |"  # the faster dense reading
    serving = serving_table(rows)
    assert len(serving) == 2 + 2
    assert serving[3].endswith("| 0.500 | 0.500 | 1000 | 90 | 1 | 41.5 |")


@pytest.mark.slow
def test_bench_one_eager_under_the_interpreter(monkeypatch):
    """The timed path end to end on the CPU (Triton's interpreter, CUDA calls stubbed): the row's figures
    come from the run, the first configuration records the decisions and the next replays them."""
    from tools import bench_e2e

    for name, fn in (("synchronize", lambda *a: None), ("reset_peak_memory_stats", lambda *a: None),
                     ("max_memory_allocated", lambda *a: 2**20), ("empty_cache", lambda *a: None)):
        monkeypatch.setattr(torch.cuda, name, fn)
    cache = ModelCache(0.5, device="cpu", dtype=torch.float32)
    rows = [bench_e2e.bench_one(Config(TINY, "evit", 1, backend), cache, repeats=1, min_time=0.0, warmup_s=0.0,
                                latency_calls=3, latency_max_batch=4) for backend in ("triton", "padded_sdpa")]
    tri, pad = rows
    assert [r["decisions"] for r in rows] == ["recorded", "replayed"]
    assert tri["img_per_s"] > 0 and tri["latency_calls"] == 3 and tri["p50_ms"] <= tri["p99_ms"]
    assert tri["max_abs"] < 1e-3 and pad["max_abs"] == 0.0  # padded_sdpa eager is the reference itself
    assert tri["tokens_per_block"] == pad["tokens_per_block"] and tri["flop_ratio"] > 1.0
    assert tri["nodes"] is None and tri["compile_s"] is None  # eager: nothing captured or compiled


# -- GPU smoke test (run with `pytest -m gpu`): every mode end to end on a tiny model ------------------------
@pytest.mark.gpu
def test_gpu_bench_one_tiny_every_mode():
    from tools.bench_e2e import bench_one

    cache = ModelCache(0.5)
    cfgs = [Config(TINY, None, 4, "dense", m) for m in ("eager", "graph", "compile+graph")]
    cfgs += [Config(TINY, "threshold_l2", 4, b, m) for b, m in (("triton", "graph"), ("triton", "compile+graph"),
                                                                ("fa2_varlen", "graph"), ("padded_sdpa", "graph"))]
    cfgs += [Config(TINY, None, 4, "dense", "graph", fused=True),
             Config(TINY, "threshold_l2", 4, "triton", "graph", fused=True),
             Config(TINY, "threshold_l2", 4, "triton", "compile+graph", fused=True)]
    rows = [bench_one(c, cache, repeats=1, min_time=0.01, warmup_s=0.0, latency_calls=50, latency_max_batch=4)
            for c in cfgs]
    for r in rows:
        assert r["img_per_s"] > 0 and r["peak_gib"] > 0 and r["latency_calls"] is not None
        assert r["max_abs"] < 4e-3 and r["top1_mismatch"] == 0
    captured = [r for r in rows if r["mode"] != "eager"]
    assert all(r["nodes"] and r["nodes"]["kernel"] > 0 for r in captured)
    assert all(r["compile_s"] > 0 for r in rows if r["mode"] == "compile+graph")
    dense_graph, dense_compiled = rows[1], rows[2]
    assert dense_compiled["nodes"]["kernel"] < dense_graph["nodes"]["kernel"]  # inductor fused something
    assert [r["decisions"] for r in rows[3:]] == ["recorded", "replayed", "replayed", "replayed", "own", "replayed",
                                                  "replayed"]
    dense_fused = rows[7]
    assert dense_fused["nodes"]["kernel"] < dense_compiled["nodes"]["kernel"]  # five launches a block, one head
    for r in rows:
        r["elapsed_s"] = 0.0
    assert len(target_rows(rows)) == 1
