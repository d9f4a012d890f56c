"""Which host a run was measured on. asv's machine name is a label, and a workflow may give every
host the same one (a `BENCH_MACHINE` default, a copied `~/.asv-machine.json`): the store tells hosts
apart by what asv records of the machine in every result file (`params`: arch, cpu, num_cpu, os,
ram) and the GPU sidecar's GPU model, so results of two hosts never share a series.

A host is its hardware and OS family: arch, CPU model, CPU count, RAM, the first word of asv's `os`
("Linux", "Windows", "Darwin", a runner image label) and the GPU model. What changes on one host
over its life (the kernel version inside `os`, the GPU driver, CUDA, torch, a few kB of RAM the
firmware keeps) is its environment, recorded with each run and never a new host: the Jenkins
container of a real history (MetPy's, 2025-2026) went through 5 kernel versions and 5 RAM
readings 32 kB apart in 59 runs, and splitting a series at each would have hidden exactly the
regressions such updates cause.

Pure functions over the strings asv writes; no SQLAlchemy.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence

HOST_KEYS = ("arch", "cpu", "num_cpu", "os", "ram", "gpu")
_RAM_TOLERANCE = 0.05  # RAM readings of one host within 5 % (firmware reservations move it by kB)
_UNITS = {"": None, "b": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}
_RAM_RE = re.compile(r"\s*([0-9]+(?:\.[0-9]*)?)\s*([kmgt]?)(?:i?b)?\s*", re.IGNORECASE)

Host = tuple[tuple[str, str], ...]


def host_fingerprint(info: Mapping[str, str]) -> Host:
    """The host identity in asv's machine info (a result file's `params`, or machine.json) plus the
    GPU model, normalised: only the keys of `HOST_KEYS` that are recorded, whitespace collapsed, the
    OS as its family (its first word, lower case).

    Args:
        info: asv's machine fields as strings; "gpu" from the GPU sidecar where there is one.

    Returns:
        Sorted (key, value) pairs; empty when nothing identifies the host.
    """
    out = {}
    for key in HOST_KEYS:
        value = info.get(key)
        if not isinstance(value, str):
            continue
        value = " ".join(value.split())
        if key == "os":
            value = value.split(" ")[0].lower() if value else ""
        if value:
            out[key] = value
    return tuple(sorted(out.items()))


def _ram(text: str) -> float | None:
    """A RAM reading as a number: with its unit where asv wrote one ("7GB"), else as written (asv
    writes bytes today and kB in older releases: `same_host` allows for both)."""
    m = _RAM_RE.fullmatch(text)
    if m is None:
        return None
    value = float(m.group(1))
    unit = _UNITS[m.group(2).lower()]
    return value * unit if unit else value


def _ram_close(a: str, b: str) -> bool:
    """Two RAM readings of one host: within 5 %, up to a factor 1024^k between their units."""
    x, y = _ram(a), _ram(b)
    if x is None or y is None:
        return a == b
    if x <= 0 or y <= 0:
        return x == y
    k = round(math.log(x / y, 1024))
    return abs(x / (y * 1024.0**k) - 1.0) <= _RAM_TOLERANCE


def same_host(a: Host, b: Host) -> bool:
    """Whether two fingerprints can be one host: every key recorded in both agrees (RAM within 5 %);
    a key that one of them lacks says nothing.

    Args:
        a: a `host_fingerprint`.
        b: another.

    Returns:
        True when nothing recorded tells them apart.
    """
    da, db = dict(a), dict(b)
    for key in da.keys() & db.keys():
        if key == "ram":
            if not _ram_close(da[key], db[key]):
                return False
        elif da[key] != db[key]:
            return False
    return True


def host_differences(a: Host, b: Host) -> list[str]:
    """What tells two fingerprints apart, for messages: ["cpu 'X' / 'Y'", ...]."""
    da, db = dict(a), dict(b)
    out = []
    for key in HOST_KEYS:
        if key in da and key in db:
            close = _ram_close(da[key], db[key]) if key == "ram" else da[key] == db[key]
            if not close:
                out.append(f"{key} {da[key]!r} / {db[key]!r}")
    return out


def merged(old: Host, new: Host) -> Host:
    """`old` with the keys only `new` records added (a later run that records the GPU, say)."""
    out = dict(new)
    out.update(old)
    return tuple(sorted(out.items()))


def describe(host: Host | Sequence[tuple[str, str]]) -> str:
    """A fingerprint in a few words, e.g. "x86_64, AMD EPYC 7763, 4 CPUs, 16 GB RAM, linux, GPU NVIDIA H200"."""
    d = dict(host)
    parts = [d[k] for k in ("arch", "cpu") if k in d]
    if "num_cpu" in d:
        parts.append(f"{d['num_cpu']} CPUs")
    if "ram" in d:
        parts.append(f"RAM {d['ram']}")
    if "os" in d:
        parts.append(d["os"])
    if "gpu" in d:
        parts.append(f"GPU {d['gpu']}")
    return ", ".join(parts) or "nothing recorded"
