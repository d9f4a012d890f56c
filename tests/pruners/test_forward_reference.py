"""Today's pruned forward reproduces, bit for bit, what the forward computed before `pruners/model.py`
was split into packing, layers, stages, build and the model (2026-12-05): for every pruner, backend and
forward flag in `data/forward_cases.py`, the same logits, the same keep masks at every stage and the
same packings (per-image lengths and capacities). A refactor that moves forward code must keep this
passing; a change that means to change results regenerates the file and says why."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

REFERENCE = json.loads((Path(__file__).parent / "data" / "forward_reference.json").read_text())


def test_the_reference_covers_every_case():
    from tests.pruners.data.forward_cases import CASES

    assert sorted(REFERENCE) == sorted(CASES)


@pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1", reason="the reference is the CPU interpreter's")
@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_the_forward_reproduces_the_reference_bit_for_bit(name):
    from tests.pruners.data.forward_cases import run_case

    got, want = run_case(name), REFERENCE[name]
    assert got["lengths"] == want["lengths"] and got["capacities"] == want["capacities"], "other packings"
    assert got["keeps"] == want["keeps"], "other keep decisions"
    assert got["logits"] == want["logits"], "other logits"
    assert got.get("logits_recorded") == want.get("logits_recorded"), "other logits while recording"
