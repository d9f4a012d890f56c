"""`ForwardOptions`: how a `PrunedDeiT` forward runs, as one typed record, and every check of its flags.

`PrunedDeiT` takes its flags (exact capacity, packer, ragged linear layers, sync-free shapes, fused blocks)
as this record instead of as keywords; `build_pruned_model` derives one from its `BuildOptions`
(`BuildOptions.forward_options`). The combinations that exclude each other whatever the backend are
refused on construction; what depends on the backend is checked by `for_backend` (what the model runs)
and `check_capture` (what graph mode and torch.compile take).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from pruners.backends import check_capturable
from pruners.packing import PACKERS

_FLAGS = ("exact_capacity", "ragged_linear", "sync_free", "fused_blocks", "gelu_epilogue")
# The backends whose attention reads the batch's longest kept length back to the host unless built
# sync-free (`pruners.layers.attention_fn`): they are captured or compiled only with sync_free=True.
_SYNC_FREE_ONLY = ("padded_sdpa",)


@dataclass(frozen=True)
class ForwardOptions:
    """The flags of a `PrunedDeiT` forward; the defaults are the plain eager forward. Checked on
    construction (TypeError/ValueError), except what depends on the backend (`for_backend`, which
    `PrunedDeiT` calls, and `check_capture`, which graph mode and the compiled forward call).

    Attributes:
        exact_capacity: eager only: after each stage read the kept total and longest image back to
            the host (one sync per stage) and size the packed buffer exactly.
        packer: "ragged_kernels" (the library's pack_tokens) or "torch"; None: torch for the reference
            backend, ragged_kernels otherwise (`for_backend` fills it in). Packing is exact data
            movement, so the choice never changes results.
        ragged_linear: experimental: on packed tokens, run qkv, proj and the MLP (fc1 with its GELU
            fused) through `ragged_kernels.linear.ragged_linear`, and the blocks' LayerNorms through
            `ragged_layer_norm`, which skip the capacity rows past `cu_seqlens[-1]` on the device
            instead of computing them (graph mode at the kept size).
            Padding rows then hold uninitialised values, which the packed layout never reads into a
            valid row. Opt-in: on the H200 it paid for Threshold-L2 only, and since Threshold-L2's batch
            budget it pays for none (2026-11-29, docs/performance.md "Opt-in paths"): cuBLAS on the tighter
            buffer is 6-7% faster. Not with the dense backend (no packed tokens), nor compiled.
        sync_free: every shape from host ints, for CUDA-graph capture and torch.compile: the only
            backend this changes is padded_sdpa, which then pads to the capacity bound instead of
            reading the batch's longest kept length back (the others never read anything back). Needs
            a capturable backend (`CAPTURABLE_BACKENDS`); excludes exact_capacity.
        fused_blocks: every block as five launches with the LayerNorms, GELU and residual adds fused into the
            linear layers, and the head as one (`pruners.fused`), the blocks before the first stage included
            (on the dense batch as rows with uniform segments; `dense` then attends with the library's
            kernel). For serving batches, where the forward is a chain of small launches. Not with
            ragged_linear (its unfused form); compiled, the fused layers stay custom ops and inductor fuses
            what lies between them (embedding, the stages' bookkeeping).
        gelu_epilogue: on packed tokens of a CUDA fp16/bf16 model, each plain MLP's fc1 and GELU as one
            cuBLASLt GEMM with its GELU epilogue (`torch._addmm_activation`), instead of cuBLAS then a
            GELU kernel reading and writing the 4x-wide intermediate again. cuBLASLt's GELU is the tanh
            form, not timm's exact one; in fp16 their difference is within rounding (largest difference
            from fp32 exact GELU 0.00201 against the exact fp16 path's 0.00206, one H100, 2026-12-06,
            `python -m tools.bench_ragged_linear --epilogue`). Elsewhere (CPU, fp32, the dense layout)
            the MLP runs as before. Not with ragged_linear or fused_blocks, which fuse fc1 and GELU
            themselves. torch.compile keeps the op (inductor's fallback for it), so compiled forwards
            use it too.

    Example:
        >>> model = PrunedDeiT(backbone, pruner, "triton", ForwardOptions(sync_free=True, fused_blocks=True))
    """

    exact_capacity: bool = False
    packer: str | None = None
    ragged_linear: bool = False
    sync_free: bool = False
    fused_blocks: bool = False
    gelu_epilogue: bool = False

    def __post_init__(self) -> None:
        for flag in _FLAGS:
            if not isinstance(getattr(self, flag), bool):
                raise TypeError(f"{flag} must be True or False, got {getattr(self, flag)!r}")
        if self.packer is not None and self.packer not in PACKERS:
            raise ValueError(f"packer must be 'torch' or 'ragged_kernels', got {self.packer!r}")
        if self.sync_free and self.exact_capacity:
            raise ValueError("sync_free excludes exact_capacity (it reads counts back to the host)")
        if self.fused_blocks and self.ragged_linear:
            raise ValueError("fused_blocks already runs every linear layer through ragged_linear, fused with its "
                             "neighbours: choose one of fused_blocks and ragged_linear")
        if self.gelu_epilogue and (self.fused_blocks or self.ragged_linear):
            raise ValueError("gelu_epilogue is fc1 + GELU on cuBLASLt; fused_blocks and ragged_linear fuse them in "
                             "their own kernels: choose one")

    def for_backend(self, backend: str) -> ForwardOptions:
        """These options as a model on `backend` runs them, the packer filled in; ValueError where the backend
        excludes one (ragged_linear needs packed tokens, sync_free a capturable backend)."""
        if self.ragged_linear and backend == "dense":
            raise ValueError("ragged_linear applies to packed tokens; the dense backend has none")
        if self.sync_free:
            check_capturable(backend, "sync_free")
        if self.packer is not None:
            return self
        return dataclasses.replace(self, packer=self.packer_for(backend))

    def packer_for(self, backend: str) -> str:
        """The packer a model on `backend` uses: `packer`, or where None the backend's default (torch for
        the reference backend, ragged_kernels otherwise)."""
        if self.packer is not None:
            return self.packer
        return "torch" if backend == "reference" else "ragged_kernels"

    def check_capture(self, backend: str, *, compiled: bool) -> None:
        """ValueError unless a model on `backend` with these options can be captured as a CUDA graph
        (compiled=False: `pruners.graph`) or traced by torch.compile (compiled=True: `pruners.compiled`)."""
        what = "compile" if compiled else "graph mode"
        if self.exact_capacity:
            raise ValueError(f"{what} needs exact_capacity=False (it reads counts back to the host)")
        check_capturable(backend, what)
        if backend in _SYNC_FREE_ONLY and not self.sync_free:
            raise ValueError(f"{what} with {backend} needs the model built with sync_free=True (it then pads to the "
                             "capacity instead of reading the longest kept length back to the host)")
        if compiled and self.ragged_linear:
            raise ValueError("compile does not take ragged_linear=True (its LayerNorm kernel is no custom op, and "
                             "inductor fuses the layers it would replace); fused_blocks=True is the form that compiles")


__all__ = ["ForwardOptions"]
