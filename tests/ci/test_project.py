"""The project's asv.conf.json: read as asv reads it, found beside the results at ingest, kept in the
store."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from ci.cli import main
from ci.project import ConfigError, find_asv_conf, read_asv_conf
from ci.records import Project
from ci.store import Store
from tests.ci.conftest import sha_for, write_results

ROOT = Path(__file__).resolve().parents[2]
# Another project's asv.conf.json.
FOREIGN_CONF = """{
    // written the way asv's template is: comments and a trailing comma
    "version": 1,
    "project": "tinygrid",
    "project_url": "https://example.org/tinygrid/",
    "repo": "https://example.org/tinygrid.git",
    "show_commit_url": "https://example.org/tinygrid/commit/",
    "regressions_thresholds": {".*": 0.06, "benchmarks.PeakMem": 0.8,},
}
"""


def _conf(path: Path, **fields: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"version": 1, "repo": ".", **fields}))
    return path


def test_asv_conf_is_read_as_asv_reads_it(tmp_path: Path) -> None:
    conf = tmp_path / "asv.conf.json"
    conf.write_text(FOREIGN_CONF)
    project = read_asv_conf(conf)
    assert project == Project("tinygrid", "https://example.org/tinygrid/", "https://example.org/tinygrid/commit/",
                              ((".*", 0.06), ("benchmarks.PeakMem", 0.8)), str(conf))
    # asv's default "#" and a relative path are no link; no thresholds keep the built-in floor.
    bare = read_asv_conf(_conf(tmp_path / "b" / "asv.conf.json", show_commit_url="#", project_url="docs/"))
    assert (bare.name, bare.url, bare.commit_url, bare.thresholds) == ("", "", "", ())


@pytest.mark.parametrize(("text", "message"), [
    pytest.param('{"version": 1, "project": "x"', "not valid JSON", id="truncated"),
    pytest.param('{"project": "x"}', "No version specified", id="no-version"),
    pytest.param('{"version": 2}', "newer than", id="newer-format"),
    pytest.param('[1, 2]', "No version specified", id="not-an-object"),
    pytest.param('{"version": 1, "project": 3}', "project must be a string", id="name-not-text"),
    pytest.param('{"version": 1, "regressions_thresholds": {".*": "5%"}}', "must map to a non-negative number",
                 id="threshold-text"),
    pytest.param('{"version": 1, "regressions_thresholds": [0.05]}', "regressions_thresholds must be an object",
                 id="thresholds-list"),
    pytest.param('{"version": 1, "regressions_thresholds": {"(": 0.05}}', "bad regex", id="bad-regex"),
    pytest.param('{"version": 1, "regressions_thresholds": {"x": 200}}', "floor for", id="out-of-range"),
])
def test_a_malformed_asv_conf_is_a_clear_error(tmp_path: Path, text: str, message: str) -> None:
    conf = tmp_path / "asv.conf.json"
    conf.write_text(text)
    with pytest.raises(ConfigError, match=re.escape(message)) as err:
        read_asv_conf(conf)
    assert str(err.value).startswith(str(conf)), err.value
    with pytest.raises(ConfigError, match="no such file"):
        read_asv_conf(tmp_path / "missing.json")


def test_ingest_finds_the_conf_whose_results_dir_is_the_folder(tmp_path: Path, capsys) -> None:
    # This project's layout: asv.conf.json at the top, results in .asv/results.
    ours = tmp_path / "ours"
    results = ours / ".asv" / "results"
    write_results(results, [sha_for(0)])
    shutil.copy(ROOT / "asv.conf.json", ours / "asv.conf.json")
    assert find_asv_conf(results) == (ours / "asv.conf.json", "")
    db = str(tmp_path / "h.sqlite")
    assert main(["ingest", "--db", db, str(results)]) == 0
    assert f"project 'ragged-vit' from {ours / 'asv.conf.json'}" in capsys.readouterr().err
    with Store(db) as store:
        assert store.project() == read_asv_conf(ours / "asv.conf.json")
    assert main(["ingest", "--db", db, str(results)]) == 0
    assert "project" not in capsys.readouterr().err  # unchanged: nothing to say, nothing written
    # A conf beside the folder that keeps its results elsewhere is not this folder's project.
    other = tmp_path / "other"
    write_results(other / "results", [sha_for(1)])
    _conf(other / "asv.conf.json", project="elsewhere", results_dir="bench-results")
    path, why = find_asv_conf(other / "results")
    assert path is None and "keeps its results in" in why and "not this folder's project" in why
    assert main(["ingest", "--db", db, str(other / "results")]) == 0
    assert "not this folder's project (pass --config to use it); the store keeps" in capsys.readouterr().err
    with Store(db) as store:
        assert store.project().name == "ragged-vit"  # the kept one stands
    (tmp_path / "lone" / "results").mkdir(parents=True)
    assert find_asv_conf(tmp_path / "lone" / "results") == (None, "")  # none above: nothing to say
    # --config names it outright.
    assert main(["ingest", "--db", db, "--config", str(other / "asv.conf.json"), str(other / "results")]) == 0
    with Store(db) as store:
        assert store.project().name == "elsewhere"


def test_a_malformed_conf_stops_the_ingest_before_any_result(tmp_path: Path, capsys) -> None:
    root = tmp_path / "proj"
    write_results(root / "results", [sha_for(0)])
    (root / "asv.conf.json").write_text('{"version": 1, "regressions_thresholds": {".*": "5%"}}')
    db = str(tmp_path / "h.sqlite")
    assert main(["ingest", "--db", db, str(root / "results")]) == 2
    assert f"error: {root / 'asv.conf.json'}: regressions_thresholds: '.*' must map" in capsys.readouterr().err
    with Store(db) as store:
        assert store.counts()["runs"] == 0 and store.project() is None
    assert main(["ingest", "--db", db, "--config", str(tmp_path / "nope.json"), str(root / "results")]) == 2
    assert "nope.json: no such file" in capsys.readouterr().err
    (root / "asv.conf.jsonc").write_text("{}")
    with pytest.raises(ConfigError, match="asv refuses to choose"):
        find_asv_conf(root / "results")
