"""End to end: throughput, serving latency and peak GPU memory of pruned DeiTs, per model x pruner x
backend x mode, against the dense model at its fastest.

The whole matrix is measured once per commit inside `setup_cache` (one process: one torch
import, one CUDA context), then each parameter's process only reads its numbers; spawning one
torch process per point would cost more than the measurements.

Modes: "eager"; "graph", the whole forward captured once as a CUDA graph and replayed (padded_sdpa
padded to the captured capacity, built with `graph=True`: from 2026-12-01 on); "compile",
`torch.compile` of the forward, then captured the same way (`build_pruned_model(graph=True,
compile=True)`, from 2026-12-01 on; timed for `triton` and `dense` only, each compile costs ~10 s
on the H200); "fused", every block as five launches with its norms, GELU and residual adds fused into
the linear layers, captured the same way (`build_pruned_model(graph=True, fused_blocks=True)`, from
2026-12-04 on; `triton` and `dense` only). "dense" is the unpruned model: the same value is reported
under every pruner, as that pruner's reference line; its fastest mode is what a pruned series is to be
compared with, not its eager one.

`time_forward` hands asv the 30 synchronised forwards of each case (host dispatch included: at
serving batch sizes it is the bottleneck), one per call (`_replay`), so a throughput change has
samples on both sides for asv's Mann-Whitney test and the service's A/B verdicts; images/s is the
preset's batch / this time. `track_latency_p50` / `track_latency_p99` are the percentiles of 1,000
synchronised forwards at the serving presets (batch <= 4); `track_compile_seconds` is a compiled
case's first call (tracing, compiling, capture).
"""

from __future__ import annotations

import time

from . import _replay, declare, model_runs, timing
from .presets import MODEL_BACKENDS, MODEL_PRESETS, PRUNERS

MODES = ["eager", "graph", "compile", "fused"]
PR_MODES = ["eager", "graph"]  # the quick PR subset: two compiles per round and commit would add ~40 s to a PR job
COMPILED_BACKENDS = frozenset({"triton", "dense"})
FUSED_BACKENDS = frozenset({"triton", "dense"})  # tools.bench_e2e --fused times the other backends fused too
LATENCY_CALLS = 1000  # synchronised forwards for the latency percentiles
LATENCY_MAX_BATCH = 4  # serving presets only


def _runner(torch, p, pruner: str, backend: str, mode: str, x, eager):
    """(one forward of the case, its compile seconds or None); NotImplementedError where the library at
    this commit cannot run the mode."""
    if mode == "eager":
        return (lambda: eager(x)), None
    if mode == "graph" and backend not in BUILT_CAPTURED:
        return model_runs.forward_runner(torch, eager, x, graph=True), None
    if mode == "compile" and backend not in COMPILED_BACKENDS:
        raise NotImplementedError(f"compile is timed for {sorted(COMPILED_BACKENDS)} only (suite time)")
    if mode == "fused" and backend not in FUSED_BACKENDS:
        raise NotImplementedError(f"fused is timed for {sorted(FUSED_BACKENDS)} only (suite time)")
    build_pruned_model = timing.require_attr("pruners", "build_pruned_model")
    opts = {"graph": True, **({"compile": True} if mode == "compile" else {}),
            **({"fused_blocks": True} if mode == "fused" else {})}
    try:
        model = build_pruned_model(p.model, model_runs.bound_pruner(p.model, pruner), backend, seed=0, **opts)
    except (TypeError, ValueError) as exc:  # unknown option / not capturable at this commit
        raise NotImplementedError(f"{backend} {mode} not supported at this commit: {exc}") from exc
    model = model.to(device="cuda", dtype=torch.float16).eval()
    t0 = time.perf_counter()
    model(x)  # capture (and compile)
    torch.cuda.synchronize()
    return (lambda: model(x)), (time.perf_counter() - t0 if mode == "compile" else None)


# graph mode of these is built by the library (padded to the capacity), not captured from the eager model
BUILT_CAPTURED = frozenset({"padded_sdpa"})


