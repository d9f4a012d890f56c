"""Plumbing shared by the library's kernels and the pruners' own Triton kernels (public on purpose:
`pruners` uses it too).

- `INTERPRET`: whether Triton runs in its CPU interpreter (`TRITON_INTERPRET=1`, read once at import,
  as Triton itself does);
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
from collections.abc import Callable

import torch

INTERPRET = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


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


__all__ = ["INTERPRET", "require_device", "runs_here", "traceable_op"]
