"""The pruner interface the packed DeiT forward calls, and the name-keyed registry.

A pruner is an `nn.Module` (DynamicViT owns learned predictors; Threshold-L2 owns calibrated
thresholds as buffers) that, at each of its stages, turns the current tokens into a keep mask.
Decisions are computed on the device, with no host sync: by `decide` on a dense view `[B, N, C]` with a
validity mask, or, where a pruner has one, by `decide_packed` straight from the packed rows (ATS and
Threshold-L2 on CUDA: one fused kernel per stage; in graph mode a stage's cost is its kernel count).
Host-side it only answers how many tokens an image (`tokens_bound`) and a batch (`rows_bound`) can hold
after a stage, which sizes the packed buffers (exact for the fixed-count pruners, an upper bound for the
ragged ones).
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal

import torch
from torch import nn

Placement = Literal["before_block", "after_attention"]


@dataclass(frozen=True)
class ModelInfo:
    """What a pruner needs to know about the backbone it is bound to."""

    depth: int
    num_patches: int
    embed_dim: int
    num_heads: int
    seed: int = 0


@dataclass(frozen=True)
class AttnInfo:
    """Attention facts of the current block, for pruners that prune after attention (EViT, ATS).

    Attributes:
        cls_probs: [B, H, N] fp32, row 0 of the block's softmax attention (zero at invalid keys).
        v: [B, N, C] value vectors with heads concatenated (zeros at invalid positions), or None when
            the pruner does not ask for them (`needs_values`).
        v_norm: [B, N] fp32 L2 norms of those value vectors (zero at invalid positions), or None when
            the pruner does not ask for them (`needs_value_norms`: cheaper than `v` on packed rows,
            where the norms are taken on the packed rows and only [B, N] scalars are gathered).
    """

    cls_probs: torch.Tensor
    v: torch.Tensor | None
    v_norm: torch.Tensor | None = None


def check_stages(stages: Sequence[int], name: str) -> tuple[int, ...]:
    """Validate a stage list: distinct, ascending, non-negative ints."""
    if isinstance(stages, (str, bytes)) or not isinstance(stages, Sequence):
        raise TypeError(f"{name}: stages must be a sequence of block indices, got {type(stages).__name__}")
    out = tuple(stages)
    if not all(isinstance(s, int) and not isinstance(s, bool) for s in out):
        raise TypeError(f"{name}: stages must be ints, got {out!r}")
    if any(s < 0 for s in out) or list(out) != sorted(set(out)):
        raise ValueError(f"{name}: stages must be distinct, ascending, non-negative block indices, got {out!r}")
    return out


def per_stage(value: float | Sequence[float] | None, n: int, what: str, name: str) -> tuple | None:
    """Broadcast a scalar option to one value per stage, or validate a per-stage sequence."""
    if value is None:
        return None
    if _is_number(value):
        return (value,) * n
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        if not all(_is_number(v) for v in value):
            raise TypeError(f"{name}: {what} must be numbers, got {list(value)!r}")
        if len(value) != n:
            raise ValueError(f"{name}: {what} has {len(value)} entries for {n} stages")
        return tuple(value)
    raise TypeError(f"{name}: {what} must be a number or one number per stage, got {type(value).__name__}")


def _is_number(v: object) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


class Pruner(nn.Module):
    """Base class. Subclasses set `name`, `placement`, `needs_attention`, `needs_values`, `needs_value_norms`."""

    name: ClassVar[str] = ""
    placement: ClassVar[Placement] = "before_block"
    needs_attention: ClassVar[bool] = False
    needs_values: ClassVar[bool] = False
    needs_value_norms: ClassVar[bool] = False
    # False when decide() never reads the tokens x (it is then passed None and the model skips
    # gathering them into a dense view).
    needs_tokens: ClassVar[bool] = True
    ragged: ClassVar[bool] = False
    # How to bound the tokens an image keeps, for graph mode's warning when no stage does (`tokens_bound`
    # never below its input): the option to name, or "".
    capacity_hint: ClassVar[str] = ""
    # Bumped (in the subclass) by a change that means to change this pruner's keep decisions: the exact
    # benchmarks measure it beside the kept tokens, and a pull request whose kept tokens move without a
    # bump fails its check (`bench_structure.Flops.track_decisions_version`, `ci.verdicts.exact`).
    decisions_version: ClassVar[int] = 1

    def __init__(self, stages: Sequence[int]) -> None:
        super().__init__()
        self.stages = check_stages(stages, self.name)
        self.info: ModelInfo | None = None
        # True when extra_token() may add a token (EViT's fusion): the model calls it only then. By default
        # True exactly when a subclass overrides extra_token, so a custom pruner's token is never skipped.
        self.fuses_tokens = type(self).extra_token is not Pruner.extra_token

    def bind(self, info: ModelInfo) -> None:
        """Attach to a backbone: check the stages fit and build anything that depends on its size.

        Args:
            info: the backbone's depth, patch count, width, heads and the weight seed.
        """
        if self.stages and self.stages[-1] >= info.depth:
            raise ValueError(f"{self.name}: stage {self.stages[-1]} is past the last block ({info.depth - 1})")
        self.info = info

    def decide(self, stage: int, x: torch.Tensor, valid: torch.Tensor, attn: AttnInfo | None) -> torch.Tensor:
        """Keep mask for stage `stage` (index into `self.stages`).

        Args:
            stage: stage index.
            x: dense tokens [B, N, C], CLS at position 0 (post-attention residual stream for
                `after_attention` pruners, block input for `before_block` ones); None when the
                pruner sets `needs_tokens = False`.
            valid: [B, N] bool.
            attn: attention facts (only for `needs_attention` pruners).

        Returns:
            keep [B, N] bool; the model applies it with CLS on and invalid positions off whatever it
            says there (`pruners.packing.applied_mask`).
        """
        raise NotImplementedError

    def decide_packed(
        self, stage: int, x: torch.Tensor, cu_seqlens: torch.Tensor | None, max_seqlen: int,
        qkv: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None, scale: float | None = None,
    ) -> torch.Tensor | None:
        """Optional fast path: the keep mask [B, max_seqlen] straight from the tokens x (packed rows [R, C]
        with `cu_seqlens`, or dense [B, N, C] with None) and, for `after_attention` pruners, the block's
        q, k, v (same layout, [.., H, D]) and softmax `scale`, without the dense views `decide` reads.

        Returns None where it does not apply (the model then calls `decide`). The mask must equal
        `decide`'s up to floating-point association; the model applies it as it applies `decide`'s (CLS on,
        positions past an image's length ignored). The choice may depend on devices, shapes and options,
        never on the attention backend."""
        return None

    def extra_token(
        self, stage: int, x: torch.Tensor, valid: torch.Tensor, keep: torch.Tensor, attn: AttnInfo | None
    ) -> tuple[torch.Tensor, torch.Tensor] | None:
        """Optional token appended after the kept ones (EViT fusion): ([B, 1, C], present [B, 1] bool).
        Called only when `fuses_tokens` is True, with `keep` the stage's applied mask [B, N] (CLS on, invalid
        positions off: `pruners.packing.applied_mask`)."""
        return None

    def fusion_weights(self, stage: int, valid: torch.Tensor, attn: AttnInfo | None) -> torch.Tensor | None:
        """Optional fast path of `extra_token` for a token of the form sum(w * x) over an image's dropped
        tokens: the weights w [B, N] (float, any value at kept or invalid positions). Where given, the
        packer writes that token straight from the tokens as it packs them (`pack_tokens(fuse_weights=)`),
        with no dense view and no concatenation; it must then equal `extra_token`'s up to floating-point
        association. None (the default): the model calls `extra_token` on the dense view."""
        return None

    def tokens_bound(self, stage: int, n_in: int) -> int:
        """Host upper bound on tokens per image (CLS and any extra token included) after `stage`.

        Args:
            stage: stage index.
            n_in: host upper bound on tokens per image before the stage.

        Returns:
            the bound (exact for fixed-count pruners on uniform input).
        """
        return n_in

    def rows_bound(self, stage: int, n_in: int, batch: int) -> int:
        """Host upper bound on the packed rows of a batch of `batch` images after `stage` (every image's
        tokens, CLS and any extra token included): the packed buffer's size. Default `batch` x
        `tokens_bound`; a pruner whose decisions bound the batch's total more tightly (Threshold-L2's
        batch budget) returns less."""
        return batch * self.tokens_bound(stage, n_in)

    def is_noop(self, stage: int, n_in: int) -> bool:
        """True when the stage provably keeps everything (host-known). The model does not skip such
        stages (it still packs); a pruner may use it in `tokens_bound` (EViT: no fused-token row)."""
        return False

    def extra_repr(self) -> str:
        return f"stages={self.stages}"


PRUNERS: dict[str, type[Pruner]] = {}


def register(cls: type[Pruner]) -> type[Pruner]:
    """Class decorator adding a pruner to `PRUNERS` under its `name`."""
    PRUNERS[cls.name] = cls
    return cls


def create_pruner(name: str, **options) -> Pruner:
    """Build a pruner by name.

    Args:
        name: one of `PRUNERS` (`threshold_l2`, `dynamicvit`, `evit`, `ats`).
        **options: the pruner's keyword options (see each class).

    Returns:
        an unbound pruner; `build_pruned_model` binds a copy of it to a backbone.
    """
    if not isinstance(name, str):
        raise TypeError(f"pruner name must be a str, got {type(name).__name__}")
    if name not in PRUNERS:
        raise ValueError(f"unknown pruner {name!r}; choose one of {sorted(PRUNERS)}")
    return PRUNERS[name](**options)