def measure_matrix(presets: list[str], pruners: list[str], backends: list[str], modes: list[str]) -> dict:
    """Measure images/s and peak bytes for every combination (see module docstring).

    Args:
        presets: MODEL_PRESETS names.
        pruners: pruner names.
        backends: backend names.
        modes: "eager" and/or "graph".

    Returns:
        `{key: entry}` as described in `model_runs`; key = "preset|pruner|backend|mode".
    """
    results: dict = {}
    seconds: dict[str, float] = {}
    t0 = time.perf_counter()
    try:
        torch = timing.require_cuda()
    except NotImplementedError as exc:
        return {"_global": {"skip": str(exc)}}
    from .gpu_env import write_for_asv_run

    write_for_asv_run()
    timing.warm_up_device(torch)
    label = f"end-to-end matrix ({len(presets)} presets)"
    # The 3-preset matrix took 470 s on one H100 with no line between its start and its summary
    # (2026-12-05): one line per case says where it is and which case is slow.
    total = len(presets) * len(modes) * sum(1 if backend == "dense" else len(pruners) for backend in backends)
    done = 0
    for preset_name in presets:
        p = MODEL_PRESETS[preset_name]
        x = model_runs.images(torch, p.batch, p.resolution).half()
        for backend in backends:
            for pruner in pruners[:1] if backend == "dense" else pruners:
                try:
                    model = model_runs.build_model(torch, p.model, pruner, backend, torch.float16)
                except NotImplementedError as exc:
                    for mode in modes:
                        results[model_runs.key_of((preset_name, pruner, backend, mode))] = {"skip": str(exc)}
                    done += len(modes)  # cases that cannot be built count as done: the numbering reaches total
                    continue
                except Exception as exc:  # noqa: BLE001 - recorded per entry below
                    for mode in modes:
                        results[model_runs.key_of((preset_name, pruner, backend, mode))] = {"error": repr(exc)}
                    done += len(modes)
                    continue
                for mode in modes:

                    def compute(model=model, mode=mode, backend=backend, pruner=pruner, x=x, p=p) -> dict:
                        if mode != "eager" and backend in NOT_CAPTURABLE:
                            raise NotImplementedError(f"{backend} cannot be captured as a CUDA graph")
                        with torch.inference_mode():
                            run, compile_s = _runner(torch, p, pruner, backend, mode, x, model)
                            ips, peak, times = model_runs.images_per_s_and_peak(torch, run, p.batch, reps=FORWARDS)
                            out = {"images_per_s": ips, "peak_bytes": peak, "time_forward": times}
                            if p.batch <= LATENCY_MAX_BATCH:
                                lat = timing.synced_calls(torch, run, LATENCY_CALLS)
                                out["latency_p50"] = timing.percentile(lat, 50)
                                out["latency_p99"] = timing.percentile(lat, 99)
                        if compile_s is not None:
                            out["compile_seconds"] = compile_s
                            torch.compiler.reset()  # dynamo's recompile limit: every case compiles anew
                        return out

                    key = model_runs.key_of((preset_name, pruner, backend, mode))
                    model_runs.guarded(results, key, compute, seconds)
                    done += 1
                    model_runs.report_case(label, done, total, key, seconds[key])
                del model
                torch.cuda.empty_cache()
            if backend == "dense":
                for pruner in pruners[1:]:
                    for mode in modes:
                        k0 = model_runs.key_of((preset_name, pruners[0], backend, mode))
                        results[model_runs.key_of((preset_name, pruner, backend, mode))] = results[k0]
    model_runs.report_setup(label, seconds, time.perf_counter() - t0)
    return results


NOT_CAPTURABLE = model_runs.NOT_CAPTURABLE
FORWARDS = 30  # timed forwards per point: >= rounds x repeat of every class below


class _EndToEndBase(_replay.Replayed):
    param_names = ["preset", "pruner", "backend", "mode"]
    # 2: each case warms up for WARMUP_S of its own forwards (was 5 forwards). Unchanged by the modes and
    # measures added on 2026-12-01: the existing series measure what they measured.
    version = "2"

    def track_peak_memory(self, cache: dict, preset: str, pruner: str, backend: str, mode: str) -> float:
        return float(self.samples["peak_bytes"])

    track_peak_memory.unit = "bytes"
    track_peak_memory.direction = declare.LOWER

    def time_forward(self, cache: dict, preset: str, pruner: str, backend: str, mode: str) -> None:
        """Seconds per synchronised forward of the preset's batch (images/s = batch / this)."""
        self.replay("time_forward", preset, pruner, backend, mode)


class EndToEnd(_EndToEndBase):
    """Full matrix (every commit on the GPU runner).

    One round: `asv run` computes setup_cache once per commit, so a second round would only re-read
    it (102 more processes at ~0.5 s); the history compares commits, not rounds.
    """

    params = (["deits224-b1", "deitb224-b32", "deitb384-b8"], PRUNERS, MODEL_BACKENDS, MODES)
    rounds = 1
    repeat = 20

    def setup_cache(self) -> dict:
        return measure_matrix(*self.params)

    setup_cache.timeout = 900

    def _value(self, name: str) -> float:
        if name not in self.samples:
            what = ("a compiled case's" if name == "compile_seconds"
                    else f"a serving preset's (batch <= {LATENCY_MAX_BATCH})")
            raise NotImplementedError(f"{name} is {what} only")
        return float(self.samples[name])

    def track_latency_p50(self, cache: dict, preset: str, pruner: str, backend: str, mode: str) -> float:
        """Median seconds of one synchronised forward over 1,000 (serving presets)."""
        return self._value("latency_p50")

    track_latency_p50.unit = "seconds"
    track_latency_p50.direction = declare.LOWER

    def track_latency_p99(self, cache: dict, preset: str, pruner: str, backend: str, mode: str) -> float:
        """99th percentile seconds of one synchronised forward over 1,000 (serving presets)."""
        return self._value("latency_p99")

    track_latency_p99.unit = "seconds"
    track_latency_p99.direction = declare.LOWER

    def track_compile_seconds(self, cache: dict, preset: str, pruner: str, backend: str, mode: str) -> float:
        """Seconds of a compiled case's first call: tracing, compiling and capturing."""
        return self._value("compile_seconds")

    track_compile_seconds.unit = "seconds"
    track_compile_seconds.direction = declare.LOWER


class EndToEndPR(_EndToEndBase):
    """Quick PR subset: DeiT-S at serving batch 32, truly ragged pruner, the kernel vs the best baselines.

    Two rounds of 10: in a PR job asv computes setup_cache per round and commit, interleaved, so
    drift over the job reaches base and head alike.
    """

    params = (["deits224-b32"], ["threshold_l2"], ["triton", "fa2_varlen", "padded_sdpa", "dense"], PR_MODES)
    rounds = 2
    repeat = 10

    def setup_cache(self) -> dict:
        return measure_matrix(*self.params)

    setup_cache.timeout = 300
