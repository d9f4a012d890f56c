"""Post the PR comment through the GitHub REST API, sticky: one comment per PR, updated in place.

The earlier comment is the oldest one whose body starts with the hidden marker
(`ci.outputs.comment.MARKER`) and whose author is the authenticated user (GET /user, asked once, when a
marked comment is first seen): a person who pasted the bot's comment into their own must not
have it edited (GitHub would refuse with 403 anyway). Actions' GITHUB_TOKEN gets 403 from /user;
its comments are by `github-actions[bot]` (`RAGGED_BOT_LOGIN` names another app's bot), and
another app's marked comment is never edited. Marked comments of ours after the first (left by an
older run) are deleted, so the PR keeps one. List the issue comments (paginated), PATCH that one,
or POST a new one.

The token comes from the environment (GITHUB_TOKEN; surrounding whitespace such as the newline
`echo` leaves is dropped, any other whitespace or control character is refused before a request
is built) and never appears in logs, exceptions or reprs: everything posting raises goes out
through one boundary that turns it into a `GitHubError` with the token (raw, percent-encoded, or
any GitHub-token-shaped string) replaced by `***`, and text the server sent (its message, a
redirect's Location) is shown without terminal escapes or control characters. The token is sent
to the configured API host only: redirects are never followed (a renamed repository's 301 is
reported, with where it points). GET and PATCH are retried on 5xx, rate limits (Retry-After /
X-RateLimit-Reset, waits up to a minute) and dropped connections; a POST never is (it may have
created the comment). The whole posting has one deadline (`deadline`, 180 s by default, across
every request, retry and wait: a server that trickles a byte at a time is cut off when it passes),
and a response over `MAX_RESPONSE_BYTES` is refused unread past that size. `api_url` points the
client at a local server in tests (or at a GitHub Enterprise host).

REST endpoints (docs.github.com/en/rest/issues/comments, docs.github.com/en/rest/users/users):
  GET   /repos/{owner}/{repo}/issues/{number}/comments?per_page=100
  PATCH /repos/{owner}/{repo}/issues/comments/{comment_id}
  POST  /repos/{owner}/{repo}/issues/{number}/comments
  GET   /user
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import socket
import ssl
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ci.exit_codes import EXIT_ERROR, EXIT_OK
from ci.outputs.comment import GITHUB_MAX_CHARS, MARKER
from ci.text import redact_text

DEFAULT_API_URL = "https://api.github.com"
_LOOPBACK = ("localhost", "127.0.0.1", "::1")  # the only hosts the token may reach over plain http (a test server)
ACTIONS_BOT_LOGIN = "github-actions[bot]"  # the author of Actions' GITHUB_TOKEN comments
_MAX_RATE_WAIT_S = 60.0
_REPO_RE = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
_NEXT_RE = re.compile(r'<([^>]+)>;\s*rel="next"')
_MAX_PAGES = 50  # 5,000 comments: a runaway Link chain stops here
DEFAULT_DEADLINE_S = 180.0  # the whole posting; GitHub answers each request in well under a second
# A job that posts part of the comment (`merge`) reads it back this long after writing it and puts its
# part back where another job's write took it out: two posting jobs of one pull request (the GPU job's
# timings, the exact workflow's Structure section) each read, merge and write in two requests, so a write
# of the other job's that missed this one's part lands within about a second of this one's.
SETTLE_S = 10.0
SETTLE_ROUNDS = 3
# A page of 100 comments of at most 65,536 characters each (up to 4 bytes each in UTF-8) is 26 MB
# at the very most; anything larger is not a comments page.
MAX_RESPONSE_BYTES = 32 * 2**20
_MAX_ERROR_BYTES = 64 * 2**10  # an error response's body: its message is all that is read
_MAX_SERVER_TEXT = 500  # characters of server text (a message, a Location) shown in an error
# Terminal control sequences (CSI `ESC [ ... final`, OSC `ESC ] ... BEL|ESC \\`, other `ESC x`, C1 CSI).
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\\\)?|\x1b[@-_]|\x9b[0-?]*[ -/]*[@-~]")


class GitHubError(RuntimeError):
    """A GitHub API call failed; the message says what to fix. Never contains the token."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


# A run of this many of the token's characters in a server's text is taken for a piece of it.
_PIECE = 8


