"""asv install step: put one commit's sources on the path of an existing torch installation.

asv's `install_command` runs this inside the asv-managed virtualenv, once per commit:

    python benchmarks/_asv_install.py BUILD_DIR     # write the .pth
    python benchmarks/_asv_install.py --uninstall   # remove it

The library is pure Python + Triton, so "installing" a commit is writing one `.pth` file into the
asv environment's site-packages that lists (1) asv's checkout of the commit and (2) the
site-packages of the interpreter that launched asv. (2) is what makes torch, triton and timm
visible without reinstalling them per commit: on the H200 image torch lives in a virtualenv
(/opt/torch/.venv), whose packages `VIRTUALENV_SYSTEM_SITE_PACKAGES=true` would NOT expose (that
flag only exposes the *base* interpreter's packages). Paths from a `.pth` line are appended to
sys.path without processing the `.pth` files inside them, so an editable install of this
project in the launching environment cannot shadow the commit under test.

The launching interpreter is, in order: `$RAGGED_ASV_BASE_PYTHON` (explicit override), the
interpreter of the parent process (asv itself), `$VIRTUAL_ENV/bin/python`.
This module is imported by asv's benchmark discovery, so it has no side effects on import.
"""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
import sysconfig
from pathlib import Path

PTH_NAME = "ragged_vit_asv.pth"
_QUERY = (
    "import json, site, sysconfig; "
    "print(json.dumps(site.getsitepackages() + [sysconfig.get_paths()['purelib'], sysconfig.get_paths()['platlib']]))"
)


def _own_site_packages() -> Path:
    """The site-packages directory of the running (asv-managed) interpreter."""
    return Path(sysconfig.get_paths()["purelib"])


def _parent_python() -> str | None:
    """The interpreter path the parent process (asv) was started with, if it is a Python."""
    try:
        raw = Path(f"/proc/{os.getppid()}/cmdline").read_bytes()
    except OSError:
        return None
    argv = [a.decode(errors="replace") for a in raw.split(b"\0") if a]
    if not argv or not Path(argv[0]).name.startswith("python"):
        return None
    return argv[0] if os.sep in argv[0] else shutil.which(argv[0])


def launching_python() -> str | None:
    """Path of the interpreter whose packages (torch, triton, timm) the benchmarks must see.

    Returns:
        An executable path, or None when none can be determined.
    """
    explicit = os.environ.get("RAGGED_ASV_BASE_PYTHON")
    if explicit:
        if not Path(explicit).exists():
            raise ValueError(f"RAGGED_ASV_BASE_PYTHON={explicit!r} does not exist")
        return explicit
    parent = _parent_python()
    if parent:
        return parent
    venv = os.environ.get("VIRTUAL_ENV")
    if venv and (Path(venv) / "bin" / "python").exists():
        return str(Path(venv) / "bin" / "python")
    return None


def site_dirs_of(python: str) -> list[str]:
    """site-packages directories of another interpreter, in its own order, existing ones only.

    Args:
        python: path to a Python executable.

    Returns:
        Absolute directory paths.
    """
    out = subprocess.run([python, "-c", _QUERY], check=True, capture_output=True, text=True).stdout
    dirs: list[str] = []
    for d in json.loads(out):
        if Path(d).is_dir() and d not in dirs:
            dirs.append(d)
    return dirs


def pth_lines(build_dir: str, base_python: str | None) -> list[str]:
    """Lines of the .pth file: the commit's checkout first, then the launching interpreter's packages.

    Args:
        build_dir: asv's checkout of the commit under test.
        base_python: the launching interpreter, or None.

    Returns:
        Directory paths, without duplicates and without this environment's own site-packages.
    """
    if not Path(build_dir).is_dir():
        raise ValueError(f"build dir {build_dir!r} is not a directory")
    own = {str(_own_site_packages()), *site.getsitepackages()}
    lines = [str(Path(build_dir).resolve())]
    if base_python:
        lines += [d for d in site_dirs_of(base_python) if d not in own and d not in lines]
    return lines


def main(argv: list[str] | None = None) -> int:
    """Write (or with --uninstall remove) the .pth file in this interpreter's site-packages.

    Args:
        argv: `[BUILD_DIR]` or `["--uninstall"]`.

    Returns:
        Process exit status.
    """
    args = sys.argv[1:] if argv is None else argv
    target = _own_site_packages() / PTH_NAME
    if args == ["--uninstall"]:
        target.unlink(missing_ok=True)
        return 0
    if len(args) != 1:
        print("usage: _asv_install.py BUILD_DIR | --uninstall", file=sys.stderr)
        return 2
    lines = pth_lines(args[0], launching_python())
    target.write_text("\n".join(lines) + "\n")
    print(f"wrote {target}: {lines}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
