"""Plumbing shared by the library's kernels and the pruners' own Triton kernels (public on purpose:
`pruners` uses it too).

- `INTERPRET`: whether Triton runs in its CPU interpreter (`TRITON_INTERPRET=1`, read once at import,
  as Triton itself does);
- `device_arch`: which architecture's kernel tables a device uses (sm_80, sm_89 or sm_90; read once
  per device from its compute capability); `ARCHS` their per-SM limits; `KernelSpec` one shipping
  compilation of a kernel, which each kernel module lists for the ahead-of-time report
  (`ragged_kernels.aot`);
- `require_device`: the one check that a kernel's tensors can run (CUDA, or the CPU under the
  interpreter), with the message every kernel gives;
- `traceable_op`: a `torch.library` custom op around a kernel's host function, with a fake (meta)
  implementation, so `torch.compile(fullgraph=True)` traces a forward that calls it as one graph node
  (the launchers cache compiled kernels and call them with raw pointers, which dynamo cannot trace).
  Eager calls never go through the dispatcher: the public functions call the op only while
  `torch.compiler.is_compiling()` (92 ns per call on this project's CPU machines, 2026-12-01), so the
  host cost of an eager launch (a product target, ~6 us per `ragged_attention` on the H200) is unchanged.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

INTERPRET = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


@dataclass(frozen=True)
class Arch:
    """Per-SM limits of one compute capability, and the SM count of the cards this project plans for."""

    capability: int  # major * 10 + minor
    name: str
    regs_per_sm: int
    max_threads_per_sm: int
    max_blocks_per_sm: int
    smem_per_sm: int  # bytes, the largest shared-memory carve-out
    smem_per_block: int  # bytes, the opt-in maximum per block
    sms: int  # the reference card's SM count (waves of a grid)
    card: str


ARCHS: dict[int, Arch] = {
    80: Arch(80, "sm_80", 65536, 2048, 32, 164 * 1024, 163 * 1024, 108, "A100"),
    89: Arch(89, "sm_89", 65536, 1536, 24, 100 * 1024, 99 * 1024, 48, "RTX 4000 Ada"),
    90: Arch(90, "sm_90", 65536, 2048, 32, 228 * 1024, 227 * 1024, 132, "H200"),
}


def arch_of(capability: tuple[int, int]) -> int:
    """The `ARCHS` key a device of this compute capability uses: Hopper and later 90, A100 (8.0) 80, the
    other 8.x parts (consumer Ampere 8.6 and Ada 8.9, 1,536 threads per SM like `ARCHS[89]`) 89; older
    parts 80, a table nobody compiled or timed for them (`tools.compile_check` covers sm_80, sm_89 and
    sm_90 only); where a config needs more shared memory than theirs, the attention and linear launches
    step down (`compile_with_fallback`)."""
    major, minor = capability
    if major >= 9:
        return 90
    if major == 8 and minor != 0:
        return 89
    return 80


@dataclass(frozen=True)
class KernelSpec:
    """One compilation of a Triton kernel as it ships: non-constexpr argument types, constexprs and
    launch options (num_warps, num_stages, maxnreg). Pointers are compiled 16-byte aligned, as the
    JIT specialises them at launch for the tensors the library allocates or takes on its fast path;
    `divisible` names the integer arguments the JIT sees divisible by 16 at the shipping shapes (it
    specialises those too, and an argument equal to 1 becomes a constexpr: list it in `constexprs`)."""

    name: str
    kernel: Any  # a triton JITFunction (triton has no type information: Any)
    args: dict[str, str]
    constexprs: Mapping[str, object]
    options: dict[str, int] = field(default_factory=dict)
    divisible: tuple[str, ...] = ()

    @property
    def threads(self) -> int:
        return 32 * self.options.get("num_warps", 4)


_ARCH: dict[int, int] = {}  # CUDA device index -> `arch_of` its compute capability


def device_arch(device: torch.device | int | None) -> int:
    """The architecture key (80, 89 or 90: a key of `ARCHS`) whose kernel tables a launch on
    `device` uses: read once per CUDA device; 90 (the H200 tables) for the CPU and the interpreter."""
    index = device if isinstance(device, int) else (None if device is None else device.index)
    if INTERPRET or (isinstance(device, torch.device) and device.type != "cuda") or (index is not None and index < 0):
        return 90
    if index is None:
        index = torch.cuda.current_device()
    arch = _ARCH.get(index)
    if arch is None:
        arch = _ARCH[index] = arch_of(torch.cuda.get_device_capability(index))
    return arch


def runs_here(t: torch.Tensor) -> bool:
    """Whether a Triton kernel can run on `t`'s device: CUDA, or any device under the interpreter."""
    return t.is_cuda or INTERPRET


def require_device(t: torch.Tensor, what: str, alternative: str = "") -> None:
    """Raise ValueError unless a Triton kernel can run on `t` (`runs_here`), naming the fix."""
    if not runs_here(t):
        more = f", or {alternative}" if alternative else ""
        raise ValueError(f"{what} needs CUDA tensors (got {t.device}); on the CPU it runs only in Triton's "
                         f"interpreter: set TRITON_INTERPRET=1 before triton is imported{more}")


def traceable_op(name: str, fake: Callable) -> Callable[[Callable], Callable]:
    """Decorator: register `fn` (fully type-annotated, positional arguments only) as the custom op
    `name` ("namespace::op") with `fake` as its fake implementation, and return the op.

    The op's real implementation is `fn` itself, so what runs inside a compiled graph is exactly the
    eager host function (validation included); `fake` returns empty tensors of the outputs' shapes,
    dtypes and devices, computed from host ints and input metadata only.
    """

    def wrap(fn: Callable) -> Callable:
        op = torch.library.custom_op(name, mutates_args=())(fn)
        op.register_fake(fake)
        return op

    return wrap


__all__ = ["ARCHS", "INTERPRET", "Arch", "KernelSpec", "arch_of", "device_arch", "require_device", "runs_here",
           "traceable_op"]
