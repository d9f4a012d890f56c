"""Launches per forward, counted on the CPU: the kernels, copies and memsets one captured forward of a
pruned DeiT launches on CUDA, without a GPU.

Graph mode (`pruners.graph`) captures `PrunedDeiT.forward` once and replays it; a replay launches
exactly the nodes the capture recorded, one per kernel, device copy and memset the forward issued. That
number decides the serving batches' speed (docs/performance.md, "Serving batches": ~3.7 us a node at
batch 1 on the H200) and does not depend on timing, so it can be counted exactly where there is no GPU:

- the model is built as `build_pruned_model(..., graph=True)` builds it (seeded weights; Threshold-L2
  calibrated on the CPU as the library does), then its parameters and buffers become fake CUDA tensors
  (`torch._subclasses.FakeTensorMode`: shapes, dtypes and devices, no memory), so every branch that asks
  `x.is_cuda` takes the CUDA path;
- the forward that graph mode captures runs once under three interceptors: a dispatch mode that sees
  every aten op and maps it to what its CUDA implementation launches (`cuda_launches`); a function mode
  that takes `scaled_dot_product_attention` before PyTorch picks a backend (the CPU would pick its math
  fallback; on the H200 it is cuDNN's fused kernel); and Triton's launcher, replaced by a counter (the
  process runs with TRITON_INTERPRET=1, so the library launches every kernel through `kernel[grid](...)`
  and never through its cached or native paths, which launch the same kernels);
- `torch.cuda.is_current_stream_capturing()` answers True, as it does inside the capture.

The mapping (`cuda_launches`) is PyTorch's CUDA dispatch as of torch 2.11-2.14 on sm_90: views and
allocations launch nothing, a device copy is one memcpy when both sides are dense with the same layout and
one kernel otherwise, a GEMM is one kernel, SDPA is cuDNN's kernel plus one memset. Checked against the
graph node counts the H200 recorded (tests/benchmarks/test_launch_count.py lists, op by op, the nodes
cuBLAS's heuristics add there and a CPU cannot see). An op the mapping does not know counts one kernel and
is listed in `LaunchCount.unmapped`, so a new op is mapped on purpose.

Run in a process of its own (`benchmarks/structure_worker.py`): TRITON_INTERPRET must be set before Triton
is imported, and CUDA hidden, so that the count is the same on a machine with a GPU.
"""

from __future__ import annotations

import contextlib
import math
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

KINDS = ("kernel", "memcpy", "memset")

