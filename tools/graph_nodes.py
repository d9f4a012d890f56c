"""Graph nodes of captured forwards on a GPU, beside the launches the exact tier counts on the CPU.

On a CUDA machine, for the exact tier's grid (`benchmarks.structure_worker`: model x forward x mode x batch,
the same pruner options), capture each forward as graph mode does (`build_pruned_model(graph=True)`, fp16)
and read what one replay launches (`GraphedPrunedModel.replay_nodes`: kernel, memcpy and memset nodes). With
`--cpu-counts FILE` (the worker's `launches` output, run on the same machine) it prints both side by side:
the check that `benchmarks.launch_count` maps what it dispatches to what CUDA launches.

Usage: python -m tools.graph_nodes --out FILE [--models DeiT-S DeiT-B] [--forwards dense ATS ...]
       [--modes graph fused] [--batches B1 B64] [--cpu-counts FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback


def capture(label: str, forward: str, mode: str, batch: str) -> dict:
    """What one replay of the captured forward launches, by node kind."""
    import torch

    from benchmarks import structure_worker as w
    from pruners import build_pruned_model, synthetic_images

    model_name = w.MODELS[label]
    pruner, backend = w.forward_parts(forward)
    bound = None if pruner is None else w.bound_pruner(model_name, pruner)
    options = {"graph": True, **({"fused_blocks": True} if mode == "fused" else {})}
    model = build_pruned_model(model_name, bound, backend, seed=0, **options).to("cuda", torch.float16)
    x = synthetic_images(int(batch[1:]), 224, seed=1).to("cuda", torch.float16)
    with torch.no_grad():
        model(x)
    torch.cuda.synchronize()
    return model.replay_nodes()


def main(argv: list[str] | None = None) -> int:
    from benchmarks import structure_worker as w

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--models", nargs="+", default=list(w.MODELS))
    ap.add_argument("--forwards", nargs="+", default=w.FORWARDS)
    ap.add_argument("--modes", nargs="+", default=w.MODES)
    ap.add_argument("--batches", nargs="+", default=w.BATCHES)
    ap.add_argument("--cpu-counts", help="the structure worker's launches JSON, to print beside")
    args = ap.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("graph_nodes: needs a CUDA GPU", file=sys.stderr)
        return 2
    cpu = json.load(open(args.cpu_counts)) if args.cpu_counts else {}
    out = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "nodes": {}}
    for label in args.models:
        for forward in args.forwards:
            for mode in args.modes:
                for batch in args.batches:
                    key = "|".join((label, forward, mode, batch))
                    try:
                        nodes = capture(label, forward, mode, batch)
                    except Exception as exc:  # noqa: BLE001 - every point reports its own failure
                        nodes = {"error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc(limit=4)}
                    out["nodes"][key] = nodes
                    counted = cpu.get(key, {}).get("value")
                    print(key, nodes, "cpu:", counted, flush=True)
                    with open(args.out, "w") as f:
                        json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
