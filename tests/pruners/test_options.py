"""`ForwardOptions`, PrunedDeiT's forward flags as one record: what it refuses on construction, what it
checks against a backend, and the record `BuildOptions` gives the model. No model is run."""

from __future__ import annotations

import pytest

from pruners import BuildOptions, ForwardOptions


@pytest.mark.parametrize(
    "fields, error, match",
    [
        ({"exact_capacity": 1}, TypeError, "exact_capacity must be True or False"),
        ({"sync_free": "yes"}, TypeError, "sync_free must be True or False"),
        ({"packer": "numpy"}, ValueError, "packer must be 'torch' or 'ragged_kernels'"),
        ({"sync_free": True, "exact_capacity": True}, ValueError, "sync_free excludes exact_capacity"),
        ({"fused_blocks": True, "ragged_linear": True}, ValueError, "choose one of fused_blocks and ragged_linear"),
        ({"gelu_epilogue": 1}, TypeError, "gelu_epilogue must be True or False"),
        ({"gelu_epilogue": True, "fused_blocks": True}, ValueError, "fuse them in their own kernels"),
        ({"gelu_epilogue": True, "ragged_linear": True}, ValueError, "fuse them in their own kernels"),
    ],
    ids=["int-flag", "str-flag", "bad-packer", "sync_free-exact", "fused-ragged_linear", "int-epilogue",
         "epilogue-fused", "epilogue-ragged_linear"],
)
def test_the_record_refuses_what_no_backend_takes(fields, error, match):
    with pytest.raises(error, match=match):
        ForwardOptions(**fields)


def test_for_backend_fills_in_the_packer_and_checks_the_backend():
    assert ForwardOptions().for_backend("reference").packer == "torch"
    assert ForwardOptions().for_backend("triton").packer == "ragged_kernels"
    chosen = ForwardOptions(packer="torch")
    assert chosen.for_backend("triton") is chosen
    with pytest.raises(ValueError, match="the dense backend has none"):
        ForwardOptions(ragged_linear=True).for_backend("dense")
    with pytest.raises(ValueError, match="sync_free needs a sync-free backend"):
        ForwardOptions(sync_free=True).for_backend("nested_sdpa")


def test_check_capture_for_graph_mode_and_compile():
    ForwardOptions().check_capture("triton", compiled=False)
    ForwardOptions(sync_free=True, ragged_linear=True).check_capture("padded_sdpa", compiled=False)
    with pytest.raises(ValueError, match="graph mode needs exact_capacity=False"):
        ForwardOptions(exact_capacity=True).check_capture("triton", compiled=False)
    with pytest.raises(ValueError, match="compile with padded_sdpa needs the model built with sync_free=True"):
        ForwardOptions().check_capture("padded_sdpa", compiled=True)
    with pytest.raises(ValueError, match="fused_blocks=True is the form that compiles"):
        ForwardOptions(ragged_linear=True).check_capture("triton", compiled=True)
    with pytest.raises(ValueError, match="NestedTensor"):
        ForwardOptions(sync_free=True).check_capture("nested_sdpa", compiled=False)


def test_build_options_give_a_sync_free_record_when_captured():
    assert BuildOptions().forward_options() == ForwardOptions()
    assert BuildOptions(graph=True, fused_blocks=True).forward_options() == ForwardOptions(sync_free=True,
                                                                                           fused_blocks=True)
    assert BuildOptions(compile=True, packer="torch").forward_options() == ForwardOptions(sync_free=True,
                                                                                          packer="torch")
    with pytest.raises(ValueError, match="choose one of fused_blocks and ragged_linear"):  # on construction now
        BuildOptions(fused_blocks=True, ragged_linear=True)
