"""Packed (ragged) forward of a timm DeiT with a token pruner, over a choice of attention backends.

Blocks before the first pruning point run on the dense batch [B, 1+N0, C] with PyTorch SDPA, the same
code under every backend, so the first keep decisions are bitwise identical across backends. From the
first pruning point on, every block runs on packed tokens [R, C] (norms, qkv, MLP and projections as
row-wise ops; attention through the chosen backend with `cu_seqlens`), and the head reads the CLS
rows. The block forward is our own, written over timm's Block submodules (norm1, attn.qkv, attn.proj,
ls1, drop_path1, norm2, mlp, ls2, drop_path2) instead of Block.forward.

No host sync in the forward: R ("capacity") and the per-image length bound are host ints that the
pruner derives from the stage configuration (exact for fixed-count pruners, an upper bound for
ragged ones; padding rows past cu_seqlens[-1] are computed and ignored), so the `triton` forward can
be captured as one CUDA graph (pruners.graph). `exact_capacity=True` is the documented eager
alternative for ragged pruners: one host read of the kept total per stage shrinks the buffer so large
batches do not spend linear-layer FLOPs on padding rows.
"""

from __future__ import annotations

import contextlib
import functools
import numbers
import os
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from pruners._ops import (
    cls_attention_full,
    cls_attention_packed,
    dense_index,
    gather_dense,
    pack_dense_torch,
    to_dense,
    value_norms,
)
from pruners.backends import BACKENDS, EXTRA_BACKENDS, check_capturable
from pruners.base import AttnInfo, ModelInfo, Pruner, create_pruner

MODELS = ("deit_tiny_patch16_224", "deit_small_patch16_224", "deit_base_patch16_224", "deit_base_patch16_384")
AttentionFn = Callable[..., torch.Tensor]


def reference_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens: torch.Tensor, max_seqlen: int, *, scale=None
) -> torch.Tensor:
    """Packed attention in plain PyTorch: gather to [B, max_seqlen], masked SDPA, pack back (no host sync).

    Args:
        q, k, v: [R, H, D] packed rows.
        cu_seqlens: int32 [B+1].
        max_seqlen: host upper bound of the segment lengths.
        scale: softmax scale (default D ** -0.5).

    Returns:
        [R, H, D]; rows past cu_seqlens[-1] are zero.
    """
    R, H, D = q.shape
    index = dense_index(cu_seqlens, max_seqlen, R)
    qd, kd, vd, valid = gather_dense(q, index), gather_dense(k, index), gather_dense(v, index), index[1]
    o = F.scaled_dot_product_attention(
        qd.transpose(1, 2), kd.transpose(1, 2), vd.transpose(1, 2), attn_mask=valid[:, None, None, :], scale=scale
    )
    packed, _ = pack_dense_torch(o.transpose(1, 2).reshape(*valid.shape, H * D), valid, R)
    return packed.view(R, H, D)


def _attention_fn(backend: str, sync_free: bool = False) -> AttentionFn:
    if backend == "reference":
        return reference_attention
    try:
        import ragged_kernels
    except ImportError as e:  # the kernel library is part of this repository: a missing one is a broken install
        raise RuntimeError(f"backend {backend!r} needs the ragged_kernels package ({e})") from e
    if backend == "padded_sdpa" and sync_free:
        return functools.partial(ragged_kernels.padded_sdpa_attention, pad_to_bound=True)
    return ragged_kernels.ATTENTION_BACKENDS[backend]


# What pack_tokens writes into the packed buffer's padding rows: None = nothing. Tests set NaN to
# show that no padding row ever reaches a valid one (the logits do not change).
PADDING_FILL: float | None = None


def applied_mask(keep: torch.Tensor, valid: torch.Tensor | None = None) -> torch.Tensor:
    """The mask a pruning stage applies for the decision `keep` [B, N] bool: `keep` where `valid` [B, N]
    (None: everywhere), and every image's class token (position 0) whatever the decision says. A new
    tensor: the pruner's (or `keep_override`'s) mask is left alone.

    The one statement of the class-token rule along the pruned forward. Every stage's decision reaches
    the packed buffer through `_Packer`, which applies this rule: the torch packer by calling this, the
    kernel packer by `pack_tokens(keep_first=True)`, the same rule inside the copy (the two are tested to
    agree). The model materialises the applied mask with this function only where it reads it (recorded
    masks, exact capacity, a fused token, a replayed mask's size check)."""
    keep = keep.clone() if valid is None else keep & valid
    keep[:, 0] = True
    return keep


class _Packer:
    """Packs a stage's kept tokens. `dense(x, keep, cap)`: x [B, N, C], keep [B, N]; `rows(x, cu, n, keep,
    cap)`: packed rows [R, C] and a per-position keep [B, n] (positions past an image's length are never
    read). Both pack `applied_mask(keep)`: every image's first row (CLS) whatever `keep` says."""

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


class _LoggingPacker:
    """A `_Packer` that appends every packing's (cu_seqlens, capacity) to a PackingLog."""

    def __init__(self, inner: _Packer, log: PackingLog) -> None:
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


def _ragged_linear_fn() -> Callable[..., torch.Tensor]:
    from ragged_kernels.linear import ragged_linear

    return ragged_linear