# Ops that launch nothing on CUDA: views and metadata, allocations, and the dispatcher's own queries.
_NO_LAUNCH = frozenset({
    "view", "_unsafe_view", "_reshape_alias", "reshape", "t", "transpose", "permute", "expand", "expand_as",
    "select", "slice", "unsqueeze", "squeeze", "as_strided", "alias", "detach", "unbind", "split",
    "split_with_sizes", "unflatten", "flatten", "narrow", "diagonal", "view_as", "lift_fresh", "movedim",
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "resize_", "set_", "device",
    "sym_size", "sym_stride", "sym_numel", "sym_storage_offset", "is_same_size", "_has_compatible_shallow_copy_type",
    "is_contiguous", "is_non_overlapping_and_dense", "dim", "size", "stride", "numel", "storage_offset",
    "conj", "_conj", "_neg_view", "real", "imag", "_nested_tensor_size", "contiguous",
})
# One kernel each on CUDA: TensorIterator elementwise and comparison ops (a scalar operand rides along as a
# kernel argument), fills and factories (`zeros` is `empty` + a fill kernel, `scalar_tensor` on the device a
# fill), LayerNorm, softmax and GELU kernels, and the indexing kernels (index, index_select, gather, scatter_,
# searchsorted) with integer indices.
_ONE_KERNEL = frozenset({
    "add", "sub", "mul", "div", "neg", "abs", "exp", "log", "sqrt", "rsqrt", "pow", "reciprocal", "sigmoid", "tanh",
    "relu", "gelu", "silu", "ceil", "floor", "round", "trunc", "sign", "clamp", "clamp_", "clamp_min", "clamp_max",
    "minimum", "maximum", "where", "lt", "le", "gt", "ge", "eq", "ne", "logical_not", "logical_and", "logical_or",
    "bitwise_and", "bitwise_or", "bitwise_not", "bitwise_xor", "isfinite", "isnan", "masked_fill_",
    "fill_", "zero_", "zeros", "ones", "full", "zeros_like", "ones_like", "full_like", "scalar_tensor", "arange",
    "linspace", "native_layer_norm", "_softmax", "_log_softmax", "_safe_softmax", "index", "index_select", "gather",
    "scatter_", "scatter_add_", "index_put_", "index_add_", "index_copy_", "searchsorted", "bucketize", "add_",
    "sub_", "mul_", "div_", "copysign", "erf", "lerp", "addcmul", "addcdiv", "hardtanh", "leaky_relu",
})
# Reductions and scans PyTorch runs as one kernel each at these sizes.
_ONE_KERNEL_REDUCTIONS = frozenset({
    "sum", "mean", "amax", "amin", "max", "min", "argmax", "argmin", "any", "all", "prod", "norm",
    "linalg_vector_norm", "var_mean", "var", "std", "logsumexp",
})
# Reductions that reduce in their output dtype on CUDA (`make_reduction_from_out_ty`).
_CAST_REDUCTIONS = frozenset({"sum", "mean", "prod", "nansum"})
# Out-of-place forms whose CUDA implementation copies `self` into a new tensor, then runs the in-place kernel.
_COPY_THEN_KERNEL = frozenset({"scatter", "scatter_add", "index_add", "index_copy", "index_fill", "masked_scatter",
                               "masked_fill"})


@dataclass(frozen=True)
class Launch:
    """One op of the forward and what it launches on CUDA."""

    op: str  # aten op, "sdpa", or "triton:<kernel>"
    kind: str  # one of KINDS
    count: int
    why: str = ""
    shape: tuple[int, ...] = ()  # a GEMM's (M, K, N); else the first output's shape


@dataclass
class LaunchCount:
    """What one forward launched, by kind, and the ops behind it (in order)."""

    launches: list[Launch] = field(default_factory=list)
    unmapped: Counter = field(default_factory=Counter)  # aten ops counted as one kernel by default
    host_syncs: list[str] = field(default_factory=list)  # ops that read a device value (a capture would fail)

    def total(self, kind: str | None = None) -> int:
        return sum(x.count for x in self.launches if kind is None or x.kind == kind)

    def by_kind(self) -> dict[str, int]:
        return {k: self.total(k) for k in KINDS}

    def by_op(self) -> dict[tuple[str, str], int]:
        out: Counter = Counter()
        for x in self.launches:
            out[(x.op, x.kind)] += x.count
        return dict(out)


def _numel(t: Any) -> int:
    return math.prod(t.shape)


def _dense_strides(t: Any) -> tuple[int, ...] | None:
    """The strides of `t` with size-1 dimensions dropped (they never move a pointer), or None when `t`
    is not non-overlapping and dense (a TensorIterator over it does not collapse to one dimension)."""
    dims = [(s, n) for s, n in zip(t.stride(), t.shape, strict=True) if n != 1]
    expected = 1
    for s, n in sorted(dims):
        if s != expected:
            return None
        expected *= n
    return tuple(s for s, _ in dims)


def copy_kind(dst: Any, src: Any) -> str | None:
    """What `dst.copy_(src)` launches on one CUDA device: "memcpy" when PyTorch's copy is memcpy-eligible
    (same dtype, and the iteration collapses to one contiguous dimension: both dense with the same
    layout, no broadcast, or one element), else "kernel"; None for no elements."""
    n = _numel(dst)
    if n == 0:
        return None
    if dst.dtype != src.dtype:
        return "kernel"
    if n == 1:
        return "memcpy"
    if tuple(src.shape) != tuple(dst.shape):
        return "kernel"  # broadcast: a strided kernel
    a, b = _dense_strides(dst), _dense_strides(src)
    return "memcpy" if a is not None and a == b else "kernel"


