"""Model-level benchmark helpers: the results matrix protocol and which backends graph mode skips."""

from __future__ import annotations

import re

import pytest
import torch

from benchmarks import model_runs, timing
from benchmarks.presets import MODEL_BACKENDS


@pytest.mark.parametrize("backend", ["padded_sdpa", "nested_sdpa"])
def test_backends_that_read_device_values_are_not_captured_from_their_eager_form(backend):
    """A host read (`.item()`, `int(t)`) inside CUDA-graph capture raises and can poison the process's
    later measurements, so such backends must be skipped in graph mode, not recorded as errors.
    Meta tensors have no values: a host read raises there too, which is how it is detected here."""
    import ragged_kernels

    assert backend in MODEL_BACKENDS
    q = torch.empty(10, 2, 32, device="meta")
    cu = torch.empty(3, dtype=torch.int32, device="meta")
    with pytest.raises(RuntimeError, match="item"):
        ragged_kernels.ATTENTION_BACKENDS[backend](q, q, q, cu, 8)
    # nested_sdpa is never captured; padded_sdpa's graph mode is built padded to the capacity instead
    from benchmarks import bench_end_to_end

    assert backend in model_runs.NOT_CAPTURABLE or backend in bench_end_to_end.BUILT_CAPTURED
    if backend == "padded_sdpa":  # its sync-free form reads nothing back: it runs on meta tensors
        out = ragged_kernels.padded_sdpa_attention(q, q, q, cu, 8, pad_to_bound=True)
        assert out.shape == q.shape


def test_guarded_and_lookup_map_skips_and_errors():
    results: dict = {}
    model_runs.guarded(results, "ok", lambda: {"v": 2.5})
    model_runs.guarded(results, "skip", lambda: (_ for _ in ()).throw(NotImplementedError("no fa2")))
    model_runs.guarded(results, "err", lambda: 1 / 0)
    assert model_runs.lookup(results, "ok", "v") == 2.5
    with pytest.raises(NotImplementedError, match="no fa2"):
        model_runs.lookup(results, "skip", "v")
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        model_runs.lookup(results, "err", "v")
    with pytest.raises(NotImplementedError, match="not measured"):
        model_runs.lookup(results, "missing", "v")
    with pytest.raises(NotImplementedError, match="needs a CUDA GPU"):
        model_runs.lookup({"_global": {"skip": "needs a CUDA GPU"}, "ok": {"values": {"v": 1.0}}}, "ok", "v")


@pytest.mark.parametrize("pruner", ["threshold_l2", "dynamicvit"])
@pytest.mark.slow
def test_build_cache_reuses_the_calibrated_pruner_and_changes_no_logit(monkeypatch, pruner):
    """ModelCorrectness builds every (model, pruner) once per backend: the second build must not
    calibrate again, and must give exactly the logits of a fresh build."""
    from pruners import build_pruned_model, create_pruner
    from pruners.model import PrunedDeiT

    monkeypatch.setattr(model_runs, "_PRUNERS", {})
    calls = []
    real = PrunedDeiT.calibrate
    monkeypatch.setattr(PrunedDeiT, "calibrate", lambda self, images: (calls.append(1), real(self, images))[1])
    name = "deit_tiny_patch16_224"
    model_runs.build_cpu(name, pruner, "padded_sdpa")
    first = len(calls)
    cached = model_runs.build_cpu(name, pruner, "padded_sdpa")
    assert len(calls) == first, "the second build calibrated again"
    assert first == (1 if pruner == "threshold_l2" else 0)
    fresh = build_pruned_model(name, create_pruner(pruner), "padded_sdpa", seed=0)
    x = torch.randn(2, 3, 224, 224, generator=torch.Generator().manual_seed(3))
    with torch.inference_mode():
        assert torch.equal(cached(x), fresh(x))


@pytest.mark.slow
def test_model_correctness_replays_the_checked_models_decisions():
    """ModelCorrectness compares logits under the same keep decisions: a checked model that
    decides differently (here: EViT made to keep the mirror image of the reference's first-stage
    token set, same counts, weights and backend) gives the reference's logits exactly once the
    reference replays its masks, though not with its own."""
    from benchmarks.bench_correctness import compare_with_reference
    from pruners import build_pruned_model, create_pruner

    name = "deit_tiny_patch16_224"
    ref, checked = (build_pruned_model(name, create_pruner("evit"), "padded_sdpa", seed=0).eval() for _ in range(2))
    x = torch.randn(2, 3, 224, 224)
    ref.record = True
    with torch.inference_mode():
        ref_logits = ref(x).float()
    other = [k.clone() for k in ref.recorded_keeps]
    other[0][:, 1:] = other[0][:, 1:].flip(1)  # another token set of the same size; CLS stays kept
    assert not torch.equal(other[0], ref.recorded_keeps[0])
    checked.keep_override = other
    with torch.inference_mode():
        own = (checked(x).float() - ref_logits).abs().max().item()
    got = compare_with_reference(torch, checked, {"model": ref, "logits": ref_logits}, x)
    assert own > 1e-3, "different decisions should move the logits"
    assert got["max_abs_diff"] < 1e-5 and got["top1_agreement"] == 1.0
    assert ref.keep_override is None, "the reference must be left deciding on its own"


