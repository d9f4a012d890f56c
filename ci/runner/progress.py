"""What a runner job prints while it runs: a progress bar on a terminal, `[runner]` lines in CI logs."""

from __future__ import annotations

from typing import Any

from ci.text import silence_stdout


class JobProgress:
    """A rich progress bar on a terminal, plain `[runner]` lines otherwise (CI logs)."""

    def __init__(self, total: int, label: str) -> None:
        self._bar: Any = None
        self.total = total
        self.done = 0
        try:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            console = Console(stderr=True)
            if console.is_terminal:
                self._bar = Progress(
                    TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=console,
                )  # fmt: skip
        except ImportError:  # rich is optional on the GPU host
            self._bar = None
        self._task = None
        self._label = label

    def __enter__(self) -> JobProgress:
        if self._bar is not None:
            self._bar.start()
            self._task = self._bar.add_task(self._label, total=self.total)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()

    def line(self, text: str) -> None:
        """Print one line above the bar (asv's own output, or a runner message)."""
        if self._bar is not None:
            self._bar.console.print(text, markup=False, highlight=False, soft_wrap=True)
        else:
            print(text, flush=True)

    def step(self, description: str) -> None:
        """Mark one unit done."""
        self.done += 1
        if self._bar is not None:
            self._bar.update(self._task, advance=1, description=description)
        self.line(f"[runner] {self.done}/{self.total} {description}")


def say(text: str) -> None:
    """A runner message on stdout, flushed (CI logs interleave it with asv's lines). A reader that
    has left (`... | head`) ends the messages, not the run: stdout goes to /dev/null from then on."""
    try:
        print(f"[runner] {text}", flush=True)
    except BrokenPipeError:
        silence_stdout()
