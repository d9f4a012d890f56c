"""Kernel resources, read from the compiled code without a GPU: for every shipping Triton kernel x config x
architecture (sm_80, sm_89: the product's RTX 4000 Ada runner, sm_90: the H200) its registers, spill
bytes, shared memory, programs per SM, and its static SASS instruction counts by class.

The compilations are the library's own list (`ragged_kernels.aot.library_specs` and
`pruners.kernels.compile_specs`, what `tools.compile_check` checks), and registers, spills, shared memory
and programs per SM are `ragged_kernels.aot.report`'s, so this tier and the compile check read one set of
numbers. The SASS comes from the cubin that compilation produced (Triton's own ptxas run), disassembled
with the `cuobjdump` Triton ships, and counted by opcode (`SASS_CLASSES`).

A kernel's series is named by a slot that survives retuning (`slot_names`): its family (the compilation's
name without its tile and block sizes) and its place among that family's compilations on the
architecture, e.g. `ragged_linear gelu=False norm #0`. A PR that retunes a tile then reads as that slot's
registers or spills moving, not as one series vanishing and another appearing; `KERNEL_SLOTS` in
`bench_structure` lists them (append-only, checked against the code by tests/benchmarks/test_structure.py).

Run without TRITON_INTERPRET (interpreted kernels cannot be compiled), in a process of its own
(`benchmarks/structure_worker.py`). The disassembly (~0.35 s a kernel, cuobjdump's start-up) is kept in a
cache keyed by the cubin's sha256 (`$XDG_CACHE_HOME/ragged-vit/sass`), beside Triton's own compile cache:
a value is a function of the cubin, so the cache changes no number, only the time.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

ARCHS = (80, 89, 90)
# Opcode -> class. An opcode is its mnemonic before the first dot (`HMMA.16816.F32` -> HMMA).
SASS_CLASSES = ("mma", "global_loads", "global_stores", "shared_loads", "shared_stores", "other")
_GLOBAL_LOADS = frozenset({"LDG", "LDGSTS", "UTMALDG", "LD", "UBLKCP"})
_GLOBAL_STORES = frozenset({"STG", "UTMASTG", "ST", "UTMAREDG"})
_SHARED_LOADS = frozenset({"LDS", "LDSM"})
_SHARED_STORES = frozenset({"STS", "STSM"})
_INSTRUCTION = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_]*)")


def family(spec_name: str) -> str:
    """A compilation's name without its tile, block and warp sizes: `ragged_linear (128, 256, 64, 8, 3)
    gelu=False norm` -> `ragged_linear gelu=False norm`, `attention D64 float16 AttnConfig(...)` ->
    `attention D64 float16`, `CLS scores D64 BLOCK_N=16` -> `CLS scores D64`."""
    name = re.sub(r"AttnConfig\([^)]*\)", "", spec_name)
    name = re.sub(r"\([^)]*\)", "", name)
    name = re.sub(r"\b[A-Z][A-Z_]*=\d+\b", "", name)
    return " ".join(name.split())


def slot_names(spec_names: Sequence[str]) -> list[str]:
    """Each compilation's slot, in order: its family and its place among that family's compilations
    in the list (`family #i`)."""
    seen: dict[str, int] = {}
    out = []
    for name in spec_names:
        fam = family(name)
        out.append(f"{fam} #{seen.get(fam, 0)}")
        seen[fam] = seen.get(fam, 0) + 1
    return out


def opcode_class(opcode: str) -> str:
    """The `SASS_CLASSES` entry of one opcode mnemonic."""
    if opcode.endswith("MMA") or "GMMA" in opcode:
        return "mma"  # HMMA, IMMA, DMMA, BMMA (Ampere/Ada), HGMMA, IGMMA, QGMMA (Hopper warpgroup MMA)
    if opcode in _GLOBAL_LOADS:
        return "global_loads"
    if opcode in _GLOBAL_STORES:
        return "global_stores"
    if opcode in _SHARED_LOADS:
        return "shared_loads"
    if opcode in _SHARED_STORES:
        return "shared_stores"
    return "other"


def sass_counts(sass: str) -> dict[str, int]:
    """Static instruction counts by class of a disassembly (cuobjdump -sass or nvdisasm text)."""
    counts = dict.fromkeys(SASS_CLASSES, 0)
    for line in sass.splitlines():
        m = _INSTRUCTION.match(line)
        if m:
            counts[opcode_class(m.group(1).split(".")[0])] += 1
    return counts


def _cache_dir() -> Path | None:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    path = Path(base) / "ragged-vit" / "sass"
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return path


