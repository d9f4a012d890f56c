"""Sticky PR comment posting against a local GitHub REST stand-in (http.server on 127.0.0.1)."""

from __future__ import annotations

import json
import re
import threading
import traceback
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest

from ci.outputs.comment import MARKER
from ci.outputs.github import GitHubError, main, post_sticky_comment, write_dry_run

TOKEN = "ghp_TESTTOKEN_do_not_leak_123"
REPO = "acme/ragged-vit"
BOT = "perf-bot[bot]"  # the login TOKEN authenticates as


class FakeGitHub:
    """In-memory issue comments served like api.github.com (pagination via Link headers)."""

    def __init__(self) -> None:
        self.comments: dict[int, list[dict]] = {}
        self.requests: list[tuple[str, str, dict, str]] = []  # method, path, headers, body
        self.fail: dict[str, tuple[int, dict]] = {}  # method -> (status, json body), consumed once per request
        self.fail_times: dict[str, int] = {}
        self.page_size = 100
        self.next_id = 1000
        self.base = ""
        self.link_override: str | None = None
        # GET /user: 200 with this login, or this status (403 is what a GitHub App installation
        # token, e.g. Actions' GITHUB_TOKEN, gets: "Resource not accessible by integration").
        self.user_status = 200
        self.heads: dict[int, str] = {}  # pull request number -> its head commit (GET /repos/{o}/{r}/pulls/{n})
        # Called with (method, path) before a request is served (a test's other job acting in between).
        self.before: Callable[[str, str], None] | None = None

    def add(self, pr: int, body: str, login: str = "alice", user_type: str = "User") -> dict:
        """A comment by `login` (a human by default; the bot's own comments pass login=BOT)."""
        self.next_id += 1
        c = {"id": self.next_id, "body": body, "user": {"login": login, "type": user_type},
             "html_url": f"https://github.com/{REPO}/pull/{pr}#issuecomment-{self.next_id}"}
        self.comments.setdefault(pr, []).append(c)
        return c


def _handler(gh: FakeGitHub):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:  # keep pytest output clean
            pass

        def _send(self, status: int, payload, headers: dict | None = None) -> None:
            raw = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(raw)

        def _handle(self, method: str) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length).decode() if length else ""
            gh.requests.append((method, self.path, {k.lower(): v for k, v in self.headers.items()}, body))
            if gh.before is not None:
                gh.before(method, self.path)
            if gh.fail_times.get(method, 0) > 0:
                gh.fail_times[method] -= 1
                status, payload = gh.fail[method]
                extra = dict(payload.get("_headers", {}))
                if payload.get("ratelimited"):
                    extra["X-RateLimit-Remaining"] = "0"
                return self._send(status, {k: v for k, v in payload.items() if k != "_headers"}, extra)
            if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                return self._send(401, {"message": "Bad credentials"})
            url = urlsplit(self.path)
            parts = url.path.strip("/").split("/")
            if method == "GET" and parts == ["user"]:
                if gh.user_status != 200:
                    return self._send(gh.user_status, {"message": "Resource not accessible by integration"})
                return self._send(200, {"login": BOT, "type": "Bot", "id": 41898282})
            if method == "GET" and parts[:3] == ["repos", *REPO.split("/")] and parts[3:4] == ["pulls"]:
                head = gh.heads.get(int(parts[4]))
                if head is None:
                    return self._send(404, {"message": "Not Found"})
                return self._send(200, {"number": int(parts[4]), "head": {"sha": head}})
            # /repos/{o}/{r}/issues/{n}/comments  or  /repos/{o}/{r}/issues/comments/{id}
            if parts[:3] != ["repos", *REPO.split("/")] or parts[3] != "issues":
                return self._send(404, {"message": "Not Found"})
            if method == "GET" and parts[5:] == ["comments"]:
                pr = int(parts[4])
                page = int(parse_qs(url.query).get("page", ["1"])[0])
                items = gh.comments.get(pr, [])
                chunk = items[(page - 1) * gh.page_size: page * gh.page_size]
                headers = {}
                if page * gh.page_size < len(items):
                    headers["Link"] = gh.link_override or (
                        f'<{gh.base}/repos/{REPO}/issues/{pr}/comments?per_page=100&page={page + 1}>; rel="next"')
                return self._send(200, chunk, headers)
            if method == "POST" and parts[5:] == ["comments"]:
                c = gh.add(int(parts[4]), json.loads(body)["body"], BOT, "Bot")
                return self._send(201, c)
            if method == "PATCH" and parts[4] == "comments":
                for items in gh.comments.values():
                    for c in items:
                        if c["id"] == int(parts[5]):
                            if c["user"]["login"] != BOT:  # as GitHub: only the author may edit it
                                return self._send(403, {"message": "Resource not accessible by integration"})
                            c["body"] = json.loads(body)["body"]
                            return self._send(200, c)
            if method == "DELETE" and parts[4] == "comments":
                for items in gh.comments.values():
                    for c in list(items):
                        if c["id"] == int(parts[5]) and c["user"]["login"] == BOT:
                            items.remove(c)
                            self.send_response(204)
                            self.end_headers()
                            return None
            return self._send(404, {"message": "Not Found"})

        def do_GET(self) -> None:
            self._handle("GET")

        def do_POST(self) -> None:
            self._handle("POST")

        def do_PATCH(self) -> None:
            self._handle("PATCH")

        def do_DELETE(self) -> None:
            self._handle("DELETE")

    return Handler


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    gh = FakeGitHub()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(gh))
    gh.base = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield gh
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.fixture(autouse=True)
def _quick_read_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """A merging post reads the comment back `SETTLE_S` (10 s) after writing it; here 10 ms."""
    monkeypatch.setattr("ci.outputs.github.SETTLE_S", 0.01)


