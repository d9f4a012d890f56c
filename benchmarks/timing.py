"""Measurement helpers shared by the benchmark files.

How the three attention measures reach asv with raw samples (see README.md, "GPU timings"):
every `time_*` benchmark here measures its own region and advances a `MeasuredClock`; the
benchmark's `timer` attribute is that clock's `now`. asv's timing loop reads `timer()` before
and after each call, so each asv sample is exactly the per-call quantity the function measured
(GPU time from CUDA events, or host time from `perf_counter`), and asv keeps the samples in its
result files (`--record-samples`, default in `asv continuous`) for its Mann-Whitney test.

This module has no torch import at module level: asv imports it during discovery.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import Any


class MeasuredClock:
    """A clock that only moves when a benchmark reports a measured interval.

    `timeit` computes `timer() after - timer() before`; with this clock that difference is the
    sum of the intervals reported in between, i.e. what the benchmark measured itself.
    """

    def __init__(self) -> None:
        self._now = 0.0

    def now(self) -> float:
        """Current reading in seconds (the `timer` attribute handed to asv)."""
        return self._now

    def advance(self, seconds: float) -> None:
        """Add a measured interval.

        Args:
            seconds: a non-negative duration.
        """
        if not seconds >= 0.0:  # also rejects NaN
            raise ValueError(f"measured interval must be >= 0 s, got {seconds!r}")
        self._now += seconds


CLOCK = MeasuredClock()


def require_cuda() -> Any:
    """Import torch and return it, or skip the benchmark (NotImplementedError) without a CUDA GPU."""
    try:
        import torch
    except ImportError as exc:
        raise NotImplementedError(f"torch not importable: {exc}") from exc
    if not torch.cuda.is_available():
        raise NotImplementedError("needs a CUDA GPU")
    return torch


def warm_up_device(torch: Any, seconds: float = 0.5) -> None:
    """Keep the GPU busy with fp16 matmuls for about `seconds` before a process's first timed case.

    An idle card sits at a low clock (the runner's GPU sidecar reads 345 MHz on the H200 at idle)
    and takes time to raise it; without this the first case of a setup_cache would be timed on the
    way up. Clocks are only observed, never set: the GPU host is shared and its settings are not ours.
    """
    # Not randn: the CUDA generator may be unusable after a failed capture (see GpuTimer).
    a = torch.full((4096, 4096), 0.5, device="cuda", dtype=torch.float16)
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        for _ in range(8):
            a @ a
        torch.cuda.synchronize()
    del a


def restore_rng_after_failed_capture(torch: Any) -> None:
    """Give the current device's CUDA generator back its eager state after a capture that raised.

    A capture that fails midway never reaches the generator's capture epilogue, so the generator
    stays marked as capturing and every later eager `torch.randn(..., device="cuda")` of the
    process raises "Offset increment outside graph capture encountered unexpectedly" (seen on the
    H200, 2026-11-29). A cloned state starts outside any capture; seed and offset carry
    over, so the random stream continues where it was.
    """
    try:
        gen = torch.cuda.default_generators[torch.cuda.current_device()]
        gen.graphsafe_set_state(gen.clone_state())
    except Exception:  # noqa: BLE001 - best effort: older torch without graph-safe generator states
        pass


def require_attr(module_name: str, attr: str) -> Any:
    """Import `module_name.attr`, skipping (NotImplementedError) when it is absent at this commit.

    Args:
        module_name: dotted module path, e.g. "ragged_kernels".
        attr: attribute name, e.g. "ragged_attention".

    Returns:
        The attribute.
    """
    import importlib

    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise NotImplementedError(f"{module_name} not importable at this commit: {exc}") from exc
    try:
        return getattr(module, attr)
    except AttributeError as exc:
        raise NotImplementedError(f"{module_name}.{attr} absent at this commit") from exc


WARMUP_S = 0.3  # per case: at least this long of its own forwards before anything is timed
WARMUP_MAX_S = 1.0  # ... and then until two consecutive chunks agree (STEADY_TOL), at most this long
STEADY_TOL = 0.05  # the slow first cases read 20-30% slow; host jitter of eager B 1 chunks is a few %
CHUNK_S = 0.025  # forwards per chunk: enough for ~25 ms


def warm_up(torch: Any, run: Callable[[], Any], min_s: float = WARMUP_S, max_s: float = WARMUP_MAX_S) -> int:
    """Run untimed forwards for at least `min_s` (and 5), then until the time per forward is steady.

    Steady: two consecutive chunks of ~CHUNK_S differ by at most STEADY_TOL in time per forward;
    never longer than `max_s`. (Here, in the suite, not in the library: asv runs the suite against
    older commits too; `tools.bench_e2e` uses this one.)

    Returns:
        forwards run.
    """
    t_start = time.perf_counter()
    n, prev, per_chunk = 0, None, 5
    while True:
        t0 = time.perf_counter()
        for _ in range(per_chunk):
            run()
        torch.cuda.synchronize()
        now = time.perf_counter()
        n += per_chunk
        dt = (now - t0) / per_chunk
        if n >= 5 and now - t_start >= min_s and prev is not None and abs(dt - prev) <= STEADY_TOL * prev:
            return n
        if now - t_start >= max(max_s, min_s) and n >= 5:
            return n
        prev, per_chunk = dt, max(1, min(1000, int(CHUNK_S / max(dt, 1e-6))))


def synced_calls(torch: Any, run: Callable[[], Any], calls: int) -> list[float]:
    """Wall seconds of each of `calls` forwards, each followed by a synchronize (serving latency: from
    the call until its result is on the device), in the order taken.

    Args:
        torch: the torch module.
        run: one forward.
        calls: number of calls (>= 1).
    """
    if calls < 1:
        raise ValueError(f"calls must be >= 1, got {calls}")
    torch.cuda.synchronize()
    out = []
    for _ in range(calls):
        t0 = time.perf_counter()
        run()
        torch.cuda.synchronize()
        out.append(time.perf_counter() - t0)
    return out


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100) of `values`, linear between closest ranks (numpy's default)."""
    if not values:
        raise ValueError("percentile of no values")
    if not 0 <= q <= 100:
        raise ValueError(f"q must be in [0, 100], got {q}")
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def host_cost(fn: Callable[[int], Any], calls: int, sync: Callable[[], None]) -> float:
    """Host cost per call: wall time of `calls` back-to-back calls read BEFORE the final sync, / calls.

    Args:
        fn: called as fn(i) for i in range(calls) (i rotates input sets).
        calls: number of calls (>= 1).
        sync: device synchronisation, run after the clock is read so the queue is drained for the next sample.

    Returns:
        Seconds per call.
    """
    if calls < 1:
        raise ValueError(f"calls must be >= 1, got {calls}")
    t0 = time.perf_counter()
    for i in range(calls):
        fn(i)
    t1 = time.perf_counter()
    sync()
    return (t1 - t0) / calls


def latency(fn: Callable[[int], Any], calls: int, sync: Callable[[], None]) -> float:
    """Latency per call: wall time of (call + synchronize), averaged over `calls` repetitions.

    Args:
        fn: called as fn(i).
        calls: number of calls (>= 1).
        sync: device synchronisation inside the timed region.

    Returns:
        Seconds per call.
    """
    if calls < 1:
        raise ValueError(f"calls must be >= 1, got {calls}")
    sync()
    t0 = time.perf_counter()
    for i in range(calls):
        fn(i)
        sync()
    return (time.perf_counter() - t0) / calls


class GpuTimer:
    """GPU time per call of a callable, from CUDA events around a CUDA-graph replay of N calls.

    The graph holds `calls` launches cycling over several input sets (so a small problem is not
    flattered by a warm L2). Each measurement first replays the graph once untimed: while the GPU
    runs it, the host enqueues the start event and the timed replay, so the host's launch gap is
    not counted (`mode` "graph-events").

    Where capture fails (an op that reads a device value on the host, or is not capturable, e.g.
    padded SDPA's longest-length read and NestedTensor construction), the GPU idles between the
    call's kernels while the host catches up, so events around eager calls would measure the host:
    on the H200 such "GPU times" of padded SDPA spread 0.36-0.78 ms between two runs of one commit
    for ~20 us of kernels. Then (`mode` "kernel-sum") each sample is the summed device duration of
    every kernel, copy and memset of `calls` eager calls, from the CUDA profiler's activity trace
    (CUPTI, through `torch.profiler`): what the GPU spent, without the host-bound gaps. If the
    trace holds no device activity (no CUPTI), the timer falls back to events around eager calls
    and `mode` becomes "eager-events".

    The durations are read from the profiler's raw records (`prof.profiler.kineto_results`), not
    from `prof.events()`, which builds a FunctionEvent per record first: on one H100 (2026-12-05)
    `measure_many(20)` of padded and NestedTensor SDPA cases took 0.7-2.3 s against 3.8-6.6 s, with
    the same durations. `BENCH_PROFILER_EVENTS=1` reads `prof.events()` (to compare the two).

    Profile last: once used, CUPTI can stay attached to the process and slow every later launch
    (pytorch/pytorch#146604), so a caller that also times host cost must take the kernel-sum
    samples after everything else in the process (`bench_attention` defers them).
    """

    def __init__(self, fn: Callable[[int], Any], calls: int, torch_mod: Any) -> None:
        if calls < 1:
            raise ValueError(f"calls must be >= 1, got {calls}")
        self.torch = torch_mod
        self.fn = fn
        self.calls = calls
        self.graph = None
        self.mode = "eager-events"
        torch = torch_mod
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for i in range(3):  # warm up (compile, autotune caches, allocator) before capture
                fn(i)
        torch.cuda.current_stream().wait_stream(stream)
        torch.cuda.synchronize()
        try:
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                for i in range(calls):
                    fn(i)
            graph.replay()
            torch.cuda.synchronize()
            self.graph = graph
            self.mode = "graph-events"
        except Exception:  # noqa: BLE001 - any capture failure means "not capturable": measure eager calls
            torch.cuda.synchronize()
            restore_rng_after_failed_capture(torch)
            self.graph = None
            self.mode = "kernel-sum"  # no profiling here: see the class docstring, "profile last"
        self.start = torch.cuda.Event(enable_timing=True)
        self.end = torch.cuda.Event(enable_timing=True)

    def _device_durations(self, calls: int) -> list[float]:
        """Device seconds of every kernel, copy and memset of `calls` eager calls, in start order;
        [] when the profiler is unavailable or records no device activity."""
        torch = self.torch
        from torch.autograd import DeviceType
        from torch.profiler import ProfilerActivity, profile

        try:
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for i in range(calls):
                    self.fn(i)
                torch.cuda.synchronize()
        except RuntimeError:  # profiler unavailable in this build / process
            return []
        raw = getattr(getattr(prof, "profiler", None), "kineto_results", None)
        if raw is not None and not os.environ.get("BENCH_PROFILER_EVENTS"):
            # The trace's own records: `prof.events()` builds a FunctionEvent (and a tree) per record
            # first, runtime calls included, which is what this needs most of its time for.
            device = sorted(
                (e.start_ns(), e.end_ns() - e.start_ns()) for e in raw.events()
                if e.device_type() == DeviceType.CUDA and not e.is_hidden_event()
            )
            return [ns * 1e-9 for _, ns in device]
        device = sorted(
            (e.time_range.start, e.time_range.elapsed_us()) for e in prof.events() if e.device_type == DeviceType.CUDA
        )
        return [us * 1e-6 for _, us in device]

    def _run_all(self) -> None:
        if self.graph is not None:
            self.graph.replay()
        else:
            for i in range(self.calls):
                self.fn(i)

    def measure_many(self, samples: int) -> list[float]:
        """`samples` samples of `measure`. In "kernel-sum" mode all of them come from one profiler
        session (a session costs ~0.2 s or more of trace start, flush and parse; one per sample made
        AttentionKernels' setup over 60 s longer on the H200), which starts with one untimed warm-up
        sample: CUPTI can drop records at the start of a session (pytorch/pytorch#192021), and
        `split_samples` discards the warm-up sample, dropped records included."""
        if samples < 1:
            raise ValueError(f"samples must be >= 1, got {samples}")
        if self.mode == "kernel-sum":
            durations = self._device_durations((samples + 1) * self.calls)
            grouped = split_samples(durations, samples, self.calls, warmup=1)
            if grouped is not None:
                return grouped
            if not durations:  # no activity trace: events around eager calls, and say so
                self.mode = "eager-events"
            elif samples > 1:  # records lost past the warm-up sample: one session per sample
                return [self.measure_many(1)[0] for _ in range(samples)]
            else:
                raise RuntimeError(
                    f"kernel-sum: {len(durations)} device records for 2 x {self.calls} calls do not split into "
                    "equal calls (calls launch varying kernel counts, or the trace lost records)"
                )
        return [self.measure() for _ in range(samples)]

    def measure(self) -> float:
        """One sample: GPU seconds per call."""
        if self.mode == "kernel-sum":
            return self.measure_many(1)[0]
        self._run_all()  # untimed: keeps the GPU busy while the timed work is enqueued
        self.start.record()
        self._run_all()
        self.end.record()
        self.end.synchronize()
        return self.start.elapsed_time(self.end) * 1e-3 / self.calls


def split_samples(durations: Sequence[float], samples: int, calls: int, warmup: int = 0) -> list[float] | None:
    """Per-call GPU seconds of each of `samples` consecutive groups of `calls` calls, from the
    device durations of `warmup` untimed groups followed by the timed ones, in start order.

    Every call of one case launches the same sequence of device activities (k of them), so the
    timed part is the last `samples * calls * k` records. Records may be missing from the head of
    the trace (a profiler session can drop its first records): k is inferred as the smallest count
    that fits, which is right while fewer than `(samples + warmup) * calls` records are missing;
    if the inferred loss reaches past the warm-up groups, or there is a loss and no warm-up, the
    grouping is unknown: None, and the caller measures another way.
    """
    if samples < 1 or calls < 1 or warmup < 0:
        raise ValueError(f"samples and calls must be >= 1 and warmup >= 0, got {samples}, {calls}, {warmup}")
    n = len(durations)
    groups = samples + warmup
    if n == 0:
        return None
    per_call = -(-n // (groups * calls))  # ceil: the head may have lost records
    missing = groups * calls * per_call - n
    if missing > warmup * calls * per_call:
        return None  # lost records would reach the timed groups (or there is no warm-up to lose them in)
    per_sample = calls * per_call
    timed = durations[n - samples * per_sample :]
    return [sum(timed[j * per_sample : (j + 1) * per_sample]) / calls for j in range(samples)]


def rotating_sets(make: Callable[[int], Sequence[Any]], bytes_per_set: int, l2_bytes: int, max_sets: int = 16) -> list:
    """Enough independent input sets that cycling through them streams at least 2x the L2 cache.

    Args:
        make: builds input set number i.
        bytes_per_set: device bytes of one set.
        l2_bytes: the GPU's L2 size.
        max_sets: upper bound on sets (memory).

    Returns:
        List of input sets (at least 2).
    """
    if bytes_per_set <= 0:
        raise ValueError(f"bytes_per_set must be > 0, got {bytes_per_set}")
    n = min(max_sets, max(2, -(-2 * l2_bytes // bytes_per_set)))
    return [make(i) for i in range(n)]
