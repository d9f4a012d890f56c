"""Named, append-only shape presets for the benchmarks.

A preset's name is part of every result key in the history, so presets are only ever ADDED:
never edit or delete one (a changed shape under an old name would fake a regression). Lengths
are drawn from a seeded generator owned by the preset, so every commit, machine and process
measures exactly the same ragged batch.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

GEOMETRY_TOKENS = {224: 197, 384: 577}  # 1 class token + (res/16)^2 patches


@dataclass(frozen=True)
class AttentionPreset:
    """One ragged attention batch: DeiT geometry, batch size and how many tokens survive pruning.

    Attributes:
        name: stable preset id used as the asv parameter value.
        batch: images per batch (B).
        heads: attention heads (H).
        head_dim: channels per head (D).
        resolution: image side in pixels; fixes the unpruned length `tokens`.
        keep: mean fraction of tokens kept per image, in (0, 1].
        ragged: relative spread of kept lengths; lengths are uniform in keep*tokens*(1 +- ragged).
        seed: seed of the length generator.
    """

    name: str
    batch: int
    heads: int
    head_dim: int
    resolution: int
    keep: float
    ragged: float = 0.3
    seed: int = 0

    def __post_init__(self) -> None:
        if self.resolution not in GEOMETRY_TOKENS:
            raise ValueError(f"{self.name}: resolution must be one of {sorted(GEOMETRY_TOKENS)}, got {self.resolution}")
        if not 0.0 < self.keep <= 1.0:
            raise ValueError(f"{self.name}: keep must be in (0, 1], got {self.keep}")
        if not 0.0 <= self.ragged < 1.0:
            raise ValueError(f"{self.name}: ragged must be in [0, 1), got {self.ragged}")
        for field in ("batch", "heads", "head_dim"):
            if getattr(self, field) < 1:
                raise ValueError(f"{self.name}: {field} must be >= 1, got {getattr(self, field)}")

    @property
    def tokens(self) -> int:
        """Unpruned sequence length N (also the `max_seqlen` upper bound handed to kernels)."""
        return GEOMETRY_TOKENS[self.resolution]

    def lengths(self) -> list[int]:
        """Kept tokens per image, deterministic for the preset.

        Returns:
            `batch` ints in [1, tokens].
        """
        rng = np.random.default_rng(self.seed)
        mean = self.keep * self.tokens
        raw = rng.uniform(mean * (1.0 - self.ragged), mean * (1.0 + self.ragged), size=self.batch)
        return [int(v) for v in np.clip(np.rint(raw), 1, self.tokens)]

    def cu_seqlens(self) -> list[int]:
        """Cumulative lengths `[0, l0, l0+l1, ...]` (B+1 ints)."""
        out = [0]
        for n in self.lengths():
            out.append(out[-1] + n)
        return out

    @property
    def total_tokens(self) -> int:
        """Packed length T = sum of kept lengths."""
        return sum(self.lengths())


@dataclass(frozen=True)
class ModelPreset:
    """One end-to-end configuration: a timm DeiT and a batch size.

    Attributes:
        name: stable preset id used as the asv parameter value.
        model: timm model name accepted by `pruners.build_pruned_model`.
        batch: images per forward.
        resolution: input image side in pixels.
    """

    name: str
    model: str
    batch: int
    resolution: int

    def __post_init__(self) -> None:
        if self.resolution not in GEOMETRY_TOKENS:
            raise ValueError(f"{self.name}: resolution must be one of {sorted(GEOMETRY_TOKENS)}, got {self.resolution}")
        if not self.model.endswith(f"_{self.resolution}"):
            raise ValueError(f"{self.name}: model {self.model} does not take {self.resolution}px inputs")
        if self.batch < 1:
            raise ValueError(f"{self.name}: batch must be >= 1, got {self.batch}")


def _deit_b(name: str, batch: int, resolution: int, keep: float, ragged: float = 0.3) -> AttentionPreset:
    return AttentionPreset(name, batch=batch, heads=12, head_dim=64, resolution=resolution, keep=keep, ragged=ragged)


# Append-only. DeiT-B heads (12 x 64); 224 -> 197 tokens, 384 -> 577 tokens.
ATTENTION_PRESETS: dict[str, AttentionPreset] = {
    p.name: p
    for p in [
        _deit_b("deitb224-b1-keep0.5", 1, 224, 0.5),
        _deit_b("deitb224-b8-keep0.5", 8, 224, 0.5),
        _deit_b("deitb224-b32-keep0.5", 32, 224, 0.5),
        _deit_b("deitb224-b32-keep0.3", 32, 224, 0.3),
        _deit_b("deitb224-b32-keep0.7", 32, 224, 0.7),
        _deit_b("deitb384-b1-keep0.5", 1, 384, 0.5),
        _deit_b("deitb384-b8-keep0.5", 8, 384, 0.5),
        _deit_b("deitb384-b32-keep0.5", 32, 384, 0.5),
        # Nearly uniform lengths (fixed top-k pruners such as EViT), where the paper benchmarked.
        _deit_b("deitb224-b32-keep0.5-uniform", 32, 224, 0.5, ragged=0.0),
    ]
}

# Pack/unpack: x is [B, N, C] with C = heads * head_dim (768 for DeiT-B).
PACK_PRESETS: dict[str, AttentionPreset] = {
    p.name: p
    for p in [
        ATTENTION_PRESETS["deitb224-b8-keep0.5"],
        ATTENTION_PRESETS["deitb224-b32-keep0.5"],
        ATTENTION_PRESETS["deitb384-b32-keep0.5"],
    ]
}

# Small enough for PyTorch-CPU and the Triton interpreter in CI (< 1 s per call).
CPU_PRESETS: dict[str, AttentionPreset] = {
    p.name: p
    for p in [
        AttentionPreset("tiny224-b4-keep0.5", batch=4, heads=2, head_dim=16, resolution=224, keep=0.5),
        # head_dim 32: the smallest the Triton kernel supports (16 is rejected, so "triton" failed there).
        AttentionPreset("tiny224-b4-keep0.5-d32", batch=4, heads=2, head_dim=32, resolution=224, keep=0.5),
    ]
}

MODEL_PRESETS: dict[str, ModelPreset] = {
    p.name: p
    for p in [
        ModelPreset("deits224-b1", "deit_small_patch16_224", 1, 224),
        ModelPreset("deits224-b32", "deit_small_patch16_224", 32, 224),
        ModelPreset("deitb224-b32", "deit_base_patch16_224", 32, 224),
        ModelPreset("deitb384-b8", "deit_base_patch16_384", 8, 384),
        ModelPreset("deitt224-b8", "deit_tiny_patch16_224", 8, 224),
    ]
}

# flex: FlexAttention with a document mask built in every call from cu_seqlens (compiled; absent before 2026-12-01).
ATTENTION_BACKENDS = ["triton", "fa2_varlen", "padded_sdpa", "nested_sdpa", "varlen_attn", "flex"]
MODEL_BACKENDS = ["triton", "fa2_varlen", "padded_sdpa", "nested_sdpa", "dense"]
PRUNERS = ["threshold_l2", "dynamicvit", "evit", "ats"]
