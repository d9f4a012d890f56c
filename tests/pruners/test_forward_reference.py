"""Today's pruned forward reproduces what the forward computed before `pruners/model.py` was split into
packing, layers, stages, build and the model (2026-12-05): for every pruner, backend and forward flag in
`data/forward_cases.py`, the same keep masks at every stage and the same packings (per-image lengths
and capacities), bit for bit, and the same logits. A refactor that moves forward code must keep this
passing; a change that means to change results regenerates the file and says why.

The logits are bit for bit on a CPU like the one that wrote the file; another CPU's float kernels sum
in another order (on an AMD EPYC, 2026-12-06: every keep mask and packing identical, the logits of
all 29 cases within 1.3e-6 of the largest, relative), so they are held to `LOGITS_RTOL` of the
reference's largest logit: all of them for the tiny cases, the first four for the full-size builds,
whose file keeps a SHA-256 of the rest."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

REFERENCE = json.loads((Path(__file__).parent / "data" / "forward_reference.json").read_text())
LOGITS_RTOL = 1e-5  # of the reference's largest |logit|: 8x the spread seen between two CPUs


def _same_logits(got: dict | None, want: dict | None) -> bool:
    """Bit for bit, or (another CPU's kernels) every stored value within LOGITS_RTOL."""
    if got == want:
        return True
    if got is None or want is None or got["shape"] != want["shape"]:
        return False
    key = "hex" if "hex" in want else "first"
    a = [float.fromhex(x) for x in got[key]]
    b = [float.fromhex(x) for x in want[key]]
    scale = max(abs(x) for x in b)
    return len(a) == len(b) and all(abs(x - y) <= LOGITS_RTOL * scale for x, y in zip(a, b, strict=True))


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
    assert _same_logits(got["logits"], want["logits"]), "other logits"
    assert _same_logits(got.get("logits_recorded"), want.get("logits_recorded")), "other logits while recording"


def test_logits_are_held_to_the_reference():
    want = {"shape": [1, 3], "hex": [(1.0).hex(), (-2.0).hex(), (0.5).hex()]}
    near = {"shape": [1, 3], "hex": [(1.0 + 1e-6).hex(), (-2.0).hex(), (0.5).hex()]}
    far = {"shape": [1, 3], "hex": [(1.0 + 1e-3).hex(), (-2.0).hex(), (0.5).hex()]}
    assert _same_logits(want, want) and _same_logits(near, want) and _same_logits(None, None)
    assert not _same_logits(far, want) and not _same_logits(None, want) and not _same_logits(want, None)
    assert not _same_logits({**near, "shape": [3, 1]}, want)
