"""The exact tier's suite (`benchmarks.bench_structure`) and its helpers: the launch mapping's rules, kernel
slots and SASS classes, kept tokens on the photos, and what asv and the service read of it."""

from __future__ import annotations

import io
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import bench_structure, kernel_resources, launch_count, structure_worker, token_flops
from benchmarks.kernel_slots import KERNEL_SLOTS

ROOT = Path(__file__).resolve().parents[2]
NO_INTERPRETER = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}


# --- launches: the mapping, rule by rule ------------------------------------------------------------


def _fake(*shapes_and_strides, dtype=None):
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    mode = FakeTensorMode()
    with mode:
        return [torch.empty_strided(shape, stride, dtype=dtype or torch.float16, device="cuda")
                for shape, stride in shapes_and_strides]


def test_a_copy_is_a_memcpy_only_between_alike_dense_layouts():
    a, b, c, d, e = _fake(((1, 384), (384, 1)), ((1, 384), (75648, 1)), ((4, 384), (75648, 1)), ((4, 384), (384, 1)),
                          ((384, 4), (1, 384)))
    assert launch_count.copy_kind(a, b) == "memcpy"  # B 1: the class token's row is dense (a memcpy node)
    assert launch_count.copy_kind(c, d) == "kernel"  # B 4: a strided slice
    assert launch_count.copy_kind(d, e.t()) == "memcpy"  # the same layout
    assert launch_count.copy_kind(d, d.to(__import__("torch").float32)) == "kernel"  # a cast


def _count(fn, *shapes):
    """Launches of `fn` on fake CUDA tensors of `shapes` (float16)."""
    import torch

    class M(torch.nn.Module):
        def forward(self, x):
            return fn(x)

    return launch_count.count_forward(M(), shapes[0], torch.float16)


def test_sort_sdpa_cat_reductions_and_pads_launch_what_their_cuda_code_does():
    import torch
    import torch.nn.functional as F

    sort = _count(lambda x: x.argsort(dim=1, stable=True), (1, 196)).by_kind()
    assert sort == {"kernel": 2, "memcpy": 3, "memset": 0}  # values = self twice, arange + its copy, the sort
    sort4 = _count(lambda x: x.argsort(dim=1), (4, 196)).by_kind()
    assert sort4 == {"kernel": 3, "memcpy": 2, "memset": 0}  # the arange's copy is a broadcast kernel at B 4
    strided = _count(lambda x: x[:, 0].argsort(dim=1), (4, 3, 196)).by_kind()
    assert strided == {"kernel": 5, "memcpy": 0, "memset": 0}  # values = a strided self: copy kernels

    def attend(x, masked):
        q = x[:, :, :64].unflatten(-1, (1, 64)).transpose(1, 2)
        mask = torch.ones(q.shape[0], 1, 1, q.shape[2], dtype=torch.bool, device=x.device) if masked else None
        return F.scaled_dot_product_attention(q, q, q, attn_mask=mask)

    plain = _count(lambda x: attend(x, False), (2, 197, 64)).by_kind()
    assert plain == {"kernel": 1, "memcpy": 0, "memset": 1}  # cuDNN's kernel and its memset
    masked = _count(lambda x: attend(x, True), (2, 197, 64)).by_kind()
    assert masked == {"kernel": 5, "memcpy": 0, "memset": 1}  # + ones, logical_not, fill, where of the bool mask
    cat = _count(lambda x: torch.cat([x, x * 2], dim=1), (2, 197, 64)).by_kind()
    assert cat == {"kernel": 2, "memcpy": 0, "memset": 0}  # the mul, then one batched copy of both inputs
    strided_cat = _count(lambda x: torch.cat([x, x[:, :1]], dim=1), (2, 197, 64)).by_kind()
    assert strided_cat == {"kernel": 2, "memcpy": 0, "memset": 0}  # a strided input: one copy per input
    bool_sum = _count(lambda x: (x > 0).sum(1), (2, 197)).by_kind()
    assert bool_sum == {"kernel": 3, "memcpy": 0, "memset": 0}  # gt, the cast to int64, the sum
    pad = _count(lambda x: F.pad(x, (1, 0)), (2, 197)).by_kind()
    assert pad == {"kernel": 2, "memcpy": 0, "memset": 0}


