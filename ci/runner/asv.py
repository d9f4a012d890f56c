"""The real asv CLI, driven by a runner job: its environment, the machine file, the GPU state
sidecar, and one `asv run` over a HASHFILE with asv's lines streamed and its process group
stopped on an interrupt."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from ci.runner.config import RunnerConfig, RunnerError
from ci.text import holds_credential, printable

_SHA_RE = re.compile(r"^[0-9a-f]{40}$")


def withheld_variables() -> list[str]:
    """The names of this process's environment variables that asv and the benchmarks do not get: those
    that hold a credential (`ci.text.holds_credential`). asv runs the suite of the commit it measures,
    a pull request's code included, in processes that inherit its environment: a benchmark of a PR
    read GITHUB_TOKEN and a DATABASE_URL with its password at import time (2026-12-07)."""
    return sorted(name for name, value in os.environ.items() if holds_credential(name, value))


def protect_this_process() -> bool:
    """Make this process's memory, its environment included, unreadable by the code it runs (Linux:
    `prctl(PR_SET_DUMPABLE, 0)`, as ssh-agent does): a process of the same user could otherwise read
    `/proc/<this pid>/environ` and find the credentials withheld from asv's environment (a PR's
    benchmark walked up to the runner and read its GITHUB_TOKEN there, 2026-12-07). The flag resets in
    the programs it starts (asv), so it guards this process alone: an ancestor that holds a credential
    (the shell or CI step that set it) stays readable, which is why a PR's code must run with no
    credential anywhere above it (docs/runner.md). Returns whether the flag is set."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(4, 0, 0, 0, 0) == 0)  # PR_SET_DUMPABLE = 4
    except (OSError, AttributeError):
        return False


def _asv_env(cfg: RunnerConfig) -> dict[str, str]:
    """asv's environment: this process's, less the variables that hold a credential (`withheld_variables`;
    the runner's `env` entries, named on purpose, are kept), with what the runner sets."""
    withheld = set(withheld_variables())
    env = {name: value for name, value in os.environ.items() if name not in withheld}
    env.update(dict(cfg.env))
    env["ASV_MACHINE"] = cfg.machine  # read by benchmarks/gpu_env.py for the sidecar's path
    env["PYTHONUNBUFFERED"] = "1"
    # asv's virtualenv plugin looks for `pythonX.Y` on PATH; put the runner's own base interpreter
    # first so a pyenv shim (or none at all) cannot pick another one. Its packages reach the
    # benchmarks through the suite's .pth (RAGGED_ASV_BASE_PYTHON = the interpreter running asv).
    ver = f"python{sys.version_info.major}.{sys.version_info.minor}"
    bindir = cfg.repo / ".asv" / "runner-bin"
    bindir.mkdir(parents=True, exist_ok=True)
    link = bindir / ver
    base = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
    if not link.exists() or os.path.realpath(link) != base:
        link.unlink(missing_ok=True)
        link.symlink_to(base)
    env["PATH"] = f"{bindir}{os.pathsep}{env.get('PATH', '')}"
    env.setdefault("RAGGED_ASV_BASE_PYTHON", cfg.python)
    env.pop("VIRTUAL_ENV", None)
    if cfg.wheelhouse is not None:
        # asv pip-installs its runner (asv_runner, build, wheel, pympler) into each new environment.
        env["PIP_FIND_LINKS"] = str(cfg.wheelhouse.resolve())
        env["PIP_NO_INDEX"] = "1"
    return env


def _asv_cmd(cfg: RunnerConfig, *args: str) -> list[str]:
    return [cfg.python, "-m", "asv", *args, "--config", str(cfg.repo / "asv.conf.json")]


