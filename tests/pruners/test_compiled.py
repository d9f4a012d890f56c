"""torch.compile of the pruned forward and graph mode for every sync-free backend.

On the CPU: every kernel of the forward is a custom op whose fake implementation agrees with the real
one (`torch.library.opcheck`, Triton's interpreter), the whole pruned forward traces with
`fullgraph=True` (no graph break) and computes what the eager forward computes, and the build options
refuse what cannot be captured. On a GPU (`gpu` marker): graph and compile+graph of every capturable
backend against its eager forward.
"""

from __future__ import annotations

import pytest
import torch

from pruners import (
    CAPTURABLE_BACKENDS,
    CompiledPrunedModel,
    ForwardOptions,
    GraphedPrunedModel,
    PrunedDeiT,
    build_pruned_model,
    create_pruner,
    synthetic_images,
)

TINY = "deit_tiny_patch16_224"
# ATS's fused sampler (its two decision kernels) runs on CUDA by default; forced here so the CPU traces it.
PRUNER_OPTIONS = {"ats": {"sampler": "fused", "num_samples": 40}, "dynamicvit": {}, "evit": {}, "threshold_l2": {}}


def _cu(lengths: list[int]) -> torch.Tensor:
    return torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int32)


def test_every_kernel_op_passes_opcheck():
    """Fake (meta) implementations give the real outputs' shapes, dtypes and strides; schemas match."""
    from pruners.kernels.ats_sampling import ats_keep_op, ats_stage_op
    from pruners.kernels.cls_scores import cls_scores_op, cls_scores_values_op
    from pruners.kernels.threshold import threshold_keep_op
    from ragged_kernels.attention.interface import attention_op
    from ragged_kernels.pack import pack_op, unpack_op

    # opcheck compares outputs bit for bit: no unwritten rows (capacity padding, fill=None) in them.
    cu = _cu([5, 3, 2])
    q, k, v = torch.randn(3, 10, 2, 32).unbind(0)
    torch.library.opcheck(attention_op, (q, k, v, cu, 6, None))
    x, keep = torch.randn(2, 7, 16), torch.rand(2, 7) < 0.5
    torch.library.opcheck(pack_op, (x, keep, 9, None, None, 0.0, True))
    packed, cu_out = pack_op(x, keep, 9, None, None, 0.0, True)
    torch.library.opcheck(unpack_op, (packed, keep, cu_out, None, None, None, True))
    rows, row_keep = torch.randn(10, 16), torch.rand(3, 6) < 0.5
    torch.library.opcheck(pack_op, (rows, row_keep, 8, cu, 6, 0.0, True))
    torch.library.opcheck(pack_op, (rows, row_keep, 10, cu, 6, 0.0, True, torch.rand(3, 6)))  # EViT's fused row
    scores = cls_scores_op(q, k, cu, 6, 0.125)
    torch.library.opcheck(cls_scores_op, (q, k, cu, 6, 0.125))
    torch.library.opcheck(cls_scores_values_op, (q, k, v, cu, 6, 0.125))
    scores, vsq = cls_scores_values_op(q, k, v, cu, 6, 0.125)
    torch.library.opcheck(ats_stage_op, (scores, vsq, cu, 10, 4))
    torch.library.opcheck(ats_stage_op, (scores, vsq, cu, 10, 4, True))  # the binary-search targets
    norms = torch.rand(10)
    torch.library.opcheck(ats_keep_op, (torch.rand(2, 5), torch.rand(2, 5) < 0.8, 3))
    torch.library.opcheck(threshold_keep_op, (norms, cu, 6, torch.tensor([0.5]), 1, 3, None))


@torch.no_grad()
@pytest.mark.parametrize("pruner", list(PRUNER_OPTIONS))
def test_the_pruned_forward_traces_without_a_graph_break(pruner):
    """fullgraph=True: one graph for the whole forward (decisions, packing, packed blocks, head), the same
    logits as the eager forward (aot_eager runs the traced graph unfused, so the values are bitwise ours)."""
    base = build_pruned_model(TINY, create_pruner(pruner, **PRUNER_OPTIONS[pruner]), "triton")
    inner = PrunedDeiT(base.backbone, base.pruner, "triton", ForwardOptions(sync_free=True)).eval()
    x = synthetic_images(2, 224, seed=1)
    inner.record = True
    ref = inner(x)
    keeps = [k.clone() for k in inner.recorded_keeps]
    compiled = CompiledPrunedModel(inner, backend="aot_eager")
    out = compiled(x)
    torch.testing.assert_close(out, ref, rtol=0, atol=1e-5)
    assert [torch.equal(a, b) for a, b in zip(inner.recorded_keeps, keeps, strict=True)] == [True] * len(keeps)
    key = next(iter(compiled.compile_seconds))
    assert key[0] == (2, 3, 224, 224) and compiled.compile_seconds[key] > 0
    # A replayed decision list is checked by one eager forward before the compiled one runs.
    inner.keep_override = keeps
    torch.testing.assert_close(compiled(x), ref, rtol=0, atol=1e-5)
    assert inner.override_checked
    torch.compiler.reset()


