"""`build_pruned_model`'s options as a record (`pruners.build.BuildOptions`) and as keywords build the same
model, and the record checks its fields when it is made."""

from __future__ import annotations

import pytest
import torch

from pruners import BuildOptions, build_pruned_model

TINY = "deit_tiny_patch16_224"


def test_the_record_and_the_keywords_build_the_same_model():
    by_record = build_pruned_model(TINY, "evit", "reference", BuildOptions(seed=3, packer="torch"))
    by_keywords = build_pruned_model(TINY, "evit", "reference", seed=3, packer="torch")
    assert repr(by_record) == repr(by_keywords)
    for (name, a), b in zip(by_record.state_dict().items(), by_keywords.state_dict().values(), strict=True):
        assert torch.equal(a, b), name


@pytest.mark.parametrize(
    "fields,error,match",
    [
        ({"seed": 1.5}, TypeError, "seed must be an int"),
        ({"seed": -1}, ValueError, r"seed must be in \[0, 2\*\*63\)"),
        ({"graph": 1}, TypeError, "graph must be True or False"),
        ({"fused_blocks": "yes"}, TypeError, "fused_blocks must be True or False"),
        ({"compile": 2}, TypeError, "compile must be True, False or a torch.compile mode"),
        ({"calibration_images": [1, 2]}, TypeError, "calibration_images must be a float"),
    ],
    ids=["float-seed", "negative-seed", "int-graph", "str-fused", "int-compile", "list-images"],
)
def test_the_record_checks_its_fields(fields, error, match):
    with pytest.raises(error, match=match):
        BuildOptions(**fields)
    with pytest.raises(error, match=match):  # the keyword API raises the same
        build_pruned_model(TINY, "evit", "reference", **fields)


def test_backend_dependent_options_are_checked_against_the_backend():
    with pytest.raises(ValueError, match="graph mode needs a sync-free backend"):
        build_pruned_model(TINY, "evit", "nested_sdpa", BuildOptions(graph=True))
    with pytest.raises(ValueError, match="exact_capacity reads counts back"):
        build_pruned_model(TINY, "evit", "reference", BuildOptions(compile=True, exact_capacity=True))


def test_options_come_one_way_only():
    with pytest.raises(TypeError, match="either as a BuildOptions or as keywords"):
        build_pruned_model(TINY, "evit", "reference", BuildOptions(), seed=1)
    with pytest.raises(TypeError, match="options must be a BuildOptions"):
        build_pruned_model(TINY, "evit", "reference", {"seed": 1})
    with pytest.raises(TypeError, match="unknown build_pruned_model options"):
        build_pruned_model(TINY, "evit", "reference", sed=1)
    assert BuildOptions(seed=2) == BuildOptions(seed=2) and BuildOptions(seed=2).captured is False
