"""The timm DeiT backbones a pruned model is built on: seeded weights (a small cache of fresh inits) or a
local checkpoint. Nothing is downloaded."""

from __future__ import annotations

import copy
import os
from collections import OrderedDict

import torch
from torch import nn

MODELS = ("deit_tiny_patch16_224", "deit_small_patch16_224", "deit_base_patch16_224", "deit_base_patch16_384")

_SEEDED_CACHE_SIZE = 2
_seeded: OrderedDict[tuple[str, int], nn.Module] = OrderedDict()


def seeded_backbone(model_name: str, seed: int) -> nn.Module:
    """A fresh copy of timm's `model_name` initialised under `seed` (fp32, CPU).

    The last _SEEDED_CACHE_SIZE backbones are kept and copied: timm's random init of DeiT-B/384 takes
    ~0.6 s on a CPU core, a copy ~0.1 s, and the benchmarks build the same model under every backend
    (~80 builds per full asv run). The copy has exactly the weights a fresh init gives. Callers get
    their own module; `clear_backbone_cache()` drops the cached ones (up to ~0.7 GB for two DeiT-B).
    """
    import timm

    key = (model_name, seed)
    cached = _seeded.get(key)
    if cached is None:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            cached = timm.create_model(model_name, pretrained=False)
        _seeded[key] = cached
        while len(_seeded) > _SEEDED_CACHE_SIZE:
            _seeded.popitem(last=False)
    else:
        _seeded.move_to_end(key)
    return copy.deepcopy(cached)


def checkpoint_backbone(model_name: str, path: object, seed: int) -> nn.Module:
    """timm's `model_name` with the weights of a local checkpoint; a clear error for a path that is
    not a readable checkpoint of this architecture."""
    import pickle
    import zipfile

    import timm

    if not isinstance(path, str | os.PathLike):
        raise TypeError(f"checkpoint_path must be a path, got {type(path).__name__}")
    file = os.fspath(path)
    if not file:
        raise ValueError("checkpoint_path is empty: give a local checkpoint file, or leave it out for seeded weights")
    if not os.path.isfile(file):
        what = "is a folder" if os.path.isdir(file) else "does not exist"
        raise FileNotFoundError(f"checkpoint_path {file!r} {what}: give a local checkpoint file")
    with torch.random.fork_rng(devices=[]):  # timm initialises before loading: leave the caller's RNG alone
        torch.manual_seed(seed)
        try:
            return timm.create_model(model_name, pretrained=False, checkpoint_path=file)
        except (RuntimeError, KeyError, AttributeError, TypeError, ValueError, EOFError, pickle.UnpicklingError,
                zipfile.BadZipFile) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else exc.__class__.__name__
            raise ValueError(f"checkpoint_path {file!r} is not a loadable {model_name} checkpoint: {first}") from exc


def clear_backbone_cache() -> None:
    """Forget the seeded backbones `build_pruned_model` keeps for its next builds."""
    _seeded.clear()


__all__ = ["MODELS", "checkpoint_backbone", "clear_backbone_cache", "seeded_backbone"]
