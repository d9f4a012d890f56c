"""Native entry point of `ragged_attention`: the default launch path on machines with a CUDA GPU.

`native.cpp` checks the arguments, allocates the output and calls `cuLaunchKernel` in one C++ call,
with the kernel Triton compiled for the same key (registered here after the Python path compiles
it). Anything it does not handle returns None and the Python path runs, so errors, the debug mode,
`out=`, `scale=` and multi-GPU callers behave exactly as without it. Built on first import with
`torch.utils.cpp_extension.load` (needs a C++ compiler and the CUDA headers; ~25 s once, then cached
in torch's extension directory, one build per content of `native.cpp` whatever checkout it comes from:
`_stable_source`); if the build fails, a warning says so and the Python path stays.

`RAGGED_KERNELS_LAUNCH` selects the path: unset (default) = native where CUDA is available,
`native` = native (built even without a GPU, e.g. to test the build), `python` = the Python path.
Measured on the H200 (2026-11-29, docs/performance.md "Kernel host cost and latency"): same outputs bit
for bit; host cost per call
5.8-8.4 µs against 12-17 µs for the Python path and 18-21 µs for FlashAttention-2 varlen.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import sys
import warnings
from pathlib import Path

LAUNCH_CHOICES = ("", "native", "python")


def _enabled(choice: str) -> bool:
    """Whether the native entry point is used, from RAGGED_KERNELS_LAUNCH's value."""
    choice = choice.strip().lower()
    if choice not in LAUNCH_CHOICES:
        raise ValueError(f"RAGGED_KERNELS_LAUNCH must be 'native', 'python' or unset, got {choice!r}")
    if choice:
        return choice == "native"
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:  # noqa: BLE001 - no usable torch/CUDA: nothing to launch natively
        return False


ENABLED = _enabled(os.environ.get("RAGGED_KERNELS_LAUNCH", ""))
_EXT_NAME = "ragged_kernels_native"
_DTYPE_CODES: dict = {}
_module = None
_failed = False

# Kinds of the kernel's non-constexpr arguments as PTX declares them: Q, K, V, Out, CU (pointers),
# total_tokens (i32), sm_scale_log2 (f32); Triton appends 64-bit scratch pointers after them.
_PTX_KINDS = ({"u64", "b64"},) * 5 + ({"u32", "s32", "b32"}, {"f32", "b32"})


def module():
    """The compiled extension, or None (disabled, or the build failed: warned once)."""
    global _module, _failed
    if _module is not None or _failed or not ENABLED:
        return _module
    try:
        import torch
        from torch.utils.cpp_extension import load

        if shutil.which("ninja") is None:  # the pip `ninja` of this interpreter's environment, not on PATH
            os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
        torch_lib = os.path.join(os.path.dirname(torch.__file__), "lib")
        name, source = _stable_source()
        _clear_stale_build_lock(name=name)
        _say_if_building(name)
        _module = load(
            name=name,
            sources=[source],
            extra_cflags=["-O3"],
            extra_include_paths=_cuda_include_dirs(),
            # No CUDA toolkit libraries: libcuda is opened at run time, the stream comes from c10_cuda.
            extra_ldflags=[f"-L{torch_lib}", "-lc10_cuda", f"-Wl,-rpath,{torch_lib}"],
            with_cuda=False,
            verbose=False,
        )
        _DTYPE_CODES.update({torch.float16: 0, torch.bfloat16: 1, torch.float32: 2})
    except Exception as exc:  # noqa: BLE001 - any build/import failure: keep the Python path, say why
        _failed = True
        warnings.warn(f"ragged_kernels: the native entry point did not build ({exc}); using the Python "
                      "launch path (host cost ~2x; RAGGED_KERNELS_LAUNCH=python silences this)",
                      stacklevel=2)  # fmt: skip
    return _module


def _stable_source() -> tuple[str, str]:
    """(extension name, source path) that depend only on `native.cpp`'s content, not on where this
    checkout lies.

    Why: torch's loader writes the absolute source path into its ninja file, and ninja rebuilds when a
    command changes. Two checkouts of the same code (the runner's checkout and asv's copy of the commit
    under test, or two worktrees) then rebuilt the extension (~25 s) each time the other one had loaded
    it: twice per commit in a history run. The source is copied, once, to a file named by its digest
    beside the build directories, and each content gets its own extension name (so its own build
    directory): alternating between commits whose `native.cpp` differs rebuilds nothing either."""
    text = Path(__file__).with_name("native.cpp").read_bytes()
    digest = hashlib.sha256(text).hexdigest()[:16]
    name = f"{_EXT_NAME}_{digest}"
    root = Path(_build_dir(name)).parent / f"{_EXT_NAME}_sources"
    path = root / f"native_{digest}.cpp"
    try:
        same = path.read_bytes() == text
    except OSError:
        same = False
    if not same:  # written whole or not at all: a concurrent loader never compiles half a file
        root.mkdir(parents=True, exist_ok=True)
        tmp = root / f".{path.name}.{os.getpid()}.tmp"
        tmp.write_bytes(text)
        os.replace(tmp, path)
    return name, str(path)