def _tensors(x: Any) -> Iterator[Any]:
    import torch

    if isinstance(x, torch.Tensor):
        yield x
    elif isinstance(x, (list, tuple)):
        for y in x:
            yield from _tensors(y)


def cuda_launches(name: str, overload: str, args: Sequence[Any], kwargs: dict[str, Any], out: Any
                  ) -> list[tuple[str, int, str]]:
    """What one aten op launches on a CUDA device (PyTorch's CUDA implementations, torch 2.11-2.14, sm_90).

    Args:
        name: the op's name without namespace and overload (e.g. "addmm").
        overload: its overload name ("default", "Tensor", "out", ...).
        args, kwargs: its arguments (fake tensors for tensors).
        out: what it returned.

    Returns:
        [(kind, count, why)]; empty when it launches nothing. An op not listed here returns
        [("kernel", 1, "unmapped")].
    """
    import torch

    outs = list(_tensors(out))
    if name in _NO_LAUNCH:
        return []
    if outs and all(_numel(t) == 0 for t in outs) and name not in ("copy_",):
        return []
    if name in ("copy_", "_copy_from"):
        dst, src = args[0], args[1]
        if not isinstance(src, torch.Tensor):
            return [("kernel", 1, "fill")]
        if src.device.type != dst.device.type:
            return [("memcpy", 1, "host-device copy")]
        kind = copy_kind(dst, src)
        return [] if kind is None else [(kind, 1, "copy")]
    if name in ("clone", "_to_copy", "to", "_to_dense"):
        src = args[0]
        dst = outs[0]
        if src.device.type != dst.device.type:
            return [("memcpy", 1, "host-device copy")]
        kind = copy_kind(dst, src)
        return [] if kind is None else [(kind, 1, "copy")]
    if name == "cat":
        return _cat(list(args[0]), outs[0])
    if name == "stack":
        return [("kernel", 1, "cat")]
    if name in ("addmm", "mm", "bmm", "baddbmm", "addmv", "mv", "addbmm", "_addmm_activation"):
        return [("kernel", 1, "GEMM (cuBLAS/cuBLASLt, bias epilogue)")]
    if name in ("_flash_attention_forward", "_efficient_attention_forward"):
        return [("kernel", 1, "fused attention")]
    if name in ("cumsum", "cumprod"):
        src = args[0]
        dim = args[1] if len(args) > 1 else kwargs.get("dim")
        dim = dim % max(src.dim(), 1)
        if src.dim() <= 1 or _numel(src) == src.shape[dim]:
            return [("kernel", 2, "CUB DeviceScan: init + scan kernels")]
        return [("kernel", 1, "scan")]
    if name in _CAST_REDUCTIONS and outs and args and isinstance(args[0], torch.Tensor):
        src, dtype = args[0], outs[0].dtype
        lowp_to_float = src.dtype in (torch.float16, torch.bfloat16) and dtype == torch.float32
        if src.dtype != dtype and not lowp_to_float:
            # `make_reduction_from_out_ty` reduces in the output's dtype: `self.to(dtype)` first (a bool
            # count's sum is an int64 cast kernel, then the reduction).
            return [("kernel", 1, f"{name}: input cast to the output dtype"), ("kernel", 1, "reduction")]
        return [("kernel", 1, "reduction")]
    if name in _ONE_KERNEL_REDUCTIONS:
        return [("kernel", 1, "reduction")]
    if name in _COPY_THEN_KERNEL:
        src = args[0]
        kind = copy_kind(outs[0], src) or "kernel"
        return [(kind, 1, "copy of self"), ("kernel", 1, name)]
    if name == "sort":
        return _sort(args[0], args, kwargs, outs)
    if name in _ONE_KERNEL:
        return [("kernel", 1, "one kernel")]
    if name == "constant_pad_nd":  # empty, fill with the value, then the input copied into its slice
        return [("kernel", 1, "pad: fill"), ("kernel", 1, "pad: copy of the input")]
    if name in ("nonzero", "masked_select", "unique", "_unique2", "item", "_local_scalar_dense", "repeat_interleave"):
        return [("kernel", 1, "host sync")]
    return [("kernel", 1, "")]


