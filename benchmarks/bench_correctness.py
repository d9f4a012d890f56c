"""Correctness as tracked values: a speed-up that breaks the numbers must show on the dashboard.

- `ModelCorrectness`: max |logit diff| ("max abs diff", lower is better) and top-1 agreement
  ("top-1 agreement", fraction of images, higher is better) of each backend's pruned model
  against the same model and pruner with the `padded_sdpa` backend (fused SDPA over the padded
  batch: the reference pipeline, as in the paper's Table VI), fp16, same seeded weights and images,
  the reference replaying the keep decisions the checked backend took (the kernels compared under
  the same decisions). Without the replay, a pruner whose decisions depend on attention values (ATS's
  inverse-transform sampling, EViT's top-k) can flip a token on a rounding difference, and the logit
  difference then measures the flip, not the kernel (seen on the H200 on 2026-11-29: ATS on DeiT-S,
  0.0095 with its own decisions, against 0.0017 before a change of the kernel's summation order).
  `python -m tools.check_grid` reports whether the decisions themselves agreed.
- `KernelError`: max |error| of each attention backend on fp16 inputs against the fp32 oracle
  `ragged_kernels.attention.naive.ragged_attention_ref`.
Both are computed once per commit in `setup_cache` (see `model_runs`).
"""

from __future__ import annotations

import math

from . import declare, model_runs, timing
from .presets import ATTENTION_BACKENDS, ATTENTION_PRESETS, PRUNERS

REFERENCE_BACKEND = "padded_sdpa"
CHECKED_BACKENDS = ["triton", "fa2_varlen", "nested_sdpa"]
MODELS = ["deit_small_patch16_224", "deit_base_patch16_384"]
N_IMAGES = 8


def model_matrix(models: list[str], pruners: list[str], backends: list[str]) -> dict:
    """Logit differences and top-1 agreement against the reference backend, per model x pruner x backend.

    Args:
        models: timm model names.
        pruners: pruner names.
        backends: backends to check.

    Returns:
        `{"model|pruner|backend": entry}` with values max_abs_diff and top1_agreement.
    """
    try:
        torch = timing.require_cuda()
    except NotImplementedError as exc:
        return {"_global": {"skip": str(exc)}}
    from .gpu_env import write_for_asv_run

    write_for_asv_run()
    results: dict = {}
    for model_name in models:
        resolution = int(model_name.rsplit("_", 1)[1])
        x = model_runs.images(torch, N_IMAGES, resolution).half()
        for pruner in pruners:
            ref_entry: dict = {}

            def reference(model_name=model_name, pruner=pruner, x=x, ref_entry=ref_entry) -> dict:
                model = model_runs.build_model(torch, model_name, pruner, REFERENCE_BACKEND, torch.float16)
                with torch.inference_mode():
                    ref_entry["logits"] = model(x).float()
                ref_entry["model"] = model
                return {}

            model_runs.guarded(results, "_ref", reference)
            ref_status = results.pop("_ref")
            for backend in backends:
                key = model_runs.key_of((model_name, pruner, backend))
                if "values" not in ref_status:
                    results[key] = ref_status  # the reference is missing: so is every comparison
                    continue

                def compare(model_name=model_name, pruner=pruner, backend=backend, x=x, ref_entry=ref_entry) -> dict:
                    model = model_runs.build_model(torch, model_name, pruner, backend, torch.float16)
                    return compare_with_reference(torch, model, ref_entry, x)

                model_runs.guarded(results, key, compare)
            ref_entry.clear()  # frees the reference model
            torch.cuda.empty_cache()
    return results


def compare_with_reference(torch, model, ref_entry: dict, x) -> dict:
    """Logits of `model` against the reference model replaying `model`'s keep decisions.

    Args:
        torch: the torch module.
        model: the checked pruned model (fp16, GPU).
        ref_entry: the reference's "model" and its own "logits".
        x: the images.

    Returns:
        max_abs_diff and top1_agreement against the replayed reference (against the reference's own
        logits at commits whose models cannot replay decisions).
    """
    ref_model = ref_entry["model"]
    replay = hasattr(ref_model, "keep_override")  # older commits: no replay, own decisions
    if replay:
        model.record = True
    with torch.inference_mode():
        logits = model(x).float()
        if replay:
            ref_model.keep_override = [k.clone() for k in model.recorded_keeps]
            try:
                ref = ref_model(x).float()
            finally:
                ref_model.keep_override = None
        else:
            ref = ref_entry["logits"]
    return {
        "max_abs_diff": (logits - ref).abs().max().item(),
        "top1_agreement": (logits.argmax(-1) == ref.argmax(-1)).float().mean().item(),
    }


