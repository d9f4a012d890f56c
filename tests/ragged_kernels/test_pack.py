"""pack_tokens / unpack_tokens: exact data movement, both forms, capacity handling, bad inputs."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ragged_kernels import pack_tokens, unpack_tokens

DENSE_CASES = {
    "B4-N197-C64-keep0.5": (4, 197, 64, 0.5),
    "B1-N1-C8-keep1.0": (1, 1, 8, 1.0),
    "B3-N63-C130-keep0.2": (3, 63, 130, 0.2),
    "B2-N577-C32-keep0.5": (2, 577, 32, 0.5),
    "B5-N17-C16-keep0.0": (5, 17, 16, 0.0),
}


def _mask(batch: int, seq: int, keep: float, device: str) -> torch.Tensor:
    m = torch.rand(batch, seq, device=device) < keep
    m[:, 0] |= keep > 0  # CLS kept, as the pruners do
    return m


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32], ids=["fp16", "fp32"])
@pytest.mark.parametrize("case", list(DENSE_CASES), ids=list(DENSE_CASES))
def test_dense_pack_unpack_exact(case, dtype, device):
    batch, seq, channels, keep_ratio = DENSE_CASES[case]
    x = torch.randn(batch, seq, channels, device=device).to(dtype)
    keep = _mask(batch, seq, keep_ratio, device)
    packed, cu = pack_tokens(x, keep)
    assert packed.shape == (batch * seq, channels) and cu.dtype == torch.int32
    total = int(keep.sum())
    assert cu.tolist() == [0, *keep.sum(1).cumsum(0).tolist()]
    assert torch.equal(packed[:total], x[keep])  # segment order, token order inside
    assert torch.equal(packed[total:], torch.zeros_like(packed[total:]))
    back = unpack_tokens(packed, keep, cu)
    assert torch.equal(back, torch.where(keep[..., None], x, torch.zeros_like(x)))


def test_fill_of_the_unused_capacity(device):
    x = torch.randn(3, 20, 16, device=device)
    keep = torch.zeros(3, 20, dtype=torch.bool, device=device)
    keep[:, :5] = True  # 15 kept
    nan, _ = pack_tokens(x, keep, capacity=40, fill=float("nan"))
    assert torch.equal(nan[:15], x[keep]) and torch.isnan(nan[15:]).all()
    ones, _ = pack_tokens(x.half(), keep, capacity=40, fill=1.0)
    assert (ones[15:] == 1).all()
    unwritten, cu = pack_tokens(x, keep, capacity=40, fill=None)  # rows 15.. hold whatever was there
    assert torch.equal(unwritten[:15], x[keep]) and cu.tolist() == [0, 5, 10, 15]
    empty, cu0 = pack_tokens(x[:0], keep[:0], capacity=4, fill=float("nan"))
    assert cu0.tolist() == [0] and torch.isnan(empty).all()
    with pytest.raises(TypeError, match="fill"):
        pack_tokens(x, keep, fill="0")


def test_capacity_larger_and_smaller(device):
    x = torch.randn(3, 20, 16, device=device)
    keep = torch.zeros(3, 20, dtype=torch.bool, device=device)
    keep[:, :5] = True  # 15 kept
    big, cu = pack_tokens(x, keep, capacity=40)
    assert big.shape == (40, 16) and torch.equal(big[:15], x[keep]) and not big[15:].any()
    small, cu_small = pack_tokens(x, keep, capacity=12)
    assert cu_small.tolist() == [0, 5, 10, 12]
    assert torch.equal(small, x[keep][:12])


def test_packed_repack_second_stage(device):
    """A second pruning stage on already packed rows, and its exact inverse."""
    lengths = [7, 0, 12, 3]
    source_cu = torch.tensor([0, 7, 7, 19, 22], dtype=torch.int32, device=device)
    rows = torch.randn(25, 24, device=device)  # 3 rows of capacity padding at the end
    keep = torch.rand(25, device=device) < 0.6
    keep[22:] = False
    packed, cu = pack_tokens(rows, keep, source_cu_seqlens=source_cu, max_seqlen=max(lengths))
    expect_counts = [int(keep[a:b].sum()) for a, b in zip(source_cu[:-1].tolist(), source_cu[1:].tolist(), strict=True)]
    assert cu.tolist() == [0, *torch.tensor(expect_counts).cumsum(0).tolist()]
    total = sum(expect_counts)
    assert torch.equal(packed[:total], rows[keep])
    # a bound computed with NumPy (np.int64) is a host int too
    back = unpack_tokens(packed, keep, cu, source_cu_seqlens=source_cu, max_seqlen=np.max(lengths))
    assert torch.equal(back, torch.where(keep[:, None], rows, torch.zeros_like(rows)))


@pytest.mark.parametrize("keep_first", [False, True])
@pytest.mark.parametrize("width", [12, 9])
def test_packed_rows_per_position_keep(device, keep_first, width):
    """Packed rows with a [B, L] mask indexed by segment position (what a pruning stage decides on its
    dense view): positions at or past a segment's length are never read, positions >= L are dropped,
    keep_first keeps each segment's first row; the inverse restores exactly the kept rows."""
    lengths = [7, 0, 12, 3]
    source_cu = torch.tensor([0, 7, 7, 19, 22], dtype=torch.int32, device=device)
    rows = torch.randn(25, 24, device=device)  # 3 rows of capacity padding at the end
    keep = torch.rand(4, width, device=device) < 0.5
    keep[:, 0] = False  # only keep_first can keep a first row
    keep[3, 5:] = True  # past segment 3's length: must not be read
    # The per-row mask the per-position one stands for.
    flat = torch.zeros(25, dtype=torch.bool, device=device)
    for b, (a, n) in enumerate(zip(source_cu[:-1].tolist(), lengths, strict=True)):
        m = min(n, width)
        flat[a:a + m] = keep[b, :m]
        if keep_first and n:
            flat[a] = True
    packed, cu = pack_tokens(rows, keep, source_cu_seqlens=source_cu, max_seqlen=max(lengths), keep_first=keep_first,
                             fill=None)
    counts = [int(flat[a:b].sum()) for a, b in zip(source_cu[:-1].tolist(), source_cu[1:].tolist(), strict=True)]
    assert cu.tolist() == [0, *torch.tensor(counts).cumsum(0).tolist()]
    assert torch.equal(packed[: sum(counts)], rows[flat])
    back = unpack_tokens(packed, keep, cu, source_cu_seqlens=source_cu, max_seqlen=max(lengths), rows=25,
                         keep_first=keep_first)
    assert torch.equal(back, torch.where(flat[:, None], rows, torch.zeros_like(rows)))


