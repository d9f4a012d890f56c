"""Ingest: asv result files into the store.

- `asv_files`: the layout of an asv results directory and its small files (benchmarks.json,
  machine.json, the GPU sidecar);
- `parse`: one result file into a `ci.records.ParsedRun` (strict: a malformed file is an error,
  never a wrong number);
- `results_dir`: a whole results directory into a `ci.store.Store`, file by file, with git's
  commit metadata.
"""

from ci.ingest.asv_files import AsvFormatError
from ci.ingest.results_dir import BATCH_FILES, FileOutcome, IngestReport, ingest_results_dir

__all__ = ["BATCH_FILES", "AsvFormatError", "FileOutcome", "IngestReport", "ingest_results_dir"]