def test_an_op_the_mapping_does_not_know_is_listed_and_a_host_read_fails():
    got = _count(lambda x: x.topk(3, dim=1).values, (2, 197))
    assert dict(got.unmapped) == {"aten.topk": 1}
    with pytest.raises(RuntimeError, match="reads a device value on the host"):
        _count(lambda x: x * x.sum().item(), (2, 197))


def test_every_shipped_forward_is_counted_with_mapped_ops_only():
    """The whole grid of today's library: every op mapped on purpose, no host sync (the worker would fail)."""
    env = {**os.environ, "TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": str(ROOT)}
    out = ROOT / ".pytest-launches.json"
    try:
        proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "structure_worker.py"), "launches", "--out",
                               str(out), "--models", "DeiT-S", "--batches", "B1"], env=env, capture_output=True,
                              text=True, timeout=900)  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-2000:]
        got = json.loads(out.read_text())
    finally:
        out.unlink(missing_ok=True)
    assert all("value" in v for v in got.values()), {k: v for k, v in got.items() if "value" not in v}
    assert {k: v["unmapped"] for k, v in got.items() if v["unmapped"]} == {}
    total = {k: sum(v["value"].values()) for k, v in got.items()}
    assert total["DeiT-S|dense|graph|B1"] == 139 and total["DeiT-S|ATS|graph|B1"] == 169
    # fused blocks: five launches a block; a pruned forward still launches more than dense (each stage's own)
    assert total["DeiT-S|dense|fused|B1"] < total["DeiT-S|ATS|fused|B1"] < total["DeiT-S|ATS|graph|B1"]


# --- kernel resources --------------------------------------------------------------------------------


def test_slots_survive_retuning():
    names = ["ragged_linear (128, 256, 64, 8, 3) gelu=False norm", "ragged_linear (64, 64, 64, 4, 3) gelu=False norm",
             "attention D64 float16 AttnConfig(BLOCK_M=64, BLOCK_N=32, num_warps=4)", "CLS scores D64 BLOCK_N=16",
             "threshold-L2 stage BLOCK=256 budget=True BLOCK_B=64"]
    assert kernel_resources.slot_names(names) == [
        "ragged_linear gelu=False norm #0", "ragged_linear gelu=False norm #1", "attention D64 float16 #0",
        "CLS scores D64 #0", "threshold-L2 stage budget=True #0"]


def test_sass_counts_by_class():
    sass = """
        /*0000*/                   LDC R1, c[0x0][0x28] ;
        /*0010*/                   LDG.E.128 R4, desc[UR4][R2.64] ;
        /*0020*/              @!P0 LDGSTS.E.BYPASS.LTC128B.128 [R7], desc[UR4][R8.64] ;
        /*0030*/                   LDSM.16.M88.4 R12, [R10] ;
        /*0040*/                   HMMA.16816.F32 R16, R12, R14, R16 ;
        /*0050*/                   HGMMA.64x64x16.F32 R24, gdesc[UR4], R24 ;
        /*0060*/                   STS.128 [R3], R4 ;
        /*0070*/                   STG.E desc[UR4][R2.64], R0 ;
        /*0080*/                   EXIT ;
    """
    assert kernel_resources.sass_counts(sass) == {"mma": 2, "global_loads": 2, "global_stores": 1, "shared_loads": 1,
                                                  "shared_stores": 1, "other": 2}