def test_dense_keep_first(device):
    x = torch.randn(3, 6, 8, device=device)
    keep = torch.zeros(3, 6, dtype=torch.bool, device=device)
    keep[1, 4] = True
    packed, cu = pack_tokens(x, keep, keep_first=True)
    assert cu.tolist() == [0, 1, 3, 4]
    assert torch.equal(packed[:4], torch.stack([x[0, 0], x[1, 0], x[1, 4], x[2, 0]]))


def test_per_position_keep_errors(device):
    rows = torch.randn(10, 8, device=device)
    cu = torch.tensor([0, 4, 10], dtype=torch.int32, device=device)
    with pytest.raises(ValueError, match="B = 2 segments"):
        pack_tokens(rows, torch.ones(3, 6, dtype=torch.bool, device=device), source_cu_seqlens=cu, max_seqlen=6)
    with pytest.raises(TypeError, match="keep_first"):
        pack_tokens(rows, torch.ones(10, dtype=torch.bool, device=device), source_cu_seqlens=cu, max_seqlen=6,
                    keep_first=1)
    packed, out_cu = pack_tokens(rows, torch.ones(2, 6, dtype=torch.bool, device=device), source_cu_seqlens=cu,
                                 max_seqlen=6)
    with pytest.raises(TypeError, match="needs rows"):
        unpack_tokens(packed, torch.ones(2, 6, dtype=torch.bool, device=device), out_cu, source_cu_seqlens=cu,
                      max_seqlen=6)
    with pytest.raises(ValueError, match="rows is only"):
        unpack_tokens(packed, torch.ones(10, dtype=torch.bool, device=device), out_cu, source_cu_seqlens=cu,
                      max_seqlen=6, rows=10)


def test_numpy_integer_capacity_is_a_host_int(device):
    """A capacity computed with NumPy (np.int64) is accepted like max_seqlen is: same result."""
    x = torch.randn(3, 20, 16, device=device)
    keep = torch.rand(3, 20, device=device) < 0.5
    for cap in (np.int64(30), np.int32(30)):
        got, cu = pack_tokens(x, keep, capacity=cap)
        want, cu_want = pack_tokens(x, keep, capacity=30)
        assert got.shape == (30, 16) and torch.equal(got, want) and torch.equal(cu, cu_want)


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16, torch.int8, torch.int64, torch.uint8, torch.bool],
                         ids=str)
