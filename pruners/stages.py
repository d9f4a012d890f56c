"""What one pruning stage of the packed forward reads and checks, apart from the model that runs it.

- `StageInputs`: the stage's tokens and, built on first use and shared, the dense index and validity of
  packed rows, the tokens' dense view and an `after_attention` pruner's attention facts (`attn_info`);
- `decide`: the pruner's keep mask for a stage (its packed fast path where it has one);
- `override_masks`, `replayed_mask`, `check_override_fits`: the checks on `keep_override`, another
  model's recorded masks replayed in place of the pruner's decisions.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import torch

from pruners._ops import cls_attention_full, cls_attention_packed, dense_index, gather_dense, value_norms
from pruners.base import AttnInfo, Pruner
from pruners.packing import Packer, applied_mask


def attn_info(pruner: Pruner, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu: torch.Tensor | None,
              valid: torch.Tensor, scale: float | None, index: tuple | None) -> AttnInfo:
    """The CLS attention row (and the values or their norms) an attention-based pruner decides on; on
    packed rows `index` is the stage's `dense_index`, shared with the token gather."""
    if cu is None:
        probs = cls_attention_full(q, k, scale)  # every position is valid before the first stage
        vd = v.flatten(-2) if pruner.needs_values else None
        vn = value_norms(v) if pruner.needs_value_norms else None
    else:
        probs = cls_attention_packed(q, k, cu, valid.shape[1], scale, index)
        vd = gather_dense(v, index).flatten(-2) if pruner.needs_values else None
        vn = value_norms(v, index) if pruner.needs_value_norms else None
    return AttnInfo(probs, vd, vn)


class StageInputs:
    """What one pruning stage may read besides its tokens x, each built on first use and then shared: the
    dense index of packed rows (None for dense x) and the validity mask [B, n], the tokens as a dense view
    [B, n, C] (through `packer`), and an `after_attention` pruner's attention facts. A `decide_packed`
    fast path and the packers read none of them, so a stage on that path builds none."""

    def __init__(self, pruner: Pruner, packer: Packer, x: torch.Tensor, cu: torch.Tensor | None, n: int,
                 qkv: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None, scale: float | None) -> None:
        self.pruner, self.packer = pruner, packer
        self.x, self.cu, self.n, self.qkv, self.scale = x, cu, n, qkv, scale
        self._index: tuple[torch.Tensor, torch.Tensor] | None = None
        self._valid: torch.Tensor | None = None
        self._tokens: torch.Tensor | None = None
        self._attn: AttnInfo | None = None

    def _build_index(self) -> None:
        if self.cu is None:  # dense x: every position is valid
            self._valid = torch.ones(self.x.shape[:2], dtype=torch.bool, device=self.x.device)
        else:
            self._index = dense_index(self.cu, self.n, self.x.shape[0])
            self._valid = self._index[1]

    @property
    def index(self) -> tuple[torch.Tensor, torch.Tensor] | None:
        """The stage's `dense_index`, or None for dense x."""
        if self._valid is None:
            self._build_index()
        return self._index

    @property
    def valid(self) -> torch.Tensor:
        """[B, n] bool: True at positions inside an image's length."""
        if self._valid is None:
            self._build_index()
        return self._valid

    def tokens(self) -> torch.Tensor:
        """The tokens as a dense view [B, n, C], zeros at invalid positions."""
        if self._tokens is None:
            index = self.index
            self._tokens = self.x if index is None else self.packer.to_dense(self.x, self.cu, index)
        return self._tokens

    def attn(self) -> AttnInfo | None:
        """The attention facts of an `after_attention` stage (None before a block)."""
        if self._attn is None and self.qkv is not None:
            self._attn = attn_info(self.pruner, *self.qkv, self.cu, self.valid, self.scale, self.index)
        return self._attn


def decide(pruner: Pruner, stage: int, inputs: StageInputs) -> torch.Tensor:
    """The pruner's keep mask: its `decide_packed` fast path where it has one, else `decide` on the dense
    views. The pruner decides even when its decision is replaced (`keep_override`): a replaying model
    then pays what the pruner costs, so its timing compares with the model whose decisions it replays."""
    keep = pruner.decide_packed(stage, inputs.x, inputs.cu, inputs.n, inputs.qkv, inputs.scale)
    if keep is None:
        keep = pruner.decide(stage, inputs.tokens() if pruner.needs_tokens else None, inputs.valid, inputs.attn())
    return keep


def override_masks(masks: Sequence[torch.Tensor] | None) -> list[torch.Tensor] | None:
    """`keep_override`'s value as a list of bool [B, N] masks (None stays None); TypeError otherwise."""
    if masks is None:
        return None
    if isinstance(masks, (torch.Tensor, str, bytes)) or not isinstance(masks, Iterable):
        raise TypeError("keep_override must be a list of bool [B, N] masks, one per pruning stage (e.g. "
                        f"another model's recorded_keeps), or None; got {type(masks).__name__}")
    masks = list(masks)
    bad = [i for i, m in enumerate(masks) if not isinstance(m, torch.Tensor) or m.dtype != torch.bool
           or m.dim() != 2]
    if bad:
        m = masks[bad[0]]
        got = f"{m.dtype} {tuple(m.shape)}" if isinstance(m, torch.Tensor) else type(m).__name__
        raise TypeError(f"keep_override[{bad[0]}] must be a bool [B, N] tensor, got {got}")
    return masks


def replayed_mask(masks: list[torch.Tensor], i: int, stage: int, inputs: StageInputs, batch: int) -> torch.Tensor:
    """`masks[i]`, the replayed mask of pruning stage `stage`, checked against the stage's shape [batch, n],
    dtype and device (ValueError)."""
    x, n = inputs.x, inputs.n
    if i >= len(masks):
        raise ValueError(f"keep_override has {len(masks)} masks; stage {stage} needs one more")
    keep = masks[i]
    if keep.shape != (batch, n) or keep.dtype != torch.bool or keep.device != x.device:
        raise ValueError(
            f"keep_override[{i}] must be bool {(batch, n)} on {x.device}, got {keep.dtype} "
            f"{tuple(keep.shape)} on {keep.device}"
        )
    return keep


def check_override_fits(pruner: Pruner, i: int, keep: torch.Tensor, inputs: StageInputs, n_out: int,
                        cap: int) -> None:
    """A replayed mask (`keep_override[i]`) must fit the packed buffers this pruner sizes (`tokens_bound`
    per image, `rows_bound` per batch): the packers would silently drop what does not fit. One host read,
    on the first forward after `keep_override` is set (never inside a CUDA-graph capture)."""
    if inputs.x.is_cuda and torch.cuda.is_current_stream_capturing():
        return
    valid = inputs.valid
    applied = applied_mask(keep, valid)
    rows = applied.sum(1)
    if pruner.fuses_tokens:  # EViT's fused token comes on top wherever a token was dropped
        rows = rows + (applied != valid).any(1)
    longest, total = (int(t) for t in torch.stack([rows.max(), rows.sum()]).tolist())
    if longest > n_out or total > cap:
        raise ValueError(
            f"keep_override[{i}] keeps up to {longest} tokens in an image and {total} in the batch; "
            f"this model's {pruner.name} stage holds {n_out} per image and {cap} per batch, so tokens "
            "would be dropped: replay masks of a pruner with the same capacity"
        )


__all__ = ["StageInputs", "attn_info", "check_override_fits", "decide", "override_masks", "replayed_mask"]