def kernel_matrix(presets: list[str], backends: list[str]) -> dict:
    """Max |error| of each attention backend (fp16 inputs) against the fp32 oracle.

    Args:
        presets: ATTENTION_PRESETS names.
        backends: ATTENTION_BACKENDS keys.

    Returns:
        `{"preset|backend": entry}` with value max_abs_error.
    """
    try:
        torch = timing.require_cuda()
    except NotImplementedError as exc:
        return {"_global": {"skip": str(exc)}}
    from .bench_attention import make_qkv

    results: dict = {}
    for preset_name in presets:
        p = ATTENTION_PRESETS[preset_name]
        for backend in backends:

            def compute(p=p, backend=backend) -> dict:
                oracle = timing.require_attr("ragged_kernels.attention.naive", "ragged_attention_ref")
                table = timing.require_attr("ragged_kernels", "ATTENTION_BACKENDS")
                if backend not in table:
                    raise NotImplementedError(f"attention backend {backend!r} absent at this commit")
                q, k, v, cu = make_qkv(torch, p, "cuda", torch.float16, seed=11)
                out = table[backend](q, k, v, cu, p.tokens).float()
                ref = oracle(q.float(), k.float(), v.float(), cu, p.tokens).float()
                return {"max_abs_error": (out - ref).abs().max().item()}

            model_runs.guarded(results, model_runs.key_of((preset_name, backend)), compute)
    return results


def checked(value: float, what: str) -> float:
    """A correctness value as asv should record it: asv stores a NaN result as skipped, which reads
    like "does not apply here"; a check whose number is NaN or infinite raises instead, so that asv
    records a failure and the gates fail it (a check that did not run is not a pass)."""
    if not math.isfinite(value):
        raise FloatingPointError(f"{what} is {value!r}: the check produced no number")
    return value


class _ModelCorrectnessBase:
    param_names = ["model", "pruner", "backend"]
    version = "2"  # 2: the reference replays the checked backend's keep decisions
    rounds = 1  # deterministic values: a second round (another setup_cache per commit in a PR job) adds nothing

    def setup(self, cache: dict, model: str, pruner: str, backend: str) -> None:
        key = model_runs.key_of((model, pruner, backend))
        self.max_abs_diff = model_runs.lookup(cache, key, "max_abs_diff")
        self.top1 = model_runs.lookup(cache, key, "top1_agreement")

    def track_max_abs_logit_diff(self, cache: dict, model: str, pruner: str, backend: str) -> float:
        return checked(self.max_abs_diff, "max |logit diff|")

    track_max_abs_logit_diff.unit = "max abs diff"
    track_max_abs_logit_diff.direction = declare.LOWER

    def track_top1_agreement(self, cache: dict, model: str, pruner: str, backend: str) -> float:
        return checked(self.top1, "top-1 agreement")

    track_top1_agreement.unit = "top-1 agreement"
    track_top1_agreement.direction = declare.HIGHER


class ModelCorrectness(_ModelCorrectnessBase):
    """End-to-end logits of every backend vs the padded-SDPA reference pipeline (full suite)."""

    params = (MODELS, PRUNERS, CHECKED_BACKENDS)

    def setup_cache(self) -> dict:  # in the class body: asv keys setup_cache on its source line
        return model_matrix(*self.params)

    setup_cache.timeout = 600


class ModelCorrectnessPR(_ModelCorrectnessBase):
    """The quick PR subset's correctness gate: DeiT-S at 224², every pruner and checked backend.

    The full class adds DeiT-B/384 (the 577-token kernel bucket, which KernelError's 384 preset also
    covers at the kernel level); its setup_cache was the largest piece of the quick subset (over 47 s
    on the H200, 2026-11-29), mostly building and running the 384 models.
    """

    params = (MODELS[:1], PRUNERS, CHECKED_BACKENDS)

    def setup_cache(self) -> dict:  # in the class body: asv keys setup_cache on its source line
        return model_matrix(*self.params)

    setup_cache.timeout = 300


class KernelError:
    """Attention output error against the fp32 oracle, per shape preset x backend."""

    params = (["deitb224-b8-keep0.5", "deitb384-b8-keep0.5", "deitb224-b32-keep0.5-uniform"], ATTENTION_BACKENDS)
    param_names = ["preset", "backend"]
    version = "1"
    rounds = 1  # deterministic values, as ModelCorrectness

    def setup_cache(self) -> dict:
        return kernel_matrix(*self.params)

    setup_cache.timeout = 300

    def setup(self, cache: dict, preset: str, backend: str) -> None:
        self.error = model_runs.lookup(cache, model_runs.key_of((preset, backend)), "max_abs_error")

    def track_max_abs_error(self, cache: dict, preset: str, backend: str) -> float:
        return checked(self.error, "max |attention error|")

    track_max_abs_error.unit = "max abs diff"
    track_max_abs_error.direction = declare.LOWER
