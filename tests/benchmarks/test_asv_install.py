"""The asv install step: a .pth with the commit's checkout first, then the launching interpreter's packages."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from benchmarks import _asv_install

HELPER = Path(_asv_install.__file__)


def test_pth_lines_build_dir_first_then_launcher_site_packages(tmp_path):
    lines = _asv_install.pth_lines(str(tmp_path), sys.executable)
    assert lines[0] == str(tmp_path.resolve())
    # Running under the project venv, the launcher is this interpreter: its own site-packages are
    # not repeated (they are already on sys.path), and nothing is listed twice.
    assert sysconfig.get_paths()["purelib"] not in lines
    assert len(lines) == len(set(lines))


def test_pth_lines_rejects_missing_build_dir(tmp_path):
    with pytest.raises(ValueError, match="not a directory"):
        _asv_install.pth_lines(str(tmp_path / "nope"), None)


def test_explicit_base_python_must_exist(monkeypatch, tmp_path):
    monkeypatch.setenv("RAGGED_ASV_BASE_PYTHON", str(tmp_path / "python"))
    with pytest.raises(ValueError, match="does not exist"):
        _asv_install.launching_python()


@pytest.mark.slow
def test_helper_in_a_fresh_venv_exposes_torch_and_the_commit(tmp_path):
    # A venv WITHOUT system site packages, as asv would create it; the helper is launched by this
    # interpreter (which has torch), exactly as asv's install_command runs it.
    env_dir = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], check=True)
    py = env_dir / "bin" / "python"
    build = tmp_path / "build"
    (build / "probe_pkg").mkdir(parents=True)
    (build / "probe_pkg" / "__init__.py").write_text("VALUE = 42\n")
    subprocess.run([str(py), str(HELPER), str(build)], check=True, capture_output=True)
    out = subprocess.run([str(py), "-c", "import probe_pkg, torch; print(probe_pkg.VALUE)"], check=True,
                         capture_output=True, text=True).stdout  # fmt: skip
    assert out.strip() == "42"
    subprocess.run([str(py), str(HELPER), "--uninstall"], check=True)
    gone = subprocess.run([str(py), "-c", "import probe_pkg"], capture_output=True)
    assert gone.returncode != 0
    bad = subprocess.run([str(py), str(HELPER)], capture_output=True, text=True)
    assert bad.returncode == 2 and "usage" in bad.stderr
