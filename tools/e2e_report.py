"""The end-to-end targets and tables of `tools.bench_e2e` (pure functions over its result rows).

Every pruned figure is compared with the strongest thing a user would run instead: the fastest dense
configuration (eager, one CUDA graph, or torch.compile captured as a graph) for the speed-ups, and the
other backends in graph mode for what our kernel contributes. Targets (H200, fp16, ~50% token budget):
    serving  DeiT-S/B at 224², B 1 and 4: best pruned >= 1.3x (B 1) / 1.5x (B 4) the images/s of the
             best dense, and its p99 latency <= 0.8x that dense configuration's
    large    B 64-256: best pruned / best dense >= 0.9 x the FLOP ratio of the kept counts
    graph    every batch: triton graph >= 1.1x fa2_varlen graph and >= 1.2x padded_sdpa graph, compared in
             the graph mode where triton is fastest (graph, or graph+fused with --fused: fused against fused)
    correct  every graph / compile+graph row within TOL max |logit delta| of the padded reference on the
             same decisions, with the same top-1 wherever the reference's top-1/top-2 margin exceeds twice it
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

SERVING_MODELS = ("deit_small_patch16_224", "deit_base_patch16_224")
SERVING_SPEEDUP = {1: 1.3, 4: 1.5}
SERVING_P99 = 0.8
LARGE_BATCHES = (64, 256)  # inclusive range
LARGE_FLOP_FRACTION = 0.9
GRAPH_VS = {"fa2_varlen": 1.1, "padded_sdpa": 1.2}
TOL = 0.004


def _status(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def _fastest(rows: Sequence[dict]) -> dict | None:
    return max(rows, key=lambda r: r["img_per_s"]) if rows else None


def best_dense(rows: Sequence[dict]) -> dict[tuple, dict]:
    """(model, batch) -> the dense row with the most images/s (any mode, either reading)."""
    out: dict[tuple, dict] = {}
    for r in rows:
        if r["backend"] == "dense":
            key = (r["model"], r["batch"])
            if key not in out or r["img_per_s"] > out[key]["img_per_s"]:
                out[key] = r
    return out


def _same_decisions(rows: Sequence[dict]) -> bool:
    keys = ("tokens_per_block", "longest_per_block", "mlp_tokens_per_block", "flops_pruned")
    return len({tuple(json.dumps(r.get(k)) for k in keys) for r in rows}) <= 1


def _row(grp: Sequence[dict], backend: str, mode: str) -> dict | None:
    return next((r for r in grp if r["backend"] == backend and r["mode"] == mode), None)


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or not b else a / b


def target_rows(rows: Sequence[dict]) -> list[dict]:
    """Target figures and statuses (PASS / MISS, "n/a" where a target does not apply, "no data" where a
    row it needs was not measured) per (model, pruner, batch) with pruned rows."""
    dense = best_dense(rows)
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        if r["backend"] != "dense":
            groups.setdefault((r["model"], r["pruner"], r["batch"]), []).append(r)
    out = []
    for (model, pruner, batch), grp in groups.items():
        best, den = _fastest(grp), dense.get((model, batch))
        # graph against graph in the graph mode where triton serves most (fused blocks leave attention a
        # larger share of the forward): a user runs that one
        graph_mode = max((m for m in ("graph", "graph+fused") if _row(grp, "triton", m)),
                         key=lambda m: _row(grp, "triton", m)["img_per_s"], default="graph")
        tri, fa2, pad = (_row(grp, b, graph_mode) for b in ("triton", "fa2_varlen", "padded_sdpa"))
        checked = [r for r in grp if r["mode"] in ("graph", "compile+graph") and r.get("max_abs") is not None]
        t = dict(
            model=model, pruner=pruner, batch=batch, best=f"{best['backend']} {best['mode']}",
            best_img_per_s=best["img_per_s"], dense_mode=den["mode"] if den else None,
            dense_img_per_s=den["img_per_s"] if den else None, speedup=_ratio(best["img_per_s"], den and
                                                                              den["img_per_s"]),
            p99_ms=best.get("p99_ms"), dense_p99_ms=den.get("p99_ms") if den else None,
            flop_ratio=best["flop_ratio"], token_fraction=best["token_fraction"],
            graph_mode=graph_mode, vs_fa2_graph=_ratio(tri and tri["img_per_s"], fa2 and fa2["img_per_s"]),
            vs_padded_graph=_ratio(tri and tri["img_per_s"], pad and pad["img_per_s"]),
            max_abs=max((r["max_abs"] for r in checked), default=None),
            top1_mismatch=sum(r.get("top1_mismatch", 0) for r in checked),
            same_decisions=_same_decisions(grp),
        )
        t["p99_ratio"] = _ratio(t["p99_ms"], t["dense_p99_ms"])
        t["frac_flop"] = _ratio(t["speedup"], t["flop_ratio"])
        if model not in SERVING_MODELS or batch not in SERVING_SPEEDUP:
            t["serving"] = "n/a"
        elif t["speedup"] is None or t["p99_ratio"] is None:
            t["serving"] = "no data"
        else:
            t["serving"] = _status(t["speedup"] >= SERVING_SPEEDUP[batch] and t["p99_ratio"] <= SERVING_P99)
        if not LARGE_BATCHES[0] <= batch <= LARGE_BATCHES[1]:
            t["large"] = "n/a"
        else:
            t["large"] = "no data" if t["frac_flop"] is None else _status(t["frac_flop"] >= LARGE_FLOP_FRACTION)
        if t["vs_fa2_graph"] is None or t["vs_padded_graph"] is None:
            t["graph"] = "no data"
        else:
            t["graph"] = _status(t["vs_fa2_graph"] >= GRAPH_VS["fa2_varlen"]
                                 and t["vs_padded_graph"] >= GRAPH_VS["padded_sdpa"])
        t["correct"] = "no data" if t["max_abs"] is None else _status(t["max_abs"] < TOL and not t["top1_mismatch"])
        out.append(t)
    return out


def _f(x, fmt: str) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, fmt)


THROUGHPUT_COLUMNS = (
    ("dense", "eager"), ("dense", "graph"), ("dense", "compile+graph"),
    ("dense", "graph+fused"), ("dense", "compile+graph+fused"),
    ("triton", "graph"), ("triton", "compile+graph"), ("fa2_varlen", "graph"), ("padded_sdpa", "graph"),
    ("triton", "graph+fused"), ("triton", "compile+graph+fused"), ("fa2_varlen", "graph+fused"),
    ("padded_sdpa", "graph+fused"),
    ("triton", "eager"), ("fa2_varlen", "eager"), ("padded_sdpa", "eager"), ("nested_sdpa", "eager"),
    ("triton", "eager+exact"), ("triton", "graph+rlin"),
)


def throughput_table(rows: Sequence[dict]) -> list[str]:
    """Markdown: images/s per (model, pruner, batch) and backend/mode (dense: its faster reading per mode);
    columns no row has are left out."""
    by: dict[tuple, float] = {}
    for r in rows:
        mode = r["mode"].removesuffix("+again")
        key = (r["model"], r["pruner"] if r["backend"] != "dense" else None, r["batch"], r["backend"], mode)
        by[key] = max(by.get(key, 0.0), r["img_per_s"])
    cols = [c for c in THROUGHPUT_COLUMNS if any(k[3:] == c for k in by)]
    keys = sorted({(r["model"], r["pruner"], r["batch"]) for r in rows if r["backend"] != "dense"},
                  key=lambda k: (k[0], k[1] or "", k[2]))
    lines = ["| model | pruner | batch | " + " | ".join(f"{b} {m}" for b, m in cols) + " | tokens |",
             "|" + "---|" * (len(cols) + 4)]
    for m, p, b in keys:
        cells = [_f(by.get((m, None if be == "dense" else p, b, be, mo)), ".0f") for be, mo in cols]
        frac = next(r["token_fraction"] for r in rows if (r["model"], r["pruner"], r["batch"]) == (m, p, b))
        lines.append(f"| {m} | {p} | {b} | " + " | ".join(cells) + f" | {frac:.3f} |")
    return lines


def serving_table(rows: Sequence[dict]) -> list[str]:
    """Markdown: latency percentiles, kernels per forward (nodes of the captured graph) and compile time of
    every row that has them."""
    lines = ["| model | pruner | backend | mode | batch | img/s | p50 ms | p99 ms | calls | kernels | memcpy+memset "
             "| compile s |", "|" + "---|" * 12]
    for r in rows:
        if r.get("p50_ms") is None and r.get("nodes") is None:
            continue
        nodes = r.get("nodes") or {}
        copies = nodes.get("memcpy", 0) + nodes.get("memset", 0) if nodes else None
        lines.append(
            f"| {r['model']} | {r['pruner'] or '-'} | {r['backend']} | {r['mode']} | {r['batch']} | "
            f"{r['img_per_s']:.0f} | {_f(r.get('p50_ms'), '.3f')} | {_f(r.get('p99_ms'), '.3f')} | "
            f"{_f(r.get('latency_calls'), 'd')} | {_f(nodes.get('kernel') if nodes else None, 'd')} | "
            f"{_f(copies, 'd')} | {_f(r.get('compile_s'), '.1f')} |"
        )
    return lines


def targets_table(targets: Sequence[dict]) -> list[str]:
    """Markdown: the target figures and PASS/MISS per (model, pruner, batch)."""
    head = ("| model | pruner | batch | best pruned | img/s | best dense | img/s | speed-up | p99 / dense p99 "
            "| FLOP ratio | speed-up / FLOP ratio | triton / fa2 (graph mode) | / padded | max abs | "
            "same kept | serving | large | graph | correct |")
    lines = [head, "|" + "---|" * 19]
    for t in targets:
        cells = [
            t["model"], t["pruner"], str(t["batch"]), t["best"], f"{t['best_img_per_s']:.0f}", t["dense_mode"] or "—",
            _f(t["dense_img_per_s"], ".0f"), _f(t["speedup"], ".2f"), _f(t["p99_ratio"], ".2f"),
            _f(t["flop_ratio"], ".2f"), _f(t["frac_flop"], ".2f"),
            f"{_f(t['vs_fa2_graph'], '.2f')} ({t['graph_mode']})",
            _f(t["vs_padded_graph"], ".2f"), _f(t["max_abs"], ".4f"), "yes" if t["same_decisions"] else "NO",
            t["serving"], t["large"], t["graph"], t["correct"],
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines
