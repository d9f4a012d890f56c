"""Measurement helpers: the measured clock asv reads, host cost, latency, L2 rotation, GPU timer."""

from __future__ import annotations

import time
import timeit

import pytest

from benchmarks import timing
from tests.conftest import HAS_CUDA


def test_measured_clock_gives_timeit_the_reported_interval():
    clock = timing.MeasuredClock()
    # asv's TimeBenchmark hands `timer` to timeit.Timer: the sample must be what the statement reported.
    t = timeit.Timer(stmt=lambda: clock.advance(0.125), timer=clock.now)
    assert t.timeit(number=3) == pytest.approx(0.375)


@pytest.mark.parametrize("bad", [-1.0, float("nan")], ids=["negative", "nan"])
def test_measured_clock_rejects_bad_intervals(bad):
    with pytest.raises(ValueError, match=">= 0"):
        timing.MeasuredClock().advance(bad)


def test_host_cost_excludes_sync_and_latency_includes_it():
    def sync():
        time.sleep(0.02)

    host = timing.host_cost(lambda i: None, 5, sync)
    lat = timing.latency(lambda i: None, 5, sync)
    assert host < 0.005
    assert lat >= 0.02


def test_measures_reject_zero_calls():
    with pytest.raises(ValueError, match="calls"):
        timing.host_cost(lambda i: None, 0, lambda: None)
    with pytest.raises(ValueError, match="calls"):
        timing.latency(lambda i: None, 0, lambda: None)


def test_rotating_sets_cover_twice_the_l2():
    sets = timing.rotating_sets(lambda i: (i,), bytes_per_set=10, l2_bytes=45)
    assert len(sets) == 9 and sets[0] == (0,)
    assert len(timing.rotating_sets(lambda i: (i,), bytes_per_set=10**9, l2_bytes=45)) == 2
    assert len(timing.rotating_sets(lambda i: (i,), bytes_per_set=1, l2_bytes=10**9)) == 16
    with pytest.raises(ValueError, match="bytes_per_set"):
        timing.rotating_sets(lambda i: (i,), bytes_per_set=0, l2_bytes=1)


def test_require_attr_skips_missing_library_parts():
    with pytest.raises(NotImplementedError, match="not importable"):
        timing.require_attr("no_such_module_xyz", "f")
    with pytest.raises(NotImplementedError, match="absent"):
        timing.require_attr("benchmarks.presets", "no_such_attr")


@pytest.mark.skipif(HAS_CUDA, reason="checks the no-GPU skip path")
def test_require_cuda_skips_without_gpu():
    with pytest.raises(NotImplementedError, match="CUDA"):
        timing.require_cuda()


@pytest.mark.gpu
def test_gpu_timer_graph_mode_scales_with_work():
    import torch

    a = torch.randn(2048, 2048, device="cuda", dtype=torch.float16)
    small = timing.GpuTimer(lambda i: a @ a, 4, torch)
    big = timing.GpuTimer(lambda i: (a @ a) @ a, 4, torch)
    assert small.mode == big.mode == "graph-events"
    s = sorted(small.measure() for _ in range(9))[4]
    b = sorted(big.measure() for _ in range(9))[4]
    assert 1.5 < b / s < 2.6


@pytest.mark.gpu
def test_gpu_timer_uncapturable_call_sums_kernels_not_host_gaps():
    import time

    import torch

    a = torch.randn(2048, 2048, device="cuda", dtype=torch.float16)
    graph = timing.GpuTimer(lambda i: a @ a, 4, torch)

    def syncing(i):  # reads a device value on the host (cannot be captured) and idles the GPU 2 ms
        time.sleep(0.002)
        return float((a @ a)[0, 0])

    eager = timing.GpuTimer(syncing, 4, torch)
    assert eager.mode == "kernel-sum"
    # The failed capture must not leave the CUDA generator marked as capturing: before the fix this
    # raised "Offset increment outside graph capture encountered unexpectedly" (H200, 2026-11-29).
    assert torch.randn(8, device="cuda").isfinite().all()
    g = sorted(graph.measure() for _ in range(9))[4]
    k = sorted(eager.measure() for _ in range(9))[4]
    many = eager.measure_many(9)  # one profiler session for all nine
    assert eager.mode == "kernel-sum", "the profiler recorded no device activity"
    assert len(many) == 9 and 0.7 < sorted(many)[4] / k < 1.4
    assert k < 1e-3  # the 2 ms of host sleep per call are not GPU time
    assert 0.7 < k / g < 1.5  # the same matmul (plus a tiny copy) as the captured case


