"""How a pruning stage's decision reaches the packed buffer: the class-token rule (`applied_mask`), the
two packers (`Packer`: PyTorch or the ragged_kernels copy kernels, exact data movement either way), and
the packing log a model keeps while `PrunedDeiT.packing_log()` is active."""

from __future__ import annotations

import torch

from pruners._ops import gather_dense, pack_dense_torch, to_dense

# What pack_tokens writes into the packed buffer's padding rows: None = nothing. Tests set NaN to
# show that no padding row ever reaches a valid one (the logits do not change).
PADDING_FILL: float | None = None
PACKERS = ("torch", "ragged_kernels")


def applied_mask(keep: torch.Tensor, valid: torch.Tensor | None = None) -> torch.Tensor:
    """The mask a pruning stage applies for the decision `keep` [B, N] bool: `keep` where `valid` [B, N]
    (None: everywhere), and every image's class token (position 0) whatever the decision says. A new
    tensor: the pruner's (or `keep_override`'s) mask is left alone.

    The one statement of the class-token rule along the pruned forward. Every stage's decision reaches
    the packed buffer through `Packer`, which applies this rule: the torch packer by calling this, the
    kernel packer by `pack_tokens(keep_first=True)`, the same rule inside the copy (the two are tested to
    agree). The model materialises the applied mask with this function only where it reads it (recorded
    masks, exact capacity, a fused token, a replayed mask's size check)."""
    keep = keep.clone() if valid is None else keep & valid
    keep[:, 0] = True
    return keep


class Packer:
    """Packs a stage's kept tokens. `dense(x, keep, cap)`: x [B, N, C], keep [B, N]; `rows(x, cu, n, keep,
    cap)`: packed rows [R, C] and a per-position keep [B, n] (positions past an image's length are never
    read). Both pack `applied_mask(keep)`: every image's first row (CLS) whatever `keep` says.

    Args:
        packer: one of `PACKERS`.
    """

    def __init__(self, packer: str) -> None:
        self.name = packer
        if packer == "ragged_kernels":
            import ragged_kernels

            self._pack_tokens = ragged_kernels.pack_tokens
            self._unpack_tokens = ragged_kernels.unpack_tokens

    def dense(self, x: torch.Tensor, keep: torch.Tensor, capacity: int, fuse: torch.Tensor | None = None):
        """`fuse`: fusion weights [B, N] (`Pruner.fusion_weights`), ragged_kernels only: each image's
        dropped tokens summed into one more row after its kept ones."""
        if self.name == "torch":
            return pack_dense_torch(x, applied_mask(keep), capacity)
        # fill=None: the rows past the kept total stay unwritten (every consumer of the packed blocks
        # stops at cu_seqlens), which saves writing (capacity - kept) rows per stage.
        return self._pack_tokens(x, keep, capacity=capacity, fill=PADDING_FILL, keep_first=True, fuse_weights=fuse)

    def to_dense(self, x: torch.Tensor, cu: torch.Tensor, index: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        """Packed rows [R, C] as the dense view [B, n, C] of `index` (`dense_index(cu, n, R)`), zeros at
        invalid positions: `gather_dense`, in one kernel (`unpack_tokens` with keep = the validity mask)
        instead of an index and a `where`. Pure data movement: the same values either way."""
        if self.name == "torch" or x.dim() != 2 or x.stride(1) != 1:
            return gather_dense(x, index)
        return self._unpack_tokens(x, index[1], cu)

    def rows(self, x: torch.Tensor, cu: torch.Tensor, n: int, keep: torch.Tensor, capacity: int,
             fuse: torch.Tensor | None = None):
        if self.name == "torch":
            xd, valid = to_dense(x, cu, n)
            return pack_dense_torch(xd, applied_mask(keep, valid), capacity)
        # Straight from the packed rows: no dense view of the tokens, no `keep & valid` (the kernel reads
        # keep only inside each image's length).
        return self._pack_tokens(x, keep, capacity=capacity, source_cu_seqlens=cu, max_seqlen=n,
                                 fill=PADDING_FILL, keep_first=True, fuse_weights=fuse)


class PackingLog:
    """What a model's packings produced while `PrunedDeiT.packing_log()` was active: per packing (one per
    stage), a copy of its `cu_seqlens` and its capacity (the packed buffer's rows). The keep masks do not
    show EViT's fused token nor the capacities; this does. Reading `lengths()` syncs with the device."""

    def __init__(self) -> None:
        self.entries: list[tuple[torch.Tensor, int]] = []

    def lengths(self) -> tuple[list[list[int]], list[int]]:
        """(per stage: the per-image token counts after it, per stage: the capacity rows)."""
        return [(cu[1:] - cu[:-1]).tolist() for cu, _ in self.entries], [cap for _, cap in self.entries]


class LoggingPacker:
    """A `Packer` that appends every packing's (cu_seqlens, capacity) to a PackingLog."""

    def __init__(self, inner: Packer, log: PackingLog) -> None:
        self.inner, self.log, self.name = inner, log, inner.name

    def _logged(self, packed_cu: tuple[torch.Tensor, torch.Tensor], capacity: int):
        self.log.entries.append((packed_cu[1].detach().clone(), int(capacity)))
        return packed_cu

    def dense(self, x, keep, capacity, fuse=None):
        return self._logged(self.inner.dense(x, keep, capacity, fuse), capacity)

    def rows(self, x, cu, n, keep, capacity, fuse=None):
        return self._logged(self.inner.rows(x, cu, n, keep, capacity, fuse), capacity)

    def to_dense(self, x, cu, index):
        return self.inner.to_dense(x, cu, index)


__all__ = ["PACKERS", "PADDING_FILL", "LoggingPacker", "Packer", "PackingLog", "applied_mask"]