def _post(gh: FakeGitHub, body: str, pr: int = 7, **kw) -> str:
    kw.setdefault("token", TOKEN)
    return post_sticky_comment(REPO, pr, body, api_url=gh.base, retries=kw.pop("retries", 0), **kw)


def test_creates_then_updates_the_same_comment(github: FakeGitHub) -> None:
    github.add(7, "LGTM")
    url1 = _post(github, f"{MARKER}\nfirst")
    url2 = _post(github, f"{MARKER}\nsecond")
    assert url1 == url2
    bodies = [c["body"] for c in github.comments[7]]
    assert bodies == ["LGTM", f"{MARKER}\nsecond"]
    paths = [(m, urlsplit(p).path) for m, p, *_ in github.requests]
    comments = f"/repos/{REPO}/issues/7/comments"
    # GET /user only once a marked comment is found: whose it is decides whether it is ours.
    assert paths == [("GET", comments), ("POST", comments), ("GET", comments), ("GET", "/user"),
                     ("PATCH", f"/repos/{REPO}/issues/comments/{github.comments[7][1]['id']}")]
    _, _, headers, _ = github.requests[0]
    assert headers["accept"] == "application/vnd.github+json"
    assert headers["x-github-api-version"] == "2022-11-28"


def test_finds_marker_on_a_later_page(github: FakeGitHub) -> None:
    github.page_size = 2
    for i in range(5):
        github.add(9, f"chatter {i}")
    sticky = github.add(9, f"{MARKER}\nold", BOT, "Bot")
    url = _post(github, f"{MARKER}\nnew", pr=9)
    assert url == sticky["html_url"]
    assert sticky["body"] == f"{MARKER}\nnew"
    assert sum(m == "GET" and "/comments" in p for m, p, *_ in github.requests) == 3
    assert sum(p == "/user" for _, p, *_ in github.requests) == 1


@pytest.mark.parametrize("bad_id", [True, 0, -3, "1001", 1.0])
def test_a_comment_id_that_is_not_a_positive_integer_is_an_error(github: FakeGitHub, bad_id) -> None:
    """`true` read as the integer 1: the sticky comment would have edited comment #1, another thread's."""
    sticky = github.add(7, f"{MARKER}\nold", BOT, "Bot")
    sticky["id"] = bad_id
    with pytest.raises(GitHubError, match="comment id is not a positive integer"):
        _post(github, f"{MARKER}\nnew")
    assert not any(m == "PATCH" for m, *_ in github.requests)


def test_human_comment_starting_with_the_marker_is_not_edited(github: FakeGitHub) -> None:
    # A person pasted the bot's comment (marker first) into their own: editing it would fail with
    # 403 (and would overwrite their words). Only the authenticated user's comment is sticky.
    human = github.add(7, f"{MARKER}\nquoting the bot: why is this slower?")
    other_bot = github.add(7, f"{MARKER}\nsome other app", "other-app[bot]", "Bot")
    url = _post(github, f"{MARKER}\nfirst")
    assert human["body"].endswith("why is this slower?") and other_bot["body"].endswith("some other app")
    ours = github.comments[7][2]
    assert url == ours["html_url"] and ours["user"]["login"] == BOT
    assert _post(github, f"{MARKER}\nsecond") == url  # later runs update our comment, not theirs
    assert [c["body"].split("\n", 1)[1] for c in github.comments[7]] == [
        "quoting the bot: why is this slower?", "some other app", "second"]
    assert sum(p == "/user" for _, p, *_ in github.requests) == 2  # once per post


def test_without_user_endpoint_falls_back_to_the_apps_bot(github: FakeGitHub, monkeypatch) -> None:
    # GET /user answers 403 for GitHub App installation tokens (Actions' GITHUB_TOKEN): then the
    # sticky comment is the oldest marked comment by the app's bot (github-actions[bot], or
    # $RAGGED_BOT_LOGIN for another app), never a person's.
    github.user_status = 403
    monkeypatch.setenv("RAGGED_BOT_LOGIN", BOT)
    human = github.add(7, f"{MARKER}\nhuman copy")
    sticky = github.add(7, f"{MARKER}\nold", BOT, "Bot")
    assert _post(github, f"{MARKER}\nnew") == sticky["html_url"]
    assert sticky["body"] == f"{MARKER}\nnew" and human["body"] == f"{MARKER}\nhuman copy"
    github.comments[7].remove(sticky)
    _post(github, f"{MARKER}\nfresh")  # only the human's marked comment left: post a new one
    assert human["body"] == f"{MARKER}\nhuman copy" and github.comments[7][-1]["body"] == f"{MARKER}\nfresh"


