"""GPU environment sidecar: what asv's machine.json cannot say (GPU, driver, CUDA, clocks, heat).

Contract with the store (`ci` ingest): the suite writes
`<results_dir>/<machine>/gpu-env-<commit_hash[:8]>.json`, a JSON object of string values with
keys gpu, driver, cuda, torch, triton, sm_clock_mhz, mem_clock_mhz, temperature_c, power_w,
captured_at (ISO 8601, UTC), attention_launch ("native" or "python": which launch path
`ragged_attention` took at this commit; a runner without a C++ compiler falls back to the Python
path, ~2x the host cost, and the history should say so). Unknown values are "" (e.g. no nvidia-smi).

Inside asv the benchmark processes get ASV_CONF_DIR and ASV_COMMIT from asv; asv does not pass
the machine name, so it is `$ASV_MACHINE` (the runner exports it next to `--machine`), else the
only machine in ~/.asv-machine.json, else the host name (asv's own default).

CLI: `python -m benchmarks.gpu_env` prints the JSON; `--write` also writes the sidecar for
`--commit` (default: $ASV_COMMIT or `git rev-parse HEAD`) under `--results-dir`/`--machine`.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

KEYS = (
    "gpu", "driver", "cuda", "torch", "triton",
    "sm_clock_mhz", "mem_clock_mhz", "temperature_c", "power_w", "captured_at", "attention_launch",
)  # fmt: skip
_SMI_FIELDS = "name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw"


def parse_nvidia_smi(csv_text: str) -> dict[str, str]:
    """Parse `nvidia-smi --query-gpu=<_SMI_FIELDS> --format=csv,noheader,nounits` (first GPU line).

    Args:
        csv_text: the command's stdout.

    Returns:
        Dict with gpu, driver, sm_clock_mhz, mem_clock_mhz, temperature_c, power_w.
    """
    lines = [ln for ln in csv_text.strip().splitlines() if ln.strip()]
    if not lines:
        raise ValueError("nvidia-smi printed no GPU line")
    cells = [c.strip() for c in lines[0].split(",")]
    if len(cells) != 6:
        raise ValueError(f"expected 6 comma-separated fields from nvidia-smi, got {len(cells)}: {lines[0]!r}")
    cells = ["" if c.startswith("[") or c.lower() == "n/a" else c for c in cells]  # "[N/A]", "[Not Supported]"
    keys = ("gpu", "driver", "sm_clock_mhz", "mem_clock_mhz", "temperature_c", "power_w")
    return dict(zip(keys, cells, strict=True))


def collect(gpu_only: bool = False) -> dict[str, str]:
    """Read the GPU environment now, via torch.cuda and nvidia-smi where available.

    Args:
        gpu_only: the GPU, driver and clocks from nvidia-smi alone, no torch, triton or launch path:
            another project's suite, whose benchmark environment is not this process's (the service's
            torch and triton versions were listed in a foreign project's PR comment, 2026-12-07).

    Returns:
        A dict with exactly the keys in KEYS, all string values.
    """
    env = dict.fromkeys(KEYS, "")
    env["captured_at"] = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
    smi = shutil.which("nvidia-smi")
    if gpu_only:
        if smi:
            env.update(_smi(smi))
        return env
    if not smi:
        # No NVIDIA driver, so no GPU: the versions come from the installed packages' metadata
        # instead of importing torch (20 s on a loaded 2-core box, 2026-12-01), and the Triton
        # kernels launch from Python (in Triton's interpreter).
        from importlib import metadata

        for key in ("torch", "triton"):
            try:
                env[key] = metadata.version(key)
            except metadata.PackageNotFoundError:
                pass
        env["attention_launch"] = "python" if env["torch"] else ""
        return env
    try:
        import torch

        env["torch"] = torch.__version__
        env["cuda"] = torch.version.cuda or ""
        if torch.cuda.is_available():
            env["gpu"] = torch.cuda.get_device_name(0)
    except ImportError:
        pass
    try:
        import triton

        env["triton"] = triton.__version__
    except ImportError:
        pass
    env["attention_launch"] = attention_launch()
    env.update({k: v for k, v in _smi(smi).items() if v or not env.get(k)})
    return env


def _smi(smi: str) -> dict[str, str]:
    """nvidia-smi's GPU, driver and clocks ({} when it fails: the sidecar is best effort, a broken
    nvidia-smi must not fail the benchmark)."""
    try:
        out = subprocess.run(
            [smi, f"--query-gpu={_SMI_FIELDS}", "--format=csv,noheader,nounits", "-i", "0"],
            check=True, capture_output=True, text=True, timeout=20,
        ).stdout  # fmt: skip
        return parse_nvidia_smi(out)
    except (subprocess.SubprocessError, OSError, ValueError):
        return {}


def attention_launch() -> str:
    """ "native" or "python": the launch path `ragged_attention` uses in this process (`launch_path()`,
    from 2026-12-01 on; "unknown" at older commits, which have no public way to tell); "" when the
    library cannot be imported."""
    try:
        import ragged_kernels
    except Exception:  # noqa: BLE001 - best effort, as the rest of the sidecar
        return ""
    launch_path = getattr(ragged_kernels, "launch_path", None)
    return launch_path() if launch_path is not None else "unknown"


def _machine_name() -> str:
    name = os.environ.get("ASV_MACHINE")
    if name:
        return name
    try:
        machines = json.loads((Path.home() / ".asv-machine.json").read_text())
        names = [k for k in machines if k != "version"]
        if len(names) == 1:
            return names[0]
    except (OSError, ValueError):
        pass
    return platform.node()


def sidecar_path(results_dir: str | os.PathLike[str], machine: str, commit: str) -> Path:
    """Where the sidecar of one commit on one machine lives.

    Args:
        results_dir: asv results directory.
        machine: asv machine name.
        commit: full or abbreviated commit hash (>= 8 hex chars).

    Returns:
        `<results_dir>/<machine>/gpu-env-<commit[:8]>.json`.
    """
    if not machine or "/" in machine:
        raise ValueError(f"invalid machine name {machine!r}")
    if len(commit) < 8 or any(c not in "0123456789abcdef" for c in commit.lower()):
        raise ValueError(f"commit must be a hex hash of >= 8 chars, got {commit!r}")
    return Path(results_dir) / machine / f"gpu-env-{commit[:8].lower()}.json"


def write_sidecar(path: Path, env: dict[str, str] | None = None, *, overwrite: bool = False) -> bool:
    """Write the sidecar atomically; idempotent (an existing file is kept unless `overwrite`).

    Args:
        path: target file.
        env: values to write (default: `collect()`).
        overwrite: replace an existing file.

    Returns:
        True when a file was written.
    """
    if path.exists() and not overwrite:
        return False
    env = collect() if env is None else env
    missing = set(KEYS) - set(env)
    if missing:
        raise ValueError(f"sidecar is missing keys {sorted(missing)}")
    bad = {k: v for k, v in env.items() if not isinstance(v, str)}
    if bad:
        raise TypeError(f"sidecar values must be strings, got {bad}")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps({k: env[k] for k in KEYS}, indent=1) + "\n")
    os.replace(tmp, path)
    return True


def write_for_asv_run() -> Path | None:
    """From inside an asv benchmark process: write this run's sidecar once per commit and machine.

    Returns:
        The sidecar path, or None outside asv (no ASV_CONF_DIR/ASV_COMMIT).
    """
    conf_dir, commit = os.environ.get("ASV_CONF_DIR"), os.environ.get("ASV_COMMIT")
    if not conf_dir or not commit:
        return None
    try:
        conf = json.loads((Path(conf_dir) / "asv.conf.json").read_text())
    except (OSError, ValueError):
        conf = {}
    results_dir = Path(conf_dir) / conf.get("results_dir", "results")
    path = sidecar_path(results_dir, _machine_name(), commit)
    write_sidecar(path)
    return path


def main(argv: list[str] | None = None) -> int:
    """CLI: print the GPU environment as JSON; with --write also write the sidecar file.

    Args:
        argv: command-line arguments (default sys.argv[1:]).

    Returns:
        Exit status (0 ok, 2 usage error).
    """
    ap = argparse.ArgumentParser(prog="python -m benchmarks.gpu_env", description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="also write <results-dir>/<machine>/gpu-env-<commit>.json")
    ap.add_argument("--results-dir", default=".asv/results")
    ap.add_argument("--machine", default=None, help="asv machine name (default: $ASV_MACHINE, asv's, host name)")
    ap.add_argument("--commit", default=None, help="commit hash (default: $ASV_COMMIT or git HEAD)")
    ap.add_argument("--overwrite", action="store_true")
    ap.add_argument("--gpu-only", action="store_true",
                    help="the GPU, driver and clocks alone (another project's suite: no torch, triton or launch path)")
    args = ap.parse_args(argv)
    env = collect(gpu_only=args.gpu_only)
    print(json.dumps(env, indent=1))
    if args.write:
        commit = args.commit or os.environ.get("ASV_COMMIT")
        if not commit:
            try:
                commit = subprocess.run(
                    ["git", "rev-parse", "HEAD"], check=True, capture_output=True, text=True
                ).stdout.strip()
            except (subprocess.SubprocessError, OSError) as exc:
                print(f"error: no --commit given and git failed: {exc}", file=sys.stderr)
                return 2
        try:
            path = sidecar_path(args.results_dir, args.machine or _machine_name(), commit)
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        written = write_sidecar(path, env, overwrite=args.overwrite)
        print(f"{'wrote' if written else 'kept existing'} {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
