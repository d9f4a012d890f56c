"""`build_pruned_model`: a pruned DeiT from a model name, a pruner and a backend, with its build options as
one typed record (`BuildOptions`), which gives the model's forward flags (`pruners.options.ForwardOptions`)."""

from __future__ import annotations

import copy
import dataclasses
import numbers
import os
from dataclasses import dataclass, field

import torch
from torch import nn

from pruners.backbones import MODELS, checkpoint_backbone, seeded_backbone
from pruners.backends import BACKENDS, EXTRA_BACKENDS
from pruners.base import ModelInfo, Pruner, create_pruner
from pruners.layers import PatchGemm
from pruners.model import PrunedDeiT
from pruners.options import ForwardOptions
from pruners.sample_images import synthetic_images

_FLAGS = ("graph", "exact_capacity", "ragged_linear", "fused_blocks", "gelu_epilogue")


@dataclass(frozen=True)
class BuildOptions:
    """How `build_pruned_model` builds a model; every field has the default the keyword API has. Checked on
    construction (TypeError/ValueError; the forward's flags by the `ForwardOptions` they make), except what
    depends on the backend (`build_pruned_model` checks that) and the checkpoint path (checked when it is read).

    Attributes:
        seed: weight seed; the same seed gives the same weights under every backend.
        checkpoint_path: local timm checkpoint instead of seeded weights (nothing is downloaded).
        graph: capture the forward as a CUDA graph per batch size (a sync-free backend:
            `CAPTURABLE_BACKENDS`; padded_sdpa then pads to the capacity).
        compile: `torch.compile(fullgraph=True)` the forward at its capacities (True: inductor's default
            mode; a str: that mode, see `pruners.compiled.MODES`); with graph=True the compiled forward is
            what is captured.
        exact_capacity: eager only: one host read per stage to size buffers exactly.
        packer: "ragged_kernels" or "torch" (see ForwardOptions); None: the backend's default.
        ragged_linear: experimental, see ForwardOptions.
        fused_blocks: each block as five launches and the head as one (`pruners.fused`); any backend, dense
            included; eager, graph mode, compiled or both.
        gelu_epilogue: fc1 + GELU as one cuBLASLt GEMM on packed tokens (CUDA fp16/bf16), see ForwardOptions.
        calibration_images: float [B, 3, H, W] for an uncalibrated threshold_l2 pruner (None: 4 seeded
            `synthetic_images`).
    """

    seed: int = 0
    checkpoint_path: str | os.PathLike | None = None
    graph: bool = False
    compile: bool | str = False
    exact_capacity: bool = False
    packer: str | None = None
    calibration_images: torch.Tensor | None = field(default=None, compare=False)
    ragged_linear: bool = False
    fused_blocks: bool = False
    gelu_epilogue: bool = False

    def __post_init__(self) -> None:
        seed = self.seed
        if not isinstance(seed, numbers.Integral) or isinstance(seed, bool):
            raise TypeError(f"seed must be an int, got {type(seed).__name__}")
        if not 0 <= int(seed) < 2**63:
            raise ValueError(f"seed must be in [0, 2**63), got {int(seed)}")
        object.__setattr__(self, "seed", int(seed))
        for flag in _FLAGS:
            if not isinstance(getattr(self, flag), bool):
                raise TypeError(f"{flag} must be True or False, got {getattr(self, flag)!r}")
        if not isinstance(self.compile, bool | str):
            raise TypeError(f"compile must be True, False or a torch.compile mode, got {self.compile!r}")
        images = self.calibration_images
        if images is not None and not isinstance(images, torch.Tensor):
            raise TypeError(f"calibration_images must be a float [B, 3, H, W] tensor, got {type(images).__name__}")
        if self.captured and self.exact_capacity:  # what ForwardOptions says of sync_free, in this record's terms
            raise ValueError("exact_capacity reads counts back to the host and cannot be captured in graph mode or "
                             "compiled")
        self.forward_options()

    @property
    def compiled(self) -> bool:
        """Whether the forward is compiled (`compile` is True or a mode)."""
        return self.compile is not False

    @property
    def captured(self) -> bool:
        """Whether the forward must be sync-free: graph mode or compiled."""
        return self.graph or self.compiled

    def forward_options(self) -> ForwardOptions:
        """The built model's forward flags: these options', sync-free where the forward is captured or compiled."""
        return ForwardOptions(exact_capacity=self.exact_capacity, packer=self.packer, ragged_linear=self.ragged_linear,
                              sync_free=self.captured, fused_blocks=self.fused_blocks,
                              gelu_epilogue=self.gelu_epilogue)

    def check_for(self, backend: str) -> None:
        """ValueError unless these options can build a model on `backend`: what graph mode and compile take
        (`ForwardOptions.check_capture`: a sync-free backend; compiled, no ragged_linear), and graph mode only
        some compile modes."""
        forward = self.forward_options()
        if self.graph:
            forward.check_capture(backend, compiled=False)
        if self.compiled:
            forward.check_capture(backend, compiled=True)
            from pruners.compiled import CUDAGRAPH_MODES, MODES

            if self.compile is not True and self.compile not in MODES:
                raise ValueError(f"compile must be True or one of {[m for m in MODES if m]}, got {self.compile!r}")
            if self.graph and self.compile in CUDAGRAPH_MODES:
                raise ValueError(f"compile mode {self.compile!r} captures CUDA graphs itself; with graph=True use "
                                 "True or 'max-autotune-no-cudagraphs' (graph mode captures the compiled forward)")


