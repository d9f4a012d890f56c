"""The native entry point of ragged_attention (the default launch path on CUDA machines), on a GPU:
does it launch the same kernel (bitwise equal outputs), and what does it save on the host?

Prints (1) a check over dtypes x head dims x ragged batches with q/k/v as strided views of one qkv
buffer: native output == Python-path output, bit for bit, and the native path really launched;
(2) host cost per call (µs, 200 back-to-back calls before the sync, every call allocating its
output) and latency (call + sync) for the Python path, the native path and FA2 varlen, side by side
in one process, with native/FA2 ratios (targets: host <= 0.33x, latency <= 0.5x at 80% pruning;
docs/performance.md "Kernel targets"). Builds the extension first (~1 min).

Usage: python -m tools.bench_native_launch
"""

from __future__ import annotations

import contextlib
import os
import sys

os.environ["RAGGED_KERNELS_LAUNCH"] = "native"  # read when ragged_kernels is imported

import torch


def main() -> int:
    if not torch.cuda.is_available():
        print("bench_native_launch: needs a CUDA GPU", file=sys.stderr)
        return 2
    from ragged_kernels import fa2_varlen_attention, forced_launch_path, ragged_attention
    from ragged_kernels.attention import native
    from tools.bench_kernels import fmt_us, host_cost, latency, lengths_for

    mod = native.module()
    if mod is None:
        print("native entry point did not build (see the warning above)", file=sys.stderr)
        return 3
    def run_python_path(*args):
        with forced_launch_path("python"):
            return ragged_attention(*args)

    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}\n")
    print("## 1. Same kernel, same result")
    print("| dtype | head_dim | batch | max abs diff native vs Python path | native launched |")
    print("|---|---|---|---|---|")
    bad = 0
    for dtype in (torch.float16, torch.bfloat16, torch.float32):
        for head_dim in (32, 64, 128):
            for batch, cap in ((3, 197), (8, 577), (80, 197)):  # buckets 0, 1 and 2 (80 x 4 heads >= WIDE_PAIRS)
                lengths = lengths_for(batch, cap // 2, cap, ragged=True, seed=batch)
                cu = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int32, device="cuda")
                qkv = torch.randn(sum(lengths), 3, 4, head_dim, device="cuda", dtype=dtype)
                q, k, v = qkv.unbind(1)
                ref = run_python_path(q, k, v, cu, cap)  # compiles and registers the kernel
                fast = mod.attention(q, k, v, cu, cap)  # the native entry point itself
                launched = fast is not None
                diff = (fast.float() - ref.float()).abs().max().item() if launched else float("nan")
                bad += (not launched) or diff != 0.0
                print(f"| {str(dtype)[6:]} | {head_dim} | {batch} x {cap} | {diff:.3g} | {launched} |")
    print(f"\n{'OK' if bad == 0 else f'{bad} FAILED'}: registered kernels {mod.registered()}\n")

    print("## 2. Host cost and latency per call (µs), DeiT-B heads (12 x 64), 197-token capacity, fp16")
    print("| batch | keep | host: python | host: native | host: fa2 | native/fa2 | latency: python | "
          "latency: native | latency: fa2 | native/fa2 |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|")
    for batch in (1, 4, 32):
        for keep in (1.0, 0.5, 0.2):
            lengths = lengths_for(batch, max(1, round(197 * keep)), 197, ragged=keep < 1)
            cu = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int32, device="cuda")
            q, k, v = torch.randn(sum(lengths), 3, 12, 64, device="cuda", dtype=torch.float16).unbind(1)
            args = (q, k, v, cu, 197)
            run_python_path(*args)  # compile + register
            h, lat = {}, {}
            impls = (("python", ragged_attention), ("native", ragged_attention), ("fa2", fa2_varlen_attention))
            for name, impl in impls:
                with forced_launch_path(name) if name != "fa2" else contextlib.nullcontext():
                    h[name] = host_cost(lambda impl=impl, args=args: impl(*args))
                    lat[name] = latency(lambda impl=impl, args=args: impl(*args))
            print(f"| {batch} | {keep} | {fmt_us(h['python'])} | {fmt_us(h['native'])} | {fmt_us(h['fa2'])} | "
                  f"{h['native'] / h['fa2']:.2f} | {fmt_us(lat['python'])} | {fmt_us(lat['native'])} | "
                  f"{fmt_us(lat['fa2'])} | {lat['native'] / lat['fa2']:.2f} |")  # fmt: skip
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
