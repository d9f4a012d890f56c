"""What an ingest tells its caller: each file's outcome (`FileOutcome`), the whole call's
(`IngestReport`), and where a running ingest is (`IngestProgress`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ci.text import printable, quote_path


@dataclass(frozen=True)
class FileOutcome:
    """What happened to one result file."""

    path: str
    status: str  # inserted, replaced, unchanged, error
    points: int = 0  # benchmark points in the file (results plus marked failures)
    message: str = ""
    skipped: int = 0  # benchmarks left out: unknown to benchmarks.json, or of another version (as asv does)


@dataclass(frozen=True)
class IngestReport:
    """The outcome of one ingest call, file by file, and how long it took."""

    files: tuple[FileOutcome, ...]
    seconds: float = 0.0  # wall time of the whole call
    # One line per commit whose git record cannot be read, or not all of it (`ci.ingest.git`), then
    # one per machine this ingest added beside one of the same asv name: another environment, or
    # another host (`machine_notes`), so that no series is split or kept apart without a word.
    notes: tuple[str, ...] = ()

    @property
    def points_written(self) -> int:
        """Points of the files inserted or replaced, and those a file read again added."""
        return sum(f.points for f in self.files if f.status in ("inserted", "replaced", "read again"))

    def count(self, status: str) -> int:
        """Files with the given status."""
        return sum(1 for f in self.files if f.status == status)

    @property
    def errors(self) -> tuple[FileOutcome, ...]:
        return tuple(f for f in self.files if f.status == "error")

    @property
    def ok(self) -> bool:
        """True when every file went in (or was already in)."""
        return not self.errors

    def warnings(self) -> list[str]:
        """The files' warnings (benchmarks skipped or left out, a file read again), one line per
        distinct warning: files that say the same (a benchmark asv's suite dropped is skipped in every
        file before it: 331 lines for uxarray's history, 2026-12-07) share one line naming how many
        files and the first of them."""
        groups: dict[str, list[str]] = {}
        for f in self.files:
            if f.status == "error" or not f.message:
                continue
            name = quote_path(f.path)
            text = f.message.removeprefix(name + ": ")
            groups.setdefault(text, []).append(name)
        return [f"warning: {paths[0]}: {text}" if len(paths) == 1
                else f"warning: {len(paths)} result files (the first {paths[0]}): {text}"
                for text, paths in groups.items()]

    @property
    def stored_nothing(self) -> bool:
        """Files were read as new (not unchanged) and not one of their points went in, because every
        benchmark they hold was skipped: a benchmarks.json of another suite, which is not a pass."""
        new = [f for f in self.files if f.status in ("inserted", "replaced", "read again")]
        return bool(new) and self.points_written == 0 and any(f.skipped for f in new)

    def summary(self) -> str:
        """One line for humans."""
        written = self.points_written
        skipped = sum(f.skipped for f in self.files)
        return (
            f"{len(self.files)} result files: {self.count('inserted')} inserted, {self.count('replaced')} replaced, "
            f"{self.count('unchanged')} unchanged"
            + (f", {self.count('read again')} read again" if self.count("read again") else "")
            + f", {len(self.errors)} errors; {written} points written"
            f" in {self.seconds:.1f} s ({throughput(written, self.seconds)})"
            + (f"; {skipped} benchmarks skipped (not in benchmarks.json, of a stale version, or not storable)"
               if skipped else "")
        )


def throughput(points: int, seconds: float) -> str:
    """`points` per second as shown in ingest's messages, e.g. "61,250 points/s"."""
    return f"{points / seconds:,.0f} points/s" if seconds > 0 else "- points/s"


@dataclass(frozen=True)
class IngestProgress:
    """Where a running ingest is, after each batch of files (for progress lines on long runs)."""

    files_done: int
    files_total: int
    points_written: int
    seconds: float


def file_outcome(path: Path, status: str, points: int = 0, message: str = "", skipped: int = 0) -> FileOutcome:
    """A file's outcome; its message is one printable line whatever the file's name or content held."""
    return FileOutcome(str(path), status, points, printable(message), skipped)
