"""Ingest: asv result files into the store.

- `asv_files`: the layout of an asv results directory and its small files (benchmarks.json,
  machine.json, the GPU sidecar);
- `parse`: one result file into a `ci.records.ParsedRun` (strict: a malformed file is an error,
  never a wrong number);
- `git`: the commits' metadata from a git checkout (parents, time, subject, branch), git's output
  read as data;
- `results_dir`: a whole results directory into a `ci.store.Store`, file by file, with git's
  commit metadata;
- `reading`: its files read and parsed, each inside one boundary, here or in forked parsers;
- `report`: what it tells its caller (`IngestReport`, each file's `FileOutcome`, `IngestProgress`);
- `speed`, `speed_rule`: after an ingest, the jobs of a host the files do not record that ran at
  another speed, kept as their own machine.
"""

from ci.ingest.asv_files import AsvFormatError
from ci.ingest.report import FileOutcome, IngestProgress, IngestReport, throughput
from ci.ingest.results_dir import BATCH_FILES, ingest_results_dir, redefine_benchmarks

__all__ = [
    "BATCH_FILES",
    "AsvFormatError",
    "FileOutcome",
    "IngestProgress",
    "IngestReport",
    "ingest_results_dir",
    "redefine_benchmarks",
    "throughput",
]