def test_other_real_dtypes_move_exactly(dtype, device):
    x = (torch.randn(2, 9, 8, device=device) * 50).to(dtype)
    keep = torch.rand(2, 9, device=device) < 0.5
    packed, cu = pack_tokens(x, keep)
    assert torch.equal(packed[: int(cu[-1])], x[keep])
    assert torch.equal(unpack_tokens(packed, keep, cu), torch.where(keep[..., None], x, torch.zeros_like(x)))


@pytest.mark.parametrize("shape", [(2, 0, 4), (2, 3, 0), (0, 3, 4), (0, 0, 0)], ids=str)
def test_empty_dense_input_packs_to_empty_segments(shape, device):
    """N = 0 gives B empty segments, C = 0 still counts the kept rows; fill and capacity hold as usual."""
    x = torch.randn(*shape, device=device)
    keep = torch.ones(shape[:2], dtype=torch.bool, device=device)
    packed, cu = pack_tokens(x, keep, capacity=5, fill=7.0)
    assert packed.shape == (5, shape[2])
    n = min(shape[0] * shape[1], 5)
    assert cu.tolist() == [min(b * shape[1], 5) for b in range(shape[0] + 1)]
    assert (packed[n:] == 7).all()
    assert unpack_tokens(packed, keep, cu).shape == x.shape


def test_empty_slice_of_a_wider_buffer(device):
    x = torch.randn(2, 5, 4, device=device)[:, :0]  # [2, 0, 4], batch stride 20: no rows to view
    packed, cu = pack_tokens(x, torch.ones(2, 0, dtype=torch.bool, device=device))
    assert packed.shape == (0, 4) and cu.tolist() == [0, 0, 0]


def test_empty_packed_input_gives_empty_segments(device):
    cu_src = torch.tensor([0, 3, 5], dtype=torch.int32, device=device)  # garbage for 0 rows: clamped
    packed, cu = pack_tokens(torch.randn(0, 4, device=device), torch.ones(0, dtype=torch.bool, device=device),
                             source_cu_seqlens=cu_src, max_seqlen=3)
    assert packed.shape == (0, 4) and cu.tolist() == [0, 0, 0]


def test_strided_dense_input(device):
    """A [B, N, C] slice of a wider buffer (e.g. one of q/k/v) packs without a copy first."""
    wide = torch.randn(2, 9, 3, 8, device=device)
    x = wide[:, :, 1]  # [2, 9, 8], row stride 24
    keep = torch.rand(2, 9, device=device) < 0.5
    packed, cu = pack_tokens(x, keep)
    assert torch.equal(packed[: int(cu[-1])], x[keep])


@pytest.mark.parametrize(
    "call,exc,match",
    [
        (lambda x, k: pack_tokens(x, k.int()), TypeError, "bool"),
        (lambda x, k: pack_tokens(x, k[:, :3]), ValueError, "keep must be"),
        (lambda x, k: pack_tokens(x[0, 0], k[0]), ValueError, "dense"),
        (lambda x, k: pack_tokens(x.reshape(-1, 4), k.reshape(-1)), ValueError, "source_cu_seqlens"),
        (lambda x, k: pack_tokens(x, k, capacity=-1), ValueError, "capacity must be >= 0"),
        (lambda x, k: pack_tokens(x, k, capacity=np.int64(-1)), ValueError, "capacity must be >= 0"),
        (lambda x, k: pack_tokens(x, k, capacity=3.5), TypeError, "capacity"),
        (lambda x, k: pack_tokens(x, k, capacity=True), TypeError, "capacity"),
        (lambda x, k: pack_tokens(x, k, capacity=torch.tensor(8)), TypeError, "capacity"),
        (lambda x, k: pack_tokens(x.to(torch.complex64), k), TypeError, "x dtype must be one of float16, .*bool; "
         "got torch.complex64"),
        (lambda x, k: unpack_tokens(x[0].to(torch.complex64), k, torch.zeros(3, dtype=torch.int32)), TypeError,
         "packed dtype must be one of float16, .*bool; got torch.complex64"),
        (lambda x, k: pack_tokens(x.transpose(0, 1), k.T), ValueError, "viewable"),
        (lambda x, k: unpack_tokens(x[0], k, torch.zeros(4, dtype=torch.int32)), ValueError, "B\\+1"),
        (lambda x, k: unpack_tokens(x[0], k, torch.zeros(3, dtype=torch.int64)), ValueError, "int32"),
        (lambda x, k: unpack_tokens(x[0], k.tolist(), torch.zeros(3, dtype=torch.int32)), TypeError, "keep"),
        (lambda x, k: unpack_tokens(x[0], k.reshape(-1), torch.zeros(3, dtype=torch.int32),
                                    source_cu_seqlens=torch.tensor([0, 4, 8], dtype=torch.int32), max_seqlen=2.5),
         TypeError, "max_seqlen"),
        (lambda x, k: unpack_tokens(x[0], k.reshape(-1), torch.zeros(3, dtype=torch.int32),
                                    source_cu_seqlens=torch.tensor([0, 4, 8], dtype=torch.int32), max_seqlen=-1),
         TypeError, "max_seqlen"),
    ],
    ids=["int-mask", "mask-shape", "1d-x", "packed-no-cu", "neg-capacity", "neg-numpy-capacity", "float-capacity",
         "bool-capacity", "tensor-capacity", "complex-x", "complex-packed", "transposed",
         "cu-length", "cu-dtype", "unpack-keep-list", "unpack-float-max-seqlen", "unpack-neg-max-seqlen"],
)
def test_bad_inputs(call, exc, match):
    x = torch.randn(2, 4, 4)
    keep = torch.ones(2, 4, dtype=torch.bool)
    with pytest.raises(exc, match=match):
        call(x, keep)