def ensure_machine(cfg: RunnerConfig) -> None:
    """Register `cfg.machine` in asv's machine file (~/.asv-machine.json) once, non-interactively.

    Args:
        cfg: runner configuration.
    """
    env = _asv_env(cfg)
    path = Path(env.get("HOME", str(Path.home()))) / ".asv-machine.json"
    try:
        known = json.loads(path.read_text())
    except (OSError, ValueError):
        known = {}
    if cfg.machine in known:
        return
    proc = subprocess.run(
        _asv_cmd(cfg, "machine", "--yes", "--machine", cfg.machine),
        cwd=cfg.repo, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    if proc.returncode != 0:
        raise RunnerError(f"asv machine failed (is asv installed for {cfg.python}?): {proc.stderr.strip()[-500:]}")


def gpu_state(cfg: RunnerConfig) -> dict[str, str]:
    """The GPU environment now (`python -m benchmarks.gpu_env` of the checkout), {} when it cannot run.

    Args:
        cfg: runner configuration.

    Returns:
        The suite's sidecar keys (gpu, driver, cuda, torch, triton, clocks, ...) as strings.
    """
    # This project's checkout reads its own suite's environment (torch, triton, the kernels' launch path);
    # another project's gets the GPU, driver and clocks alone: the service's torch is not its benchmarks'.
    own = (cfg.repo / "benchmarks" / "gpu_env.py").is_file()
    try:
        proc = subprocess.run(
            [cfg.python, "-m", "benchmarks.gpu_env", *(() if own else ("--gpu-only",))], cwd=cfg.repo,
            env=_asv_env(cfg), capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        data = json.loads(proc.stdout) if proc.returncode == 0 else {}
    except (OSError, subprocess.SubprocessError, ValueError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def write_sidecar_if_missing(cfg: RunnerConfig, sha: str, state: dict[str, str]) -> None:
    """The suite writes the sidecar from its first GPU benchmark (the warm state); a CPU-only run
    has none, so the state read before the run goes there: torch/triton versions, no GPU."""
    if not state:
        return
    path = cfg.results_dir / cfg.machine / f"gpu-env-{sha[:8]}.json"
    if path.exists():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(state, indent=1) + "\n")
    os.replace(tmp, path)


def mark_call(cfg: RunnerConfig, sha: str, call: str, written: dict[str, str]) -> None:
    """Record in commit `sha`'s GPU sidecar that asv call `call` wrote the result files `written`,
    each with the sha256 of the bytes it wrote (`ci.ingest.asv_files.with_calls`). Ingest carries
    the marker into a run's environment only while its file still has that digest, so a comparison
    knows whether base and head were measured in one call (`ci.verdicts.jobs`), and a file that a
    plain `asv run` rewrote since has no marker.

    Args:
        cfg: runner configuration.
        sha: full commit hash.
        call: the call's marker (`ci.runner.config.call_marker`).
        written: result file name -> sha256 hex digest, the files of `sha` this call wrote.
    """
    from ci.ingest.asv_files import with_calls

    path = cfg.results_dir / cfg.machine / f"gpu-env-{sha[:8]}.json"
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        state = {}
    if not isinstance(state, dict):
        state = {}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(with_calls(state, call, written), indent=1) + "\n")
    os.replace(tmp, path)


def result_digests(cfg: RunnerConfig, sha: str) -> dict[str, str]:
    """sha256 of each of asv's result files for `sha`, by file name (what a call changed, it wrote)."""
    import hashlib

    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in result_files(cfg, sha)}


def measured_names(cfg: RunnerConfig, sha: str, since_ms: int) -> set[str]:
    """The asv benchmarks (names) of commit `sha`'s result files that were measured (or failed to
    run) at or after `since_ms` (ms since the epoch, asv's `started_at`): what a call that began then
    measured. asv keeps in a commit's file the results of the benchmarks a call did not select, from
    earlier calls, and the whole file is that call's once rewritten: `continuous -b X` after a full run
    judged every other benchmark's old results as measured in one call (2026-12-07)."""
    from ci.ingest.asv_files import load_json

    out: set[str] = set()
    for path in result_files(cfg, sha):
        data = load_json(path)
        if not isinstance(data, dict):
            continue
        columns, results = data.get("result_columns"), data.get("results")
        if not isinstance(columns, list) or "started_at" not in columns or not isinstance(results, dict):
            continue
        at = columns.index("started_at")
        for name, row in results.items():
            started = row[at] if isinstance(row, list) and len(row) > at else None
            if isinstance(started, int | float) and not isinstance(started, bool) and started >= since_ms:
                out.add(name)
    return out


def _scratch_dir(cfg: RunnerConfig) -> Path:
    """The checkout's folder for an asv call's own files (its HASHFILE, the setup log), each named after
    the runner's pid: those of a runner that is gone (a SIGKILL skips the cleanup; /tmp kept a dozen)
    are removed here, before the next call makes its own."""
    scratch = cfg.repo / ".asv" / "runner-tmp"
    scratch.mkdir(parents=True, exist_ok=True)
    for p in scratch.iterdir():
        pid = p.name.split("-", 1)[0]
        if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
            with contextlib.suppress(OSError):
                p.unlink()
    return scratch


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's: alive
        return True
    return True


def result_files(cfg: RunnerConfig, sha: str) -> list[Path]:
    """asv's result files for commit `sha` on this job's machine (none yet: [])."""
    d = cfg.results_dir / cfg.machine
    return sorted(d.glob(f"{sha[:8]}-*.json")) if d.is_dir() else []


