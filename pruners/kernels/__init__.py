"""The pruners' own Triton kernels, one module per decision (fla's layout: kernels, then the host
function, then its `torch.library` custom op):

- `cls_scores`: every image's CLS query against its keys, on packed rows (ATS and EViT read it);
- `ats_sampling`: ATS's inverse-transform sampling, per stage in one kernel;
- `threshold`: Threshold-L2's per-stage decision (and its batch budget).

Each module's `compile_specs()` lists its shipping compilations for the ahead-of-time resource
report (`ragged_kernels.aot`, `python -m tools.compile_check`).
"""


def compile_specs(capability: int = 90) -> list:
    """Every shipping compilation of the pruners' kernels for an architecture (`ragged_kernels.aot.KernelSpec`s)."""
    from pruners.kernels import ats_sampling, cls_scores, threshold

    return cls_scores.compile_specs() + ats_sampling.compile_specs(capability) + threshold.compile_specs()