STALE_LOCK_S = 600.0  # a build takes ~25-60 s; a lock file this old was left by a killed build


def _clear_stale_build_lock(max_age_s: float = STALE_LOCK_S, name: str | None = None) -> bool:
    """Remove the build lock a killed build left behind, where torch's extension loader waits on a
    lock *file* (torch.utils.file_baton.FileBaton, older torch): its existence alone blocks, so after
    a SIGKILL during the first build every later import would wait forever. Newer torch holds an OS
    lock that dies with its process; nothing to do there. Returns whether a lock was removed.
    `name`: the extension (default: this checkout's, `_stable_source`)."""
    import time

    from torch.utils import cpp_extension

    if getattr(cpp_extension, "FileBaton", None) is None:
        return False
    lock = os.path.join(_build_dir(name or _stable_source()[0]), "lock")
    try:
        age = time.time() - os.path.getmtime(lock)
    except OSError:
        return False
    if age < max_age_s:
        return False
    warnings.warn(f"ragged_kernels: removing a stale extension build lock ({lock}, {age:.0f} s old)", stacklevel=3)
    try:
        os.remove(lock)
    except OSError:
        return False
    return True


def _build_dir(name: str) -> str:
    """Where torch's extension loader builds and caches the extension `name`."""
    from torch.utils import cpp_extension

    return cpp_extension._get_build_directory(name, verbose=False)


def _say_if_building(name: str | None = None) -> None:
    """One line on stderr before the first build (~25 s) of the extension `name` (default: this
    checkout's, `_stable_source`), so a first import does not look hung."""
    import glob

    build = _build_dir(name or _stable_source()[0])
    if not glob.glob(os.path.join(build, "*.so")):
        print("ragged_kernels: building the native launch path once (~25 s; cached in "
              f"{os.path.dirname(build)}; RAGGED_KERNELS_LAUNCH=python skips it)", file=sys.stderr, flush=True)


def _cuda_include_dirs() -> list[str]:
    """A directory with the CUDA runtime headers that c10/cuda includes: the toolkit's, or the
    `nvidia-cuda-runtime` wheel's that a CUDA build of torch depends on."""
    import glob
    import sysconfig

    from torch.utils.cpp_extension import CUDA_HOME

    candidates = [os.path.join(CUDA_HOME, "include")] if CUDA_HOME else []
    candidates += sorted(glob.glob("/usr/local/cuda*/include"), reverse=True)
    candidates += sorted(glob.glob(os.path.join(sysconfig.get_paths()["purelib"], "nvidia", "*", "include")))
    needed = ("cuda_runtime_api.h", os.path.join("crt", "host_defines.h"))
    found = [d for d in candidates if all(os.path.isfile(os.path.join(d, f)) for f in needed)]
    if not found:
        raise RuntimeError("no CUDA runtime headers (cuda_runtime_api.h) found")
    return found[:1]


def ptx_extra_params(ptx: str, name: str) -> int | None:
    """How many trailing 64-bit parameters follow our 7 in the kernel's PTX entry; None if the
    entry does not start with exactly our parameter kinds (then the kernel is not registered)."""
    m = re.search(r"\.entry\s+" + re.escape(name) + r"\s*\((.*?)\)", ptx, re.S)
    if m is None:
        return None
    kinds = re.findall(r"\.param\s+\.(\w+)", m.group(1))
    if len(kinds) < len(_PTX_KINDS) or any(k not in ok for k, ok in zip(kinds, _PTX_KINDS, strict=False)):
        return None
    extra = kinds[len(_PTX_KINDS) :]
    return len(extra) if all(k in ("u64", "b64") for k in extra) else None


def register(ck, dtype, heads: int, head_dim: int, sq, sk, sv, bucket: int, device: int, block_m: int) -> bool:
    """Hand a kernel Triton compiled (with the table's config, a contiguous output and 16-byte
    aligned pointers) to the native entry point; False where it does not qualify."""
    mod = module()
    if mod is None:
        return False
    md = ck.metadata
    if any(getattr(md, f, 0) for f in ("global_scratch_size", "profile_scratch_size", "launch_cooperative_grid",
                                       "launch_pdl")) or getattr(md, "num_ctas", 1) != 1:  # fmt: skip
        return False
    ptx = getattr(ck, "asm", {}).get("ptx")
    extra = ptx_extra_params(ptx, getattr(ck, "name", None) or md.name) if ptx else None
    if extra is None:
        return False
    return bool(
        mod.register_kernel(_DTYPE_CODES[dtype], heads, head_dim, sq[0], sq[1], sk[0], sk[1], sv[0], sv[1], bucket,
                            device, int(ck.function), 32 * md.num_warps, int(md.shared), extra, block_m)
    )  # fmt: skip