@torch.no_grad()
def test_dense_compiles_too():
    model = build_pruned_model(TINY, None, "dense")
    x = synthetic_images(1, 224, seed=2)
    ref = model(x)
    out = CompiledPrunedModel(model, backend="aot_eager")(x)
    torch.testing.assert_close(out, ref, rtol=0, atol=1e-5)
    torch.compiler.reset()


def test_build_options_for_graph_and_compile():
    assert set(CAPTURABLE_BACKENDS) == {"triton", "fa2_varlen", "padded_sdpa", "dense", "reference"}
    with pytest.raises(ValueError, match="NestedTensor needs the kept total on the host"):
        build_pruned_model(TINY, "evit", "nested_sdpa", graph=True)
    with pytest.raises(ValueError, match="NestedTensor"):
        build_pruned_model(TINY, "evit", "nested_sdpa", compile=True)
    with pytest.raises(ValueError, match="captures CUDA graphs itself"):
        build_pruned_model(TINY, "evit", "triton", graph=True, compile="reduce-overhead")
    with pytest.raises(ValueError, match="compile must be True or one of"):
        build_pruned_model(TINY, "evit", "triton", compile="fastest")
    with pytest.raises(TypeError, match="compile must be True, False or a torch.compile mode"):
        build_pruned_model(TINY, "evit", "triton", compile=1)
    with pytest.raises(ValueError, match="exact_capacity"):
        build_pruned_model(TINY, "evit", "triton", compile=True, exact_capacity=True)
    with pytest.raises(ValueError, match="ragged_linear"):
        build_pruned_model(TINY, "evit", "triton", compile=True, ragged_linear=True)
    compiled = build_pruned_model(TINY, "evit", "padded_sdpa", compile=True)
    assert isinstance(compiled, CompiledPrunedModel) and compiled.model.options.sync_free
    graphed = build_pruned_model(TINY, "evit", "padded_sdpa", graph=True)
    assert isinstance(graphed, GraphedPrunedModel) and graphed.model.options.sync_free and graphed.compiled is None
    both = build_pruned_model(TINY, None, "dense", graph=True, compile="max-autotune-no-cudagraphs")
    assert isinstance(both.compiled, CompiledPrunedModel) and both.compiled.mode == "max-autotune-no-cudagraphs"
    eager_padded = build_pruned_model(TINY, "evit", "padded_sdpa")
    with pytest.raises(ValueError, match="sync_free=True"):
        GraphedPrunedModel(eager_padded)


@torch.no_grad()
def test_sync_free_padded_sdpa_equals_the_padded_forward():
    """padded_sdpa padded to the capacity (what graph mode captures) computes the same logits as padding to
    the batch's longest kept length."""
    base = build_pruned_model(TINY, "threshold_l2", "padded_sdpa")
    bound = PrunedDeiT(base.backbone, base.pruner, "padded_sdpa", ForwardOptions(sync_free=True)).eval()
    x = synthetic_images(3, 224, seed=3)
    torch.testing.assert_close(bound(x), base(x), rtol=0, atol=1e-4)


# -- GPU ---------------------------------------------------------------------------------------------------
@pytest.mark.gpu
@torch.no_grad()
@pytest.mark.parametrize("backend", ["triton", "fa2_varlen", "padded_sdpa", "dense"])
@pytest.mark.parametrize("compile_too", [False, True], ids=["graph", "inductor"])
def test_gpu_graph_and_compile_equal_eager(backend, compile_too):
    pruner = None if backend == "dense" else create_pruner("threshold_l2", max_keep="calibrate")
    x = synthetic_images(4, 224, seed=4).half().cuda()
    eager = build_pruned_model(TINY, pruner, backend).half().cuda()
    fast = build_pruned_model(TINY, pruner, backend, graph=True, compile=compile_too).half().cuda()
    if backend != "dense":
        eager.record = True
        ref = eager(x)
        fast.model.keep_override = eager.recorded_keeps
    else:
        ref = eager(x)
    for _ in range(2):  # the capture, then a replay
        out = fast(x)
        assert (out.float() - ref.float()).abs().max().item() < 4e-3
    nodes = fast.replay_nodes()
    assert nodes is None or nodes["kernel"] > 0
    if compile_too:
        torch.compiler.reset()