def test_cpu_tensors_without_the_interpreter_get_a_clear_error(monkeypatch):
    from ragged_kernels import runtime

    monkeypatch.setattr(runtime, "INTERPRET", False)  # read by require_device, the one check
    x = torch.randn(2, 4, 8)
    keep = torch.ones(2, 4, dtype=torch.bool)
    with pytest.raises(ValueError, match="TRITON_INTERPRET=1"):
        pack_tokens(x, keep)
    with pytest.raises(ValueError, match="TRITON_INTERPRET=1"):
        unpack_tokens(x[0], keep, torch.tensor([0, 4, 8], dtype=torch.int32))


@pytest.mark.gpu
def test_gpu_pack_is_graph_capturable():
    x = torch.randn(64, 197, 768, dtype=torch.float16, device="cuda")
    keep = torch.rand(64, 197, device="cuda") < 0.5
    pack_tokens(x, keep)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        packed, cu = pack_tokens(x, keep)
        back = unpack_tokens(packed, keep, cu)
    for _ in range(2):
        keep.copy_(torch.rand(64, 197, device="cuda") < 0.3)
        x.normal_()
        graph.replay()
        torch.cuda.synchronize()
        total = int(keep.sum())
        assert torch.equal(packed[:total], x[keep])
        assert torch.equal(back, torch.where(keep[..., None], x, torch.zeros_like(x)))


def _fused_reference(x: torch.Tensor, keep: torch.Tensor, w: torch.Tensor, lengths: list[int], keep_first: bool):
    """(rows, cu_seqlens) of `pack_tokens(fuse_weights=w)` from a dense x [B, L, C] of images of `lengths`:
    per image its kept rows, then sum(w * x) over its dropped rows (fp32) where it drops any."""
    rows, cu = [], [0]
    for b, n in enumerate(lengths):
        k = keep[b, :n].clone()
        if keep_first and n:
            k[0] = True
        parts = [x[b, :n][k]]
        if (~k).any():
            parts.append((w[b, :n][~k].float()[:, None] * x[b, :n][~k].float()).sum(0).to(x.dtype)[None])
        rows.append(torch.cat(parts))
        cu.append(cu[-1] + rows[-1].shape[0])
    return torch.cat(rows), cu


@pytest.mark.parametrize("keep_first", [True, False])
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32], ids=["fp16", "fp32"])
def test_dense_pack_with_fused_row(device, dtype, keep_first):
    """Each image's dropped rows summed with their weights into one row after its kept ones; an image that
    drops nothing gets none; the packed rows, `cu_seqlens` and the fill match the per-image reference."""
    batch, seq, channels = 4, 70, 130  # 70 rows: two 64-row steps of the fused sum; 130: two channel blocks
    x = torch.randn(batch, seq, channels, device=device).to(dtype)
    keep = torch.rand(batch, seq, device=device) < 0.5
    keep[1] = True  # drops nothing
    keep[2, 0] = False  # the first row: kept with keep_first, summed without
    w = torch.rand(batch, seq, device=device)
    packed, cu = pack_tokens(x, keep, capacity=batch * seq + batch, keep_first=keep_first, fuse_weights=w)
    ref, ref_cu = _fused_reference(x, keep, w, [seq] * batch, keep_first)
    assert cu.tolist() == ref_cu and ref_cu[2] - ref_cu[1] == seq
    torch.testing.assert_close(packed[: ref_cu[-1]], ref, rtol=1e-3 if dtype == torch.float16 else 1e-5, atol=1e-4)
    for b in range(batch):  # the kept rows are moved, not summed: bit for bit
        k = keep[b].clone()
        k[0] |= keep_first
        assert torch.equal(packed[ref_cu[b]: ref_cu[b] + int(k.sum())], x[b][k])
    assert not packed[ref_cu[-1]:].any()  # the unused capacity is filled