def test_user_endpoint_server_error_is_reported(github: FakeGitHub) -> None:
    github.add(7, f"{MARKER}\nold", BOT, "Bot")
    github.user_status = 500
    with pytest.raises(GitHubError, match="GET /user failed with HTTP 500"):
        _post(github, f"{MARKER}\nnew")


def test_quoted_marker_is_not_the_sticky_comment(github: FakeGitHub) -> None:
    github.add(7, f"> {MARKER}\n> someone quoting the bot")
    _post(github, "body without marker")
    assert len(github.comments[7]) == 2
    assert github.comments[7][1]["body"].startswith(MARKER + "\n")  # the marker is added when missing


def test_token_from_environment(github: FakeGitHub, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    assert _post(github, f"{MARKER}\nx", token=None).startswith("https://github.com/")
    monkeypatch.delenv("GITHUB_TOKEN")
    with pytest.raises(GitHubError, match="no GitHub token"):
        _post(github, f"{MARKER}\nx", token=None)


@pytest.mark.parametrize(
    ("method", "status", "payload", "match"),
    [
        pytest.param("GET", 401, {"message": "Bad credentials"}, "HTTP 401: authentication failed", id="401"),
        pytest.param("GET", 403, {"message": "Resource not accessible"}, "HTTP 403: forbidden.*pull-requests: write",
                     id="403"),
        pytest.param("GET", 403, {"message": "API rate limit", "ratelimited": True}, "HTTP 403: rate limited",
                     id="403-ratelimit"),
        pytest.param("GET", 403, {"message": "You have exceeded a secondary rate limit"}, "HTTP 403: rate limited",
                     id="403-secondary"),
        pytest.param("POST", 503, {"message": "busy"}, "HTTP 503.*a POST is not retried", id="503-post"),
        pytest.param("GET", 404, {"message": "Not Found"}, "HTTP 404: not found", id="404"),
        pytest.param("POST", 422, {"message": "Validation Failed: body is too long"},
                     "HTTP 422.*GitHub said: Validation Failed", id="422"),
        pytest.param("GET", 502, {"message": "Bad gateway"}, "HTTP 502: GitHub server error", id="502"),
    ],
)
def test_http_errors_have_clear_messages(github: FakeGitHub, method: str, status: int, payload: dict,
                                         match: str) -> None:
    github.fail[method] = (status, payload)
    github.fail_times[method] = 99
    with pytest.raises(GitHubError, match=match) as info:
        _post(github, f"{MARKER}\nx")
    assert info.value.status == status
    assert TOKEN not in str(info.value)
    assert TOKEN not in "".join(traceback.format_exception(info.value))


@pytest.mark.slow
def test_server_errors_are_retried(github: FakeGitHub) -> None:
    github.fail["GET"] = (503, {"message": "busy"})
    github.fail_times["GET"] = 1
    url = _post(github, f"{MARKER}\nx", retries=2)
    assert url.startswith("https://github.com/")
    assert [m for m, *_ in github.requests] == ["GET", "GET", "POST"]


def test_post_is_not_retried_so_a_comment_is_never_posted_twice(github: FakeGitHub) -> None:
    """A 5xx on POST may come after GitHub created the comment: retrying could post it twice."""
    github.fail["POST"] = (502, {"message": "Bad gateway"})
    github.fail_times["POST"] = 1
    with pytest.raises(GitHubError, match="502"):
        _post(github, f"{MARKER}\nx", retries=2)
    assert [m for m, *_ in github.requests] == ["GET", "POST"]


def test_wrong_token_is_401_and_not_leaked(github: FakeGitHub) -> None:
    secret = "ghp_WRONG_secret_value"
    with pytest.raises(GitHubError, match="401") as info:
        _post(github, f"{MARKER}\nx", token=secret)
    assert secret not in str(info.value) and secret not in repr(info.value)


def test_never_follows_link_to_another_host(github: FakeGitHub) -> None:
    github.page_size = 1
    github.add(7, "a")
    github.add(7, "b")
    github.link_override = '<http://evil.example:1/steal>; rel="next"'
    with pytest.raises(GitHubError, match="not the API host"):
        _post(github, f"{MARKER}\nx")


def test_unreachable_api() -> None:
    with pytest.raises(GitHubError, match="cannot reach"):
        post_sticky_comment(REPO, 1, "x", token=TOKEN, api_url="http://127.0.0.1:9", retries=0, timeout=2)


def test_a_password_in_the_api_url_is_never_printed() -> None:
    """An Enterprise proxy's user:password in --api-url was printed in "cannot reach http://user:pw@...";
    and so in the "must be https" refusal."""
    with pytest.raises(GitHubError, match="cannot reach") as unreachable:
        post_sticky_comment(REPO, 1, "x", token=TOKEN, api_url="http://user:s3cretPW@127.0.0.1:9/api", retries=0,
                            timeout=2)
    with pytest.raises(ValueError, match="must be https") as refused:
        post_sticky_comment(REPO, 1, "x", token=TOKEN, api_url="http://user:s3cretPW@ghe.example.com/api/v3")
    for exc in (unreachable.value, refused.value):
        assert "s3cretPW" not in str(exc) and "user:***@" in str(exc), str(exc)


def test_dry_run_writes_file_and_needs_no_token(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    out = tmp_path / "sub" / "comment.md"
    url = post_sticky_comment(REPO, 3, "hello", dry_run=out)
    assert url == out.resolve().as_uri()
    assert out.read_text() == f"{MARKER}\nhello"
    assert write_dry_run("x", tmp_path / "y.md").endswith("/y.md")


@pytest.mark.parametrize(
    ("args", "exc", "match"),
    [
        pytest.param(("acme", 1, "x"), ValueError, "owner/name", id="repo"),
        pytest.param((REPO, 0, "x"), ValueError, "positive", id="pr-zero"),
        pytest.param((REPO, "7", "x"), TypeError, "int", id="pr-str"),
        pytest.param((REPO, True, "x"), TypeError, "int", id="pr-bool"),
        pytest.param((REPO, 1, "  "), ValueError, "non-empty", id="empty-body"),
        pytest.param((REPO, 1, "x" * 70000), ValueError, "at most 65536", id="too-long"),
    ],
)
def test_bad_arguments(args: tuple, exc: type, match: str) -> None:
    with pytest.raises(exc, match=match):
        post_sticky_comment(*args, token=TOKEN, dry_run="/dev/null")


def test_bad_api_url_and_marker() -> None:
    with pytest.raises(ValueError, match="api_url"):
        post_sticky_comment(REPO, 1, "x", token=TOKEN, api_url="ftp://x")
    # The token travels in a header: plain http only to this machine (a test server), never elsewhere.
    with pytest.raises(ValueError, match="must be https"):
        post_sticky_comment(REPO, 1, "x", token=TOKEN, api_url="http://ghe.example.com/api/v3")
    with pytest.raises(ValueError, match="hidden HTML comment"):
        post_sticky_comment(REPO, 1, "x", token=TOKEN, marker="[bot]")


def test_main_cli(github: FakeGitHub, tmp_path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    body = tmp_path / "c.md"
    body.write_text(f"{MARKER}\ncli")
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    assert main(["--repo", REPO, "--pr", "5", "--body-file", str(body), "--api-url", github.base]) == 0
    assert capsys.readouterr().out.strip().startswith("https://github.com/acme/ragged-vit/pull/5")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_bad_cli_token")
    assert main(["--repo", REPO, "--pr", "5", "--body-file", str(body), "--api-url", github.base]) == 2
    err = capsys.readouterr().err
    assert "401" in err and "ghp_bad_cli_token" not in err
    assert main(["--repo", REPO, "--pr", "5", "--body-file", str(body), "--dry-run", str(tmp_path / "o.md")]) == 0
    assert (tmp_path / "o.md").read_text() == f"{MARKER}\ncli"


def test_another_apps_marked_comment_is_not_edited(github: FakeGitHub, monkeypatch) -> None:
    """With Actions' token (/user refused) only github-actions[bot]'s comments are ours: another
    app's marked comment is left alone (GitHub would refuse the edit), and a new one is posted."""
    monkeypatch.delenv("RAGGED_BOT_LOGIN", raising=False)
    github.user_status = 403
    other = github.add(7, f"{MARKER}\nanother app", "other-app[bot]", "Bot")
    _post(github, f"{MARKER}\nours")
    assert other["body"] == f"{MARKER}\nanother app"
    assert [m for m, *_ in github.requests if m != "GET"] == ["POST"]


def test_redirects_are_never_followed(github: FakeGitHub) -> None:
    """A redirect would carry the Authorization header to wherever it points (urllib follows
    silently): it is reported instead, with its target."""
    elsewhere = "http://127.0.0.1:1/repos/acme/renamed/issues/7/comments"
    github.fail["GET"] = (301, {"message": "Moved Permanently", "_headers": {"Location": elsewhere}})
    github.fail_times["GET"] = 1
    with pytest.raises(GitHubError, match=f"HTTP 301: the API redirected to {elsewhere}") as info:
        _post(github, f"{MARKER}\nx", retries=2)
    assert [m for m, *_ in github.requests] == ["GET"], "not followed, not retried"
    assert TOKEN not in str(info.value)


def test_rate_limits_are_waited_out_for_idempotent_requests(github: FakeGitHub, monkeypatch) -> None:
    import ci.outputs.github

    slept = []
    monkeypatch.setattr(ci.outputs.github.time, "sleep", slept.append)
    github.fail["GET"] = (429, {"message": "Too Many Requests"})
    github.fail_times["GET"] = 1
    assert _post(github, f"{MARKER}\nx", retries=2).startswith("https://github.com/")
    assert [m for m, *_ in github.requests] == ["GET", "GET", "POST"] and slept == [60.0]


def test_duplicate_sticky_comments_are_folded_into_one(github: FakeGitHub) -> None:
    first = github.add(7, f"{MARKER}\nold run 1", BOT, "Bot")
    github.add(7, "a human comment in between")
    github.add(7, f"{MARKER}\nold run 2", BOT, "Bot")
    assert _post(github, f"{MARKER}\nnew") == first["html_url"]
    assert [c["body"] for c in github.comments[7]] == [f"{MARKER}\nnew", "a human comment in between"]


def test_a_dropped_connection_is_a_clear_error(monkeypatch) -> None:
    """The server accepts the request and closes without answering: a one-line GitHubError."""
    import socket

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(5)
    port = srv.getsockname()[1]

    def serve():
        for _ in range(3):
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            conn.recv(65536)
            conn.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        with pytest.raises(GitHubError, match="no complete answer from") as info:
            post_sticky_comment(REPO, 7, "x", token=TOKEN, api_url=f"http://127.0.0.1:{port}", retries=0)
        assert TOKEN not in str(info.value)
    finally:
        srv.close()


# --- No code path prints the token; a hostile or broken server cannot hang or flood posting. ---


@pytest.mark.parametrize("suffix", ["\n", "\r\n", "  \n"], ids=["lf", "crlf", "spaces-lf"])
def test_a_token_saved_with_a_trailing_newline_still_posts(github: FakeGitHub, suffix: str) -> None:
    """`echo $TOKEN > secret` leaves a newline; http.client refused the header and its ValueError
    quoted it, token and all. Surrounding whitespace is dropped instead."""
    assert _post(github, f"{MARKER}\nx", token=TOKEN + suffix).startswith("https://github.com/")
    assert github.requests[0][2]["authorization"] == f"Bearer {TOKEN}"


@pytest.mark.parametrize("bad", [TOKEN[:10] + "\r" + TOKEN[10:], TOKEN[:10] + "\n" + TOKEN[10:],
                                 TOKEN[:10] + " " + TOKEN[10:], TOKEN + "\x00", TOKEN + "é"],
                         ids=["cr", "lf", "space", "nul", "non-ascii"])
def test_a_malformed_token_is_refused_without_showing_it(github: FakeGitHub, monkeypatch, capsys, bad: str) -> None:
    with pytest.raises(GitHubError, match="GITHUB_TOKEN is malformed") as info:
        _post(github, f"{MARKER}\nx", token=bad)
    text = str(info.value) + "".join(traceback.format_exception(info.value))
    assert TOKEN[:10] not in text and TOKEN[10:] not in text
    assert github.requests == []  # refused before any request was built
    if "\x00" not in bad:  # (an environment variable cannot hold a NUL)
        monkeypatch.setenv("GITHUB_TOKEN", bad)
        assert main(["--repo", REPO, "--pr", "1", "--body-file", __file__, "--api-url", github.base]) == 2
        err = capsys.readouterr().err
        assert "malformed" in err and TOKEN[10:] not in err and TOKEN[:10] not in err


@pytest.mark.slow
def test_ci_comment_with_a_malformed_token_prints_no_secret(tmp_path, asv_dir, monkeypatch, capsys) -> None:
    """The issue's reproduction: `ci comment --repo o/r --pr 1 --api-url http://127.0.0.1:9` with a
    token holding a carriage return printed `ValueError: Invalid header value b'Bearer ghp_...'`."""
    from ci.cli import main as ci_main
    from tests.ci.conftest import sha_for

    db = str(tmp_path / "h.sqlite")
    assert ci_main(["ingest", "--db", db, str(asv_dir([sha_for(0), sha_for(1)]))]) == 0
    capsys.readouterr()
    args = ["comment", "--db", db, "--base", sha_for(0), "--head", sha_for(1), "--repo", "o/r", "--pr", "1",
            "--api-url", "http://127.0.0.1:9"]
    for bad in (TOKEN + "\r", TOKEN[:8] + "\r\n" + TOKEN[8:]):
        monkeypatch.setenv("GITHUB_TOKEN", bad)
        assert ci_main(args) == 2
        captured = capsys.readouterr()
        assert TOKEN[8:] not in captured.out + captured.err, captured.err
        assert captured.err.startswith("error: ")


def test_a_redirect_that_echoes_the_token_is_reported_redacted(github: FakeGitHub) -> None:
    from urllib.parse import quote

    where = (f"http://127.0.0.1:1/login?access_token={TOKEN}&again={quote(TOKEN, safe='')}"
             "&\x1b]8;;http://evil.example\x07click\x1b]8;;\x07")
    github.fail["GET"] = (301, {"message": "Moved", "_headers": {"Location": where}})
    github.fail_times["GET"] = 1
    with pytest.raises(GitHubError, match="HTTP 301: the API redirected to http://127.0.0.1:1/login") as info:
        _post(github, f"{MARKER}\nx")
    text = str(info.value)
    assert TOKEN not in text and quote(TOKEN, safe="") not in text and "access_token=***" in text
    assert "\x1b" not in text and "\x07" not in text and "click" in text


def test_server_text_reaches_the_terminal_without_escapes_or_secrets(github: FakeGitHub) -> None:
    other = "ghp_" + "A" * 36  # another token the server happens to echo
    github.fail["GET"] = (422, {"message": f"\x1b[2J\x1b[31mbad\x1b[0m\r\nrequest {TOKEN} {other} \x9b1m\x00end"})
    github.fail_times["GET"] = 1
    with pytest.raises(GitHubError) as info:
        _post(github, f"{MARKER}\nx")
    text = str(info.value)
    assert "GitHub said: bad request *** *** end" in text, text
    assert not any(not ch.isprintable() for ch in text)


def test_any_exception_while_posting_leaves_as_a_redacted_github_error(github: FakeGitHub, monkeypatch) -> None:
    """Whatever a library raises on the way (here: a ValueError quoting the header, as http.client's
    does), the message that leaves posting never holds the token."""
    import ci.outputs.github as gh

    def explode(self, method, url, payload=None):
        raise ValueError(f"Invalid header value b'Bearer {self.token.reveal()}'")

    monkeypatch.setattr(gh._Client, "request", explode)
    with pytest.raises(GitHubError, match=r"posting the comment failed: ValueError: Invalid header value") as info:
        _post(github, f"{MARKER}\nx")
    assert TOKEN not in str(info.value) and TOKEN not in "".join(traceback.format_exception(info.value))


def _raw_server(handle) -> tuple[str, threading.Event, socket.socket]:
    """A TCP server on 127.0.0.1 that runs `handle(conn, stop)` per connection (each in a thread)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            threading.Thread(target=handle, args=(conn, stop), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    return f"http://127.0.0.1:{srv.getsockname()[1]}", stop, srv


import socket  # noqa: E402 - used by the raw servers below only


@pytest.mark.parametrize("where", ["status-line", "headers", "body", "tls-handshake"])
@pytest.mark.slow
def test_a_trickling_server_is_cut_off_at_the_deadline(where: str) -> None:
    """One byte every 0.1 s never trips a 30 s read timeout: the posting's own deadline ends it,
    wherever the server trickles (for https, in the TLS handshake too: a 16 KiB handshake record
    announced, then sent a byte at a time; Python bounds a whole handshake by the socket timeout,
    which is never more than what is left of the deadline)."""
    import time

    head = {"status-line": b"", "headers": b"HTTP/1.1 200 OK\r\n", "tls-handshake": b"\x16\x03\x03\x40\x00",
            "body": b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n["}[where]
    drip = {"status-line": b"H", "headers": b"X-Slow: y\r\n", "body": b" ", "tls-handshake": b"\x02"}[where]

    def handle(conn: socket.socket, stop: threading.Event) -> None:
        with conn:
            conn.recv(65536)
            try:
                conn.sendall(head)
                while not stop.is_set():
                    for byte in drip:
                        conn.sendall(bytes([byte]))
                        time.sleep(0.1)
            except OSError:
                return

    url, stop, srv = _raw_server(handle)
    if where == "tls-handshake":
        url = url.replace("http://", "https://")
    try:
        t0 = time.monotonic()
        with pytest.raises(GitHubError, match="within the posting's deadline of 1 s") as info:
            post_sticky_comment(REPO, 7, "x", token=TOKEN, api_url=url, retries=2, timeout=30, deadline=1.0)
        assert time.monotonic() - t0 < 4.0
        assert TOKEN not in str(info.value)
    finally:
        stop.set()
        srv.close()


def test_a_retry_never_waits_past_the_deadline(github: FakeGitHub, monkeypatch) -> None:
    github.fail["GET"] = (429, {"message": "slow down", "_headers": {"Retry-After": "30"}})
    github.fail_times["GET"] = 5
    with pytest.raises(GitHubError, match="deadline of 2 s"):
        _post(github, f"{MARKER}\nx", retries=3, deadline=2)
    assert len(github.requests) == 1  # the 30 s wait would pass the deadline: not waited, not retried


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "chunked"])
def test_an_oversized_response_is_refused_and_not_read(monkeypatch, declared: bool) -> None:
    """A 160 MB answer cost 2 GB of memory: a response over the cap is refused, and past the cap
    nothing more is read (here the cap is 1 MiB and the server offers 64 MiB)."""
    import ci.outputs.github as gh

    monkeypatch.setattr(gh, "MAX_RESPONSE_BYTES", 2**20)
    sent = []

    def handle(conn: socket.socket, stop: threading.Event) -> None:
        with conn:
            conn.recv(65536)
            total = 64 * 2**20
            header = (f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {total}\r\n\r\n"
                      if declared else "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                      "Transfer-Encoding: chunked\r\n\r\n")
            chunk = b"[" + b" " * 65535
            try:
                conn.sendall(header.encode())
                for _ in range(total // len(chunk)):
                    conn.sendall(chunk if declared else b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    sent.append(len(chunk))
            except OSError:
                return

    url, stop, srv = _raw_server(handle)
    try:
        with pytest.raises(GitHubError, match="over the 1,048,576-byte limit; refused"):
            post_sticky_comment(REPO, 7, "x", token=TOKEN, api_url=url, retries=0)
    finally:
        stop.set()
        srv.close()
    assert sum(sent) < 16 * 2**20  # the client stopped reading; the kernel's buffers hold the rest



def test_posting_for_a_measured_head_only(github: FakeGitHub) -> None:
    """A number read from an untrusted artifact posts only where that pull request's head is the commit the
    trusted event says was measured; a full sha is required."""
    github.heads = {7: "a" * 40, 8: "b" * 40}
    _post(github, "measured a", pr=7, head_sha="a" * 40)
    assert [c["body"] for c in github.comments[7]] == [f"{MARKER}\nmeasured a"]
    with pytest.raises(GitHubError, match=r"#8's head is bbbbbbbbbbbb, not the measured aaaaaaaaaaaa: not posting"):
        _post(github, "measured a", pr=8, head_sha="a" * 40)
    assert 8 not in github.comments
    with pytest.raises(GitHubError, match="404"):
        _post(github, "measured a", pr=9, head_sha="a" * 40)  # no such pull request
    with pytest.raises(ValueError, match="full commit sha"):
        _post(github, "x", pr=7, head_sha="a" * 12)
    assert not [path for method, path, *_ in github.requests if method != "GET" and "/issues/7" not in path]


def test_merge_replaces_only_the_structure_section_of_the_sticky_comment(github: FakeGitHub) -> None:
    from ci.outputs.structure import COMMENT_HEAD, SECTION_END, SECTION_START, merge_section

    mark = COMMENT_HEAD.format(sha="c" * 40)
    gpu = (f"{MARKER}\n## Benchmarks\n\n**✅ no regression:** 12 series\n\n{SECTION_START}\nold structure\n"
           f"{SECTION_END}\n\n| Outcome | Benchmark |\n|---|---|\n| ✅ | gpu timing |\n\n{mark}\n")
    _post(github, gpu, pr=7)
    exact = (f"{MARKER}\n## Benchmarks\n\n**✅ exact only:**\n\n{SECTION_START}\nnew structure\n{SECTION_END}\n"
             f"\n{mark}\n")
    _post(github, exact, pr=7, merge=lambda existing: merge_section(existing, exact, 65536))
    (comment,) = github.comments[7]
    assert "new structure" in comment["body"] and "old structure" not in comment["body"]
    assert "| ✅ | gpu timing |" in comment["body"] and "12 series" in comment["body"]  # the GPU job's timings stay
    # No sticky comment yet: the exact job's own body whole.
    _post(github, exact, pr=11, merge=lambda existing: merge_section(existing, exact, 65536))
    assert github.comments[11][0]["body"] == exact
    # A section marker inside contributor text (a table cell) is no section: the real one is replaced.
    cell = f"| ✅ | `x{SECTION_START}` `{SECTION_END}` |"
    _post(github, gpu.replace("| ✅ | gpu timing |", cell), pr=12)
    _post(github, exact, pr=12, merge=lambda existing: merge_section(existing, exact, 65536))
    body = github.comments[12][0]["body"]
    assert cell in body and "new structure" in body and "old structure" not in body
    # Over GitHub's limit once merged: the section's last lines give way to an "N more" line.
    many = "\n".join(f"- line {i} {'x' * 80}" for i in range(400))
    big = exact.replace("new structure", f"### Structure\n\ngist\n\n{many}")
    merged = merge_section(gpu, big, 20_000)
    assert len(merged) <= 20_000 and "- line 0 " in merged and "- line 399" not in merged
    assert re.search(r"_… and \d+ more \(see the `exact` workflow's job summary\)\._", merged)
    assert "| ✅ | gpu timing |" in merged


def test_ci_comment_posts_for_the_measured_head_only(github: FakeGitHub, tmp_path, asv_dir, monkeypatch, capsys):
    """`ci comment --pr-head SHA` (exact-comment.yml): a pull request whose head moved on, or a number that
    names another pull request, gets nothing; the one measured gets the comment."""
    from ci.cli import main as ci_main
    from tests.ci.conftest import sha_for

    db = str(tmp_path / "h.sqlite")
    assert ci_main(["ingest", "--db", db, str(asv_dir([sha_for(0), sha_for(1)]))]) == 0
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    github.heads = {7: sha_for(1), 8: sha_for(2)}
    args = ["comment", "--db", db, "--base", sha_for(0), "--head", sha_for(1), "--repo", REPO, "--api-url",
            github.base, "--pr-head", sha_for(1), "--structure-only", "--pr"]
    capsys.readouterr()
    assert ci_main([*args, "8"]) == 2
    assert "not the measured" in capsys.readouterr().err and 8 not in github.comments
    verdict = ci_main(["compare", "--db", db, "--base", sha_for(0), "--head", sha_for(1), "--no-save"])
    assert ci_main([*args, "7"]) == verdict  # posting changes no verdict
    (posted,) = github.comments[7]
    assert posted["body"].startswith(MARKER) and sha_for(1)[:7] in posted["body"]


def _two_jobs(head: str = "c" * 40) -> tuple[str, str, Callable[[str], str], Callable[[str], str]]:
    """(GPU job's body, exact job's body, their merges): one pull request head's timings and Structure section."""
    from ci.outputs.structure import COMMENT_HEAD, SECTION_END, SECTION_HEAD, SECTION_START, keep_section, merge_section

    mark = COMMENT_HEAD.format(sha=head)
    gpu = f"{MARKER}\n## Benchmarks\n\n**✅ no regression:** 12 series\n\n| ✅ | gpu timing |\n\n{mark}\n"
    exact = (f"{MARKER}\n## Benchmarks\n\n**✅ exact only:**\n\n{SECTION_START}\n{SECTION_HEAD.format(sha=head)}\n"
             f"new structure\n{SECTION_END}\n\n{mark}\n")
    return gpu, exact, lambda now: keep_section(now, gpu, head, 65536), lambda now: merge_section(now, exact, 65536)


@pytest.mark.parametrize("start", ["none", "older head", "same head, pending"])
def test_two_posting_jobs_that_read_before_either_wrote_keep_both_parts(github: FakeGitHub, start: str) -> None:
    """The GPU job (timings, `keep_section`) and the exact job (Structure, `merge_section`) of one head both
    read the comment before either writes it: the second write lacks the first one's part, and each job's
    read-back puts its own part in again, so the comment ends with both (without the read-back it lost one,
    or the pull request got two comments)."""
    gpu, exact, keep, merge = _two_jobs()
    if start == "older head":
        github.add(7, _two_jobs("b" * 40)[0], BOT, "Bot")
    elif start == "same head, pending":
        github.add(7, keep(""), BOT, "Bot")
    reads = threading.Barrier(2, timeout=10)
    first_reads = [0]

    def both_read_first(method: str, path: str) -> None:
        if method == "GET" and path.split("?")[0].endswith("/issues/7/comments") and first_reads[0] < 2:
            first_reads[0] += 1
            reads.wait()

    github.before = both_read_first
    errors: list[BaseException] = []

    def job(body: str, fold: Callable[[str], str]) -> None:
        try:
            _post(github, body, pr=7, merge=fold, settle=0.3)
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=job, args=(gpu, keep)), threading.Thread(target=job, args=(exact, merge))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not errors
    (comment,) = github.comments[7]
    assert "| ✅ | gpu timing |" in comment["body"] and "new structure" in comment["body"]
    assert "not yet checked" not in comment["body"] and "b" * 40 not in comment["body"]


def _after_write(github: FakeGitHub, body: str) -> None:
    """Another job's write between this job's write and its read-back: the comment's body becomes `body`."""
    wrote = [False]

    def hook(method: str, path: str) -> None:
        if method in ("PATCH", "POST"):
            wrote[0] = True
        elif wrote[0] and method == "GET" and path.split("?")[0].endswith("/issues/7/comments"):
            github.comments[7][0]["body"] = body
            github.before = None

    github.before = hook


def test_read_back_leaves_a_newer_heads_comment_and_stops_when_the_head_moved(github: FakeGitHub, capsys) -> None:
    """A read-back that finds another commit's comment (a newer push's job wrote it) leaves it; one that
    finds this head's comment without this job's part writes it again only while the pull request's head is
    still the measured commit."""
    gpu, exact, keep, merge = _two_jobs()
    newer = _two_jobs("d" * 40)[0]
    _post(github, exact, pr=7, merge=merge, settle=0.05)  # the comment is the exact job's
    _after_write(github, newer)
    _post(github, gpu, pr=7, merge=keep, settle=0.05)
    assert [c["body"] for c in github.comments[7]] == [newer]
    # This head's comment without the exact job's part, but the head moved on: not written again.
    github.heads = {7: "e" * 40}
    github.comments[7][0]["body"] = gpu
    github.heads = {7: "c" * 40}
    _after_write(github, gpu)
    github.before, hook = None, github.before

    def then_moved(method: str, path: str) -> None:
        assert hook is not None
        hook(method, path)
        if github.before is None:  # the other job wrote; then a push moved the head
            github.heads = {7: "e" * 40}

    github.before = then_moved
    with pytest.raises(GitHubError, match="not the measured"):
        _post(github, exact, pr=7, merge=merge, settle=0.05, head_sha="c" * 40)
    assert github.comments[7][0]["body"] == gpu
    # The head did not move: the exact job's part is merged in again.
    github.heads = {7: "c" * 40}
    _after_write(github, gpu)
    _post(github, exact, pr=7, merge=merge, settle=0.05, head_sha="c" * 40)
    assert "new structure" in github.comments[7][0]["body"] and "gpu timing" in github.comments[7][0]["body"]
    assert "merging it in again" in capsys.readouterr().err


def test_read_back_costs_one_read_when_nothing_changed_and_none_without_merge(github: FakeGitHub) -> None:
    gpu, _, keep, _ = _two_jobs()

    def calls() -> list[str]:
        return [f"{m} {path.split('?')[0].rsplit('/', 1)[-1]}" for m, path, *_ in github.requests if path != "/user"]

    _post(github, gpu, pr=7, merge=keep, settle=0.01)
    assert calls() == ["GET comments", "POST comments", "GET comments"]
    github.requests.clear()
    _post(github, gpu, pr=7)
    assert calls() == ["GET comments", "PATCH " + str(github.comments[7][0]["id"])]
    with pytest.raises(ValueError, match="settle"):
        _post(github, gpu, pr=7, merge=keep, settle=float("nan"))


def test_a_rate_limit_reset_past_any_clock_is_a_message_not_a_crash() -> None:
    """A reset time of 30 digits raised OverflowError from the clock instead of naming the rate limit."""
    from ci.outputs.github import _status_message

    text = _status_message(429, "GET", "/x", "", {"X-RateLimit-Reset": "9" * 30}, False)
    assert "rate limited by GitHub" in text


def test_pieces_and_the_reverse_of_the_token_are_redacted() -> None:
    """A hostile server echoed the token reversed and its 16-character tail: neither matched the whole
    token, and both were printed."""
    from ci.outputs.github import _Secret

    text = _Secret(TOKEN).redact(f"a {TOKEN[::-1]} b {TOKEN[-16:]} c {TOKEN[3:14]} d short {TOKEN[:5]}")
    assert TOKEN[::-1] not in text and TOKEN[-16:] not in text and TOKEN[3:14] not in text
    assert text.startswith("a *** b *** c *** d short") and "a" in text