KNOWN_OPTIONS = frozenset(f.name for f in dataclasses.fields(BuildOptions))


def build_pruned_model(model_name: str, pruner: Pruner | str | None, backend: str,
                       options: BuildOptions | None = None, **keywords) -> nn.Module:
    """Build a pruned DeiT.

    Args:
        model_name: one of MODELS.
        pruner: a pruner from `create_pruner` (a copy is bound to the model, so one pruner object can
            build several models with identical decisions), a pruner name (default options), or None
            (only with backend "dense").
        backend: one of BACKENDS ("dense" = the stock timm forward, no pruning) or "reference".
        options: the build options as a record (`BuildOptions`), or None.
        **keywords: the same options as keywords (seed, checkpoint_path, graph, compile, exact_capacity,
            packer, ragged_linear, fused_blocks, gelu_epilogue, calibration_images; see `BuildOptions`), when
            `options` is None.

    Returns:
        PrunedDeiT (fp32, CPU, eval mode; move it with .to()), CompiledPrunedModel with compile (no graph), or
        GraphedPrunedModel when graph=True. Move the model before its first call: compiling and capturing
        happen then.

    Example:
        >>> model = build_pruned_model("deit_small_patch16_224", "evit", "triton", graph=True)
        >>> same = build_pruned_model("deit_small_patch16_224", "evit", "triton", BuildOptions(graph=True))
    """
    if options is None:
        unknown = set(keywords) - KNOWN_OPTIONS
        if unknown:
            raise TypeError(f"unknown build_pruned_model options {sorted(unknown)}; known: {sorted(KNOWN_OPTIONS)}")
    elif not isinstance(options, BuildOptions):
        raise TypeError(f"options must be a BuildOptions, got {type(options).__name__}")
    elif keywords:
        raise TypeError(f"give the options either as a BuildOptions or as keywords, not both (got {sorted(keywords)})")
    if model_name not in MODELS:
        raise ValueError(f"unknown model {model_name!r}; choose one of {MODELS}")
    if backend not in BACKENDS + EXTRA_BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; choose one of {BACKENDS + EXTRA_BACKENDS}")
    if options is None:
        options = BuildOptions(**keywords)
    options.check_for(backend)
    if isinstance(pruner, str):
        pruner = create_pruner(pruner)
    if pruner is None:
        if backend != "dense":
            raise ValueError(f"backend {backend!r} needs a pruner")
        pruner = create_pruner("evit", keep_rate=1.0, stages=())
    if not isinstance(pruner, Pruner):
        raise TypeError(f"pruner must come from create_pruner, got {type(pruner).__name__}")

    seed = options.seed
    if options.checkpoint_path is not None:
        backbone = checkpoint_backbone(model_name, options.checkpoint_path, seed)
    else:
        backbone = seeded_backbone(model_name, seed)
    backbone.eval()
    # Every backend, `dense` included, embeds patches with one GEMM (PatchGemm: same weights; ~100 us
    # instead of ~575 us at DeiT-B B 64 on the H200), so pruned and dense models share that fixed cost.
    backbone.patch_embed.proj = PatchGemm.replacing(backbone.patch_embed.proj)
    pruner = copy.deepcopy(pruner)
    pruner.bind(
        ModelInfo(
            depth=len(backbone.blocks),
            num_patches=backbone.patch_embed.num_patches,
            embed_dim=backbone.embed_dim,
            num_heads=backbone.blocks[0].attn.num_heads,
            seed=seed,
        )
    )
    pruner.eval()
    model = PrunedDeiT(backbone, pruner, backend, options.forward_options()).eval()
    if getattr(pruner, "calibrated", True) is False:
        images = options.calibration_images
        if images is None:
            images = synthetic_images(4, model.img_size[0], seed=seed)
        elif images.is_floating_point():  # the model is fp32 on the CPU until the caller moves it
            images = images.detach().to("cpu", torch.float32)
        model.calibrate(images)
    compiled = None
    if options.compiled:
        from pruners.compiled import CompiledPrunedModel

        compiled = CompiledPrunedModel(model, mode=None if options.compile is True else options.compile)
    if options.graph:
        from pruners.graph import GraphedPrunedModel

        return GraphedPrunedModel(model, forward=compiled)
    return model if compiled is None else compiled


__all__ = ["KNOWN_OPTIONS", "BuildOptions", "build_pruned_model"]
