"""Token pruners (Threshold-L2, DynamicViT, EViT, ATS) on timm DeiT with a packed ragged forward.

Public API:
    create_pruner(name, **options) -> Pruner
    build_pruned_model(model_name, pruner, backend, **options) -> nn.Module
    clear_backbone_cache(): drop the seeded backbones build_pruned_model keeps (two) for reuse
    PRUNERS: name -> pruner class;  BACKENDS: attention backend names;  MODELS: supported DeiTs.
"""

from pruners import ats, dynamicvit, evit, threshold_l2  # noqa: F401  (register the pruners)
from pruners.backends import BACKENDS, CAPTURABLE_BACKENDS
from pruners.base import PRUNERS, AttnInfo, ModelInfo, Pruner, create_pruner
from pruners.compiled import CompiledPrunedModel
from pruners.graph import GraphedPrunedModel
from pruners.model import (
    MODELS,
    PrunedDeiT,
    build_pruned_model,
    clear_backbone_cache,
    reference_attention,
    synthetic_images,
)

__all__ = [
    "BACKENDS",
    "CAPTURABLE_BACKENDS",
    "CompiledPrunedModel",
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
