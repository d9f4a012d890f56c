"""Launches per forward counted on the CPU (`benchmarks.launch_count`) against the graph nodes the H200
recorded, and the mapping's rules one by one.

The H200's counts are those of docs/performance.md ("Serving batches", "ATS with its value norms inside the
CLS-score kernel"), read from the device logs' JSON (docs/device-logs-2026-12.tar.xz: 2026-12-01 runs 1-2,
commits 1328fa1 and its parents, whose pruners and kernels are 1328fa1's but for the compiled path;
2026-12-02 run 6, commit 37c3229): kernel, memcpy and memset nodes of one captured replay, fp16, ~50% token
budget, Threshold-L2 with its calibrated capacity. The library at those commits is taken from git and counted
by today's counter (`benchmarks/structure_worker.py launches`), as asv measures old commits with today's suite.

Every DeiT-S count and every DeiT-B count but the pruned ones' equals the recorded one, by kind. The DeiT-B
pruned forwards differ by kernels that cuBLAS adds on the H200 and a CPU cannot see: listed in
`CUBLAS_SPLIT_K` with their reason, op by op, and checked to account for every difference.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import requires

ROOT = Path(__file__).resolve().parents[2]
WORKER = ROOT / "benchmarks" / "structure_worker.py"

# (commit, model, forward, batch) -> (kernel, memcpy, memset) nodes of the captured graph on the H200.
RECORDED = {
    ("1328fa1", "DeiT-S", "dense", "B1"): (126, 1, 12),
    ("1328fa1", "DeiT-S", "ATS", "B1"): (173, 1, 4),
    ("1328fa1", "DeiT-S", "DynamicViT", "B1"): (224, 10, 3),
    ("1328fa1", "DeiT-S", "EViT", "B1"): (243, 10, 4),
    ("1328fa1", "DeiT-S", "Threshold-L2", "B1"): (140, 1, 3),
    ("1328fa1", "DeiT-S", "ATS+FA2", "B1"): (173, 1, 4),
    ("1328fa1", "DeiT-S", "DynamicViT+FA2", "B1"): (224, 10, 3),
    ("1328fa1", "DeiT-S", "EViT+FA2", "B1"): (243, 10, 4),
    ("1328fa1", "DeiT-S", "Threshold-L2+FA2", "B1"): (140, 1, 3),
    ("1328fa1", "DeiT-S", "ATS+padded", "B1"): (397, 1, 12),
    ("1328fa1", "DeiT-S", "DynamicViT+padded", "B1"): (476, 10, 12),
    ("1328fa1", "DeiT-S", "EViT+padded", "B1"): (467, 10, 12),
    ("1328fa1", "DeiT-S", "Threshold-L2+padded", "B1"): (392, 1, 12),
    ("1328fa1", "DeiT-S", "dense", "B4"): (127, 0, 12),
    ("1328fa1", "DeiT-S", "DynamicViT", "B4"): (228, 6, 3),
    ("1328fa1", "DeiT-S", "EViT", "B4"): (247, 6, 4),
    ("1328fa1", "DeiT-B", "dense", "B1"): (126, 1, 12),
    ("1328fa1", "DeiT-B", "ATS", "B1"): (182, 1, 4),
    ("1328fa1", "DeiT-B", "DynamicViT", "B1"): (233, 10, 3),
    ("1328fa1", "DeiT-B", "EViT", "B1"): (252, 10, 4),
    ("1328fa1", "DeiT-B", "Threshold-L2", "B1"): (146, 1, 3),
    ("1328fa1", "DeiT-B", "DynamicViT", "B4"): (231, 6, 3),
    ("1328fa1", "DeiT-B", "EViT", "B4"): (247, 6, 4),
    ("37c3229", "DeiT-S", "ATS", "B1"): (164, 1, 4),
    ("37c3229", "DeiT-B", "ATS", "B1"): (173, 1, 4),
    ("37c3229", "DeiT-S", "ATS", "B4"): (165, 0, 4),
    ("37c3229", "DeiT-B", "ATS", "B4"): (165, 0, 4),
}


def cublas_split_k(launches: list[list]) -> list[str]:
    """The kernel nodes cuBLAS adds on the H200 that the CPU count maps to one GEMM kernel: DeiT-B's fc2
    (`aten.addmm`, K 3072 -> N 768) with at most 128 rows runs as a split-K GEMM plus a reduction kernel
    (cuBLAS 13.0's heuristic on 132 SMs: one 128-row tile and 6 column tiles leave the GPU empty, so it
    splits K). The rule is read from the records themselves: every pruned DeiT-B forward's extra kernels are
    exactly its fc2 GEMMs at <= 128 rows (ATS B1 66 rows x 9 blocks: +9; DynamicViT B1 107/58/32 rows: +9,
    B4 428/232/128: +3, only the 128-row ones; EViT B1 109/61/35: +9, B4 436/244/140: +0; Threshold-L2 B1
    136/78/46: +6, the 136-row ones not), and no fc2 of 136 rows or more, nor any DeiT-S GEMM, has one.

    Returns:
        One line per added kernel: the op, its (M, K, N) and why.
    """
    return [f"aten.addmm {tuple(shape)}: cuBLAS split-K fc2 at <= 128 rows, +1 reduction kernel (H200)"
            for op, kind, count, why, shape in launches
            if op == "aten.addmm" and len(shape) == 3 and shape[1:] == [3072, 768] and shape[0] <= 128]


def _library_at(commit: str, dest: Path) -> Path:
    """`ragged_kernels` and `pruners` as they were at `commit` (git archive), in `dest`."""
    have = subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", f"{commit}^{{commit}}"], capture_output=True)
    requires(have.returncode == 0, f"commit {commit} in this clone's history (the recorded counts were made there)")
    dest.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit, "ragged_kernels", "pruners"],
                             capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest


def _count(library: Path, out: Path, models: list[str], forwards: list[str], batches: list[str]) -> dict:
    env = {**os.environ, "PYTHONPATH": str(library), "TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": ""}
    proc = subprocess.run([sys.executable, str(WORKER), "launches", "--out", str(out), "--models", *models,
                           "--forwards", *forwards, "--modes", "graph", "--batches", *batches, "--detail"],
                          env=env, capture_output=True, text=True, timeout=900)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def counted(tmp_path_factory) -> dict[tuple[str, str, str, str], dict]:
    """Today's counter on the library of each recorded commit, for the recorded points."""
    out = {}
    for commit in sorted({k[0] for k in RECORDED}):
        points = [k for k in RECORDED if k[0] == commit]
        tmp = tmp_path_factory.mktemp(commit)
        library = _library_at(commit, tmp / "lib")
        got = _count(library, tmp / "launches.json", sorted({p[1] for p in points}), sorted({p[2] for p in points}),
                     sorted({p[3] for p in points}))
        for p in points:
            out[p] = got["|".join((p[1], p[2], "graph", p[3]))]
    return out


