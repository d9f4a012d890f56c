"""Ahead-of-time resource report: compile a kernel for a GPU architecture without the GPU.

Every Triton kernel the library (and the pruners) launch publishes its shipping compilations as
`KernelSpec`s (`compile_specs(arch)` in each kernel module). `report(spec, arch)` compiles one with
the installed Triton, runs its bundled ptxas with `-v` on the PTX for the registers, spills and
stack, and derives how many programs fit one SM of that architecture (`ARCHS`: registers, threads,
blocks and shared memory per SM, from NVIDIA's CUDA C++ Programming Guide, "Compute Capabilities"
table). `python -m tools.compile_check` prints the report for sm_80, sm_89 and sm_90 and fails when a
spec spills or does not fit; CI runs it (tests/ragged_kernels/test_compile_check.py).

Needs a process without TRITON_INTERPRET (interpreted kernels cannot be compiled).
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ragged_kernels.runtime import ARCHS, Arch, KernelSpec, arch_of


@dataclass(frozen=True)
class Report:
    spec: KernelSpec
    arch: Arch
    registers: int
    spill_bytes: int  # spill stores + loads
    stack_bytes: int
    shared_bytes: int
    limit: str  # what bounds the programs per SM

    @property
    def programs_per_sm(self) -> int:
        return self.by_limit()[self.limit]

    def by_limit(self) -> dict[str, int]:
        a, threads = self.arch, self.spec.threads
        regs_per_block = self.registers * threads
        return {
            "registers": a.regs_per_sm // regs_per_block if regs_per_block else a.max_blocks_per_sm,
            "threads": a.max_threads_per_sm // threads,
            "blocks": a.max_blocks_per_sm,
            "shared memory": a.smem_per_sm // self.shared_bytes if self.shared_bytes else a.max_blocks_per_sm,
        }

    @property
    def problems(self) -> list[str]:
        out = []
        if self.spill_bytes:
            out.append(f"spills {self.spill_bytes} B")
        if self.shared_bytes > self.arch.smem_per_block:
            out.append(f"{self.shared_bytes} B shared > {self.arch.smem_per_block} B per block")
        if self.programs_per_sm < 1:
            out.append("no program fits an SM")
        return out


_PTXAS = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_REGS = re.compile(r"Used (\d+) registers")


def ptxas_usage(ptx: str, capability: int) -> tuple[int, int, int]:
    """(registers, spill bytes, stack bytes) of the PTX's kernel, from Triton's bundled ptxas `-v`."""
    from triton.backends.nvidia.compiler import get_ptxas

    gpu = f"sm_{capability}a" if capability >= 90 else f"sm_{capability}"
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "kernel.ptx"
        path.write_text(ptx)
        proc = subprocess.run([get_ptxas(capability).path, "-v", f"--gpu-name={gpu}", str(path), "-o",
                               str(Path(tmp) / "kernel.cubin")], capture_output=True, text=True, timeout=300)
    text = proc.stdout + proc.stderr
    if proc.returncode != 0:
        raise RuntimeError(f"ptxas failed: {text.strip().splitlines()[-1] if text.strip() else proc.returncode}")
    regs, frame = _REGS.search(text), _PTXAS.search(text)
    if regs is None or frame is None:
        raise RuntimeError(f"ptxas printed no resource usage: {text[-300:]}")
    stack, stores, loads = (int(g) for g in frame.groups())
    return int(regs.group(1)), stores + loads, stack


def report(spec: KernelSpec, capability: int) -> Report:
    """Compile `spec` for `capability` (a key of ARCHS) and read its resources."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    arch = ARCHS[capability]
    kernel = spec.kernel
    signature = {**spec.args, **{k: "constexpr" for k in spec.constexprs}}
    attrs = {(kernel.arg_names.index(a),): [["tt.divisibility", 16]] for a, t in spec.args.items()
             if t.startswith("*") or a in spec.divisible}
    compiled = triton.compile(ASTSource(fn=kernel, signature=signature, constexprs=spec.constexprs, attrs=attrs),
                              target=GPUTarget("cuda", capability, 32), options=spec.options)
    regs, spills, stack = ptxas_usage(compiled.asm["ptx"], capability)
    draft = Report(spec, arch, regs, spills, stack, compiled.metadata.shared, "blocks")
    counts = draft.by_limit()
    return Report(spec, arch, regs, spills, stack, compiled.metadata.shared, min(counts, key=counts.__getitem__))


def fitted(make_spec, cfg, smaller, capability: int) -> KernelSpec:
    """The spec the first launch on this architecture runs: `make_spec(cfg)`, stepped down by `smaller`
    while it needs more shared memory per block than the architecture has (the launch-time fallback of
    `ragged_kernels.attention.fwd.compile_with_fallback`, which catches Triton's OutOfResources)."""
    limit = ARCHS[capability].smem_per_block
    while True:
        spec = make_spec(cfg)
        try:
            if report(spec, capability).shared_bytes <= limit:
                return spec
        except Exception as exc:  # noqa: BLE001 - Triton raises out-of-resources at compile time for some targets
            if "resource" not in str(exc).lower() and "shared" not in str(exc).lower():
                raise
        step = smaller(cfg)
        if step is None:
            return spec  # nothing smaller: the report says why it does not fit
        cfg = step


def library_specs(capability: int) -> list[KernelSpec]:
    """Every shipping compilation of `ragged_kernels`' kernels for an architecture."""
    from ragged_kernels import linear, pack
    from ragged_kernels.attention import fwd

    fitted_linear = [fitted(lambda b, g=gelu: linear.linear_spec(b, g), linear.blocks_for(capability, gelu),
                            linear.smaller_blocks, capability) for gelu in (False, True)]
    fitted_linear += [fitted(make, blocks, linear.smaller_blocks, capability)
                      for make, blocks in linear.fused_spec_makers(capability)]
    return fwd.compile_specs(capability) + pack.compile_specs(capability) + fitted_linear + linear.layer_norm_specs()


__all__ = ["ARCHS", "Arch", "KernelSpec", "Report", "arch_of", "fitted", "library_specs", "ptxas_usage", "report"]
