"""Packed (ragged) forward of a timm DeiT with a token pruner, over a choice of attention backends.

Blocks before the first pruning point run on the dense batch [B, 1+N0, C] with PyTorch SDPA, the same
code under every backend, so the first keep decisions are bitwise identical across backends. From the
first pruning point on, every block runs on packed tokens [R, C] (norms, qkv, MLP and projections as
row-wise ops; attention through the chosen backend with `cu_seqlens`), and the head reads the CLS
rows. The block forward is our own, written over timm's Block submodules (`pruners.layers.BlockLayers`)
instead of Block.forward.

No host sync in the forward: R ("capacity") and the per-image length bound are host ints that the
pruner derives from the stage configuration (exact for fixed-count pruners, an upper bound for
ragged ones; padding rows past cu_seqlens[-1] are computed and ignored), so the `triton` forward can
be captured as one CUDA graph (pruners.graph). `exact_capacity=True` is the documented eager
alternative for ragged pruners: one host read of the kept total per stage shrinks the buffer so large
batches do not spend linear-layer FLOPs on padding rows.

Where the rest lives: the layers and attention backends in `pruners.layers`, the packers and the
class-token rule in `pruners.packing`, what a stage reads and the replay checks in `pruners.stages`,
the forward's flags (`ForwardOptions`) in `pruners.options`, the factory (`build_pruned_model`,
`BuildOptions`) in `pruners.build`, backbones in `pruners.backbones`, `synthetic_images` in
`pruners.sample_images`. The other public names this module held before that split (2026-12-05) are
still importable from it; the factory is imported from `pruners` (it builds on this
module, so this one cannot name it).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

import torch
from torch import nn

from pruners.backbones import MODELS, clear_backbone_cache
from pruners.backends import BACKENDS, EXTRA_BACKENDS
from pruners.base import Pruner
from pruners.layers import AttentionFn, BlockLayers, PatchGemm, attention_fn, reference_attention
from pruners.options import ForwardOptions
from pruners.packing import LoggingPacker, Packer, PackingLog, applied_mask
from pruners.sample_images import synthetic_images
from pruners.stages import StageInputs, check_override_fits, decide, override_masks, replayed_mask


class PrunedDeiT(nn.Module):
    """A timm DeiT whose forward prunes tokens with `pruner` and attends with `backend`.

    Args:
        backbone: a timm VisionTransformer (DeiT, class token, no register tokens).
        pruner: a bound pruner (owned by this module).
        backend: one of BACKENDS or "reference".
        options: the forward's flags (exact capacity, packer, ragged linear layers, sync-free shapes, fused
            blocks) as one record (`ForwardOptions`, checked there); None: the plain eager forward.

    Attributes:
        options: the `ForwardOptions` this model runs, resolved for its backend (the packer filled in).
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
        options: ForwardOptions | None = None,
    ) -> None:
        super().__init__()
        if backend not in BACKENDS + EXTRA_BACKENDS:
            raise ValueError(f"unknown backend {backend!r}; choose one of {BACKENDS + EXTRA_BACKENDS}")
        if options is None:
            options = ForwardOptions()
        elif not isinstance(options, ForwardOptions):
            raise TypeError(f"options must be a ForwardOptions, got {type(options).__name__}")
        options = options.for_backend(backend)
        if getattr(backbone, "reg_token", None) is not None or getattr(backbone, "num_prefix_tokens", 1) != 1:
            raise ValueError("only class-token ViTs without register tokens are supported")
        self.backbone = backbone
        self.__dict__["_dtype_device_ref"] = backbone.cls_token  # check_images: not a registered parameter
        self.pruner = pruner
        self.backend = backend
        self.options = options
        attend = attention_fn(backend, options.sync_free) if backend != "dense" else reference_attention
        self._layers = BlockLayers(attend, options.ragged_linear, options.gelu_epilogue)
        self._fused = None
        if options.fused_blocks:
            from pruners.fused import FusedBlocks

            self._fused = FusedBlocks(backbone, attention_fn("triton") if backend == "dense" else attend)
        self._pack = Packer(options.packer_for(backend))
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
        inputs = StageInputs(pr, self._pack, x, cu, n, qkv, scale)
        keep = decide(pr, stage, inputs)
        n_out, cap = pr.tokens_bound(stage, n), pr.rows_bound(stage, n, B)
        if self._keep_override is not None:
            keep = self._replayed(stage, inputs, B, n_out, cap)
        self._applied += 1
        fuse = self._fusion_weights(stage, inputs)
        on_dense_view = pr.fuses_tokens and fuse is None
        if not (self.record or self.options.exact_capacity or on_dense_view):
            return *self._pack_stage(x, cu, n, keep, cap, fuse), n_out
        keep = applied_mask(keep, inputs.valid)
        if self.record:
            self.recorded_keeps.append(keep)
        if on_dense_view:  # what is packed is then the dense view with the fused token appended
            x, keep = self._with_extra_token(stage, inputs, keep)
            cu = None
        if self.options.exact_capacity:
            counts = keep.sum(1)
            if fuse is not None:  # the packer's fused row, where an image drops a token
                counts = counts + (inputs.valid & ~keep).any(1)
            cap, n_out = (int(t) for t in torch.stack([counts.sum(), counts.max()]).tolist())
        return *self._pack_stage(x, cu, n, keep, cap, fuse), n_out

    def _fusion_weights(self, stage: int, inputs: StageInputs) -> torch.Tensor | None:
        """The pruner's `fusion_weights` where the packer can use them (ragged_kernels), else None."""
        if not self.pruner.fuses_tokens or self._pack.name != "ragged_kernels":
            return None
        return self.pruner.fusion_weights(stage, inputs.valid, inputs.attn())

    def _replayed(self, stage: int, inputs: StageInputs, B: int, n_out: int, cap: int) -> torch.Tensor:
        """`keep_override`'s mask for this stage, checked against the stage's shape (always) and, on the
        first eager forward after it is set, against the packed buffers it must fit."""
        keep = replayed_mask(self._keep_override, self._applied, stage, inputs, B)
        # exact buffers hold any mask; a compiled forward is checked by one eager forward first
        if not self._override_checked and not self.options.exact_capacity and not torch.compiler.is_compiling():
            check_override_fits(self.pruner, self._applied, keep, inputs, n_out, cap)
        return keep

    def _with_extra_token(self, stage: int, inputs: StageInputs, keep: torch.Tensor):
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

    @property
    def keep_override(self) -> list[torch.Tensor] | None:
        return self._keep_override

    @keep_override.setter
    def keep_override(self, masks: Sequence[torch.Tensor] | None) -> None:
        self._keep_override = override_masks(masks)
        self._override_checked = False

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
        self._pack = LoggingPacker(packer, log)
        try:
            yield log
        finally:
            self._pack = packer

    @property
    def override_checked(self) -> bool:
        """False while a `keep_override` is set that no eager forward has checked yet (a compiled or
        captured forward does not check: run one eager forward first, as `CompiledPrunedModel` does)."""
        return self._keep_override is None or self._override_checked or self.options.exact_capacity

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
            x, cu = self._blocks(x, None, x.shape[1], self._layers.attention, self._layers.mlp, self._prune)
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
        layers, pack, fused = self._layers, self._pack, self._fused
        self._layers, self._pack, self._fused = BlockLayers(reference_attention), Packer("torch"), None
        self.pruner.calibrating = True
        try:
            self.forward(images)
        finally:
            self.pruner.calibrating = False
            self._layers, self._pack, self._fused = layers, pack, fused
        self.pruner.calibrated = True

    def extra_repr(self) -> str:
        o = self.options
        return (
            f"backend={self.backend!r}, exact_capacity={o.exact_capacity}, packer={o.packer!r}, "
            f"ragged_linear={o.ragged_linear}, sync_free={o.sync_free}, fused_blocks={o.fused_blocks}, "
            f"gelu_epilogue={o.gelu_epilogue}"
        )


__all__ = ["MODELS", "AttentionFn", "PackingLog", "PatchGemm", "PrunedDeiT", "applied_mask", "attention_fn",
           "clear_backbone_cache", "reference_attention", "synthetic_images"]
