"""Where EndToEnd.setup_cache's time goes: per model build and per case (device diagnostic, session 5)."""
import sys, time
sys.path.insert(0, ".")
from benchmarks import _models, bench_end_to_end as e2e

rows = []
orig_build, orig_guarded = _models.build_model, _models.guarded

def build(torch, model, pruner, backend, dtype):
    t = time.perf_counter(); m = orig_build(torch, model, pruner, backend, dtype)
    rows.append(("build", f"{model} {pruner} {backend}", time.perf_counter() - t)); return m

def guarded(results, key, compute):
    t = time.perf_counter(); orig_guarded(results, key, compute)
    v = results[key].get("values", {})
    rows.append(("case", key, time.perf_counter() - t, v.get("images_per_s")))

_models.build_model, _models.guarded = build, guarded
t0 = time.perf_counter()
res = e2e.measure_matrix(*e2e.EndToEnd.params)
total = time.perf_counter() - t0
b = sum(r[2] for r in rows if r[0] == "build"); c = sum(r[2] for r in rows if r[0] == "case")
print(f"total {total:.1f} s: builds {b:.1f} s ({sum(r[0]=='build' for r in rows)}), cases {c:.1f} s "
      f"({sum(r[0]=='case' for r in rows)}), rest {total-b-c:.1f} s")
for r in sorted(rows, key=lambda r: -r[2])[:25]:
    print(f"{r[0]:5} {r[2]:6.2f} s  {r[1]}" + (f"  {r[3]:,.0f} img/s" if len(r) > 3 and r[3] else ""))
print("\nfirst 12 cases in order:")
for r in [r for r in rows if r[0] == "case"][:12]:
    print(f"{r[2]:6.2f} s  {r[1]}  {r[3] or 0:,.0f} img/s")