class _Watch:
    """While asv runs: the setup log's new lines as they come, and a heartbeat whenever asv has
    been silent for `quiet_s` (creating its environment, or inside a long setup_cache), so a job's
    log never sits still for long. Lines go out one at a time (asv's reader thread and this one
    share `echo`)."""

    def __init__(self, echo: Callable[[str], None], setup_log: Path, quiet_s: float) -> None:
        self._echo, self._log, self._quiet_s = echo, setup_log, quiet_s
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._offset = 0
        self._t0 = self._last = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="asv-watch", daemon=True)

    def line(self, text: str) -> None:
        with self._lock:
            self._last = time.monotonic()
            self._echo(text)

    def drain(self) -> None:
        """Echo the setup log's lines not echoed yet."""
        try:
            with open(self._log, encoding="utf-8") as fh:
                fh.seek(self._offset)
                chunk = fh.read()
        except OSError:
            return
        complete = chunk[: chunk.rfind("\n") + 1]  # a line being written is echoed once it is whole
        self._offset += len(complete.encode("utf-8"))
        for text in complete.splitlines():
            self.line(text)

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            self.drain()
            silent = time.monotonic() - self._last
            if silent >= self._quiet_s:
                self.line(f"[runner] asv is still working ({silent:.0f} s since its last line, "
                          f"{time.monotonic() - self._t0:.0f} s in this call)")

    def __enter__(self) -> _Watch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.drain()


def run_asv(
    cfg: RunnerConfig, shas: Sequence[str], *, interleave: bool, echo: Callable[[str], None], quiet_s: float = 8.0
) -> int:
    """One `asv run` over `shas` (a HASHFILE), streaming asv's per-benchmark lines to `echo`.

    Args:
        cfg: runner configuration.
        shas: full commit hashes.
        interleave: pass `--interleave-rounds` (PR A/B; needs >= 2 commits).
        echo: receives every output line of asv, each setup_cache's progress lines as they are
            written, and a heartbeat line after `quiet_s` seconds without any.
        quiet_s: longest silence before a heartbeat line.

    Returns:
        asv's exit status (0 ok, 2 when some benchmark failed; results are saved either way).

    Raises:
        KeyboardInterrupt: after stopping asv's whole process group.
    """
    for s in shas:
        if not _SHA_RE.match(s):
            raise ValueError(f"not a full commit sha: {s!r}")
    # The launch method comes from asv.conf.json (forkserver since 2026-12-05; benchmarks/README.md says why).
    args = ["run", "--machine", cfg.machine, "--record-samples", "--show-stderr"]
    if cfg.bench:
        args += ["-b", cfg.bench]
    if interleave:
        args.append("--interleave-rounds")
    # History: measure only what is missing. A PR job always measures both sides afresh (its first
    # interleaved round replaces what asv had): `_measure` skips the whole call for a finished job.
    if cfg.resume and not interleave:
        args.append("--skip-existing")
    args += list(cfg.asv_args)
    scratch = _scratch_dir(cfg)
    with tempfile.NamedTemporaryFile("w", dir=scratch, prefix=f"{os.getpid()}-", suffix=".hashes", delete=False) as fh:
        fh.write("".join(f"{s}\n" for s in shas))
        hashfile = fh.name
    cmd = _asv_cmd(cfg, *args, f"HASHFILE:{hashfile}")
    env = _asv_env(cfg)
    protect_this_process()  # `ci run` and `continuous` set it at their start; any other caller, here at the latest
    withheld = [name for name in withheld_variables() if name not in env]
    if withheld:
        echo(printable(f"[runner] not passed to asv and the benchmarks it runs (they hold credentials): "
                       f"{', '.join(withheld)}; a process that set them (this job's shell or step) can still "
                       "be read by the code it runs: run untrusted code with no credential in its ancestry"))
    # Each setup_cache writes its progress and a summary line to this file
    # (benchmarks.model_runs.report_case / report_setup); asv itself shows their output only on failure.
    fd, name = tempfile.mkstemp(dir=scratch, prefix=f"{os.getpid()}-setup-", suffix=".log")
    os.close(fd)
    setup_log = Path(name)
    env["RAGGED_SETUP_LOG"] = str(setup_log)
    try:
        with _Watch(echo, setup_log, quiet_s) as watch:
            # Its own session, so an interrupt can stop asv and every benchmark process it spawned.
            proc = subprocess.Popen(
                cmd, cwd=cfg.repo, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                text=True, bufsize=1, start_new_session=True,
            )  # fmt: skip
            try:
                assert proc.stdout is not None
                for raw in proc.stdout:
                    watch.line(raw.rstrip("\n"))
                return proc.wait()
            except BaseException:
                # SIGINT first: asv turns it into KeyboardInterrupt and closes its forkserver, whose
                # process group (the server and the benchmark it forked) is not asv's own group.
                # A second interrupt while asv stops (a cancelled GitHub job sends SIGINT, then SIGTERM
                # 7.5 s later) moves on to the next signal at once instead of leaving asv running and
                # writing its files behind this process (an orphan `asv run` outlived a stopped job).
                for sig, wait_s in ((signal.SIGINT, 20), (signal.SIGTERM, 10), (signal.SIGKILL, None)):
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(proc.pid, sig)
                    try:
                        proc.wait(timeout=wait_s)
                        break
                    except (subprocess.TimeoutExpired, KeyboardInterrupt):
                        continue
                raise
    finally:
        os.unlink(hashfile)
        setup_log.unlink(missing_ok=True)
