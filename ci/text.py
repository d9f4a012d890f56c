"""Text from files, stores and servers, made fit for a terminal or a log: one printable line.

A file name, a benchmark name or a reason that quotes one can hold a newline (which would forge a
further `error:` line), a carriage return or a terminal escape (which would repaint one). Every
message that carries such text passes it through `printable` (or `quote_path` for a file name).
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import sys
from collections.abc import Iterator

_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}

# Credentials by their shape, never shown wherever they turn up: GitHub's tokens (classic/OAuth/app/
# refresh: gh?_, fine-grained: github_pat_), GitLab's (glpat-, and its other prefixes), Slack's (xox?-),
# AWS access key ids (AKIA/ASIA), PyPI's, npm's, Hugging Face's, OpenAI-style sk-, Google API keys,
# JSON web tokens, a private key block, and a bearer or basic credential.
TOKEN_SHAPES = re.compile(
    r"\b(?:gh[opusr]_[A-Za-z0-9]{16,}|github_pat_[A-Za-z0-9_]{16,}"
    r"|gl(?:pat|dt|rt|cbt|ptt|ft|imt|agent|oas|soat)-[A-Za-z0-9_-]{16,}"
    r"|xox[abposre]-[A-Za-z0-9-]{10,}|(?:AKIA|ASIA)[A-Z0-9]{16}|pypi-[A-Za-z0-9_-]{16,}|npm_[A-Za-z0-9]{30,}"
    r"|hf_[A-Za-z0-9]{30,}|sk-[A-Za-z0-9_-]{20,}|AIza[0-9A-Za-z_-]{35}"
    r"|eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,})"
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)"
    # A bearer credential of 8 or more token characters with a digit among them; a basic one of 16 or
    # more base64 characters with a digit or one of + / = ("Add basic benchmarks", "bearer authentication"
    # and "basic 2D/3D-interpolation" read "***" once every shown text was redacted, 2026-12-07).
    r"|(?i:\bbearer\s+)(?=[A-Za-z._~+/=-]*[0-9])[A-Za-z0-9._~+/=-]{8,}"
    r"|(?i:\bbasic\s+)(?=[A-Za-z]*[0-9+/=])[A-Za-z0-9+/]{12,}={0,2}(?![A-Za-z0-9._~+/=-])", re.DOTALL)
# A password in a URL's userinfo (`https://user:password@host`, as a PIP_INDEX_URL or a DATABASE_URL
# carries one), and a user part alone long enough to be a token (`https://<token>@github.com`).
# The password runs to the '@' after which the host holds no '@' up to its end ('/', '?', '#' or
# whitespace): an unescaped '@' or '/' in a password is still masked whole (`u:p@ss@host`).
_URL_USERINFO = re.compile(r"(?i)(\b[a-z][a-z0-9+.-]*://)([^/\s:@]*):(\S+?)@(?=[^@\s/?#]*(?:[/?#\s]|$))")
_URL_TOKEN_USER = re.compile(r"(?i)(\b[a-z][a-z0-9+.-]*://)([^/\s:@]{16,})@")
# A credential in a query string or a `key=value` list: ?token=..., &password=..., api_key=..., sig=...: a
# value of 6 or more characters, not a number of fewer than 12 digits, that a parenthesis ends too (a
# benchmark's parameters "max_token=512" and "use_auth=True" read "max_token=***" once every shown text
# was redacted, 2026-12-07).
_SECRET_PARAMETER = re.compile(
    r"(?i)(\b[a-z0-9_.-]*?(?:token|secret|passw(?:or)?d|passphrase|pwd|api_?key|access_?key|credentials?"
    r"|signature|sig|auth|authorization)=)(?![0-9]{1,11}(?:[&\s#;,'\"()]|$))[^&\s#;,'\"()]{6,}")
# Names of variables that hold a credential: GITHUB_TOKEN, DB_PASSWORD, AWS_SECRET_ACCESS_KEY, API_KEY, ...
# A webhook's URL and a DSN carry their credential in the URL itself (SLACK_WEBHOOK_URL, SENTRY_DSN).
SECRET_NAME = re.compile(
    r"TOKEN|SECRET|PASSW|PASSPHRASE|CREDENTIAL|PRIVATE|AUTH|COOKIE|SESSION|WEBHOOK|(?:^|_)DSN(?:$|_)"
    r"|(?:^|_)(?:API_?)?KEY(?:$|_)", re.IGNORECASE)


def redact_text(text: str) -> str:
    """`text` with every credential it shows by its shape replaced by "***": tokens (`TOKEN_SHAPES`),
    a URL's password (`user:***@host`) or a token as its user part, and a credential parameter's value
    (`?token=***`). For values a pull request's job writes into its result files (environment
    variables, requirements) before they are stored or shown."""
    text = TOKEN_SHAPES.sub("***", text)
    text = _URL_USERINFO.sub(lambda m: f"{m[1]}{m[2]}:***@", text)
    text = _URL_TOKEN_USER.sub(lambda m: f"{m[1]}***@", text)
    return _SECRET_PARAMETER.sub(lambda m: f"{m[1]}***", text)


# Substrings one of which every credential `redact_text` hides holds (lower case): a cheap test that
# keeps its regular expressions (60 us on a 90-character benchmark key, 2026-12-07) off the text that
# the dashboard and the comment show by the hundred thousand.
_TOKEN_MARKS = ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-", "gldt-", "glrt-", "glcbt-",
                "glptt-", "glft-", "glimt-", "glagent-", "gloas-", "glsoat-", "xox", "akia", "asia", "pypi-", "npm_",
                "hf_", "sk-", "aiza", "eyj", "-----begin", "bearer", "basic")
_PARAMETER_MARKS = ("token", "secret", "passw", "passphrase", "pwd", "key", "credential", "sig", "auth")


def clip(value: object, chars: int) -> str:
    """`value`'s repr in at most `chars` characters for a message, its credentials hidden first (cut
    first, a credential loses the shape that hides it: `f"{value!r:.80}"` showed a URL's password once
    the cut fell before its "@", 2026-12-07)."""
    return redact_text(repr(value))[:chars]


@functools.lru_cache(maxsize=1 << 16)  # a dashboard shows each series key on many pages
def may_show_credential(text: str) -> bool:
    """False only where `text` cannot show a credential that `redact_text` hides (True: it may)."""
    low = text.lower()
    return (any(m in low for m in _TOKEN_MARKS) or ("://" in low and "@" in low)
            or ("=" in low and any(m in low for m in _PARAMETER_MARKS)))


def redact_variable(name: str, value: str) -> str:
    """An environment variable's value as it may be stored or shown: "***" where its name says it holds
    a credential (`SECRET_NAME`), the credentials any other value shows by their shape replaced
    (`redact_text`: asv records a job's `env_vars` in its result files, and the dashboard showed them
    verbatim until 2026-12-06; a password in a URL and other services' tokens until 2026-12-07)."""
    if SECRET_NAME.search(name):
        return "***"
    return redact_text(value)


def shows_credential(text: str) -> bool:
    """Whether `text` shows a credential that `redact_text` would hide (a token's shape, a URL's
    password, a credential parameter)."""
    return redact_text(text) != text


def holds_credential(name: str, value: str) -> bool:
    """Whether an environment variable holds a credential, by its name (`SECRET_NAME`: GITHUB_TOKEN,
    PGPASSWORD, AWS_SECRET_ACCESS_KEY) or by what its value shows (`shows_credential`: a token's shape, a
    URL's password, as a DATABASE_URL carries one)."""
    return bool(SECRET_NAME.search(name)) or shows_credential(value)


def redact_environment(key: str, value: str) -> str:
    """A run's recorded environment entry as it may be stored or shown: an environment variable
    ("env:NAME") by `redact_variable`, anything else (a requirement, the Python, the OS) by
    `redact_text`."""
    return redact_variable(key[4:], value) if key.startswith("env:") else redact_text(value)


def _escape(ch: str) -> str:
    if ch in _ESCAPES:
        return _ESCAPES[ch]
    if ch.isprintable():
        return ch
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def printable(text: str) -> str:
    """`text` as the service shows it (the terminal, the PR comment, the dashboard's pages and data all
    take their text from here): every credential it shows by its shape hidden (`redact_text`: a token,
    a URL's password, in a benchmark's parameter, a commit's subject or a host's description, which a
    pull request or a foreign results folder controls; 2026-12-07), and every character that is not
    printable (newlines, carriage returns, terminal escapes, bidirectional controls) written as a
    C-style escape: one line that shows what it holds."""
    if may_show_credential(text):
        text = redact_text(text)
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
