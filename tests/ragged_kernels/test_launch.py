"""The direct cuLaunchKernel path's layout logic (the launch itself is exercised by the GPU tests)."""

from __future__ import annotations

import pytest

from ragged_kernels import _launch

# The head of a PTX entry as Triton 3.6 emits it (5 pointers, i32, f32, then global/profile scratch).
PTX = """
.version 8.7
.target sm_90a
.address_size 64
.visible .entry _ragged_attn_fwd_kernel(
	.param .u64 .ptr .global .align 1 _ragged_attn_fwd_kernel_param_0,
	.param .u64 .ptr .global .align 1 _ragged_attn_fwd_kernel_param_1,
	.param .u64 .ptr .global .align 1 _ragged_attn_fwd_kernel_param_2,
	.param .u64 .ptr .global .align 1 _ragged_attn_fwd_kernel_param_3,
	.param .u64 .ptr .global .align 1 _ragged_attn_fwd_kernel_param_4,
	.param .u32 _ragged_attn_fwd_kernel_param_5,
	.param .f32 _ragged_attn_fwd_kernel_param_6,
	.param .u64 .ptr .global .align 1 _ragged_attn_fwd_kernel_param_7,
	.param .u64 .ptr .global .align 1 _ragged_attn_fwd_kernel_param_8
)
.reqntid 128
{
"""
SIG = ("ptr", "ptr", "ptr", "ptr", "ptr", "i32", "fp32")


def test_reads_the_entry_parameters_in_order():
    assert _launch.ptx_param_types(PTX, "_ragged_attn_fwd_kernel") == ["u64"] * 5 + ["u32", "f32", "u64", "u64"]
    with pytest.raises(_launch.DirectLaunchUnsupported, match="no .entry"):
        _launch.ptx_param_types(PTX, "other_kernel")


def test_layout_packs_our_arguments_and_leaves_scratch_pointers_zero():
    import struct

    fmt, offsets, size = _launch.param_layout(_launch.ptx_param_types(PTX, "_ragged_attn_fwd_kernel"), SIG)
    assert offsets == [0, 8, 16, 24, 32, 40, 44, 48, 56] and size == 64
    buf = bytearray(size)
    struct.pack_into(fmt, buf, 0, 1, 2, 3, 4, 2**40, 197, 0.5)
    assert struct.unpack_from("<5Qif2Q", buf) == (1, 2, 3, 4, 2**40, 197, 0.5, 0, 0)


def test_layout_aligns_a_pointer_after_a_32_bit_argument():
    fmt, offsets, size = _launch.param_layout(["u64", "u32", "u64"], ("ptr", "i32", "ptr"))
    assert offsets == [0, 8, 16] and size == 24 and fmt == "<Qixxxx" + "Q"


@pytest.mark.parametrize(
    ("types", "match"),
    [
        (["u64"] * 4, "has 4 parameters"),
        (["u64"] * 5 + ["f32", "f32"], "parameter 5 is .f32"),
        (["u64"] * 5 + ["u32", "f32", "u32"], "extra parameter 7"),
    ],
)
def test_layout_refuses_what_does_not_match(types, match):
    with pytest.raises(_launch.DirectLaunchUnsupported, match=match):
        _launch.param_layout(types, SIG)


def test_direct_launch_refuses_kernels_that_need_more(monkeypatch):
    class Md:
        global_scratch_size = 256
        num_warps = 4

    class Ck:
        metadata = Md()
        asm = {"ptx": PTX}
        name = "_ragged_attn_fwd_kernel"
        function = 0

    with pytest.raises(_launch.DirectLaunchUnsupported, match="global_scratch_size"):
        _launch.DirectLaunch(Ck(), SIG)
