"""The exact tier: structural figures that decide GPU performance, measured without a GPU and without
noise, the same value on every run and machine (for one commit and one torch/Triton/timm).

- `Launches`: the kernels, device copies and memsets one captured forward launches on CUDA, per model x
  forward (dense, each pruner on the triton backend, and on the FA2-varlen and padded-SDPA baselines) x mode
  (graph: the forward captured once; fused: `fused_blocks=True`, captured) x batch, counted on the CPU
  (`launch_count`). Compiled forwards are not counted: inductor generates and fuses their kernels on the
  device it compiles for, which a CPU process cannot stand in for.
- `KeptTokens` and `Flops`: what each pruner keeps after every stage on scikit-image's photos with seeded
  weights, the attention and linear FLOPs that leaves, and the FLOP ratio to dense (`token_flops`).
- `KernelResources`: every shipping Triton kernel x config x architecture (sm_80, sm_89, sm_90): registers,
  spilled bytes, shared memory, programs per SM, and static SASS instructions by class (`kernel_resources`).

Every `track_*` here declares `exact = True` (`benchmarks.declare`): the service compares such a series
without noise thresholds or sampling statistics (a change of any size is a change) and names the commit
where its value moved. Each class measures its whole grid in one `setup_cache`, in a process of its own
(`structure_worker.py`: Triton's interpreter for the launch counts, no interpreter for the compiles).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from . import declare, model_runs, structure_worker
from .kernel_slots import KERNEL_SLOTS

WORKER = Path(__file__).with_name("structure_worker.py")
ARCHS = ["sm_80", "sm_89", "sm_90"]
STAGES = [str(s) for s in range(1, 10)]  # ATS prunes in 9 blocks, the others in 3


def run_worker(what: str, timeout: float) -> dict[str, Any]:
    """Run `structure_worker.py what` in a fresh process of this interpreter and return its JSON.

    The child sees the library this process would import (its folder first on PYTHONPATH: asv's checkout
    of the commit, or the checkout a tool runs in), no GPU (CUDA_VISIBLE_DEVICES=""), and Triton's
    interpreter for the launch counts only.

    Raises:
        NotImplementedError: the library is not importable here (skips every point).
        RuntimeError: the worker failed (every point fails).
    """
    import importlib.util

    spec = importlib.util.find_spec("pruners")
    if spec is None or spec.origin is None:
        raise NotImplementedError("pruners is not importable here")
    library = str(Path(spec.origin).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (library, os.environ.get("PYTHONPATH")) if p),
           "CUDA_VISIBLE_DEVICES": ""}
    if what == "kernels":
        env.pop("TRITON_INTERPRET", None)
    else:
        env["TRITON_INTERPRET"] = "1"
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / f"{what}.json"
        proc = subprocess.run([sys.executable, str(WORKER), what, "--out", str(out)], env=env, cwd=tmp,
                              capture_output=True, text=True, timeout=timeout)  # fmt: skip
        if proc.returncode != 0 or not out.is_file():
            tail = (proc.stderr or proc.stdout).strip()[-2000:]
            raise RuntimeError(f"structure_worker {what} exited {proc.returncode}: {tail}")
        return json.loads(out.read_text())


def _entry(cache: dict[str, Any], key: str) -> Any:
    """The cache's value for `key`; NotImplementedError (skip) or RuntimeError (fail) as it says."""
    return model_runs.entry_values(cache, key, "value")


def _exact(fn, unit: str, direction: str):
    """Declare a track method's unit, direction and exactness (`benchmarks.declare`)."""
    fn.unit = unit
    fn.direction = direction
    fn.exact = declare.EXACT
    return fn


class Launches:
    """Launches per captured forward (kernels + device copies + memsets), and each kind apart."""

    params = [list(structure_worker.MODELS), structure_worker.FORWARDS, structure_worker.MODES,
              structure_worker.BATCHES]
    param_names = ["model", "forward", "mode", "batch"]
    version = "1"
    timeout = 900

    def setup_cache(self) -> dict[str, Any]:
        return run_worker("launches", self.timeout)

    def setup(self, cache, model, forward, mode, batch) -> None:
        self.kinds = _entry(cache, "|".join((model, forward, mode, batch)))

    def track_launches(self, cache, model, forward, mode, batch) -> int:
        return sum(self.kinds.values())

    def track_kernels(self, cache, model, forward, mode, batch) -> int:
        return self.kinds["kernel"]

    def track_memcpys(self, cache, model, forward, mode, batch) -> int:
        return self.kinds["memcpy"]

    def track_memsets(self, cache, model, forward, mode, batch) -> int:
        return self.kinds["memset"]

    _exact(track_launches, "launches", declare.LOWER)
    _exact(track_kernels, "kernels", declare.LOWER)
    _exact(track_memcpys, "memcpys", declare.LOWER)
    _exact(track_memsets, "memsets", declare.LOWER)