def test_every_shipping_compilation_has_a_listed_slot():
    """KERNEL_SLOTS is asv's parameter grid, fixed before the library is imported: a compilation whose slot
    is not listed would go unmeasured (add it at the end of benchmarks/kernel_slots.py)."""
    code = ("import json, sys; sys.path.insert(0, 'benchmarks'); import kernel_resources as k; "
            "print(json.dumps({c: k.slot_names([s.name for s in k.shipping_specs(c)]) for c in k.ARCHS}))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env={**NO_INTERPRETER, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    by_arch = json.loads(proc.stdout.splitlines()[-1])
    assert all(len(v) > 40 for v in by_arch.values())
    missing = sorted({s for v in by_arch.values() for s in v} - set(KERNEL_SLOTS))
    assert missing == [], f"add these to benchmarks/kernel_slots.py: {missing}"
    assert len(set(KERNEL_SLOTS)) == len(KERNEL_SLOTS)


# --- tokens and FLOPs --------------------------------------------------------------------------------


def test_flop_parts_split_linear_and_attention():
    linear, attention = token_flops.flop_parts([[3, 1]], [[3, 1]], 2)
    assert (linear, attention) == (24 * 4 * 4, 4 * 2 * 10)
    assert token_flops.forward_flops([[3, 1]], [[3, 1]], 2) == linear + attention


def test_kept_tokens_on_the_photos(tmp_path):
    """Fixed-count pruners keep exactly their counts on the 7 photos; every value is the same on a second run."""
    env = {**os.environ, "TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": str(ROOT)}
    runs = []
    for i in range(2):
        out = tmp_path / f"tokens{i}.json"
        proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "structure_worker.py"), "tokens", "--out",
                               str(out)], env=env, capture_output=True, text=True, timeout=600)  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-2000:]
        runs.append(json.loads(out.read_text()))
    assert runs[0] == runs[1]
    got = {k: v["value"] for k, v in runs[0].items()}
    r = token_flops.budget_options("dynamicvit", structure_worker.BUDGET, 196)["rho"]
    assert got["DeiT-S|DynamicViT"]["kept"] == [7 * (1 + int(196 * r ** (s + 1))) for s in range(3)]
    assert got["DeiT-S|EViT"]["kept"][0] == 7 * (1 + math.ceil(r * 196) + 1)  # the fused token included
    assert len(got["DeiT-S|ATS"]["kept"]) == 9 and got["DeiT-S|dense"]["ratio"] == 1.0
    assert all(1.8 < got[f"DeiT-B|{p}"]["ratio"] < 2.2 for p in structure_worker.PRUNERS)  # ~50% budget
    assert got["DeiT-S|ATS"]["version"] == 1  # Pruner.decisions_version


# --- what asv and the service read -------------------------------------------------------------------


def _discovered() -> list[dict]:
    from asv_runner.discovery import list_benchmarks

    buf = io.StringIO()
    list_benchmarks(str(ROOT / "benchmarks"), buf)
    return [b for b in json.loads(buf.getvalue()) if b["name"].startswith("bench_structure.")]


def test_every_structure_series_is_declared_exact_with_a_direction_and_shares_its_measurement():
    listed = _discovered()
    assert len(listed) == 19 and all(b.get("exact") is True and b["direction"] in ("lower", "higher") for b in listed)
    keys = {b["name"].split(".")[1]: b["setup_cache_key"] for b in listed}
    assert keys["KeptTokens"] == keys["Flops"] != keys["Launches"]  # one token measurement for both classes
    from ci.ingest.asv_files import load_benchmarks_json
    from ci.records import Kind

    with_version = {b["name"]: b for b in listed}
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "benchmarks.json").write_text(json.dumps({"version": 2, **with_version}))
        info = load_benchmarks_json(tmp)
    assert {i.kind for i in info.values()} == {Kind.EXACT}


def test_points_skip_or_fail_as_the_worker_says():
    cache = {"DeiT-S|ATS|graph|B1": {"value": {"kernel": 164, "memcpy": 1, "memset": 4}},
             "DeiT-S|ATS|fused|B1": {"skip": "not at this commit"},
             "DeiT-S|ATS|graph|B64": {"error": "boom"}}
    b = bench_structure.Launches()
    b.setup(cache, "DeiT-S", "ATS", "graph", "B1")
    assert b.track_launches(cache, "DeiT-S", "ATS", "graph", "B1") == 169
    with pytest.raises(NotImplementedError):
        b.setup(cache, "DeiT-S", "ATS", "fused", "B1")
    with pytest.raises(RuntimeError, match="boom"):
        b.setup(cache, "DeiT-S", "ATS", "graph", "B64")
    k = bench_structure.KernelResources()
    with pytest.raises(NotImplementedError):
        k.setup({"value": {"sm_89": {}}}, KERNEL_SLOTS[0], "sm_89")
    f = bench_structure.Flops()
    f.setup({"DeiT-S|dense": {"value": {"attention": 1.0, "linear": 2.0, "ratio": 1.0, "version": None}}},
            "DeiT-S", "dense")
    assert math.isnan(f.track_decisions_version(None, "DeiT-S", "dense"))
