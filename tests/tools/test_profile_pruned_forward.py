"""tools/profile_pruned_forward.py's bookkeeping on kernel names the H200 prints (no GPU needed)."""

import pytest

from tools import profile_pruned_forward as ppf


@pytest.mark.parametrize(
    ("name", "cat"),
    [
        ("sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1", "gemm"),
        ("nvjet_hsh_128x256_64x4_2x1_v_bz_coopA_NTN", "gemm"),
        ("_ragged_linear_kernel", "gemm"),
        ("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 128, 4>>", "attention"),
        ("_ragged_attn_fwd_kernel", "attention"),
        ("_pack_unpack_kernel", "pack"),
        ("_segment_count_kernel", "pack"),
        ("_ats_sample_fwd_kernel", "decision kernel"),
        ("_ats_stage_fwd_kernel", "decision kernel"),
        ("_threshold_keep_fwd_kernel", "decision kernel"),
        ("_ragged_layer_norm_kernel", "layernorm"),
        ("_cls_scores_fwd_kernel", "cls probe"),
        ("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::Half, float>", "layernorm"),
        ("void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl>", "gelu"),
        ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::Half>>", "elementwise"),
        ("void at::native::index_elementwise_kernel<128, 4>", "gather/scatter"),
        ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float>>", "reduction"),
        ("void at_cuda_detail::cub::DeviceScanKernel<...>", "sort/scan"),
        ("Memcpy DtoD (Device -> Device)", "copy/fill"),
        ("some_new_kernel", "other"),
    ],
)
def test_kernel_categories(name, cat):
    assert ppf.category(name) == cat


def test_summary_and_table():
    dense = ppf.summarize([("gemm_a", 100.0), ("gemm_b", 60.0), ("flash_fwd", 40.0)] * 2, forwards=2)
    pruned = ppf.summarize([("gemm_a", 50.0), ("_ragged_attn_fwd_kernel", 10.0), ("_pack_unpack_kernel", 5.0)],
                           forwards=1)
    assert dense == {"gemm": (160.0, 2.0), "attention": (40.0, 1.0)}
    rows = ppf.table({"dense": dense, "evit": pruned})
    assert rows[0].startswith("| category | dense µs (kernels) | evit µs (kernels) | evit / dense |")
    body = {r.split(" | ")[0].lstrip("| "): r for r in rows[2:]}
    assert list(body) == ["gemm", "attention", "pack", "total"]  # by time, largest first; totals last
    assert body["gemm"] == "| gemm | 160 (2) | 50 (1) | 0.31 |"
    assert body["pack"] == "| pack | 0 (0) | 5 (1) | — |"
    assert body["total"] == "| total | 200 (3) | 65 (3) | 0.33 |"


def test_top_ops_ranks_ops_by_self_gpu_time_per_forward():
    from types import SimpleNamespace

    events = [SimpleNamespace(key="aten::addmm", input_shapes=[[768], [64, 768]], count=20,
                              self_device_time_total=400.0),
              SimpleNamespace(key="aten::gelu", input_shapes=[[64, 3072]], count=10, self_device_time_total=100.0),
              SimpleNamespace(key="aten::view", input_shapes=[[1]], count=50, self_device_time_total=0.0)]
    prof = SimpleNamespace(key_averages=lambda group_by_input_shape: events)
    rows = ppf.top_ops(prof, forwards=10, n=5)
    assert rows[2].startswith("| aten::addmm | [[768], [64, 768]] | 40.0 | 2 | 80.0% |")
    assert rows[3].startswith("| aten::gelu |") and len(rows) == 4  # ops without GPU time are left out