def _fake_torch():
    from types import SimpleNamespace

    fake_cuda = SimpleNamespace(synchronize=lambda: None, reset_peak_memory_stats=lambda: None,
                                max_memory_allocated=lambda: 1234)
    return SimpleNamespace(cuda=fake_cuda)


def test_images_per_s_warms_up_by_time_then_times_reps():
    """Each case runs its own forwards for at least `warmup_s` (and 5) before anything is timed."""
    import time

    calls = []

    def run():
        calls.append(time.perf_counter())
        time.sleep(0.002)

    t0 = time.perf_counter()
    ips, peak, times = model_runs.images_per_s_and_peak(_fake_torch(), run, batch=4, reps=7, warmup_s=0.1)
    untimed = len(calls) - 7
    assert untimed >= 5 + 1 and calls[untimed - 1] - t0 >= 0.09  # warm-up (+ the peak-memory forward)
    assert calls[untimed - 1] - t0 < model_runs.WARMUP_MAX_S + 0.5
    assert len(times) == 7 and peak == 1234.0 and ips == pytest.approx(4 / sorted(times)[3])
    calls.clear()
    model_runs.images_per_s_and_peak(_fake_torch(), run, batch=1, reps=1, warmup_s=0.0)
    assert len(calls) >= 5 + 1 + 1  # never fewer than 5 warm-up forwards


