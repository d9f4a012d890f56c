"""Text from files, stores and servers, made fit for a terminal or a log: one printable line.

A file name, a benchmark name or a reason that quotes one can hold a newline (which would forge a
further `error:` line), a carriage return or a terminal escape (which would repaint one). Every
message that carries such text passes it through `printable` (or `quote_path` for a file name).
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from collections.abc import Iterator

_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}

# GitHub's token formats (classic/OAuth/app/refresh: gh?_, fine-grained: github_pat_) and any bearer
# credential: never shown, wherever they turn up.
TOKEN_SHAPES = re.compile(r"\b(?:gh[opusr]_[A-Za-z0-9]{16,}|github_pat_[A-Za-z0-9_]{16,})|(?i:bearer\s+)[^\s'\"]+")
# Names of variables that hold a credential: GITHUB_TOKEN, DB_PASSWORD, AWS_SECRET_ACCESS_KEY, API_KEY, ...
SECRET_NAME = re.compile(
    r"TOKEN|SECRET|PASSW|PASSPHRASE|CREDENTIAL|PRIVATE|AUTH|COOKIE|SESSION|(?:^|_)(?:API_?)?KEY(?:$|_)", re.IGNORECASE)


def redact_variable(name: str, value: str) -> str:
    """An environment variable's value as it may be stored or shown: "***" where its name says it holds
    a credential (`SECRET_NAME`), token-shaped parts of any other value replaced by "***" (asv records a
    job's `env_vars` in its result files, and the dashboard showed them verbatim until 2026-12-06)."""
    if SECRET_NAME.search(name):
        return "***"
    return TOKEN_SHAPES.sub("***", value)


def _escape(ch: str) -> str:
    if ch in _ESCAPES:
        return _ESCAPES[ch]
    if ch.isprintable():
        return ch
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def printable(text: str) -> str:
    """`text` with every character that is not printable (newlines, carriage returns, terminal
    escapes, bidirectional controls) written as a C-style escape: one line that shows what it holds."""
    if text.isprintable():
        return text
    return "".join(_escape(ch) for ch in text)


def quote_path(path: str | os.PathLike[str]) -> str:
    """A file name as messages show it: as it is when every character is printable, else in double
    quotes with C-style escapes (as git's `core.quotePath` does), so a name holding a newline, a
    carriage return or a terminal escape can neither forge a line of output nor repaint one.

    Args:
        path: any path.

    Returns:
        One line of printable text; `quote_path(p) == str(p)` for ordinary names.
    """
    text = os.fspath(path)
    if text.isprintable() and '"' not in text and "\\" not in text and text == text.strip():
        return text
    return '"' + "".join("\\" + ch if ch in '"\\' else _escape(ch) for ch in text) + '"'


@contextlib.contextmanager
def reader_may_leave() -> Iterator[None]:
    """Printing to a pipe whose reader has stopped (`python -m ci compare | head`, `ci continuous | head`)
    ends the printing, not the command: the work is done and the exit code stands. stdout then points at
    /dev/null, so the interpreter's last flush at exit cannot fail either."""
    try:
        yield
        sys.stdout.flush()
    except BrokenPipeError:
        silence_stdout()


def silence_stdout() -> None:
    """Point stdout at /dev/null (after its reader left)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # no real stdout file (tests capture it): nothing left to protect
        pass
