"""End to end: throughput and peak GPU memory of pruned DeiTs, per model x pruner x backend x batch x resolution x mode.

The whole matrix is measured once per commit inside `setup_cache` (one process: one torch
import, one CUDA context), then each parameter's process only reads its numbers; spawning one
torch process per point would cost more than the measurements.

`time_forward` hands asv the 30 synchronised forwards of each case (host dispatch included: at
serving batch sizes it is the bottleneck), one per call (`_replay`), so a throughput change has
samples on both sides: asv's Mann-Whitney test in `asv continuous` and the service's A/B verdicts
can judge it. images/s is the preset's batch / this time. (Until session 5 a `track_images_per_s`
reported the same quantity as one number per commit, which neither test can judge, so PR comments
showed it as "too few samples"; it also cost ~50 s of process spawns per full run. Removed.)
"graph" captures the whole forward once as a CUDA graph and replays it. "dense" is the unpruned
model: the same value is reported under every pruner, as that pruner's reference line.
"""

from __future__ import annotations

import time

from . import _models, _replay, timing
from .presets import MODEL_BACKENDS, MODEL_PRESETS, PRUNERS

MODES = ["eager", "graph"]


def measure_matrix(presets: list[str], pruners: list[str], backends: list[str], modes: list[str]) -> dict:
    """Measure images/s and peak bytes for every combination (see module docstring).

    Args:
        presets: MODEL_PRESETS names.
        pruners: pruner names.
        backends: backend names.
        modes: "eager" and/or "graph".

    Returns:
        `{key: entry}` as described in `_models`; key = "preset|pruner|backend|mode".
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
    for preset_name in presets:
        p = MODEL_PRESETS[preset_name]
        x = _models.images(torch, p.batch, p.resolution).half()
        for backend in backends:
            for pruner in pruners[:1] if backend == "dense" else pruners:
                try:
                    model = _models.build_model(torch, p.model, pruner, backend, torch.float16)
                except NotImplementedError as exc:
                    for mode in modes:
                        results[_models.key_of((preset_name, pruner, backend, mode))] = {"skip": str(exc)}
                    continue
                except Exception as exc:  # noqa: BLE001 - recorded per entry below
                    for mode in modes:
                        results[_models.key_of((preset_name, pruner, backend, mode))] = {"error": repr(exc)}
                    continue
                for mode in modes:

                    def compute(model=model, mode=mode, backend=backend, x=x, batch=p.batch) -> dict:
                        if mode == "graph" and backend in NOT_CAPTURABLE:
                            raise NotImplementedError(f"{backend} cannot be captured as a CUDA graph")
                        with torch.inference_mode():
                            run = _models.forward_runner(torch, model, x, graph=mode == "graph")
                            ips, peak, times = _models.images_per_s_and_peak(torch, run, batch, reps=FORWARDS)
                        return {"images_per_s": ips, "peak_bytes": peak, "time_forward": times}

                    _models.guarded(results, _models.key_of((preset_name, pruner, backend, mode)), compute, seconds)
                del model
                torch.cuda.empty_cache()
            if backend == "dense":
                for pruner in pruners[1:]:
                    for mode in modes:
                        k0 = _models.key_of((preset_name, pruners[0], backend, mode))
                        results[_models.key_of((preset_name, pruner, backend, mode))] = results[k0]
    _models.report_setup(f"end-to-end matrix ({len(presets)} presets)", seconds, time.perf_counter() - t0)
    return results


NOT_CAPTURABLE = _models.NOT_CAPTURABLE
FORWARDS = 30  # timed forwards per point: >= rounds x repeat of every class below


class _EndToEndBase(_replay.Replayed):
    param_names = ["preset", "pruner", "backend", "mode"]
    version = "2"  # 2: each case warms up for WARMUP_S of its own forwards (was 5 forwards)

    def track_peak_memory(self, cache: dict, preset: str, pruner: str, backend: str, mode: str) -> float:
        return float(self.samples["peak_bytes"])

    track_peak_memory.unit = "bytes"

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


class EndToEndPR(_EndToEndBase):
    """Quick PR subset: DeiT-S at serving batch 32, truly ragged pruner, the kernel vs the best baselines.

    Two rounds of 10: in a PR job asv computes setup_cache per round and commit, interleaved, so
    drift over the job reaches base and head alike.
    """

    params = (["deits224-b32"], ["threshold_l2"], ["triton", "fa2_varlen", "padded_sdpa", "dense"], MODES)
    rounds = 2
    repeat = 10

    def setup_cache(self) -> dict:
        return measure_matrix(*self.params)

    setup_cache.timeout = 300
