"""The native entry point (default on CUDA machines; RAGGED_KERNELS_LAUNCH): builds, and hands
everything it does not handle back to the Python path, which keeps its errors and results."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from ragged_kernels.attention import native

pytest.importorskip("torch.utils.cpp_extension")


@pytest.fixture(scope="module")
def mod():
    try:
        native._cuda_include_dirs()
    except RuntimeError:
        pytest.skip("no CUDA runtime headers to build the native entry point against")
    saved = native.ENABLED
    native.ENABLED = True
    try:
        m = native.module()
    finally:
        native.ENABLED = saved
    assert m is not None, "the native entry point did not build"
    return m


def test_ptx_parameter_check():
    ptx = ".entry k(\n .param .u64 a, .param .u64 b, .param .u64 c, .param .u64 d, .param .u64 e,\n" \
          " .param .u32 f, .param .f32 g, .param .u64 s1, .param .u64 s2)\n{"  # fmt: skip
    assert native.ptx_extra_params(ptx, "k") == 2
    assert native.ptx_extra_params(ptx.replace(".u32 f", ".u64 f"), "k") is None  # not our signature
    assert native.ptx_extra_params(ptx, "other") is None


def test_launch_choice_from_the_environment(monkeypatch):
    assert native._enabled("native") is True and native._enabled(" Python ") is False
    import torch

    assert native._enabled("") is torch.cuda.is_available()  # default: native where CUDA is available
    with pytest.raises(ValueError, match="RAGGED_KERNELS_LAUNCH"):
        native._enabled("cuda")


def test_cpu_tensors_go_back_to_the_python_path(mod, monkeypatch):
    from ragged_kernels.attention import interface

    q = torch.randn(10, 2, 32)
    cu = torch.tensor([0, 4, 10], dtype=torch.int32)
    assert mod.attention(q, q, q, cu, 16) is None
    assert mod.registered() == 0
    monkeypatch.setattr(interface, "_NATIVE", mod)
    # Through the public function: the Python path runs (interpreter) and its errors are unchanged.
    ref = interface.ragged_attention(q, q, q, cu, 16)
    assert ref.shape == q.shape and torch.isfinite(ref).all()
    with pytest.raises(TypeError, match="max_seqlen"):
        interface.ragged_attention(q, q, q, cu, True)
    with pytest.raises(ValueError, match="int32"):
        interface.ragged_attention(q, q, q, cu.long(), 16)


@pytest.mark.gpu
def test_gpu_native_launch_is_the_same_kernel():
    """tools/bench_native_launch.py part 1 as a test: bitwise equal outputs, and it launched."""

    root = Path(__file__).resolve().parents[2]
    r = subprocess.run([sys.executable, "-m", "tools.bench_native_launch"], capture_output=True, text=True,
                       timeout=600, cwd=root)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "OK: registered kernels" in r.stdout


def test_installed_package_carries_the_native_source(tmp_path):
    """A non-editable install must ship native.cpp, or every GPU user silently gets the Python path."""
    import zipfile

    root = Path(__file__).resolve().parents[2]
    src = tmp_path / "src"  # a copy, so setuptools' build/ and egg-info stay out of the checkout
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(root / name, src / name)
    for pkg in ("ragged_kernels", "pruners"):
        shutil.copytree(root / pkg, src / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w",
                    str(tmp_path), str(src)], check=True, capture_output=True, timeout=300)  # fmt: skip
    (wheel,) = tmp_path.glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "ragged_kernels/attention/native.cpp" in names
    assert "ragged_kernels/attention/native.py" in names


def test_a_stale_build_lock_from_a_killed_build_is_removed(tmp_path, monkeypatch):
    """Older torch waits while a lock *file* exists: one left by a killed build would hang every import."""
    import time

    from torch.utils import cpp_extension

    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    monkeypatch.setattr(cpp_extension, "FileBaton", object, raising=False)  # the lock-file loader
    build = Path(native._build_dir(native._stable_source()[0]))  # torch's loader creates it
    lock = build / "lock"
    lock.touch()
    assert native._clear_stale_build_lock() is False and lock.exists()  # fresh: a build may be running
    old = time.time() - native.STALE_LOCK_S - 5
    os.utime(lock, (old, old))
    with pytest.warns(UserWarning, match="stale extension build lock"):
        assert native._clear_stale_build_lock() is True
    assert not lock.exists()
    monkeypatch.delattr(cpp_extension, "FileBaton", raising=False)  # OS-level lock: never touched
    lock.touch()
    os.utime(lock, (old, old))
    assert native._clear_stale_build_lock() is False and lock.exists()


def test_first_build_says_so_and_a_built_one_is_quiet(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    build = Path(native._build_dir(native._stable_source()[0]))  # torch's loader creates it
    native._say_if_building()
    assert "building the native launch path once" in capsys.readouterr().err
    (build / f"{build.name}.so").touch()
    native._say_if_building()
    assert capsys.readouterr().err == ""


def test_native_bucket_rule_mirrors_the_python_table():
    """native.cpp chooses the table's bucket itself: its pair threshold must be fwd.py's WIDE_PAIRS."""
    import re

    from ragged_kernels.attention.fwd import WIDE_PAIRS, config_bucket

    src = (Path(native.__file__).with_name("native.cpp")).read_text()
    m = re.search(r"constexpr int64_t kWidePairs = (\d+);", src)
    assert m is not None and int(m.group(1)) == WIDE_PAIRS
    assert "max_seqlen > 256 ? 1 : (pairs >= kWidePairs ? 2 : 0)" in src
    assert [config_bucket(197, p) for p in (1, WIDE_PAIRS - 1, WIDE_PAIRS)] == [0, 0, 2]
    assert config_bucket(257, 10_000) == 1 and config_bucket(256, 10_000) == 2


def test_native_checks_agree_with_the_declared_contract():
    """native.cpp re-checks the input contract in C++ (it returns None, and the Python path explains,
    where they fail); its head dims and dtypes must be the ones `fwd` declares."""
    import re

    from ragged_kernels.attention import fwd, native

    src = Path(native.__file__).with_name("native.cpp").read_text()
    dims = re.search(r"if \((head_dim != \d+(?: && head_dim != \d+)*)\) return py::none\(\);", src).group(1)
    assert sorted(int(d) for d in re.findall(r"\d+", dims)) == sorted(fwd.SUPPORTED_HEAD_DIMS)
    body = re.search(r"int dtype_code\(at::ScalarType t\) \{(.*?)\n\}", src, re.S).group(1)
    names = {"kHalf": torch.float16, "kBFloat16": torch.bfloat16, "kFloat": torch.float32}
    assert {names[n] for n in re.findall(r"at::(k\w+)", body)} == set(fwd.SUPPORTED_DTYPES)
    assert "cu.scalar_type() != at::kInt || cu.dim() != 1 || cu.size(0) < 1 || !cu.is_contiguous()" in src
    assert "q.stride(2) != 1 || k.stride(2) != 1 || v.stride(2) != 1" in src


def _checkout(root: Path, cpp: bytes) -> Path:
    """A stand-in checkout: its own native.py path and native.cpp of the given content."""
    root.mkdir(parents=True)
    (root / "native.cpp").write_bytes(cpp)
    return root / "native.py"


def test_the_build_depends_on_the_source_content_not_on_the_checkout(tmp_path, monkeypatch):
    """Two checkouts of one native.cpp share one build (torch's ninja file names the source path, so a
    path that moved with the checkout rebuilt ~25 s whenever the other checkout had loaded it); another
    content gets its own name and build directory, so alternating between the two rebuilds neither."""
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "ext"))
    cpp = Path(native.__file__).with_name("native.cpp").read_bytes()
    monkeypatch.setattr(native, "__file__", str(_checkout(tmp_path / "a", cpp)))
    name_a, src_a = native._stable_source()
    written = os.stat(src_a).st_mtime_ns
    monkeypatch.setattr(native, "__file__", str(_checkout(tmp_path / "b", cpp)))
    assert native._stable_source() == (name_a, src_a)
    assert os.stat(src_a).st_mtime_ns == written  # not written again
    assert Path(src_a).read_bytes() == cpp and str(tmp_path / "ext") in src_a
    monkeypatch.setattr(native, "__file__", str(_checkout(tmp_path / "c", cpp + b"// changed\n")))
    name_c, src_c = native._stable_source()
    assert name_c != name_a and src_c != src_a and Path(src_a).read_bytes() == cpp
    assert native._build_dir(name_c) != native._build_dir(name_a)
    Path(src_c).write_bytes(b"half a fi")  # a damaged copy is replaced, whole
    assert native._stable_source() == (name_c, src_c) and Path(src_c).read_bytes() == cpp + b"// changed\n"


def test_a_second_checkout_loads_the_built_extension_without_rebuilding(mod, tmp_path):
    """End to end: once built, the same library at another path (as asv's copy of a commit is) loads the
    cached extension: the shared object is not rewritten and no build is announced."""
    name, _ = native._stable_source()
    (so,) = Path(native._build_dir(name)).glob("*.so")
    before = so.stat().st_mtime_ns
    root = Path(native.__file__).resolve().parents[2]
    copy = tmp_path / "checkout"
    shutil.copytree(root / "ragged_kernels", copy / "ragged_kernels", ignore=shutil.ignore_patterns("__pycache__"))
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from ragged_kernels.attention import native; "
            "native.ENABLED = True; m = native.module(); print(m is not None, native.__file__)")
    r = subprocess.run([sys.executable, "-c", code, str(copy)], capture_output=True, text=True, timeout=600,
                       env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split()[0] == "True" and str(copy) in r.stdout
    assert "building the native launch path" not in r.stderr
    assert so.stat().st_mtime_ns == before
