"""ATS, Adaptive Token Sampling (Fayyaz et al., ECCV 2022, arXiv 2111.15667), inference path.

Source: github.com/adaptivetokensampling/ATS `libs/models/transformers/ats_block.py` (commit 11bc16b)
and `configs/ImageNet/DeiT_S.yaml` (ATS in blocks 3..11, n_ref_tokens = 1 + N0). Inside each ATS
block, after attention:

    S_j  = (sum over heads of A[h, CLS, j]) * ||v_j||_2        (v with heads concatenated), j != CLS
    S    = S / sum(S); sort ascending; c = cumsum(S); c = (c - c.min) / (c.max - c.min)
    y_r  = c_min_nonzero + r (1 - c_min_nonzero) / (R - 1),   r = 0..R-1     (`create_ys`)
    pick = argmin_i |y_r - c_i|;  keep = unique(pick)  -> a per-image (ragged) count

R is `n_ref_tokens - 1` = N0 in the released code at every stage; `num_samples` exposes it (the
paper's K) so that a budget below "de-duplication only" can be configured. The nearest-CDF-point
search uses `searchsorted` instead of the reference's [B, R, N] distance tensor, with the same
tie rule as `argmin` (lowest index), so picks are identical. Images in a batch are independent: the
reference pads shorter images after the first stage with zero-score slots, which sort first and make
a padded image's lowest real token pickable (a token or so per stage); ragged rows have no padding,
so this matches the reference's unpadded image.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from pruners._ops import rank_desc, uniform_cu_seqlens, with_cls
from pruners.base import AttnInfo, Pruner, per_stage, register


def create_ys(c_start: torch.Tensor, n_samples: int) -> torch.Tensor:
    """The reference's evenly spaced CDF targets, op for op (fp32).

    Args:
        c_start: [B] smallest non-zero normalised CDF value.
        n_samples: R (>= 2).

    Returns:
        [B, R] targets from c_start to 1.
    """
    ys = torch.linspace(0, 1.0, steps=n_samples, device=c_start.device)[None, :]
    start = c_start[:, None].expand(-1, n_samples)
    steps = torch.arange(n_samples, device=c_start.device, dtype=torch.float32)[None, :]
    return start + ((ys * (n_samples - 1)) - start * steps) / (n_samples - 1)


def nearest_cdf_index(cdf: torch.Tensor, ys: torch.Tensor) -> torch.Tensor:
    """argmin_i |ys[b, r] - cdf[b, i]| for an ascending cdf, lowest index on ties, without [B, R, N].

    Args:
        cdf: [B, N] ascending (non-decreasing) per row.
        ys: [B, R] targets.

    Returns:
        int64 [B, R] indices into cdf.
    """
    n = cdf.shape[1]
    hi = torch.searchsorted(cdf, ys.contiguous())
    lo = (hi - 1).clamp_(min=0)
    hi = hi.clamp_(max=n - 1)
    d_lo = (ys - cdf.gather(1, lo)).abs()
    d_hi = (ys - cdf.gather(1, hi)).abs()
    pick = torch.where(d_lo <= d_hi, lo, hi)
    # argmin returns the first of equal values: step back to the first occurrence of the picked value.
    return torch.searchsorted(cdf, cdf.gather(1, pick).contiguous())


def ats_keep(scores: torch.Tensor, valid: torch.Tensor, n_samples: int) -> torch.Tensor:
    """Inverse-transform sampling keep mask over tokens (CLS excluded), per image.

    Args:
        scores: [B, M] significance (>= 0), unnormalised.
        valid: [B, M] bool.
        n_samples: R.

    Returns:
        keep [B, M] bool: the unique sampled tokens.
    """
    B, M = scores.shape
    s = torch.where(valid, scores.float(), 0.0)
    s = s / s.sum(1, keepdim=True).clamp_min(torch.finfo(torch.float32).tiny)
    # Invalid positions sort last (key +inf) and are then excluded from the CDF.
    key = torch.where(valid, s, float("inf"))
    s_sorted, order = torch.sort(key, dim=1, stable=True)
    n_valid = valid.sum(1)
    vs = torch.arange(M, device=s.device)[None, :] < n_valid[:, None]
    s_sorted = torch.where(vs, s_sorted, 0.0)
    c = torch.cumsum(s_sorted, 1)
    c_min = c[:, :1]
    c_max = c.gather(1, (n_valid - 1).clamp(min=0)[:, None])
    c = (c - c_min) / (c_max - c_min)
    # Positions past the valid ones get 2.0: sorted order holds and |y - 2| > |y - 1| for every y <= 1.
    c = torch.where(vs, c, 2.0)
    c_start = torch.where(vs & (c != 0), c, float("inf")).amin(1)
    # Images with <= 1 valid token, or a degenerate CDF (all-zero or non-finite scores: NaN after the
    # normalisation), have nothing to sample from. Their NaN CDF would send the search out of bounds,
    # so they search a well-formed placeholder (all 0, targets 1) and take the fallback below.
    degenerate = (n_valid <= 1) | ~torch.isfinite(c_start)
    c = torch.where(degenerate[:, None], torch.where(vs, 0.0, 2.0), c)
    c_start = torch.where(degenerate, 1.0, c_start)
    ys = create_ys(c_start, n_samples)
    pick = nearest_cdf_index(c, ys)
    keep_sorted = torch.zeros_like(valid).scatter_(1, pick, True) & vs
    keep = torch.zeros_like(valid).scatter_(1, order, keep_sorted)
    # Fallback: keep the valid tokens, at most n_samples of them (first by position), so the count
    # stays within `tokens_bound` and the packed buffer holds every image.
    whole = valid & (valid.cumsum(1) <= n_samples)
    return torch.where(degenerate[:, None], whole, keep & valid)


@register
class ATSPruner(Pruner):
    """ATS with significance = CLS attention x value norm and inverse-transform sampling.

    Args:
        stages: ATS blocks (default: block 3 to the last, i.e. 3..11 for DeiT).
        num_samples: R per stage (scalar or per stage: with the default stages, one per block from 3 on,
            9 for DeiT); None = N0 (reference: n_ref_tokens - 1).
        max_keep: optional cap on non-CLS tokens kept per image (the highest-significance samples):
            gives a tighter static buffer capacity; None = no cap (reference).
        sampler: "torch" (the op-by-op port, `ats_keep`), "fused" (the same sampling as one Triton
            kernel per stage, `pruners.kernels.ats_sampling`; CUDA tensors, or CPU under Triton's interpreter),
            or "auto" (default): fused for CUDA tensors with at most FUSED_MAX_TOKENS tokens, torch
            otherwise. The choice is made from shapes and devices only, so it is graph-safe.
        search: the fused kernels find each sample's CDF point by binary search (default) instead of
            comparison tiles (`ats_keep_fused(search=...)`): the same decisions. On the H200 (2026-12-05,
            `tools.bench_ats_sampler`, `tools.bench_e2e --pruners ats`) the sampler took 0.10-0.15x the
            tiles' GPU time and DeiT-B graph mode ran 1.16x the images/s at B 4, 1.03x at B 64.
    """

    name = "ats"
    # H200, 2026-11-29 (`tools/bench_ats_sampler.py --models`): at 196 tokens the fused sampler takes
    # 0.27-0.49x the torch port's GPU time and DeiT-B/224 B 32 graph mode runs 1.15x faster; at 576
    # tokens its [16, M] search tiles make it 1.11x slower alone and DeiT-B/384 ties (0.99x).
    FUSED_MAX_TOKENS = 256
    placement = "after_attention"
    needs_attention = True
    needs_value_norms = True  # significance uses ||v|| only (AttnInfo.v_norm)
    needs_tokens = False
    ragged = True

    def __init__(
        self,
        *,
        stages: Sequence[int] | None = None,
        num_samples: int | Sequence[int] | None = None,
        max_keep: int | None = None,
        sampler: str = "auto",
        search: bool = True,
    ) -> None:
        self._default_stages = stages is None
        super().__init__(() if stages is None else stages)
        self._num_samples = num_samples
        if max_keep is not None and (isinstance(max_keep, bool) or not isinstance(max_keep, int) or max_keep < 1):
            raise ValueError(f"ats: max_keep must be a positive int or None, got {max_keep!r}")
        self.max_keep = max_keep
        if sampler not in ("auto", "torch", "fused"):
            raise ValueError(f"ats: sampler must be 'auto', 'torch' or 'fused', got {sampler!r}")
        self.sampler = sampler
        if not isinstance(search, bool):
            raise TypeError(f"ats: search must be a bool, got {search!r}")
        self.search = search
        self.num_samples: tuple[int, ...] = ()
        self._validate_samples()

    def _validate_samples(self, bound: bool = False) -> None:
        """Check `num_samples`; its length against the stages once they are known (default stages
        depend on the model's depth: until `bind`, only the values are checked)."""
        value = self._num_samples
        known = bound or not self._default_stages
        n = len(self.stages)
        if not known:  # as many entries as given (a scalar: one), so only the values are checked
            n = len(value) if isinstance(value, Sequence) and not isinstance(value, (str, bytes)) else 1
        ns = per_stage(value, n, "num_samples", self.name)
        if ns is not None and any(isinstance(r, bool) or not isinstance(r, int) or r < 2 for r in ns):
            raise ValueError(f"ats: num_samples must be ints >= 2, got {ns}")
        self.num_samples = (ns or ()) if known else ()

    def bind(self, info) -> None:
        if self._default_stages:
            self.stages = tuple(range(3, info.depth))
        # From the options every time: a default R (N0) from an earlier bind must not outlive it.
        self._validate_samples(bound=True)
        super().bind(info)
        if not self.num_samples:
            self.num_samples = (info.num_patches,) * len(self.stages)

    def decide(self, stage: int, x: torch.Tensor, valid: torch.Tensor, attn: AttnInfo | None) -> torch.Tensor:
        if attn is None or (attn.v_norm is None and attn.v is None):
            raise ValueError("ats: needs the block's CLS attention and value norms")
        v_norm = attn.v_norm
        if v_norm is None:
            v_norm = torch.linalg.vector_norm(attn.v, dim=-1, dtype=torch.float32)
        sig = attn.cls_probs.sum(1) * v_norm
        tok_valid = valid[:, 1:]
        if not self.uses_fused(sig):
            keep = ats_keep(sig[:, 1:], tok_valid, self.num_samples[stage])
        else:
            from pruners.kernels.ats_sampling import ats_keep_fused

            keep = ats_keep_fused(sig[:, 1:], tok_valid, self.num_samples[stage], search=self.search)
        if self.max_keep is None:
            return with_cls(keep)
        return with_cls(keep, rank_desc(torch.where(keep, sig[:, 1:], float("-inf")), keep) < self.max_keep)

    def decide_packed(self, stage, x, cu_seqlens, max_seqlen, qkv=None, scale=None):
        """The whole decision from the block's q, k, v in two kernels (CLS scores with the value rows' squared
        norms per head, then `pruners.kernels.ats_sampling.ats_stage_fused`: softmax, head sum, value norms,
        significance and sampling): where the fused sampler applies (CUDA, at most FUSED_MAX_TOKENS tokens) and
        without `max_keep`."""
        if qkv is None or self.max_keep is not None or not self._fused_for(x.device, max_seqlen):
            return None
        q, k, v = qkv
        from pruners.kernels import cls_scores
        from pruners.kernels.ats_sampling import ats_stage_fused

        if cu_seqlens is None:  # the first stage: dense [B, N, H, D], every position valid
            b, n = q.shape[:2]
            cu_seqlens = uniform_cu_seqlens(b, n, q.device)
            q, k, v = q.flatten(0, 1), k.flatten(0, 1), v.flatten(0, 1)
        if not (cls_scores.supported(q, k) and cls_scores.supported(q, v)):
            return None
        scores, value_sq = cls_scores.cls_scores_and_value_squares(q, k, v, cu_seqlens, max_seqlen, scale)
        return ats_stage_fused(scores, value_sq, cu_seqlens, q.shape[0], self.num_samples[stage], search=self.search)

    def _fused_for(self, device: torch.device, n_tokens: int) -> bool:
        if self.sampler == "auto":
            return device.type == "cuda" and n_tokens - 1 <= self.FUSED_MAX_TOKENS
        return self.sampler == "fused"

    def uses_fused(self, sig: torch.Tensor) -> bool:
        """Whether decide() samples with the fused kernel for significance `sig` [B, N] (CLS first)."""
        return self._fused_for(sig.device, sig.shape[1])

    def tokens_bound(self, stage: int, n_in: int) -> int:
        bound = min(n_in - 1, self.num_samples[stage])
        if self.max_keep is not None:
            bound = min(bound, self.max_keep)
        return 1 + bound

    def extra_repr(self) -> str:
        return (f"stages={self.stages}, num_samples={self.num_samples or 'N0'}, max_keep={self.max_keep}, "
                f"sampler={self.sampler!r}" + ("" if self.search else ", search=False"))
