"""The benches read real asv results directories: the same `asv_dir` factory as the service's tests."""

from tests.ci.conftest import asv_dir  # noqa: F401  (a fixture, found by name)