def _ragged_layer_norm_fn() -> Callable[..., torch.Tensor]:
    from ragged_kernels.linear import ragged_layer_norm

    return ragged_layer_norm


def _is_plain_mlp(mlp: nn.Module) -> bool:
    """timm's Mlp with Linear layers and exact GELU (what DeiT uses): fc1 + act can be fused."""
    act = getattr(mlp, "act", None)
    return (
        isinstance(getattr(mlp, "fc1", None), nn.Linear)
        and isinstance(getattr(mlp, "fc2", None), nn.Linear)
        and isinstance(act, nn.GELU)
        and act.approximate == "none"
    )


class PatchGemm(nn.Conv2d):
    """A patch embedding (Conv2d with stride == kernel, no padding) computed as one GEMM.

    Why: on the H200, cuDNN runs DeiT-B's 16x16/16 fp16 patch convolution as an sm80 implicit-GEMM
    kernel plus two NCHW<->NHWC transposes, ~560 us at B 64 (9% of the dense forward; 2026-11-29,
    docs/performance.md "Where the pruned forward's time goes"). The same product as unfold + one cuBLAS
    GEMM, [B*h*w, C*p*q] x [C*p*q, out], moves the
    image once. Same parameters (`weight` [out, C, p, q], `bias`) and state_dict keys as the Conv2d it
    replaces, same output [B, out, h, w] (a permuted view; timm's `flatten(2).transpose(1, 2)` of it is
    contiguous). Only the summation order of each dot product differs (fp32 accumulation either way).
    """

    @classmethod
    def replacing(cls, conv: nn.Module) -> nn.Module:
        """`conv` as a PatchGemm sharing its parameters, or `conv` itself when it is no patch convolution."""
        if (
            type(conv) is not nn.Conv2d
            or conv.stride != conv.kernel_size
            or conv.padding not in ((0, 0), "valid")
            or conv.dilation != (1, 1)
            or conv.groups != 1
        ):
            return conv
        new = cls(conv.in_channels, conv.out_channels, conv.kernel_size, conv.stride, bias=conv.bias is not None,
                  device="meta")
        new.weight = conv.weight
        new.bias = conv.bias
        return new

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, C, H, W = x.shape
        p, q = self.kernel_size
        h, w = H // p, W // q  # as the convolution: a remainder of rows/columns is dropped
        cols = x[:, :, : h * p, : w * q].reshape(B, C, h, p, w, q).permute(0, 2, 4, 1, 3, 5).reshape(B * h * w, -1)
        y = F.linear(cols, self.weight.reshape(self.out_channels, -1), self.bias)
        return y.view(B, h, w, self.out_channels).permute(0, 3, 1, 2)


class _StageInputs:
    """What one pruning stage may read besides its tokens x, each built on first use and then shared: the
    dense index of packed rows (None for dense x) and the validity mask [B, n], the tokens as a dense view
    [B, n, C], and an `after_attention` pruner's attention facts. A `decide_packed` fast path and the
    packers read none of them, so a stage on that path builds none."""

    def __init__(self, model: PrunedDeiT, x: torch.Tensor, cu: torch.Tensor | None, n: int,
                 qkv: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None, scale: float | None) -> None:
        self.model, self.x, self.cu, self.n, self.qkv, self.scale = model, x, cu, n, qkv, scale
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
            self._tokens = self.x if index is None else self.model._pack.to_dense(self.x, self.cu, index)
        return self._tokens

    def attn(self) -> AttnInfo | None:
        """The attention facts of an `after_attention` stage (None before a block)."""
        if self._attn is None and self.qkv is not None:
            self._attn = self.model._attn_info(*self.qkv, self.cu, self.valid, self.scale, self.index)
        return self._attn


