"""CONTRIBUTING.md's layer table says what tests/test_layering.py enforces, and the fast loop's
marking (tests/conftest.py's `slow_reason`) sorts tests as CONTRIBUTING.md says."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import slow_reason
from tests.test_layering import ALLOWED, CALL_SITE, CORE, PRODUCT, SITE, SITE_ENTRY

ROOT = Path(__file__).resolve().parents[1]
CODE = re.compile(r"`([^`]+)`")


def layer_table(text: str) -> dict[str, set[str]]:
    """CONTRIBUTING.md's layer table: layer -> what it may import, with "the core" spelled out and
    the site's entry point as `ci.site.render_site`."""
    section = text.split("## Layers, and why", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    table: dict[str, set[str]] = {}
    for row in rows:
        layers, allowed = (cell.strip() for cell in row.strip("|").split("|")[:2])
        names = set(CODE.findall(allowed.split("never", 1)[0]))  # "never `tests`" names what it may not
        if "the core" in allowed:
            names |= set(CORE)
        if "every product package" in allowed:
            names |= set(PRODUCT)
        for layer in CODE.findall(layers):
            assert layer not in table, f"{layer} has two rows"
            table[layer] = names
    return table


def enforced() -> dict[str, set[str]]:
    """tests/test_layering.py's rules in the same form."""
    site = {f"{SITE}.{name}" for name in SITE_ENTRY}
    return {layer: set(allowed) | (site if layer in CALL_SITE else set()) for layer, allowed in ALLOWED.items()}


def test_the_layer_table_is_the_enforced_one() -> None:
    table = layer_table((ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8"))
    assert table == enforced()


def test_a_wrong_row_is_found() -> None:
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    wrong = text.replace("| `ci.store` | `ci.records`, `ci.text` |", "| `ci.store` | `ci.records`, `ci.verdicts` |")
    assert wrong != text
    table = layer_table(wrong)
    assert table["ci.store"] == {"ci.records", "ci.verdicts"} != enforced()["ci.store"]


@pytest.mark.parametrize(
    ("path", "fixtures", "markers", "why"),
    [
        ("tests/ragged_kernels/test_pack.py", ["poison"], [], "in tests/ragged_kernels/"),
        ("tests/pruners/test_model.py", [], [], "in tests/pruners/"),
        ("tests/ci/test_alerts.py", ["tmp_path", "store_url", "pg_server"], ["postgres"], "fixture pg_server"),
        ("tests/ci/test_runner.py", ["toy", "template", "tmp_path"], [], "fixture template"),
        ("tests/benchmarks/test_asv_cli.py", ["asv_repo"], [], "fixture asv_repo"),
        ("tests/dashboard/test_browser.py", ["site", "browser"], ["browser"], "fixture browser"),
        ("tests/ci/test_postgres.py", ["tmp_path"], ["postgres"], "marked postgres"),
        ("tests/ci/test_store.py", ["tmp_path", "store_url"], [], "in tests/ci/test_store.py"),
        ("tests/ci/test_verdicts.py", ["tmp_path", "store_url"], ["parametrize"], None),
        ("tests/dashboard/test_model.py", ["tmp_path"], [], None),
    ],
)
def test_slow_reason_sorts_by_folder_fixture_and_marker(path, fixtures, markers, why) -> None:
    reason = slow_reason(path, fixtures, markers)
    assert (reason is None) if why is None else (why.split()[-1] in reason)
