"""Presets are append-only and deterministic: history depends on every commit measuring the same batch."""

from __future__ import annotations

import pytest

from benchmarks import presets
from benchmarks.presets import ATTENTION_PRESETS, AttentionPreset, ModelPreset

# Frozen fingerprints of presets already in the history. A change here means an existing preset
# changed shape: add a NEW preset instead (append-only), never edit these values.
FROZEN = {
    "deitb224-b1-keep0.5": [107],
    "deitb224-b8-keep0.5": [107, 85, 71, 70, 117, 123, 105, 112],
}


def test_frozen_lengths_unchanged():
    for name, lengths in FROZEN.items():
        assert ATTENTION_PRESETS[name].lengths() == lengths, name


def test_lengths_in_range_and_near_keep_ratio():
    for p in ATTENTION_PRESETS.values():
        lengths = p.lengths()
        assert len(lengths) == p.batch
        assert all(1 <= n <= p.tokens for n in lengths)
        assert p.cu_seqlens()[-1] == p.total_tokens == sum(lengths)
        mean = sum(lengths) / len(lengths)
        assert abs(mean - p.keep * p.tokens) <= p.ragged * p.keep * p.tokens + 1, p.name


def test_uniform_preset_has_equal_lengths():
    lengths = ATTENTION_PRESETS["deitb224-b32-keep0.5-uniform"].lengths()
    assert len(set(lengths)) == 1


def test_names_unique_and_params_are_plain_strings():
    # asv labels parameters with repr(); names must be stable strings.
    for table in (presets.ATTENTION_PRESETS, presets.PACK_PRESETS, presets.CPU_PRESETS, presets.MODEL_PRESETS):
        for key, p in table.items():
            assert isinstance(key, str) and key == p.name


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"resolution": 256}, "resolution"),
        ({"keep": 0.0}, "keep"),
        ({"keep": 1.5}, "keep"),
        ({"ragged": 1.0}, "ragged"),
        ({"batch": 0}, "batch"),
    ],
    ids=["bad-res", "keep0", "keep1.5", "ragged1", "batch0"],
)
def test_attention_preset_rejects_bad_values(kwargs, match):
    base = dict(name="x", batch=2, heads=2, head_dim=16, resolution=224, keep=0.5)
    with pytest.raises(ValueError, match=match):
        AttentionPreset(**{**base, **kwargs})


def test_model_preset_rejects_mismatched_resolution():
    with pytest.raises(ValueError, match="384px"):
        ModelPreset("x", "deit_small_patch16_224", 1, 384)


def test_full_regex_names_every_preset_above_the_serving_batches():
    """FULL_REGEX is a literal (the runner reads it as text); the presets it leaves out of the latency
    percentiles must be exactly those above the serving batches."""
    import re

    from benchmarks import FULL_REGEX
    from benchmarks.bench_end_to_end import LATENCY_MAX_BATCH
    from benchmarks.presets import MODEL_PRESETS

    listed = re.search(r"track_latency_p\(50\|99\)\\\('\(([^)]*)\)'", FULL_REGEX).group(1).split("|")
    assert sorted(listed) == sorted(n for n, p in MODEL_PRESETS.items() if p.batch > LATENCY_MAX_BATCH)
