"""The GPU environment sidecar (contract with the store's ingest)."""

from __future__ import annotations

import json

import pytest

from benchmarks import gpu_env


def test_parse_nvidia_smi_first_gpu_and_not_available_fields():
    out = "NVIDIA H200, 570.86.15, 1980, 2619, 41, [N/A]\nNVIDIA H200, 570.86.15, 345, 2619, 30, 70.1\n"
    env = gpu_env.parse_nvidia_smi(out)
    assert env == {
        "gpu": "NVIDIA H200", "driver": "570.86.15", "sm_clock_mhz": "1980",
        "mem_clock_mhz": "2619", "temperature_c": "41", "power_w": "",
    }  # fmt: skip


@pytest.mark.parametrize("text", ["", "a, b, c"], ids=["empty", "short"])
def test_parse_nvidia_smi_rejects_bad_output(text):
    with pytest.raises(ValueError):
        gpu_env.parse_nvidia_smi(text)


def test_collect_has_exactly_the_contract_keys_as_strings():
    env = gpu_env.collect()
    assert set(env) == set(gpu_env.KEYS)
    assert all(isinstance(v, str) for v in env.values())
    assert env["torch"] and env["captured_at"].endswith("+00:00")


def test_sidecar_path_and_validation(tmp_path):
    p = gpu_env.sidecar_path(tmp_path, "h200-1", "ABCDEF0123456789")
    assert p == tmp_path / "h200-1" / "gpu-env-abcdef01.json"
    with pytest.raises(ValueError, match="commit"):
        gpu_env.sidecar_path(tmp_path, "m", "xyz")
    with pytest.raises(ValueError, match="machine"):
        gpu_env.sidecar_path(tmp_path, "a/b", "abcdef01")


def test_write_sidecar_is_idempotent_and_validates(tmp_path):
    path = tmp_path / "m" / "gpu-env-abcdef01.json"
    first = dict.fromkeys(gpu_env.KEYS, "1")
    assert gpu_env.write_sidecar(path, first) is True
    assert gpu_env.write_sidecar(path, dict.fromkeys(gpu_env.KEYS, "2")) is False
    assert json.loads(path.read_text()) == first
    assert gpu_env.write_sidecar(path, dict.fromkeys(gpu_env.KEYS, "3"), overwrite=True) is True
    assert json.loads(path.read_text())["gpu"] == "3"
    with pytest.raises(ValueError, match="missing"):
        gpu_env.write_sidecar(tmp_path / "x.json", {"gpu": "x"})
    with pytest.raises(TypeError, match="strings"):
        gpu_env.write_sidecar(tmp_path / "y.json", {**first, "power_w": 70.0})


def test_write_for_asv_run_uses_asv_environment(tmp_path, monkeypatch):
    (tmp_path / "asv.conf.json").write_text(json.dumps({"results_dir": "res"}))
    monkeypatch.setenv("ASV_CONF_DIR", str(tmp_path))
    monkeypatch.setenv("ASV_COMMIT", "0123456789abcdef0123")
    monkeypatch.setenv("ASV_MACHINE", "box")
    path = gpu_env.write_for_asv_run()
    assert path == tmp_path / "res" / "box" / "gpu-env-01234567.json"
    data = json.loads(path.read_text())
    assert list(data) == list(gpu_env.KEYS)


def test_write_for_asv_run_outside_asv_does_nothing(monkeypatch):
    monkeypatch.delenv("ASV_CONF_DIR", raising=False)
    monkeypatch.delenv("ASV_COMMIT", raising=False)
    assert gpu_env.write_for_asv_run() is None


def test_cli_writes_sidecar(tmp_path, capsys):
    rc = gpu_env.main(["--write", "--results-dir", str(tmp_path), "--machine", "m", "--commit", "feedface00"])
    assert rc == 0
    printed = json.loads(capsys.readouterr().out)
    assert json.loads((tmp_path / "m" / "gpu-env-feedface.json").read_text())["torch"] == printed["torch"]
    assert gpu_env.main(["--write", "--results-dir", str(tmp_path), "--machine", "m", "--commit", "nothex!!"]) == 2


def test_sidecar_says_which_launch_path_ragged_attention_took(monkeypatch):
    from ragged_kernels.attention import interface

    monkeypatch.setattr(interface, "_NATIVE", None)
    assert gpu_env.attention_launch() == "python" and gpu_env.collect()["attention_launch"] == "python"
    monkeypatch.setattr(interface, "_NATIVE", object())  # the built extension
    assert gpu_env.attention_launch() == "native"


@pytest.mark.slow
def test_without_nvidia_smi_the_versions_come_from_metadata_without_importing_torch(tmp_path):
    """No NVIDIA driver means no GPU: reading the state must not pay torch's import (20 s on a loaded
    2-core box), and says which packages are installed all the same."""
    import os
    import subprocess
    import sys
    from importlib import metadata
    from pathlib import Path

    code = ("import sys, json; from benchmarks import gpu_env; env = gpu_env.collect(); "
            "print(json.dumps([env, 'torch' in sys.modules]))")
    bindir = tmp_path / "bin"  # a PATH with this interpreter and git, and no nvidia-smi
    bindir.mkdir()
    env = {**os.environ, "PATH": str(bindir)}
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", code], cwd=root, env=env, capture_output=True, text=True, check=True)
    state, imported = json.loads(out.stdout)
    assert imported is False
    assert state["torch"] == metadata.version("torch") and state["gpu"] == "" and state["attention_launch"] == "python"
    assert set(state) == set(gpu_env.KEYS)


def test_gpu_only_reads_nvidia_smi_alone(monkeypatch):
    """Another project's suite: the GPU, driver and clocks, never this process's torch, triton or the
    kernels' launch path (the service's versions were listed in a foreign project's PR comment)."""
    monkeypatch.setattr(gpu_env.shutil, "which", lambda name: "/usr/bin/nvidia-smi")
    monkeypatch.setattr(gpu_env, "_smi", lambda smi: {"gpu": "NVIDIA RTX 4000 Ada", "driver": "560.35"})
    env = gpu_env.collect(gpu_only=True)
    assert set(env) == set(gpu_env.KEYS)
    assert env["gpu"] == "NVIDIA RTX 4000 Ada" and env["driver"] == "560.35"
    assert env["torch"] == env["triton"] == env["attention_launch"] == ""
    monkeypatch.setattr(gpu_env.shutil, "which", lambda name: None)
    assert gpu_env.collect(gpu_only=True)["torch"] == ""
