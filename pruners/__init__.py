"""Token pruners (Threshold-L2, DynamicViT, EViT, ATS) on timm DeiT with a packed ragged forward.

Public API:
    create_pruner(name, **options) -> Pruner
    build_pruned_model(model_name, pruner, backend, options=None, **keywords) -> nn.Module
    BuildOptions: build_pruned_model's options as one typed record
    ForwardOptions: PrunedDeiT's forward flags as one typed record (BuildOptions.forward_options)
    clear_backbone_cache(): drop the seeded backbones build_pruned_model keeps (two) for reuse
    PRUNERS: name -> pruner class;  BACKENDS: attention backend names;  MODELS: supported DeiTs.

Modules: `base` (the Pruner contract) and one per pruner; `model` (PrunedDeiT, the packed forward) over
`layers`, `packing` and `stages`, its flags in `options`; `build` (the factory) over `backbones`; `graph`
and `compiled` (the captured and compiled forwards); `fused` (fused blocks); `kernels` (the pruners'
Triton kernels).
"""

from pruners import ats, dynamicvit, evit, threshold_l2  # noqa: F401  (register the pruners)
from pruners.backbones import MODELS, clear_backbone_cache
from pruners.backends import BACKENDS, CAPTURABLE_BACKENDS
from pruners.base import PRUNERS, AttnInfo, ModelInfo, Pruner, create_pruner
from pruners.build import BuildOptions, build_pruned_model
from pruners.compiled import CompiledPrunedModel
from pruners.graph import GraphedPrunedModel
from pruners.layers import reference_attention
from pruners.model import PrunedDeiT
from pruners.options import ForwardOptions
from pruners.sample_images import synthetic_images

__all__ = [
    "BACKENDS",
    "CAPTURABLE_BACKENDS",
    "BuildOptions",
    "CompiledPrunedModel",
    "ForwardOptions",
    "MODELS",
    "PRUNERS",
    "AttnInfo",
    "GraphedPrunedModel",
    "ModelInfo",
    "PrunedDeiT",
    "Pruner",
    "build_pruned_model",
    "clear_backbone_cache",
    "create_pruner",
    "reference_attention",
    "synthetic_images",
]