class _FakeClock:
    """A clock that only the fake forwards advance: warm-up decisions without real sleeps."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


def test_warm_up_waits_for_steady_forwards_and_gives_up_at_its_cap(monkeypatch):
    """A forward that speeds up over its first 0.3 s (a card still raising its clocks) keeps the
    warm-up going past its minimum; one that never settles stops at the cap."""
    clock = _FakeClock()
    monkeypatch.setattr(timing, "time", clock)

    def ramping():  # 10 ms falling linearly to 2 ms at 0.3 s, then steady
        clock.now += 0.010 - 0.008 * min(1.0, clock.now / 0.3)

    n = timing.warm_up(_fake_torch(), ramping, min_s=0.05, max_s=1.0)
    assert 0.3 <= clock.now < 0.5 and n >= 5
    clock.now, calls = 0.0, [0]

    def slowing():  # every call 3% slower than the last: never steady
        calls[0] += 1
        clock.now += 0.001 * 1.03 ** calls[0]

    timing.warm_up(_fake_torch(), slowing, min_s=0.0, max_s=0.2)
    assert 0.2 <= clock.now < 0.3
    clock.now = 0.0
    assert timing.warm_up(_fake_torch(), lambda: setattr(clock, "now", clock.now + 0.002), min_s=0.1) >= 5
    assert 0.1 <= clock.now < 0.2  # steady from the start: stops soon after its minimum


def test_setup_report_names_the_slowest_cases(capsys, monkeypatch, tmp_path):
    """measure_matrix times every case and prints one `[setup]` line (asv --show-stderr: the run log)."""
    from benchmarks import _replay

    class Fake:
        params = (["a", "b"], ["x"])

        def setup_cache(self):
            return _replay.measure_matrix(self.params, lambda: lambda p, q: {"v": [float(len(p + q))]})

    monkeypatch.setenv("RAGGED_SETUP_LOG", str(tmp_path / "setup.log"))
    cache = Fake().setup_cache()
    assert cache["a|x"] == {"values": {"v": [2.0]}}
    line = capsys.readouterr().err.strip()
    assert line.startswith("[setup] Fake: 2 cases, ") and "slowest: " in line and "a|x" in line and "b|x" in line
    # For the runner to echo as they come (asv hides a setup_cache's output): each case, then the summary.
    logged = (tmp_path / "setup.log").read_text().splitlines()
    assert [re.sub(r" [0-9.]+ s$", "", ln) for ln in logged[:2]] == ["[setup] Fake 1/2: a|x", "[setup] Fake 2/2: b|x"]
    assert logged[2:] == [line]
    seconds = {"k1": 0.5, "k2": 3.0}
    model_runs.guarded({}, "k1", lambda: (_ for _ in ()).throw(ValueError("boom")), seconds)
    assert seconds["k1"] > 0.5  # errors are timed too
    line = model_runs.report_setup("C", seconds, 4.0)
    assert line.index("k2 3.0 s") < line.index("k1")  # slowest first


def test_end_to_end_matrix_logs_one_line_per_case(monkeypatch, tmp_path):
    """The end-to-end matrix says where it is as it goes (470 s without a line on one H100 before), its
    numbering counts the cases a commit cannot build, and the summary follows the last case."""
    import contextlib
    import types

    from benchmarks import bench_end_to_end, gpu_env

    fake_torch = types.SimpleNamespace(
        float16="fp16", inference_mode=contextlib.nullcontext,
        cuda=types.SimpleNamespace(empty_cache=lambda: None), compiler=types.SimpleNamespace(reset=lambda: None))

    def build(torch, model, pruner, backend, dtype):
        if backend == "padded_sdpa":
            raise NotImplementedError("not at this commit")
        return lambda x: None

    monkeypatch.setattr(timing, "require_cuda", lambda: fake_torch)
    monkeypatch.setattr(timing, "warm_up_device", lambda torch: None)
    monkeypatch.setattr(gpu_env, "write_for_asv_run", lambda: None)
    monkeypatch.setattr(model_runs, "images", lambda torch, batch, resolution: types.SimpleNamespace(half=lambda: "x"))
    monkeypatch.setattr(model_runs, "build_model", build)
    monkeypatch.setattr(bench_end_to_end, "_runner", lambda *case: (lambda: None, None))
    monkeypatch.setattr(model_runs, "images_per_s_and_peak", lambda torch, run, batch, reps: (100.0, 1, [0.01] * reps))
    monkeypatch.setattr(timing, "synced_calls", lambda torch, run, n: [0.001] * n)
    monkeypatch.setenv("RAGGED_SETUP_LOG", str(tmp_path / "setup.log"))

    cache = bench_end_to_end.measure_matrix(["deits224-b1"], ["ats", "evit"], ["triton", "padded_sdpa", "dense"],
                                            ["eager", "graph"])
    assert cache["deits224-b1|evit|padded_sdpa|graph"] == {"skip": "not at this commit"}
    assert cache["deits224-b1|evit|dense|eager"] == cache["deits224-b1|ats|dense|eager"]  # dense: one model
    logged = [re.sub(r" [0-9.]+ s$", "", ln) for ln in (tmp_path / "setup.log").read_text().splitlines()]
    label = "[setup] end-to-end matrix (1 presets)"
    assert logged[:-1] == [
        f"{label} 1/10: deits224-b1|ats|triton|eager", f"{label} 2/10: deits224-b1|ats|triton|graph",
        f"{label} 3/10: deits224-b1|evit|triton|eager", f"{label} 4/10: deits224-b1|evit|triton|graph",
        f"{label} 9/10: deits224-b1|ats|dense|eager", f"{label} 10/10: deits224-b1|ats|dense|graph"]
    assert logged[-1].startswith(f"{label}: 6 cases, ")


def test_end_to_end_modes_skip_what_a_commit_cannot_run(monkeypatch):
    """compile is timed for triton and dense only; padded_sdpa's graph mode and every compile need the
    library's graph/compile builds, and a commit whose build refuses them skips (NotImplementedError),
    never errors."""
    import pruners
    from benchmarks import bench_end_to_end
    from benchmarks.presets import MODEL_PRESETS

    p = MODEL_PRESETS["deits224-b1"]
    with pytest.raises(NotImplementedError, match="compile is timed for"):
        bench_end_to_end._runner(torch, p, "evit", "fa2_varlen", "compile", None, None)
    with pytest.raises(NotImplementedError, match="fused is timed for"):
        bench_end_to_end._runner(torch, p, "evit", "padded_sdpa", "fused", None, None)

    def old_build(*args, **kwargs):  # a commit before 2026-12-01: no compile option, graph for triton only
        for option in ("compile", "fused_blocks"):  # fused_blocks: before 2026-12-04
            if option in kwargs:
                raise TypeError(f"unknown build_pruned_model options ['{option}']")
        raise ValueError("graph mode is for the sync-free 'triton' backend, not 'padded_sdpa'")

    monkeypatch.setattr(pruners, "build_pruned_model", old_build)
    for backend, mode in (("padded_sdpa", "graph"), ("triton", "compile"), ("dense", "compile"), ("triton", "fused"),
                          ("dense", "fused")):
        with pytest.raises(NotImplementedError, match="not supported at this commit"):
            bench_end_to_end._runner(torch, p, "evit", backend, mode, None, None)
    run, compile_s = bench_end_to_end._runner(torch, p, "evit", "triton", "eager", "x", lambda x: ("ran", x))
    assert run() == ("ran", "x") and compile_s is None
