"""Direct `cuLaunchKernel` for a compiled Triton kernel: the host floor without Triton's launcher.

Why: host cost per call is a product target (issue 3). Triton's `CompiledKernel.run` costs ~5.8 µs
per launch on the H200 VM even with integer pointers (kernels.md §7-8): a Python `CudaLauncher.__call__`
that builds scratch-allocation closures, then a generated C `launch` that parses every argument
(constexprs included) and calls `cuLaunchKernelEx`. The driver call itself is ~1.3 µs. This module
keeps the kernel's argument block in one preallocated buffer, writes the call's values into it with
a single `struct.pack_into`, and calls `cuLaunchKernel` through `ctypes.PyDLL` (the GIL stays held,
so no release/reacquire on the hot path).

Safety: the parameter layout is read from the kernel's own PTX (`.entry name(.param ...)`), not
assumed: the leading parameters must be exactly the non-constexpr arguments we pass, in order, and
anything after them must be 64-bit (Triton's scratch pointers, passed as NULL). Kernels that need
what this path does not do (global or profile scratch, clusters, cooperative or PDL launch, more
than 228 KiB of shared memory) are refused at construction (`DirectLaunchUnsupported`), and the
caller keeps Triton's launcher. A launch returns the driver's status: on anything but success the
caller relaunches through Triton (which makes the device's context current where a thread has none
yet, or raises Triton's own error).

Set `RAGGED_KERNELS_LAUNCH=triton` to always use Triton's launcher (A/B of the two paths).
"""

from __future__ import annotations

import ctypes
import os
import re
import struct
import threading
from collections.abc import Sequence

USE_DIRECT = os.environ.get("RAGGED_KERNELS_LAUNCH", "direct").strip().lower() != "triton"

# What each Triton signature type may look like in PTX.
_SIG_TO_PTX = {
    "ptr": {"u64", "b64"},
    "i32": {"u32", "s32", "b32"},
    "fp32": {"f32", "b32"},
    "i64": {"u64", "s64", "b64"},
}
_SIG_FMT = {"ptr": ("Q", 8), "i32": ("i", 4), "fp32": ("f", 4), "i64": ("q", 8)}
_ENTRY = r"\.entry\s+{name}\s*\((.*?)\)"
_PARAM = re.compile(r"\.param\s+\.(\w+)")


class DirectLaunchUnsupported(Exception):
    """The compiled kernel needs something the direct path does not do; use Triton's launcher."""


def ptx_param_types(ptx: str, name: str) -> list[str]:
    """The PTX types (`u64`, `u32`, `f32`, ...) of the entry `name`'s parameters, in order."""
    m = re.search(_ENTRY.format(name=re.escape(name)), ptx, re.S)
    if m is None:
        raise DirectLaunchUnsupported(f"no .entry {name}( in the kernel's PTX")
    return _PARAM.findall(m.group(1))


def param_layout(ptx_types: Sequence[str], signature: Sequence[str]) -> tuple[str, list[int], int]:
    """Check the PTX parameters against the argument kinds we pass, and lay the argument block out.

    Args:
        ptx_types: from `ptx_param_types`.
        signature: the kinds of the arguments we pass, in order: "ptr", "i32", "fp32" or "i64".

    Returns:
        (struct format of the passed arguments, byte offset of every PTX parameter, block size).
        Parameters past the passed ones must be 64-bit; they stay zero (NULL scratch pointers).
    """
    if len(ptx_types) < len(signature):
        raise DirectLaunchUnsupported(f"kernel has {len(ptx_types)} parameters, we pass {len(signature)}")
    fmt, offsets, off = "<", [], 0
    for i, t in enumerate(ptx_types):
        if i < len(signature):
            if t not in _SIG_TO_PTX[signature[i]]:
                raise DirectLaunchUnsupported(f"parameter {i} is .{t} in PTX, expected {signature[i]}")
            ch, size = _SIG_FMT[signature[i]]
        else:
            if t not in ("u64", "b64"):
                raise DirectLaunchUnsupported(f"extra parameter {i} is .{t}, expected a 64-bit pointer")
            ch, size = None, 8
        pad = (-off) % size
        if ch is not None:
            fmt += "x" * pad + ch
        off += pad
        offsets.append(off)
        off += size
    return fmt, offsets, off


_cu_launch = None


def _driver_launch():
    """`cuLaunchKernel` from libcuda through ctypes.PyDLL (GIL held: no release on the hot path)."""
    global _cu_launch
    if _cu_launch is None:
        try:
            lib = ctypes.PyDLL("libcuda.so.1")
        except OSError:
            from triton.backends.nvidia.driver import libcuda_dirs

            lib = ctypes.PyDLL(os.path.join(libcuda_dirs()[0], "libcuda.so.1"))
        fn = lib.cuLaunchKernel
        fn.restype = ctypes.c_int
        fn.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3
        _cu_launch = fn
    return _cu_launch


class DirectLaunch:
    """`launch(gx, gy, gz, stream, *args)` of one compiled Triton kernel via `cuLaunchKernel`.

    Args:
        ck: the `CompiledKernel` (from the first `kernel[grid](...)` call).
        signature: kinds of the non-constexpr arguments, in order ("ptr", "i32", "fp32", "i64");
            pointers are passed as ints (`tensor.data_ptr()`).
    """

    def __init__(self, ck, signature: Sequence[str]) -> None:
        md = ck.metadata
        for field in ("global_scratch_size", "profile_scratch_size"):
            if getattr(md, field, 0):
                raise DirectLaunchUnsupported(f"{field} = {getattr(md, field)}")
        for field in ("launch_cooperative_grid", "launch_pdl"):
            if getattr(md, field, False):
                raise DirectLaunchUnsupported(field)
        if getattr(md, "num_ctas", 1) != 1:
            raise DirectLaunchUnsupported(f"num_ctas = {md.num_ctas}")
        shared = int(getattr(md, "shared", 0))
        if shared > 228 * 1024:
            raise DirectLaunchUnsupported(f"shared memory {shared} B needs the oversized mode")
        ptx = getattr(ck, "asm", {}).get("ptx")
        if not ptx:
            raise DirectLaunchUnsupported("no PTX kept for the kernel")
        name = getattr(ck, "name", None) or md.name
        fmt, offsets, size = param_layout(ptx_param_types(ptx, name), signature)
        self._pack = struct.Struct(fmt).pack_into
        self._buf = ctypes.create_string_buffer(max(size, 8))
        base = ctypes.addressof(self._buf)
        self._params = (ctypes.c_void_p * max(len(offsets), 1))(*[base + o for o in offsets])
        self._function = ck.function
        self._block = 32 * md.num_warps
        self._shared = shared
        self._launch = _driver_launch()
        self._lock = threading.Lock()

    def __call__(self, gx: int, gy: int, gz: int, stream: int, *args) -> int:
        """Launch on `stream` (raw handle) from the calling thread's current context; 0 on success."""
        with self._lock:  # one argument block per kernel: keep pack + launch together across threads
            self._pack(self._buf, 0, *args)
            return self._launch(self._function, gx, gy, gz, self._block, 1, 1, self._shared, stream, self._params, None)