class _Secret:
    """Holds the token so that a repr, a traceback with locals or a log line shows '***'."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def redact(self, text: str) -> str:
        """`text` with the token, its percent-encoded forms, its reverse, any run of `_PIECE` or more of
        its characters, and anything token-shaped replaced by '***' (a hostile server echoed a reversed
        token and its 16-character tail, which the whole token's match missed, 2026-12-07)."""
        value = self._value
        if value:
            for form in {value, urllib.parse.quote(value, safe=""), urllib.parse.quote_plus(value)}:
                text = text.replace(form, "***")
            for form in (value, value[::-1]):
                if len(form) >= _PIECE:
                    text = _cover(text, {form[i:i + _PIECE] for i in range(len(form) - _PIECE + 1)})
        return redact_text(text)  # any credential's shape, even one that is not the token sent

    def __repr__(self) -> str:
        return "_Secret('***')"

    __str__ = __repr__


def _cover(text: str, pieces: set[str]) -> str:
    """`text` with every stretch that overlapping occurrences of `pieces` (all of one length) cover
    replaced by '***'."""
    size = len(next(iter(pieces)))
    spans: list[list[int]] = []
    for m in re.finditer(f"(?=(?:{'|'.join(map(re.escape, pieces))}))", text):
        if spans and m.start() <= spans[-1][1]:
            spans[-1][1] = m.start() + size
        else:
            spans.append([m.start(), m.start() + size])
    out, pos = [], 0
    for a, b in spans:
        out += [text[pos:a], "***"]
        pos = b
    return "".join(out) + text[pos:]


def _token(raw: str) -> _Secret:
    """The token as sent: surrounding whitespace dropped (a secret saved from `echo` ends in a
    newline); GitHubError, naming no character of it, when it is empty or holds anything but
    visible ASCII (whitespace or a control character inside would be refused as a header, in an
    exception that quotes the header, token and all)."""
    value = raw.strip()
    if not value:
        raise GitHubError("no GitHub token: set GITHUB_TOKEN (or pass token=...), or use a dry run")
    bad = next((i for i, ch in enumerate(value) if not "!" <= ch <= "~"), None)
    if bad is not None:
        raise GitHubError(f"GITHUB_TOKEN is malformed: character {bad + 1} of {len(value)} is whitespace, a control "
                          "character or not ASCII (a token is printable ASCII only); set it again")
    return _Secret(value)


def _server_text(text: str, secret: _Secret | None = None, limit: int = _MAX_SERVER_TEXT) -> str:
    """Text a server sent, fit to print: terminal escape sequences removed, other control
    characters as spaces, one line of at most `limit` characters, the token redacted."""
    text = _ANSI.sub("", text)
    text = "".join(ch if ch.isprintable() else " " for ch in text)
    text = " ".join(text.split())
    if secret is not None:
        text = secret.redact(text)
    text = redact_text(text)  # before the cut: a cut credential no longer has the shape that hides it
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _rate_limit_wait(status: int, headers: Any, detail: str) -> float | None:
    """Seconds to wait before retrying a rate-limited request (429, or a 403 that says so), else None."""
    if headers is None or status not in (403, 429):
        return None
    limited = status == 429 or headers.get("X-RateLimit-Remaining") == "0" or "rate limit" in detail.lower()
    if not limited:
        return None
    try:
        if headers.get("Retry-After"):
            return max(0.0, float(headers["Retry-After"]))
        if headers.get("X-RateLimit-Reset"):
            return max(0.0, float(headers["X-RateLimit-Reset"]) - time.time())
    except ValueError:
        pass
    return 60.0  # GitHub's advice for a secondary limit without a header


def _status_message(status: int, method: str, what: str, detail: str, headers: Any, retried: bool,
                    secret: _Secret | None = None) -> str:
    wait = _rate_limit_wait(status, headers, detail)
    if wait is not None:
        reset = headers.get("X-RateLimit-Reset") if headers is not None else None
        when = (time.strftime(" (resets at %H:%M:%S UTC)", time.gmtime(float(reset)))
                if reset and reset.isdigit() and len(reset) <= 11 else f" (retry in {min(wait, 1e9):.0f} s)")
        hint = f"rate limited by GitHub{when}; try again later"
    elif status == 401:
        hint = "authentication failed: GITHUB_TOKEN is missing, expired or malformed"
    elif status == 403:
        hint = ("forbidden: the token lacks write access to issues/pull requests (workflow needs "
                "`permissions: pull-requests: write`), or a fork PR's token is read-only")
    elif status == 404:
        hint = "not found: the repository or pull request does not exist, or the token cannot see it"
    elif status == 422:
        hint = f"GitHub rejected the request as invalid (body over {GITHUB_MAX_CHARS} characters, or empty?)"
    elif status in (301, 302, 303, 307, 308):
        where = _server_text(headers.get("Location", "?") if headers is not None else "?", secret)
        hint = (f"the API redirected to {where} (repository renamed or transferred? use its new owner/name); "
                "redirects are not followed, so the token never goes elsewhere")
    elif status >= 500:
        hint = ("GitHub server error; retried without success, try again later" if retried
                else "GitHub server error (a POST is not retried: it may have posted); check the PR, try again later")
    else:
        hint = "unexpected HTTP status"
    text = f"GitHub API {method} {what} failed with HTTP {status}: {hint}"
    return f"{text}. GitHub said: {detail}" if detail else text


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Never follow a redirect: urllib would resend the Authorization header to wherever it points
    (and turn a POST into a bodyless GET). The 3xx reaches the caller as an HTTPError."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


class _Deadline:
    """One deadline for a whole posting. Each request's socket timeout is at most the time left,
    and a watchdog shuts the request's socket down when the deadline passes, so a server that
    answers a byte at a time (each read well within the socket timeout) is cut off too."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.end = time.monotonic() + seconds
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self.passed = False

    def remaining(self) -> float:
        return self.end - time.monotonic()

    def watch(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)
            passed = self.passed
        if passed:
            self._cut()

    def _cut(self) -> None:
        with self._lock:
            self.passed = True
            sockets, self._sockets = self._sockets, []
        for sock in sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)  # a blocked recv returns at once; the owner closes it
            except OSError:
                pass

    def start(self) -> threading.Timer:
        timer = threading.Timer(max(0.0, self.remaining()), self._cut)
        timer.daemon = True
        timer.start()
        return timer

    def done(self, timer: threading.Timer) -> None:
        timer.cancel()
        with self._lock:
            self._sockets.clear()


def _opener(deadline: _Deadline) -> urllib.request.OpenerDirector:
    """urllib with redirects refused and every connection's socket handed to the deadline's watchdog."""

    class Connection(http.client.HTTPConnection):
        def connect(self) -> None:
            super().connect()
            deadline.watch(self.sock)

    class SecureConnection(http.client.HTTPSConnection):
        def connect(self) -> None:
            super().connect()
            deadline.watch(self.sock)

    context = ssl.create_default_context()

    class Handler(urllib.request.HTTPHandler):
        def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
            return self.do_open(Connection, req)

    class SecureHandler(urllib.request.HTTPSHandler):
        def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
            return self.do_open(SecureConnection, req, context=context)

    return urllib.request.build_opener(_NoRedirect, Handler, SecureHandler(context=context))


class _TooLarge(Exception):
    """A response past its size cap."""


def _read_capped(resp: Any, limit: int, deadline: _Deadline) -> bytes:
    """A response body of at most `limit` bytes, read as it arrives (so the deadline is checked
    between reads); _TooLarge past the limit, refused unread when Content-Length says so."""
    length = resp.headers.get("Content-Length") if resp.headers is not None else None
    if length and length.strip().isdigit() and int(length) > limit:
        raise _TooLarge(f"{int(length):,} bytes")
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = resp.read1(65536)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > limit:
            raise _TooLarge(f"more than {limit:,} bytes")
        chunks.append(chunk)
        if deadline.passed:
            raise TimeoutError("deadline passed")


def check_api_url(api_url: str) -> urllib.parse.SplitResult:
    """`api_url` parsed, or ValueError where a token may not be sent to it: not http(s), or plain
    http to another machine (the token travels in a header: anyone on the path would read it)."""
    parsed = urllib.parse.urlsplit(api_url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise ValueError(f"api_url must be an http(s) URL, got {redact_text(api_url)!r}")
    if parsed.scheme == "http" and (parsed.hostname or "") not in _LOOPBACK:
        raise ValueError(f"api_url must be https (the token would travel in clear), got "
                         f"{redact_text(api_url)!r}; plain http only to this machine (localhost, 127.0.0.1, ::1)")
    return parsed


class _Client:
    def __init__(self, api_url: str, token: _Secret, timeout: float, retries: int, deadline: float,
                 max_bytes: int | None = None) -> None:
        parsed = check_api_url(api_url)
        self.base = api_url.rstrip("/")
        self.shown = redact_text(self.base)  # a password in the URL (an Enterprise proxy's) is never printed
        self.origin = (parsed.scheme, parsed.netloc)
        self.token = token
        self.timeout = timeout
        self.retries = retries
        self.deadline = _Deadline(deadline)
        self.max_bytes = MAX_RESPONSE_BYTES if max_bytes is None else max_bytes
        self.opener = _opener(self.deadline)

    def _fail(self, message: str, status: int | None = None) -> GitHubError:
        return GitHubError(self.token.redact(message), status)

    def _late(self, method: str, what: str) -> GitHubError:
        return self._fail(f"GitHub API {method} {what}: no complete answer within the posting's deadline of "
                          f"{self.deadline.seconds:g} s (a server answering too slowly?); gave up"
                          + ("; a POST may have posted: check the PR" if method == "POST" else ""))

    def _wait(self, seconds: float, method: str, what: str) -> None:
        """Sleep before a retry, unless that would pass the deadline (then the retry is given up)."""
        if seconds >= self.deadline.remaining():
            raise self._fail(f"GitHub API {method} {what}: a retry in {seconds:.3g} s would pass the posting's "
                             f"deadline of {self.deadline.seconds:g} s; gave up (try again later)")
        time.sleep(seconds)

    def request(self, method: str, url: str, payload: dict | None = None) -> tuple[Any, Any]:
        """(decoded JSON, response headers); raises GitHubError with a clear, token-free message."""
        parsed = urllib.parse.urlsplit(url)
        what = _server_text(parsed.path, self.token, 200)
        if (parsed.scheme, parsed.netloc) != self.origin:
            # Never send the token to a host other than the configured API (e.g. a forged Link header).
            host = _server_text(f"{parsed.scheme}://{parsed.netloc}", self.token, 200)
            raise self._fail(f"refusing to follow {method} to {host}: not the API host")
        data = json.dumps(payload).encode() if payload is not None else None
        # Only idempotent requests are retried: a POST that failed with a 5xx or a dropped connection
        # may still have created the comment, and a retry would post it twice.
        retries = self.retries if method in ("GET", "PATCH", "DELETE") else 0
        for attempt in range(retries + 1):
            left = self.deadline.remaining()
            if left <= 0:
                raise self._late(method, what)
            req = urllib.request.Request(url, data=data, method=method)
            req.add_header("Accept", "application/vnd.github+json")
            req.add_header("X-GitHub-Api-Version", "2022-11-28")
            req.add_header("User-Agent", "ragged-vit-bench")
            req.add_header("Authorization", f"Bearer {self.token.reveal()}")
            if data is not None:
                req.add_header("Content-Type", "application/json")
            watchdog = self.deadline.start()
            try:
                with self.opener.open(req, timeout=min(self.timeout, left)) as resp:
                    raw = _read_capped(resp, self.max_bytes, self.deadline)
                # A socket shut down by the watchdog can end the headers or the body early and look
                # like a complete (short) answer: past the deadline, nothing read counts.
                if self.deadline.passed:
                    raise self._late(method, what)
                return (json.loads(raw) if raw else None), resp.headers
            except urllib.error.HTTPError as exc:
                if self.deadline.passed:
                    raise self._late(method, what) from None
                status, headers = exc.code, exc.headers
                try:
                    body = exc.read(_MAX_ERROR_BYTES)
                    detail = str(json.loads(body or b"{}").get("message", ""))
                except (ValueError, AttributeError, OSError, RecursionError, http.client.HTTPException):
                    detail = ""
                exc.close()
                detail = _server_text(detail, self.token)
                wait = _rate_limit_wait(status, headers, detail)
                if attempt < retries and (status >= 500 or (wait is not None and wait <= _MAX_RATE_WAIT_S)):
                    self._wait(wait if wait is not None else 0.5 * 2**attempt, method, what)
                    continue
                raise self._fail(_status_message(status, method, what, detail, headers, retries > 0, self.token),
                                 status) from None
            except _TooLarge as exc:
                raise self._fail(f"GitHub API {method} {what}: the response is {exc}, over the "
                                 f"{self.max_bytes:,}-byte limit; refused") from None
            except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
                # Unreachable host, a dropped connection, a timed-out read, a truncated body, the deadline.
                if self.deadline.passed or self.deadline.remaining() <= 0:
                    raise self._late(method, what) from None
                if attempt < retries:
                    self._wait(0.5 * 2**attempt, method, what)
                    continue
                if isinstance(exc, urllib.error.URLError):
                    problem = f"cannot reach {self.shown}: {_server_text(str(exc.reason), self.token)}"
                else:
                    said = _server_text(str(exc), self.token) or type(exc).__name__
                    problem = f"no complete answer from {self.shown} ({said})"
                after = ("retried without success" if retries else
                         "not retried (a POST may have posted: check the PR)" if method == "POST" else "not retried")
                raise self._fail(f"GitHub API {method} {what}: {problem}; {after}") from None
            except (ValueError, RecursionError):  # json.loads: not JSON, or nested beyond the stack
                raise self._fail(f"GitHub API {method} {what}: response is not JSON") from None
            finally:
                self.deadline.done(watchdog)
        raise AssertionError("unreachable")  # the loop always returns or raises


def _authenticated_login(client: _Client) -> str | None:
    """The token's login from GET /user; None when the token may not ask (a GitHub App
    installation token gets 403, "Resource not accessible by integration") or the answer has none."""
    try:
        user, _ = client.request("GET", f"{client.base}/user")
    except GitHubError as exc:
        if exc.status in (403, 404):
            return None
        raise
    login = user.get("login") if isinstance(user, dict) else None
    return login if isinstance(login, str) and login else None


def _find_sticky_comments(client: _Client, repo: str, pr_number: int, marker: str) -> list[dict]:
    """Every comment on the PR whose body starts with `marker` and that the token's user wrote
    (by login; when GET /user is refused, an Actions token's: `github-actions[bot]`, or
    `$RAGGED_BOT_LOGIN`), oldest first."""
    url: str | None = f"{client.base}/repos/{repo}/issues/{pr_number}/comments?per_page=100"
    unknown = object()
    login: Any = unknown  # asked once, and only when a marked comment is found
    found: list[dict] = []
    for _ in range(_MAX_PAGES):
        if url is None:
            return found
        page, headers = client.request("GET", url)
        if not isinstance(page, list):
            raise GitHubError(f"GitHub API GET /repos/{repo}/issues/{pr_number}/comments: expected a list")
        for comment in page:
            if not (isinstance(comment, dict) and str(comment.get("body") or "").lstrip().startswith(marker)):
                continue
            if login is unknown:
                login = _authenticated_login(client) or os.environ.get("RAGGED_BOT_LOGIN") or ACTIONS_BOT_LOGIN
            user = comment.get("user")
            if not isinstance(user, dict):
                user = {}
            if user.get("login") == login and "id" in comment:
                cid = comment["id"]
                # A comment id is a positive integer: `true` read as int 1, and the sticky comment would
                # have edited comment #1 of another thread (a hostile server, 2026-12-07).
                if isinstance(cid, bool) or not isinstance(cid, int) or cid <= 0:
                    raise GitHubError(f"GitHub API GET /repos/{repo}/issues/{pr_number}/comments: a comment id "
                                      f"is not a positive integer: {_server_text(repr(cid)[:40], None)}")
                found.append(comment)
        match = _NEXT_RE.search(headers.get("Link", "") if headers is not None else "")
        url = match.group(1) if match else None
    raise GitHubError(f"more than {_MAX_PAGES} pages of comments on {repo}#{pr_number}")


def write_dry_run(body: str, path: str | Path) -> str:
    """Write the comment body to a file instead of posting it.

    Args:
        body: the markdown.
        path: where to write it (parent folders are created).

    Returns:
        The file's `file://` URL (what `post_sticky_comment` returns in dry-run mode).
    """
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(body, encoding="utf-8")
    return out.resolve().as_uri()


def post_sticky_comment(
    repo: str,
    pr_number: int,
    body: str,
    *,
    token: str | None = None,
    api_url: str = DEFAULT_API_URL,
    marker: str = MARKER,
    dry_run: str | Path | None = None,
    timeout: float = 30.0,
    retries: int = 2,
    deadline: float = DEFAULT_DEADLINE_S,
    merge: Callable[[str], str] | None = None,
    head_sha: str | None = None,
    settle: float | None = None,
) -> str:
    """Create or update the bot's one comment on a pull request.

    Args:
        repo: "owner/name".
        pr_number: the pull request (issue) number, > 0.
        body: the markdown (from `ci.outputs.comment.render_comment`); the marker is prepended if missing.
        token: a GitHub token; None reads GITHUB_TOKEN from the environment.
        api_url: the REST API root (a local server in tests, or GitHub Enterprise's /api/v3).
        marker: the hidden HTML comment that identifies the sticky comment.
        dry_run: a file path: write the body there and touch no network (no token needed).
        timeout: seconds per HTTP read (at most what is left of `deadline`).
        retries: extra attempts on 5xx or connection errors (with backoff).
        deadline: seconds for the whole posting: every request, retry and rate-limit wait.
        merge: what to post given the sticky comment's current body ("" where there is none; with
            `dry_run`, the file's current text): a job that measured part of the suite keeps the rest
            (`ci.outputs.structure.merge_section`). None: post `body` as it is.
        head_sha: post only if the pull request's head is this commit (a number that came from an
            untrusted artifact must name the pull request the trusted event says was measured).
        settle: with `merge`, seconds after each write to read the comment back (None: `SETTLE_S`): where
            another job's write of the same commit's comment took this job's part out (both read the
            comment before either wrote it), `merge` is applied again, up to `SETTLE_ROUNDS` times; a
            comment of another commit (a newer push's job wrote it) is left as it is. 0: no read-back.

    Returns:
        The comment's html_url (or the dry-run file's file:// URL).

    Raises:
        TypeError / ValueError: bad repo, PR number, body, URL or deadline.
        GitHubError: no token or a malformed one, the API refused (401/403/404/422/5xx, with a message
            saying why), the deadline passed, or anything else went wrong while posting; its message
            never holds the token.
    """
    if not isinstance(repo, str) or not _REPO_RE.match(repo):
        raise ValueError(f"repo must be 'owner/name', got {repo!r}")
    if isinstance(pr_number, bool) or not isinstance(pr_number, int):
        raise TypeError(f"pr_number must be an int, got {type(pr_number).__name__}")
    if pr_number <= 0:
        raise ValueError(f"pr_number must be positive, got {pr_number}")
    if not isinstance(body, str) or not body.strip():
        raise ValueError("body must be a non-empty string")
    if not marker.startswith("<!--") or not marker.endswith("-->"):
        raise ValueError(f"marker must be a hidden HTML comment '<!-- ... -->', got {marker!r}")
    if not body.lstrip().startswith(marker):
        body = f"{marker}\n{body}"
    if len(body) > GITHUB_MAX_CHARS:
        raise ValueError(f"body is {len(body)} characters; GitHub accepts at most {GITHUB_MAX_CHARS}")
    if not (isinstance(deadline, int | float) and deadline > 0):
        raise ValueError(f"deadline must be a positive number of seconds, got {deadline!r}")
    if settle is not None and not (isinstance(settle, int | float) and not isinstance(settle, bool) and settle >= 0):
        raise ValueError(f"settle must be a number of seconds >= 0, got {settle!r}")
    if head_sha is not None and not re.fullmatch(r"[0-9a-f]{40}", head_sha):
        raise ValueError(f"head_sha must be a full commit sha, got {head_sha!r}")
    if dry_run is not None:
        if merge is not None:
            path = Path(dry_run)
            body = merge(path.read_text(encoding="utf-8") if path.is_file() else "")
        return write_dry_run(body, dry_run)

    secret = _token(token if token is not None else os.environ.get("GITHUB_TOKEN", ""))
    client = _Client(api_url, secret, timeout, retries, deadline)
    # The redaction boundary: whatever goes wrong from here on (an HTTP error, a library's exception
    # quoting a header, a malformed answer) leaves as one GitHubError with the token replaced by ***.
    try:
        if head_sha is not None:
            _check_head(client, repo, pr_number, head_sha)
        url, written = _post(client, repo, pr_number, body, marker, merge)
        if merge is not None:
            url = _settle(client, repo, pr_number, marker, merge, written, url,
                          SETTLE_S if settle is None else settle, head_sha)
        return url
    except GitHubError as exc:
        raise GitHubError(secret.redact(str(exc)), exc.status) from None
    except Exception as exc:  # noqa: BLE001 - see above
        raise GitHubError(secret.redact(f"posting the comment failed: {type(exc).__name__}: {exc}")) from None


def _check_head(client: _Client, repo: str, pr_number: int, head_sha: str) -> None:
    """GitHubError unless pull request `pr_number`'s head commit is `head_sha`."""
    pull, _ = client.request("GET", f"{client.base}/repos/{repo}/pulls/{pr_number}")
    head = pull.get("head") if isinstance(pull, dict) else None
    got = head.get("sha") if isinstance(head, dict) else None
    if got != head_sha:
        shown = got[:12] if isinstance(got, str) else "unknown"
        raise GitHubError(f"{repo}#{pr_number}'s head is {shown}, not the measured {head_sha[:12]}: not posting")


def _post(client: _Client, repo: str, pr_number: int, body: str, marker: str,
          merge: Callable[[str], str] | None = None) -> tuple[str, str]:
    """(the comment's html_url, the body written): the sticky comment created or updated, duplicates gone."""
    ours = _find_sticky_comments(client, repo, pr_number, marker)
    if merge is not None:
        body = merge(str(ours[0].get("body") or "") if ours else "")
        if len(body) > GITHUB_MAX_CHARS:
            raise GitHubError(f"the merged comment is {len(body)} characters; GitHub takes {GITHUB_MAX_CHARS}")
    if ours:
        result, _ = client.request("PATCH", f"{client.base}/repos/{repo}/issues/comments/{int(ours[0]['id'])}",
                                   {"body": body})
    else:
        result, _ = client.request("POST", f"{client.base}/repos/{repo}/issues/{pr_number}/comments", {"body": body})
    if not isinstance(result, dict) or not result.get("html_url"):
        raise GitHubError("GitHub API accepted the comment but returned no html_url")
    for stale in ours[1:]:  # an older run's duplicate: the PR keeps one sticky comment
        try:
            client.request("DELETE", f"{client.base}/repos/{repo}/issues/comments/{int(stale['id'])}")
        except GitHubError as exc:
            print(f"warning: could not delete a duplicate sticky comment: {exc}", file=sys.stderr)
    return _server_text(str(result["html_url"]), client.token), body


def _settle(client: _Client, repo: str, pr_number: int, marker: str, merge: Callable[[str], str], written: str,
            url: str, settle: float, head_sha: str | None) -> str:
    """Read the sticky comment back `settle` seconds after this job wrote `written`, and write `merge` of it
    again where another job's write took this job's part out (see `post_sticky_comment`)."""
    from ci.outputs.structure import comment_head

    if settle <= 0:
        return url
    for _ in range(SETTLE_ROUNDS):
        if settle >= client.deadline.remaining():
            print(f"warning: not reading the comment back: {settle:g} s would pass the posting's deadline",
                  file=sys.stderr)
            return url
        time.sleep(settle)
        ours = _find_sticky_comments(client, repo, pr_number, marker)
        now = str(ours[0].get("body") or "") if ours else ""
        if not ours or (len(ours) == 1 and (now == written or merge(now) == now)):
            return url  # this job's part is there (or someone deleted the comment: not put back)
        if comment_head(now) != comment_head(written):
            return url  # another commit's comment: a newer push's job wrote it, and it stands
        if head_sha is not None:
            _check_head(client, repo, pr_number, head_sha)
        print("note: another job wrote the comment after this one without its part: merging it in again",
              file=sys.stderr)
        url, written = _post(client, repo, pr_number, written, marker, merge)
    print(f"warning: the comment still changed {SETTLE_ROUNDS} times after this job wrote it; "
          "its part may be missing until the job runs again", file=sys.stderr)
    return url


def main(argv: list[str] | None = None) -> int:
    """`python -m ci.outputs.github --repo O/R --pr N --body-file F [--api-url URL] [--dry-run OUT]`.

    Returns:
        0 on success, 2 on any error (message on stderr, never the token).
    """
    parser = argparse.ArgumentParser(prog="python -m ci.outputs.github",
                                     description="Post or update the sticky PR comment.")
    parser.add_argument("--repo", required=True, help="owner/name")
    parser.add_argument("--pr", type=int, required=True, help="pull request number")
    parser.add_argument("--body-file", required=True, type=Path, help="markdown file (from the comment command)")
    parser.add_argument("--api-url", default=os.environ.get("GITHUB_API_URL", DEFAULT_API_URL))
    parser.add_argument("--dry-run", type=Path, default=None, help="write the body here instead of posting")
    args = parser.parse_args(argv)
    try:
        body = args.body_file.read_text(encoding="utf-8")
        url = post_sticky_comment(args.repo, args.pr, body, api_url=args.api_url, dry_run=args.dry_run)
    except (OSError, ValueError, TypeError, GitHubError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    print(url)
    return EXIT_OK


if __name__ == "__main__":
    raise SystemExit(main())