def _tokens_cache(self) -> dict[str, Any]:
    """One token measurement for `KeptTokens` and `Flops` (asv keys a setup_cache by its function's module
    and line, so both classes share this one)."""
    return run_worker("tokens", 600)


class KeptTokens:
    """Tokens after each pruning stage, summed over the 7 photos (the class token and EViT's fused token
    included: the rows the next blocks run on)."""

    params = [list(structure_worker.MODELS), list(structure_worker.PRUNERS), STAGES]
    param_names = ["model", "pruner", "stage"]
    version = "1"
    timeout = 600
    setup_cache = _tokens_cache

    def setup(self, cache, model, pruner, stage) -> None:
        kept = _entry(cache, f"{model}|{pruner}")["kept"]
        if int(stage) > len(kept):
            raise NotImplementedError(f"{pruner} has {len(kept)} stages")
        self.kept = kept[int(stage) - 1]

    def track_kept_tokens(self, cache, model, pruner, stage) -> int:
        return self.kept

    _exact(track_kept_tokens, "tokens", declare.LOWER)


class Flops:
    """FLOPs per forward of the 7 photos (the blocks' linear layers and attention, `token_flops.flop_parts`)
    and dense's FLOPs over the pruned forward's; the pruner's declared decisions version."""

    params = [list(structure_worker.MODELS), ["dense", *structure_worker.PRUNERS]]
    param_names = ["model", "pruner"]
    version = "1"
    timeout = 600
    setup_cache = _tokens_cache

    def setup(self, cache, model, pruner) -> None:
        self.value = _entry(cache, f"{model}|{pruner}")

    def track_attention_flops(self, cache, model, pruner) -> float:
        return self.value["attention"]

    def track_linear_flops(self, cache, model, pruner) -> float:
        return self.value["linear"]

    def track_flop_ratio(self, cache, model, pruner) -> float:
        return self.value["ratio"]

    def track_decisions_version(self, cache, model, pruner) -> float:
        """`Pruner.decisions_version`: bumped by a change that means to change the pruner's decisions
        (the kept-token gate passes a change of kept tokens only with a bump); NaN for dense and at
        commits before the attribute."""
        version = self.value.get("version")
        return math.nan if version is None else float(version)

    _exact(track_attention_flops, "FLOP", declare.LOWER)
    _exact(track_linear_flops, "FLOP", declare.LOWER)
    _exact(track_flop_ratio, "x dense", declare.HIGHER)
    _exact(track_decisions_version, "version", declare.HIGHER)


class KernelResources:
    """Per shipping Triton compilation (`kernel_resources`: its slot, e.g. `ragged_linear gelu=False norm #0`)
    and architecture: registers, spilled bytes, shared memory, programs per SM, SASS instructions by class."""

    params = [list(KERNEL_SLOTS), ARCHS]
    param_names = ["kernel", "arch"]
    version = "1"
    timeout = 1200

    def setup_cache(self) -> dict[str, Any]:
        return run_worker("kernels", self.timeout)

    def setup(self, cache, kernel, arch) -> None:
        if "skip" in cache:
            raise NotImplementedError(cache["skip"])
        if "error" in cache:
            raise RuntimeError(cache["error"])
        got = cache["value"].get(arch, {}).get(kernel)
        if got is None:
            raise NotImplementedError(f"no {kernel} compilation for {arch} at this commit")
        if "error" in got:
            raise RuntimeError(f"{got.get('name', kernel)} on {arch}: {got['error']}")
        self.r = got

    def track_registers(self, cache, kernel, arch) -> int:
        return self.r["registers"]

    def track_spilled_bytes(self, cache, kernel, arch) -> int:
        return self.r["spill_bytes"]

    def track_shared_bytes(self, cache, kernel, arch) -> int:
        return self.r["shared_bytes"]

    def track_programs_per_sm(self, cache, kernel, arch) -> int:
        return self.r["programs_per_sm"]

    def track_sass_mma(self, cache, kernel, arch) -> int:
        return self.r["mma"]

    def track_sass_global_loads(self, cache, kernel, arch) -> int:
        return self.r["global_loads"]

    def track_sass_global_stores(self, cache, kernel, arch) -> int:
        return self.r["global_stores"]

    def track_sass_shared_loads(self, cache, kernel, arch) -> int:
        return self.r["shared_loads"]

    def track_sass_shared_stores(self, cache, kernel, arch) -> int:
        return self.r["shared_stores"]

    def track_sass_other(self, cache, kernel, arch) -> int:
        return self.r["other"]

    _exact(track_registers, "registers", declare.LOWER)
    _exact(track_spilled_bytes, "spilled bytes", declare.LOWER)
    _exact(track_shared_bytes, "shared bytes", declare.LOWER)
    _exact(track_programs_per_sm, "programs/SM", declare.HIGHER)
    for _m in (track_sass_mma, track_sass_global_loads, track_sass_global_stores, track_sass_shared_loads,
               track_sass_shared_stores, track_sass_other):
        _exact(_m, "instructions", declare.LOWER)
    del _m