def test_cpu_counts_equal_the_h200_graph_nodes_but_for_cublas_split_k(counted):
    table, mismatches = [], []
    for point, recorded in RECORDED.items():
        entry = counted[point]
        assert "value" in entry, (point, entry)
        cpu = entry["value"]
        added = cublas_split_k(entry["launches"]) if point[1] == "DeiT-B" and point[2] != "dense" else []
        predicted = (cpu["kernel"] + len(added), cpu["memcpy"], cpu["memset"])
        table.append(f"{' '.join(point):34} cpu {cpu['kernel']:3}/{cpu['memcpy']:2}/{cpu['memset']:2} "
                     f"+{len(added)} split-K = {sum(predicted):3}  H200 {sum(recorded):3}")
        if predicted != recorded:
            mismatches.append((point, cpu, added, recorded))
    print("\n".join(table))
    assert mismatches == []
    # The rule explains differences, never hides a count: DeiT-S and the dense forwards match with no addition.
    assert all(not cublas_split_k(counted[p]["launches"]) for p in RECORDED if p[1] == "DeiT-S")


def test_the_counts_need_no_default_mapping(counted):
    """Every op the recorded forwards dispatch is mapped on purpose (none falls back to "one kernel")."""
    assert {p: e["unmapped"] for p, e in counted.items() if e["unmapped"]} == {}


def test_the_ats_cls_score_change_took_one_launch_off_each_stage(counted):
    """The value norms inside the CLS-score kernel (a0e3144): 178 -> 169 nodes at B 1 on the H200, one fewer in
    each of ATS's 9 stages (docs/performance.md compared 164 kernel nodes with the earlier 178 nodes in all)."""
    before = counted[("1328fa1", "DeiT-S", "ATS", "B1")]["value"]
    after = counted[("37c3229", "DeiT-S", "ATS", "B1")]["value"]
    assert sum(before.values()) - sum(after.values()) == 9