def cubin_sass_counts(cubin: bytes, cuobjdump: str) -> dict[str, int]:
    """`sass_counts` of a cubin, disassembled with `cuobjdump -sass` (cached by the cubin's sha256)."""
    digest = hashlib.sha256(cubin).hexdigest()
    cache = _cache_dir()
    hit = cache / f"{digest}.json" if cache is not None else None
    if hit is not None and hit.is_file():
        try:
            counts = json.loads(hit.read_text())
            if set(counts) == set(SASS_CLASSES):
                return counts
        except (OSError, ValueError):
            pass
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "kernel.cubin"
        path.write_bytes(cubin)
        proc = subprocess.run([cuobjdump, "-sass", str(path)], capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise RuntimeError(f"cuobjdump failed: {(proc.stderr or proc.stdout).strip()[-300:]}")
    counts = sass_counts(proc.stdout)
    if sum(counts.values()) == 0:
        raise RuntimeError("cuobjdump printed no instruction")
    if hit is not None:
        with contextlib.suppress(OSError):
            tmp_path = hit.with_suffix(f".{os.getpid()}.tmp")
            tmp_path.write_text(json.dumps(counts))
            tmp_path.replace(hit)
    return counts


@contextlib.contextmanager
def _compiled_kernels() -> Iterator[list[Any]]:
    """Collect what `triton.compile` returns while the block runs (the cubin of `aot.report`'s compile)."""
    import triton

    seen: list[Any] = []
    original = triton.compile

    def compile_and_keep(*args, **kwargs):
        out = original(*args, **kwargs)
        seen.append(out)
        return out

    triton.compile = compile_and_keep
    try:
        yield seen
    finally:
        triton.compile = original


def shipping_specs(capability: int) -> list[Any]:
    """The commit's shipping compilations for one architecture: the library's and the pruners' (as
    `tools.compile_check` lists them without `--variants`). NotImplementedError at a commit without them."""
    try:
        from ragged_kernels.aot import library_specs
    except ImportError as exc:
        raise NotImplementedError(f"ragged_kernels.aot not importable at this commit: {exc}") from exc
    try:
        from pruners.kernels import compile_specs as pruner_specs
    except ImportError:
        pruner_specs = None
    return list(library_specs(capability)) + (list(pruner_specs(capability)) if pruner_specs else [])


def measure_one(capability: int, index: int) -> dict[str, Any]:
    """Resources of compilation `index` of `shipping_specs(capability)`: registers, spill_bytes,
    shared_bytes, programs_per_sm and one entry per `SASS_CLASSES` ("error" instead on failure)."""
    import triton
    from triton.backends.nvidia.compiler import get_ptxas

    from ragged_kernels import aot

    spec = _specs(capability)[index]
    try:
        with _compiled_kernels() as seen:
            report = aot.report(spec, capability)
        cuobjdump = str(Path(get_ptxas(capability).path).with_name("cuobjdump"))
        cubin = seen[-1].asm["cubin"] if seen else None
        sass = cubin_sass_counts(cubin, cuobjdump) if cubin else {}
    except Exception as exc:  # noqa: BLE001 - one kernel that does not compile is its own result
        return {"name": spec.name, "error": f"{type(exc).__name__}: {str(exc).strip()[:300]}"}
    del triton
    return {"name": spec.name, "registers": report.registers, "spill_bytes": report.spill_bytes,
            "shared_bytes": report.shared_bytes, "programs_per_sm": report.programs_per_sm, **sass}


_SPECS: dict[int, list[Any]] = {}


def _specs(capability: int) -> list[Any]:
    if capability not in _SPECS:
        _SPECS[capability] = shipping_specs(capability)
    return _SPECS[capability]


def _measure_chunk(work: list[tuple[int, int]]) -> list[tuple[int, int, dict[str, Any]]]:
    return [(c, i, measure_one(c, i)) for c, i in work]


def measure_all(archs: Sequence[int] = ARCHS, jobs: int | None = None) -> dict[str, dict[str, dict[str, Any]]]:
    """Every shipping compilation's resources, by architecture ("sm_80", ...) and slot.

    Args:
        archs: compute capabilities x 10.
        jobs: worker processes (default: the CPUs this process may use).

    Returns:
        {"sm_89": {slot: {"name": compilation, "registers": ..., ...}}}.
    """
    from concurrent.futures import ProcessPoolExecutor

    counts = {c: len(_specs(c)) for c in archs}
    work = [(c, i) for c in archs for i in range(counts[c])]
    jobs = max(1, min(jobs or len(os.sched_getaffinity(0)), len(work)))
    if jobs == 1:
        done = _measure_chunk(work)
    else:
        import multiprocessing

        with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("fork")) as pool:
            done = [x for part in pool.map(_measure_chunk, [work[k::jobs] for k in range(jobs)]) for x in part]
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for c in archs:
        names = [s.name for s in _specs(c)]
        slots = slot_names(names)
        results = {i: r for cap, i, r in done if cap == c}
        out[f"sm_{c}"] = {slots[i]: results[i] for i in range(len(names))}
    return out