@pytest.mark.gpu
def test_kernel_sum_reads_the_same_durations_from_the_raw_records_as_from_prof_events(monkeypatch):
    """The kernel-sum durations come from the profiler's raw records; `prof.events()` (a FunctionEvent
    per record first) gave the same durations on one H100 for padded and NestedTensor SDPA
    (2026-12-05) in a fifth to a half of the time."""
    import torch

    a = torch.randn(512, 512, device="cuda", dtype=torch.float16)

    def syncing(i):
        return float((a @ a + i)[0, 0])  # uncapturable: reads a device value

    timer = timing.GpuTimer(syncing, 4, torch)
    raw = timer._device_durations(8)
    monkeypatch.setenv("BENCH_PROFILER_EVENTS", "1")
    parsed = timer._device_durations(8)
    assert raw and len(raw) == len(parsed)  # the same records of two sessions of the same calls
    assert 0.5 < sum(raw) / sum(parsed) < 2.0


def test_split_samples_groups_consecutive_calls():
    # 2 samples x 2 calls, 3 device activities per call: sample 0 = first 6, sample 1 = last 6
    durations = [1.0, 2.0, 3.0] * 2 + [10.0, 20.0, 30.0] * 2
    assert timing.split_samples(durations, 2, 2) == [6.0, 60.0]


def test_split_samples_refuses_uneven_counts():
    assert timing.split_samples([1.0] * 7, 2, 2) is None  # a call launched a different number of kernels
    assert timing.split_samples([], 2, 2) is None  # no activity trace
    with pytest.raises(ValueError, match=">= 1"):
        timing.split_samples([1.0], 0, 1)


def test_split_samples_discards_the_warm_up_group_and_records_lost_from_its_head():
    timed = [10.0, 20.0, 30.0] * 2 + [40.0, 50.0, 60.0] * 2  # 2 samples x 2 calls x 3 records
    warm = [1.0, 2.0, 3.0] * 2
    assert timing.split_samples(warm + timed, 2, 2, warmup=1) == [60.0, 150.0]
    # A session that lost its first records (pytorch/pytorch#192021): still the same timed part.
    assert timing.split_samples(warm[4:] + timed, 2, 2, warmup=1) == [60.0, 150.0]
    # Lost records reaching past the warm-up group (5 samples x 1 call x 3 records, 4 lost): unknown.
    trace = [1.0, 2.0, 3.0] * 6
    assert timing.split_samples(trace[3:], 5, 1, warmup=1) == [6.0] * 5
    assert timing.split_samples(trace[4:], 5, 1, warmup=1) is None


def test_measure_matrix_runs_deferred_measures_after_every_case(tmp_path, monkeypatch):
    from benchmarks import _replay

    setup_log = tmp_path / "setup.log"
    monkeypatch.setenv("RAGGED_SETUP_LOG", str(setup_log))

    log = []

    def make_compute():
        def compute(preset, backend):
            log.append(("measure", backend))
            if backend == "late":
                return {"time_host": [1.0], "time_gpu": lambda: log.append(("deferred", backend)) or [2.0]}
            if backend == "broken":
                return {"time_host": [1.0], "time_gpu": lambda: 1 / 0}
            return {"time_host": [3.0], "time_gpu": [4.0]}

        return compute

    cache = _replay.measure_matrix((["p"], ["late", "broken", "early"]), make_compute)
    assert log == [("measure", "late"), ("measure", "broken"), ("measure", "early"), ("deferred", "late")]
    assert cache["p|late"] == {"values": {"time_host": [1.0], "time_gpu": [2.0]}}
    assert cache["p|early"] == {"values": {"time_host": [3.0], "time_gpu": [4.0]}}
    assert "ZeroDivisionError" in cache["p|broken"]["error"]
    lines = setup_log.read_text().splitlines()
    # One progress line per case, then one per case measured last (the broken one too), then the total.
    assert [x.split(": ")[0] for x in lines[3:5]] == [
        "[setup] measure_matrix, measured last (time_gpu) 1/2", "[setup] measure_matrix, measured last (time_gpu) 2/2"]
    assert lines[3].split(": ")[1].startswith("p|late ") and lines[4].split(": ")[1].startswith("p|broken ")
    assert len(lines) == 6 and lines[5].startswith("[setup] measure_matrix: 3 cases")


@pytest.mark.gpu
def test_warm_up_device_keeps_the_gpu_busy_for_about_the_time_asked():
    import time

    import torch

    t0 = time.perf_counter()
    timing.warm_up_device(torch, seconds=0.2)
    assert 0.2 <= time.perf_counter() - t0 < 2.0