# torch.sort's in-place path below this many elements along the sorted dim (`should_use_small_sort`).
SMALL_SORT = 4096


def _sort(src: Any, args: Sequence[Any], kwargs: dict[str, Any], outs: list[Any]) -> list[tuple[str, int, str]]:
    """torch.sort / argsort on CUDA (Sorting.cpp `sort_stable_out`, cuda/Sort.cpp `sort_cuda_kernel`) for
    slices of at most SMALL_SORT elements: values = self (a copy), the indices filled with an arange
    (a kernel, then a copy of it into every slice), values = self again, then one in-place key-value
    sort kernel (bitonic, warp-merge or block radix by the slice size)."""
    values, indices = outs[0], outs[1]
    dim = kwargs.get("dim", -1)
    for a in args[1:]:
        if isinstance(a, int) and not isinstance(a, bool):
            dim = a
            break
    dim = dim % max(src.dim(), 1)
    n = src.shape[dim] if src.dim() else 1
    if n > SMALL_SORT:
        return [("kernel", 1, "unmapped: segmented sort (more than SMALL_SORT elements)")]
    values_copy = copy_kind(values, src)
    range_shape = [1] * indices.dim()
    range_shape[dim] = n
    fill = "memcpy" if tuple(range_shape) == tuple(indices.shape) and _dense_strides(indices) is not None else "kernel"
    out = [(values_copy, 1, "sort: values = self"), ("kernel", 1, "sort: arange of the indices"),
           (fill, 1, "sort: the arange copied into every slice"), (values_copy, 1, "sort: values = self (in place)")]
    if n > 1:
        out.append(("kernel", 1, "sort: in-place key-value sort"))
    return [x for x in out if x[0]]


def _cat(inputs: list[Any], out: Any) -> list[tuple[str, int, str]]:
    """torch.cat on CUDA: one batched-copy kernel when every non-empty input is contiguous in the
    output's memory format and of its dtype (CatArrayBatchedCopy, up to 64 inputs a launch), else one
    copy per input (`out.narrow(...).copy_(input)`: a memcpy where that slice and the input are dense alike)."""
    inputs = [t for t in inputs if _numel(t) > 0 and t.dim() == out.dim()]
    if not inputs:
        return []
    fmt_ok = all(t.is_contiguous() and t.dtype == out.dtype for t in inputs) and out.is_contiguous()
    if fmt_ok:
        return [("kernel", math.ceil(len(inputs) / 64), "cat (batched copy)")]
    dim = next(d for d in range(out.dim()) if any(t.shape[d] != out.shape[d] for t in inputs)) \
        if any(tuple(t.shape) != tuple(out.shape) for t in inputs) else 0
    res, offset = [], 0
    for t in inputs:
        part = out.narrow(dim, offset, t.shape[dim])
        offset += t.shape[dim]
        kind = copy_kind(part, t)
        if kind:
            res.append((kind, 1, "cat (copy per input)"))
    return res


class _Counting:
    """The dispatch and function modes and the Triton hook of one count (see the module docstring)."""

    def __init__(self, result: LaunchCount) -> None:
        self.result = result

    def add(self, op: str, kind: str, count: int, why: str = "", shape: tuple[int, ...] = ()) -> None:
        if count:
            self.result.launches.append(Launch(op, kind, count, why, shape))