@pytest.mark.parametrize("per_position", [True, False], ids=["per-position", "per-row"])
def test_packed_rows_with_fused_row(device, per_position):
    """A second stage on packed rows: the weights indexed as keep ([B, L] by position or [R] by row)."""
    lengths = [5, 70, 1, 33]
    cu_in = torch.tensor([0, *np.cumsum(lengths)], dtype=torch.int32, device=device)
    x = torch.randn(int(cu_in[-1]), 24, device=device)
    dense = torch.zeros(len(lengths), 70, 24, device=device)
    keep_d = torch.rand(len(lengths), 70, device=device) < 0.4
    w_d = torch.rand(len(lengths), 70, device=device)
    for b, n in enumerate(lengths):
        dense[b, :n] = x[cu_in[b]: cu_in[b] + n]
    if per_position:
        keep, w = keep_d, w_d
    else:
        keep = torch.cat([keep_d[b, :n] for b, n in enumerate(lengths)])
        w = torch.cat([w_d[b, :n] for b, n in enumerate(lengths)])
    packed, cu = pack_tokens(x, keep, capacity=x.shape[0], source_cu_seqlens=cu_in, max_seqlen=70, fill=None,
                             keep_first=True, fuse_weights=w)
    ref, ref_cu = _fused_reference(dense, keep_d, w_d, lengths, keep_first=True)
    assert cu.tolist() == ref_cu
    torch.testing.assert_close(packed[: ref_cu[-1]], ref, rtol=1e-5, atol=1e-5)
    kept = torch.cat([dense[b, :n][torch.cat([torch.ones(1, dtype=torch.bool, device=device), keep_d[b, 1:n]])]
                      for b, n in enumerate(lengths)])
    back = unpack_tokens(packed, keep, cu, source_cu_seqlens=cu_in, max_seqlen=70,
                         rows=x.shape[0] if per_position else None, keep_first=True)
    assert torch.equal(back[back.any(1)], kept[kept.any(1)])  # the kept rows unpack to their places


def test_fused_row_past_the_capacity_is_dropped(device):
    """The fused row counts like a kept one: past the capacity it is not written and cu_seqlens is clamped."""
    x = torch.randn(2, 6, 8, device=device)
    keep = torch.tensor([[1, 1, 0, 1, 0, 0], [1, 0, 1, 1, 1, 1]], dtype=torch.bool, device=device)
    w = torch.ones(2, 6, device=device)
    packed, cu = pack_tokens(x, keep, capacity=9, fuse_weights=w)
    assert cu.tolist() == [0, 4, 9]  # image 1: 5 kept + 1 fused = 6 rows, 5 fit
    torch.testing.assert_close(packed[3], x[0, [2, 4, 5]].sum(0))
    assert torch.equal(packed[4:9], x[1, keep[1]])


@pytest.mark.parametrize(
    "weights,x_dtype,exc,match",
    [
        (lambda k: k.float().tolist(), torch.float32, TypeError, "fuse_weights must be a float tensor"),
        (lambda k: k.int(), torch.float32, TypeError, "float16, bfloat16 or float32"),
        (lambda k: k.float(), torch.float64, TypeError, "float16, bfloat16 or float32"),
        (lambda k: k.float()[:, :3], torch.float32, ValueError, "shaped as keep"),
        (lambda k: k.float().to("meta"), torch.float32, ValueError, "must be on"),
    ],
    ids=["list", "int-weights", "fp64-x", "shape", "device"],
)
def test_bad_fuse_weights(weights, x_dtype, exc, match):
    x, keep = torch.randn(2, 5, 4, dtype=x_dtype), torch.rand(2, 5) < 0.5
    with pytest.raises(exc, match=match):
        pack_tokens(x, keep, fuse_weights=weights(keep))