class PrunedDeiT(nn.Module):
    """A timm DeiT whose forward prunes tokens with `pruner` and attends with `backend`.

    Args:
        backbone: a timm VisionTransformer (DeiT, class token, no register tokens).
        pruner: a bound pruner (owned by this module).
        backend: one of BACKENDS or "reference".
        exact_capacity: eager only: after each stage read the kept total and longest image back to
            the host (one sync per stage) and size the packed buffer exactly.
        packer: "ragged_kernels" (the library's pack_tokens) or "torch"; default: torch for the
            reference backend, ragged_kernels otherwise. Packing is exact data movement, so the choice
            never changes results.
        sync_free: every shape from host ints, for CUDA-graph capture and torch.compile: the only
            backend this changes is padded_sdpa, which then pads to the capacity bound instead of
            reading the batch's longest kept length back (the others never read anything back).
        ragged_linear: experimental: on packed tokens, run qkv, proj and the MLP (fc1 with its GELU
            fused) through `ragged_kernels.linear.ragged_linear`, and the blocks' LayerNorms through
            `ragged_layer_norm`, which skip the capacity rows past `cu_seqlens[-1]` on the device
            instead of computing them (graph mode at the kept size).
            Padding rows then hold uninitialised values, which the packed layout never reads into a
            valid row. Opt-in: on the H200 it paid for Threshold-L2 only, and since Threshold-L2's batch
            budget it pays for none (2026-11-29, docs/performance.md "Opt-in paths"): cuBLAS on the tighter
            buffer is 6-7% faster.
        fused_blocks: every block as five launches with the LayerNorms, GELU and residual adds fused into the
            linear layers, and the head as one (`pruners.fused`), the blocks before the first stage included
            (on the dense batch as rows with uniform segments; `dense` then attends with the library's
            kernel). For serving batches, where the forward is a chain of small launches. Not with
            ragged_linear (its unfused form); compiled, the fused layers stay custom ops and inductor fuses
            what lies between them (embedding, the stages' bookkeeping).

    Attributes:
        record: when True, each forward stores the keep masks it applied in `recorded_keeps`
            (one [B, N] bool tensor per stage, before any EViT fused token).
        keep_override: when set to such a list, the forward applies these masks instead of the
            pruner's decisions (replays another backend's decisions; fusion weights are recomputed).
            The pruner still computes its own decisions, unused, so a replaying forward costs what
            the pruned forward costs. The first forward after it is set checks, with one host read
            per stage, that every mask fits this model's packed buffers (ValueError otherwise: the
            packers would drop the tokens that do not fit); later forwards and CUDA-graph captures
            do not read.
    """

    def __init__(
        self,
        backbone: nn.Module,
        pruner: Pruner,
        backend: str,
        *,
        exact_capacity: bool = False,
        packer: str | None = None,
        ragged_linear: bool = False,
        sync_free: bool = False,
        fused_blocks: bool = False,
    ) -> None:
        super().__init__()
        if backend not in BACKENDS + EXTRA_BACKENDS:
            raise ValueError(f"unknown backend {backend!r}; choose one of {BACKENDS + EXTRA_BACKENDS}")
        if packer is None:
            packer = "torch" if backend == "reference" else "ragged_kernels"
        if packer not in ("torch", "ragged_kernels"):
            raise ValueError(f"packer must be 'torch' or 'ragged_kernels', got {packer!r}")
        if getattr(backbone, "reg_token", None) is not None or getattr(backbone, "num_prefix_tokens", 1) != 1:
            raise ValueError("only class-token ViTs without register tokens are supported")
        self.backbone = backbone
        self.__dict__["_dtype_device_ref"] = backbone.cls_token  # check_images: not a registered parameter
        self.pruner = pruner
        self.backend = backend
        self.exact_capacity = bool(exact_capacity)
        self.packer = packer
        if ragged_linear and backend == "dense":
            raise ValueError("ragged_linear applies to packed tokens; the dense backend has none")
        self.ragged_linear = bool(ragged_linear)
        self._ragged_linear_fn = _ragged_linear_fn() if ragged_linear else None
        self._ragged_layer_norm_fn = _ragged_layer_norm_fn() if ragged_linear else None
        if sync_free:
            check_capturable(backend, "sync_free")
            if exact_capacity:
                raise ValueError("sync_free excludes exact_capacity (it reads counts back to the host)")
        self.sync_free = bool(sync_free)
        self._attend = _attention_fn(backend, self.sync_free) if backend != "dense" else reference_attention
        if fused_blocks and ragged_linear:
            raise ValueError("fused_blocks already runs every linear layer through ragged_linear, fused with its "
                             "neighbours: choose one of fused_blocks and ragged_linear")
        self.fused_blocks = bool(fused_blocks)
        self._fused = None
        if fused_blocks:
            from pruners.fused import FusedBlocks

            self._fused = FusedBlocks(backbone, _attention_fn("triton") if backend == "dense" else self._attend)
        self._pack = _Packer(packer)
        self._stage_at = {blk: s for s, blk in enumerate(pruner.stages)}
        self.record = False
        self.recorded_keeps: list[torch.Tensor] = []
        self.keep_override = None
        pe = backbone.patch_embed
        self.img_size = tuple(pe.img_size)
        self.num_patches = pe.num_patches
        pos = getattr(backbone, "pos_embed", None)
        # timm's `_pos_embed` concatenates the class token, then adds the position embedding: a
        # CatArrayBatchedCopy (66 us at DeiT-B B 64 on the H200) and a second full pass. With the plain
        # layout below, one add writes the patch rows into place instead (`_embed`).
        self._fused_pos_embed = (
            getattr(backbone, "cls_token", None) is not None and pos is not None
            and not getattr(backbone, "no_embed_class", False) and not getattr(backbone, "dynamic_img_size", False)
            and tuple(pos.shape[:2]) == (1, self.num_patches + 1)
        )

    # -- layouts ---------------------------------------------------------------------------------
    def _linear(self, layer: nn.Module, x: torch.Tensor, cu: torch.Tensor | None) -> torch.Tensor:
        """`layer(x)`; on packed rows with `ragged_linear`, only the rows before cu_seqlens[-1]."""
        if cu is None or self._ragged_linear_fn is None or not isinstance(layer, nn.Linear):
            return layer(x)
        return self._ragged_linear_fn(x, layer.weight, layer.bias, cu)

    def _norm(self, norm: nn.Module, x: torch.Tensor, cu: torch.Tensor | None) -> torch.Tensor:
        """`norm(x)`; on packed rows with `ragged_linear`, a LayerNorm runs on the rows before cu_seqlens[-1] only."""
        # Gated on `_ragged_linear_fn` (the one switch `calibrate` turns off); the function is resolved once.
        if cu is None or self._ragged_linear_fn is None or not isinstance(norm, nn.LayerNorm) or x.dim() != 2 \
                or tuple(norm.normalized_shape) != (x.shape[1],):
            return norm(x)
        return self._ragged_layer_norm_fn(x, norm.weight, norm.bias, norm.eps, cu)

    def _qkv(
        self, blk: nn.Module, h: torch.Tensor, cu: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        a = blk.attn
        qkv = self._linear(a.qkv, h, cu).unflatten(-1, (3, a.num_heads, a.head_dim))
        q, k, v = qkv.unbind(-3)
        return a.q_norm(q), a.k_norm(k), v

    def _attn_out(self, blk: nn.Module, h: torch.Tensor, o: torch.Tensor, cu: torch.Tensor | None) -> torch.Tensor:
        a = blk.attn
        o = a.norm(o.flatten(-2))
        gate = getattr(a, "gate", None)
        if gate is not None:
            o = o * gate(h).sigmoid()
        return blk.drop_path1(blk.ls1(a.proj_drop(self._linear(a.proj, o, cu))))

    def _attention(
        self, blk: nn.Module, x: torch.Tensor, cu: torch.Tensor | None, n: int
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Residual-added attention output and the q, k, v it used, on either layout."""
        h = self._norm(blk.norm1, x, cu)
        q, k, v = self._qkv(blk, h, cu)
        if cu is None:  # dense [B, N, H, D]: the same SDPA for every backend
            o = F.scaled_dot_product_attention(
                q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), scale=blk.attn.scale
            ).transpose(1, 2)
        else:
            o = self._attend(q, k, v, cu, n, scale=blk.attn.scale)
        return x + self._attn_out(blk, h, o, cu), q, k, v

    def _mlp(self, blk: nn.Module, x: torch.Tensor, cu: torch.Tensor | None) -> torch.Tensor:
        h = self._norm(blk.norm2, x, cu)
        mlp = blk.mlp
        if cu is None or self._ragged_linear_fn is None or not _is_plain_mlp(mlp):
            return x + blk.drop_path2(blk.ls2(mlp(h)))
        # timm Mlp: fc1 -> act -> drop1 -> norm -> fc2 -> drop2; fc1 and its exact GELU in one kernel.
        h = self._ragged_linear_fn(h, mlp.fc1.weight, mlp.fc1.bias, cu, gelu=True)
        h = self._linear(mlp.fc2, mlp.norm(mlp.drop1(h)), cu)
        return x + blk.drop_path2(blk.ls2(mlp.drop2(h)))

    # -- pruning ---------------------------------------------------------------------------------
    def _prune(
        self, stage: int, x: torch.Tensor, cu: torch.Tensor | None, n: int,
        qkv: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None, scale: float | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, int]:
        """One pruning stage on x (dense [B, N, C] before the first stage, packed rows after): decide,
        replay (`keep_override`), size the packed buffer, pack. `qkv` (and the block's `scale`) for
        `after_attention` pruners.

        The packers apply the decision as `applied_mask` does on their own, so the applied mask is built
        only where something reads it: a recorded mask, a fused token on the dense view, exact capacity.
        A fused token with `fusion_weights` (EViT) is written by the packer from the rows it packs."""
        pr = self.pruner
        B = x.shape[0] if cu is None else cu.shape[0] - 1
        inputs = _StageInputs(self, x, cu, n, qkv, scale)
        keep = self._decide(stage, inputs)
        n_out, cap = pr.tokens_bound(stage, n), pr.rows_bound(stage, n, B)
        if self._keep_override is not None:
            keep = self._replayed(stage, inputs, B, n_out, cap)
        self._applied += 1
        fuse = self._fusion_weights(stage, inputs)
        on_dense_view = pr.fuses_tokens and fuse is None
        if not (self.record or self.exact_capacity or on_dense_view):
            return *self._pack_stage(x, cu, n, keep, cap, fuse), n_out
        keep = applied_mask(keep, inputs.valid)
        if self.record:
            self.recorded_keeps.append(keep)
        if on_dense_view:  # what is packed is then the dense view with the fused token appended
            x, keep = self._with_extra_token(stage, inputs, keep)
            cu = None
        if self.exact_capacity:
            counts = keep.sum(1)
            if fuse is not None:  # the packer's fused row, where an image drops a token
                counts = counts + (inputs.valid & ~keep).any(1)
            cap, n_out = (int(t) for t in torch.stack([counts.sum(), counts.max()]).tolist())
        return *self._pack_stage(x, cu, n, keep, cap, fuse), n_out

    def _fusion_weights(self, stage: int, inputs: _StageInputs) -> torch.Tensor | None:
        """The pruner's `fusion_weights` where the packer can use them (ragged_kernels), else None."""
        if not self.pruner.fuses_tokens or self._pack.name != "ragged_kernels":
            return None
        return self.pruner.fusion_weights(stage, inputs.valid, inputs.attn())

    def _decide(self, stage: int, inputs: _StageInputs) -> torch.Tensor:
        """The pruner's keep mask: its `decide_packed` fast path where it has one, else `decide` on the dense
        views. The pruner decides even when its decision is replaced (`keep_override`): a replaying model
        then pays what the pruner costs, so its timing compares with the model whose decisions it replays."""
        pr = self.pruner
        keep = pr.decide_packed(stage, inputs.x, inputs.cu, inputs.n, inputs.qkv, inputs.scale)
        if keep is None:
            keep = pr.decide(stage, inputs.tokens() if pr.needs_tokens else None, inputs.valid, inputs.attn())
        return keep

    def _replayed(self, stage: int, inputs: _StageInputs, B: int, n_out: int, cap: int) -> torch.Tensor:
        """`keep_override`'s mask for this stage, checked against the stage's shape (always) and, on the
        first eager forward after it is set, against the packed buffers it must fit."""
        i, masks, x, n = self._applied, self._keep_override, inputs.x, inputs.n
        if i >= len(masks):
            raise ValueError(f"keep_override has {len(masks)} masks; stage {stage} needs one more")
        keep = masks[i]
        if keep.shape != (B, n) or keep.dtype != torch.bool or keep.device != x.device:
            raise ValueError(
                f"keep_override[{i}] must be bool {(B, n)} on {x.device}, got {keep.dtype} "
                f"{tuple(keep.shape)} on {keep.device}"
            )
        # exact buffers hold any mask; a compiled forward is checked by one eager forward first
        if not self._override_checked and not self.exact_capacity and not torch.compiler.is_compiling():
            self._check_override_fits(keep, inputs, n_out, cap)
        return keep

    def _with_extra_token(self, stage: int, inputs: _StageInputs, keep: torch.Tensor):
        """(dense tokens [B, n(+1), C], applied mask [B, n(+1)]): the pruner's extra token (EViT's fused
        token) appended to the stage's dense view and mask where it gives one."""
        xd = inputs.tokens()
        extra = self.pruner.extra_token(stage, xd, inputs.valid, keep, inputs.attn())
        if extra is None:
            return xd, keep
        return torch.cat([xd, extra[0]], dim=1), torch.cat([keep, extra[1]], dim=1)

    def _pack_stage(self, x: torch.Tensor, cu: torch.Tensor | None, n: int, keep: torch.Tensor, cap: int,
                    fuse: torch.Tensor | None = None):
        """(packed rows [cap, C], cu_seqlens) of the tokens `keep` selects from x (dense [B, N, C] when cu is
        None, packed rows otherwise), with `fuse`'s fused row per image where given."""
        if cu is None:
            return self._pack.dense(x, keep, cap, fuse)
        return self._pack.rows(x, cu, n, keep, cap, fuse)

    def _check_override_fits(self, keep: torch.Tensor, inputs: _StageInputs, n_out: int, cap: int) -> None:
        """A replayed mask must fit the packed buffers this pruner sizes (`tokens_bound` per image,
        `rows_bound` per batch): the packers would silently drop what does not fit. One host read,
        on the first forward after `keep_override` is set (never inside a CUDA-graph capture)."""
        if inputs.x.is_cuda and torch.cuda.is_current_stream_capturing():
            return
        valid = inputs.valid
        applied = applied_mask(keep, valid)
        rows = applied.sum(1)
        if self.pruner.fuses_tokens:  # EViT's fused token comes on top wherever a token was dropped
            rows = rows + (applied != valid).any(1)
        longest, total = (int(t) for t in torch.stack([rows.max(), rows.sum()]).tolist())
        if longest > n_out or total > cap:
            raise ValueError(
                f"keep_override[{self._applied}] keeps up to {longest} tokens in an image and {total} in the batch; "
                f"this model's {self.pruner.name} stage holds {n_out} per image and {cap} per batch, so tokens "
                "would be dropped: replay masks of a pruner with the same capacity"
            )

    @property
    def keep_override(self) -> list[torch.Tensor] | None:
        return self._keep_override

    @keep_override.setter
    def keep_override(self, masks: Sequence[torch.Tensor] | None) -> None:
        if masks is not None:
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
        self._keep_override = masks
        self._override_checked = False

    def _attn_info(self, q, k, v, cu, valid, scale, index: tuple | None) -> AttnInfo:
        """The CLS attention row (and the values or their norms) an attention-based pruner decides on; on
        packed rows `index` is the stage's `dense_index`, shared with the token gather."""
        pr = self.pruner
        if cu is None:
            probs = cls_attention_full(q, k, scale)  # every position is valid before the first stage
            vd = v.flatten(-2) if pr.needs_values else None
            vn = value_norms(v) if pr.needs_value_norms else None
        else:
            probs = cls_attention_packed(q, k, cu, valid.shape[1], scale, index)
            vd = gather_dense(v, index).flatten(-2) if pr.needs_values else None
            vn = value_norms(v, index) if pr.needs_value_norms else None
        return AttnInfo(probs, vd, vn)

    # -- forward ---------------------------------------------------------------------------------
    def check_images(self, images: torch.Tensor) -> None:
        """Raise ValueError/TypeError unless images is a float [B, 3, H, W] batch of the model's size."""
        if not isinstance(images, torch.Tensor):
            raise TypeError(f"images must be a torch.Tensor, got {type(images).__name__}")
        if images.dim() != 4 or images.shape[1] != 3 or tuple(images.shape[2:]) != self.img_size:
            raise ValueError(
                f"images must be [B, 3, {self.img_size[0]}, {self.img_size[1]}], got {tuple(images.shape)}"
            )
        if not images.is_floating_point():
            raise TypeError(f"images must be floating point, got {images.dtype}")
        if images.shape[0] < 1:
            raise ValueError("images must hold at least one image")
        # A plain reference to one of the model's parameters (nn.Module attribute lookups cost ~1 us on
        # the hot path; .to()/.half() convert parameters in place); the live one settles a mismatch.
        ref = self.__dict__["_dtype_device_ref"]
        if images.dtype is not ref.dtype or images.device != ref.device:
            ref = self.__dict__["_dtype_device_ref"] = self.backbone.cls_token
            if images.device != ref.device or (
                images.dtype is not ref.dtype and not torch.is_autocast_enabled(images.device.type)
            ):
                raise TypeError(f"images must have the model's dtype and device ({ref.dtype} on {ref.device}), got "
                                f"{images.dtype} on {images.device}: move one of them with .to()")

    def _embed(self, images: torch.Tensor) -> torch.Tensor:
        """Patch embedding, class token and position embedding: timm's values (the same additions),
        with the class token placed by writing into one buffer instead of a concatenation."""
        m = self.backbone
        x = m.patch_embed(images)
        pos = m.pos_embed
        grad = torch.is_grad_enabled() and (pos.requires_grad or x.requires_grad or m.cls_token.requires_grad)
        # out= below does not take part in autograd; under torch.compile timm's concatenation and add
        # are fused into one kernel anyway.
        if not self._fused_pos_embed or x.dim() != 3 or grad or torch.compiler.is_compiling():
            x = m._pos_embed(x)
        else:
            b, n, c = x.shape
            out = torch.empty((b, 1 + n, c), dtype=torch.result_type(x, pos), device=x.device)
            torch.add(x, pos[:, 1:], out=out[:, 1:])
            out[:, 0] = m.cls_token[:, 0] + pos[:, 0]
            x = m.pos_drop(out)
        return m.norm_pre(m.patch_drop(x))

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """Logits [B, 1000] for images [B, 3, H, W] (same dtype/device as the model)."""
        self.check_images(images)
        return self.logits(images)

    @contextlib.contextmanager
    def packing_log(self) -> Iterator[PackingLog]:
        """Context manager: every packing of this model while it is active is logged (an untimed forward
        only: it copies each `cu_seqlens`); the model's packer is restored on exit, errors included.

        Example:
            >>> with model.packing_log() as log:
            ...     model(images)
            >>> lengths, capacities = log.lengths()
        """
        log, packer = PackingLog(), self._pack
        self._pack = _LoggingPacker(packer, log)
        try:
            yield log
        finally:
            self._pack = packer

    @property
    def override_checked(self) -> bool:
        """False while a `keep_override` is set that no eager forward has checked yet (a compiled or
        captured forward does not check: run one eager forward first, as `CompiledPrunedModel` does)."""
        return self._keep_override is None or self._override_checked or self.exact_capacity

    def logits(self, images: torch.Tensor) -> torch.Tensor:
        """The forward without the input check: what torch.compile traces and graph mode captures."""
        m = self.backbone
        if self._keep_override is not None:
            if self.backend == "dense":
                raise ValueError("the dense backend does not prune: keep_override does not apply to it")
            if len(self._keep_override) != len(self._stage_at):
                raise ValueError(f"keep_override has {len(self._keep_override)} masks for this model's "
                                 f"{len(self._stage_at)} pruning stages")
        if self.backend == "dense" and self._fused is None:
            # timm's forward (forward_features + forward_head) with the same embedding as the pruned path.
            return m.forward_head(m.norm(m.blocks(self._embed(images))))
        self.recorded_keeps = []
        self._applied = 0
        x = self._embed(images)
        if self._fused is not None:
            logits = self._fused_forward(x)
        else:
            x, cu = self._blocks(x, None, x.shape[1], self._attention, self._mlp, self._prune)
            cls = x[:, 0] if cu is None else x.index_select(0, cu[:-1])  # int32 rows: no int64 copy
            logits = m.head(m.head_drop(m.fc_norm(m.norm(cls))))
        if self._keep_override is not None and not torch.compiler.is_compiling() and not (
            images.is_cuda and torch.cuda.is_current_stream_capturing()
        ):
            # Outside a capture every stage's mask was checked (or exact_capacity needs none), and fits.
            self._override_checked = True
        return logits

    def _blocks(self, x: torch.Tensor, cu: torch.Tensor | None, n: int, attention, mlp, prune):
        """(x, cu) after every block and its pruning stage: a `before_block` stage prunes before its block,
        an `after_attention` one between its block's attention and MLP. `attention(blk, x, cu, n)` ->
        (x, q, k, v), `mlp(blk, x, cu)` -> x and `prune` (`_prune`'s arguments) are the forward's own steps."""
        before = self.pruner.placement == "before_block"
        for i, blk in enumerate(self.backbone.blocks):
            stage = self._stage_at.get(i)
            if stage is not None and before:
                x, cu, n = prune(stage, x, cu, n)
            x, q, k, v = attention(blk, x, cu, n)
            if stage is not None and not before:
                x, cu, n = prune(stage, x, cu, n, (q, k, v), blk.attn.scale)
            x = mlp(blk, x, cu)
        return x, cu

    def _fused_forward(self, x: torch.Tensor) -> torch.Tensor:
        """Blocks and head of the fused forward (`pruners.fused`) on the embedded tokens x [B, N, C]: the
        rows of the dense batch with uniform segments until the first stage, then the packed rows. A stage
        sees the dense phase as [B, N, C] views (and q, k, v as [B, N, H, D]), as the unfused forward gives it."""
        fused = self._fused
        batch, n, width = x.shape
        dense = True

        def prune(stage, x, cu, n, qkv=None, scale=None):
            nonlocal dense
            if not dense:
                return self._prune(stage, x, cu, n, qkv, scale)
            dense = False  # the unfused forward's dense layouts, as views of the rows
            qkv = None if qkv is None else tuple(t.view(batch, n, *t.shape[1:]) for t in qkv)
            return self._prune(stage, x.view(batch, n, width), None, n, qkv, scale)

        x, cu = self._blocks(x.reshape(batch * n, width), fused.uniform_cu(batch, n, x.device), n, fused.attention,
                             fused.mlp, prune)
        return fused.head(self.backbone, x, cu)

    @torch.no_grad()
    def calibrate(self, images: torch.Tensor) -> None:
        """Calibrate a threshold pruner's per-stage thresholds on `images` (host syncs: not for timing).

        Runs the backend-independent reference path, so thresholds do not depend on the backend.

        Args:
            images: [B, 3, H, W] calibration batch.
        """
        if not hasattr(self.pruner, "calibrating"):
            raise ValueError(f"pruner {self.pruner.name!r} has nothing to calibrate")
        self.check_images(images)
        if not bool(torch.isfinite(images).all()):
            raise ValueError("calibration images must be finite (they hold NaN or infinity)")
        attend, pack, linear, fused = self._attend, self._pack, self._ragged_linear_fn, self._fused
        self._attend, self._pack, self._ragged_linear_fn = reference_attention, _Packer("torch"), None
        self._fused = None
        self.pruner.calibrating = True
        try:
            self.forward(images)
        finally:
            self.pruner.calibrating = False
            self._attend, self._pack, self._ragged_linear_fn, self._fused = attend, pack, linear, fused
        self.pruner.calibrated = True

    def extra_repr(self) -> str:
        return (
            f"backend={self.backend!r}, exact_capacity={self.exact_capacity}, packer={self.packer!r}, "
            f"ragged_linear={self.ragged_linear}, sync_free={self.sync_free}, fused_blocks={self.fused_blocks}"
        )


def synthetic_images(n: int, size: int, seed: int = 0) -> torch.Tensor:
    """Seeded, smooth, photo-like test images (low-frequency colour fields plus texture), normalised.

    Args:
        n: number of images.
        size: side in pixels.
        seed: generator seed.

    Returns:
        float32 [n, 3, size, size], roughly zero-mean unit-variance per channel.
    """
    g = torch.Generator().manual_seed(seed)
    low = torch.randn(n, 3, 7, 7, generator=g)
    img = F.interpolate(low, size=(size, size), mode="bicubic", align_corners=False)
    img = img + 0.3 * torch.randn(n, 3, size, size, generator=g)
    return (img - img.mean(dim=(2, 3), keepdim=True)) / img.std(dim=(2, 3), keepdim=True)


_SEEDED_CACHE_SIZE = 2
_seeded: OrderedDict[tuple[str, int], nn.Module] = OrderedDict()


def _seeded_backbone(model_name: str, seed: int) -> nn.Module:
    """A fresh copy of timm's `model_name` initialised under `seed` (fp32, CPU).

    The last _SEEDED_CACHE_SIZE backbones are kept and copied: timm's random init of DeiT-B/384 takes
    ~0.6 s on a CPU core, a copy ~0.1 s, and the benchmarks build the same model under every backend
    (~80 builds per full asv run). The copy has exactly the weights a fresh init gives. Callers get
    their own module; `clear_backbone_cache()` drops the cached ones (up to ~0.7 GB for two DeiT-B).
    """
    import copy

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


def _checkpoint_backbone(model_name: str, path: object, seed: int) -> nn.Module:
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


_BUILD_OPTIONS = {"seed", "checkpoint_path", "graph", "compile", "exact_capacity", "packer", "calibration_images",
                  "ragged_linear", "fused_blocks"}


def build_pruned_model(model_name: str, pruner: Pruner | str | None, backend: str, **options) -> nn.Module:
    """Build a pruned DeiT.

    Args:
        model_name: one of MODELS.
        pruner: a pruner from `create_pruner` (a copy is bound to the model, so one pruner object can
            build several models with identical decisions), a pruner name (default options), or None
            (only with backend "dense").
        backend: one of BACKENDS ("dense" = the stock timm forward, no pruning) or "reference".
        **options:
            seed (int, 0): weight seed; the same seed gives the same weights under every backend.
            checkpoint_path (str): local timm checkpoint instead of seeded weights (nothing is downloaded).
            graph (bool, False): capture the forward as a CUDA graph per batch size (a sync-free backend:
                `CAPTURABLE_BACKENDS`; padded_sdpa then pads to the capacity).
            compile (bool or str, False): `torch.compile(fullgraph=True)` the forward at its capacities
                (True: inductor's default mode; a str: that mode, see `pruners.compiled.MODES`); with
                graph=True the compiled forward is what is captured.
            exact_capacity (bool, False): eager only: one host read per stage to size buffers exactly.
            packer (str): "ragged_kernels" or "torch" (see PrunedDeiT).
            ragged_linear (bool, False): experimental, see PrunedDeiT.
            fused_blocks (bool, False): each block as five launches and the head as one (`pruners.fused`);
                any backend, dense included; eager, graph mode, compiled or both.
            calibration_images (Tensor [B,3,H,W]): for an uncalibrated threshold_l2 pruner (default:
                4 seeded `synthetic_images`).

    Returns:
        PrunedDeiT (fp32, CPU, eval mode; move it with .to()), CompiledPrunedModel with compile (no graph), or
        GraphedPrunedModel when graph=True. Move the model before its first call: compiling and capturing
        happen then.
    """
    import copy

    unknown = set(options) - _BUILD_OPTIONS
    if unknown:
        raise TypeError(f"unknown build_pruned_model options {sorted(unknown)}; known: {sorted(_BUILD_OPTIONS)}")
    if model_name not in MODELS:
        raise ValueError(f"unknown model {model_name!r}; choose one of {MODELS}")
    if backend not in BACKENDS + EXTRA_BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; choose one of {BACKENDS + EXTRA_BACKENDS}")
    seed = options.get("seed", 0)
    if not isinstance(seed, numbers.Integral) or isinstance(seed, bool):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    seed = int(seed)
    if not 0 <= seed < 2**63:
        raise ValueError(f"seed must be in [0, 2**63), got {seed}")
    for flag in ("graph", "exact_capacity", "ragged_linear", "fused_blocks"):
        if not isinstance(options.get(flag, False), bool):
            raise TypeError(f"{flag} must be True or False, got {options[flag]!r}")
    graph = options.get("graph", False)
    compile_mode = options.get("compile", False)
    if not isinstance(compile_mode, bool | str):
        raise TypeError(f"compile must be True, False or a torch.compile mode, got {compile_mode!r}")
    if graph:
        check_capturable(backend, "graph mode")
    if compile_mode is not False:
        check_capturable(backend, "compile")
        from pruners.compiled import CUDAGRAPH_MODES, MODES

        if compile_mode is not True and compile_mode not in MODES:
            raise ValueError(f"compile must be True or one of {[m for m in MODES if m]}, got {compile_mode!r}")
        if graph and compile_mode in CUDAGRAPH_MODES:
            raise ValueError(f"compile mode {compile_mode!r} captures CUDA graphs itself; with graph=True use "
                             "True or 'max-autotune-no-cudagraphs' (graph mode captures the compiled forward)")
    if (graph or compile_mode is not False) and options.get("exact_capacity", False):
        raise ValueError("exact_capacity reads counts back to the host and cannot be captured in graph mode or "
                         "compiled")
    if isinstance(pruner, str):
        pruner = create_pruner(pruner)
    if pruner is None:
        if backend != "dense":
            raise ValueError(f"backend {backend!r} needs a pruner")
        pruner = create_pruner("evit", keep_rate=1.0, stages=())
    if not isinstance(pruner, Pruner):
        raise TypeError(f"pruner must come from create_pruner, got {type(pruner).__name__}")

    ckpt = options.get("checkpoint_path")
    images = options.get("calibration_images")
    if images is not None and not isinstance(images, torch.Tensor):
        raise TypeError(f"calibration_images must be a float [B, 3, H, W] tensor, got {type(images).__name__}")
    if ckpt is not None:
        backbone = _checkpoint_backbone(model_name, ckpt, seed)
    else:
        backbone = _seeded_backbone(model_name, seed)
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
    model = PrunedDeiT(
        backbone,
        pruner,
        backend,
        exact_capacity=options.get("exact_capacity", False),
        packer=options.get("packer"),
        ragged_linear=options.get("ragged_linear", False),
        sync_free=graph or compile_mode is not False,
        fused_blocks=options.get("fused_blocks", False),
    ).eval()
    if getattr(pruner, "calibrated", True) is False:
        if images is None:
            images = synthetic_images(4, model.img_size[0], seed=seed)
        elif images.is_floating_point():  # the model is fp32 on the CPU until the caller moves it
            images = images.detach().to("cpu", torch.float32)
        model.calibrate(images)
    compiled = None
    if compile_mode is not False:
        from pruners.compiled import CompiledPrunedModel

        compiled = CompiledPrunedModel(model, mode=None if compile_mode is True else compile_mode)
    if graph:
        from pruners.graph import GraphedPrunedModel

        return GraphedPrunedModel(model, forward=compiled)
    return model if compiled is None else compiled