def _dispatch_mode(counting: _Counting):
    from torch.utils._python_dispatch import TorchDispatchMode

    class CountDispatch(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            packet = func.name().split("::")[-1].split(".")[0]
            ns = func.namespace
            if ns == "prim" or (ns == "aten" and packet in _NO_LAUNCH):
                return out
            if ns != "aten":
                counting.add(str(func), "kernel", 1, "custom op")
                counting.result.unmapped[str(func)] += 1
                return out
            launches = cuda_launches(packet, func._overloadname, args, kwargs, out)
            shape = _shape_of(packet, args, out)
            for kind, n, why in launches:
                if why == "host sync":
                    counting.result.host_syncs.append(packet)
                counting.add(f"aten.{packet}", kind, n, why, shape)
                if why == "":
                    counting.result.unmapped[f"aten.{packet}"] += 1
            return out

    return CountDispatch()


def _shape_of(name: str, args: Sequence[Any], out: Any) -> tuple[int, ...]:
    """A GEMM's (M, K, N) (batched: (batch, M, K, N)), else the first output's shape."""
    if name in ("addmm", "mm") and len(args) >= 2:
        a, b = (args[1], args[2]) if name == "addmm" else (args[0], args[1])
        return (a.shape[0], a.shape[1], b.shape[1])
    if name in ("bmm", "baddbmm"):
        a, b = (args[0], args[1]) if name == "bmm" else (args[1], args[2])
        return (a.shape[0], a.shape[1], a.shape[2], b.shape[2])
    first = next(_tensors(out), None)
    return tuple(first.shape) if first is not None else ()


def _function_mode(counting: _Counting):
    import torch
    import torch.nn.functional as F
    from torch.overrides import TorchFunctionMode

    sdpa = {F.scaled_dot_product_attention, torch._C._nn.scaled_dot_product_attention}

    class CountFunctions(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if func in sdpa:
                q, v = args[0], args[2] if len(args) > 2 else kwargs["value"]
                mask = args[3] if len(args) > 3 else kwargs.get("attn_mask")
                if mask is not None and mask.dtype == torch.bool:
                    # `convert_boolean_attn_mask`: where(mask.logical_not(), -inf, scalar_tensor(0) on the
                    # device) before any backend: a logical_not, a fill and a where kernel.
                    for step in ("logical_not", "fill", "where"):
                        counting.add("sdpa", "kernel", 1, f"boolean mask to additive: {step}")
                # cuDNN's fused attention (H200, torch 2.11: `_cudnn_attention_forward`), whose launch the
                # graph records with one memset (docs/performance.md, graph nodes by kind); the padded
                # backend's masked calls take the same count.
                counting.add("sdpa", "kernel", 1, "cuDNN fused attention")
                counting.add("sdpa", "memset", 1, "cuDNN fused attention")
                with torch._C.DisableTorchFunction():
                    return _like_layout(q, (*q.shape[:-1], v.shape[-1]))
            return func(*args, **kwargs)

    return CountFunctions()


def _like_layout(q: Any, shape: tuple[int, ...]) -> Any:
    """An empty tensor of `shape` whose dimensions lie in memory in `q`'s order: the fused attention
    kernels allocate their output matching the query's layout (`alloc_with_matching_layout` in
    PyTorch's cuDNN and flash paths), so a [B, N, H, D] view of a fused qkv buffer gives an output whose
    transpose back to [B, N, H * D] is free."""
    order = sorted(range(q.dim()), key=lambda d: (-q.stride(d), d))
    out = q.new_empty([shape[d] for d in order])
    return out.permute([order.index(d) for d in range(q.dim())])


@contextlib.contextmanager
def _triton_counter(counting: _Counting) -> Iterator[None]:
    """Replace the interpreter's launcher with a counter (TRITON_INTERPRET=1 only)."""
    from triton.runtime import interpreter

    original = interpreter.InterpretedFunction.run

    def run(self, *args, grid, warmup, **kwargs):  # noqa: ARG001 - the launcher's signature
        name = getattr(getattr(self, "fn", None), "__name__", None) or getattr(self, "__name__", "triton")
        counting.add(f"triton:{name}", "kernel", 1, "Triton kernel")
        return None

    interpreter.InterpretedFunction.run = run
    try:
        yield
    finally:
        interpreter.InterpretedFunction.run = original


@dataclass(frozen=True)
class DeviceProperties:
    """What `torch.cuda.get_device_properties` answers while counting: the H200 the recorded counts come
    from (132 SMs, sm_90). The library reads the SM count to pick ragged_linear's tile, never a count."""

    name: str = "NVIDIA H200 (counted on the CPU)"
    major: int = 9
    minor: int = 0
    multi_processor_count: int = 132
    total_memory: int = 141 * 2**30


@contextlib.contextmanager
def _as_captured_on_h200() -> Iterator[None]:
    """`torch.cuda.is_current_stream_capturing()` answers True, as inside a graph capture, and the device
    queries answer for one H200 (`DeviceProperties`)."""
    import torch

    props = DeviceProperties()
    patches = {
        "is_current_stream_capturing": lambda: True,
        "get_device_properties": lambda device=None: props,
        "get_device_capability": lambda device=None: (props.major, props.minor),
        "current_device": lambda: 0,
    }
    saved = {name: getattr(torch.cuda, name) for name in patches}
    for name, fn in patches.items():
        setattr(torch.cuda, name, fn)
    try:
        yield
    finally:
        for name, fn in saved.items():
            setattr(torch.cuda, name, fn)


def fake_cuda(module: Any, fake_mode: Any) -> Any:
    """Replace every parameter and buffer of `module` (and plain tensor attributes of its submodules) by a
    fake CUDA tensor of the same shape, strides and dtype, in place; returns `module`."""
    import torch

    def convert(t: torch.Tensor) -> torch.Tensor:
        with fake_mode:
            return torch.empty_strided(tuple(t.shape), tuple(t.stride()), dtype=t.dtype, device="cuda")

    return _replace_tensors(module, convert)


def meta(module: Any) -> Any:
    """Replace every parameter and buffer of `module` (and plain tensor attributes of its submodules) by a
    `meta` tensor of the same shape, strides and dtype, in place: no storage, so a dtype conversion of the
    module costs nothing; returns `module`."""
    import torch

    return _replace_tensors(module, lambda t: torch.empty_strided(tuple(t.shape), tuple(t.stride()), dtype=t.dtype,
                                                                  device="meta"))


def _replace_tensors(module: Any, convert: Callable[[Any], Any]) -> Any:
    import torch

    for m in module.modules():
        for name, p in list(m._parameters.items()):
            if p is not None:
                m._parameters[name] = torch.nn.Parameter(convert(p.detach()), requires_grad=False)
        for name, b in list(m._buffers.items()):
            if b is not None:
                m._buffers[name] = convert(b)
        for name, value in list(vars(m).items()):
            if isinstance(value, torch.Tensor) and name not in ("_parameters", "_buffers"):
                setattr(m, name, convert(value)) if not name.startswith("__") else None
    return module


def count_forward(model: Any, images_shape: tuple[int, ...], dtype: Any, forward: Callable | None = None
                  ) -> LaunchCount:
    """Count what one forward of `model` (a CPU module; converted to fake CUDA `dtype` in place) launches.

    Args:
        model: the module graph mode captures (`GraphedPrunedModel.model`, a PrunedDeiT).
        images_shape: the input's shape [B, 3, H, W].
        dtype: the model's dtype on the GPU (torch.float16 as the benchmarks run it).
        forward: what to call instead of `model(images)`.

    Returns:
        The count.
    """
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    mode = FakeTensorMode(allow_non_fake_inputs=True)
    # The module's own conversion rules (Threshold-L2 keeps its thresholds in fp32) on storage-less copies:
    # converting the real fp32 weights took a third of each point's time (2026-12-05, 2-core box), and the
    # fakes themselves cannot be converted in place (`Module._apply` swaps a subclass, and fakes refuse).
    meta(model)
    model.to(dtype)
    fake_cuda(model, mode)
    ref = getattr(model, "backbone", None)
    if ref is not None and "_dtype_device_ref" in vars(model):
        model.__dict__["_dtype_device_ref"] = ref.cls_token
    result = LaunchCount()
    counting = _Counting(result)
    with mode:
        images = torch.empty(images_shape, dtype=dtype, device="cuda")
    from torch._subclasses.fake_tensor import DataDependentOutputException, DynamicOutputShapeException

    try:
        with torch.no_grad(), _as_captured_on_h200(), _triton_counter(counting), mode, _function_mode(counting), \
                _dispatch_mode(counting):
            (forward or model)(images)
    except (DataDependentOutputException, DynamicOutputShapeException) as exc:
        raise RuntimeError(f"the forward reads a device value on the host ({exc}): a capture would fail") from exc
    return result
