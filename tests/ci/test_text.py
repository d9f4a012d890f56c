"""Text fit for a terminal: one printable line, file names quoted only where unusual."""

from __future__ import annotations

import pytest

from ci.text import printable, quote_path, redact_text


@pytest.mark.parametrize(("name", "shown"), [
    pytest.param("/r/h200/8fc4c96b-virtualenv-py3.12.json", "/r/h200/8fc4c96b-virtualenv-py3.12.json", id="plain"),
    pytest.param("/r/é ü.json", "/r/é ü.json", id="printable-unicode-and-space"),
    pytest.param("x\nerror: forged.json", '"x\\nerror: forged.json"', id="newline"),
    pytest.param("x\rerror.json", '"x\\rerror.json"', id="carriage-return"),
    pytest.param("\x1b[2Kok.json", '"\\x1b[2Kok.json"', id="terminal-escape"),
    pytest.param("a\u202eb.json", '"a\\u202eb.json"', id="bidi-override"),
    pytest.param('q"uote\\d.json', '"q\\"uote\\\\d.json"', id="quote-and-backslash"),
    pytest.param(" lead.json", '" lead.json"', id="leading-space"),
    pytest.param("bad\udcffbyte.json", '"bad\\udcffbyte.json"', id="undecodable-byte"),
])
def test_quote_path(name: str, shown: str) -> None:
    assert quote_path(name) == shown
    assert quote_path(name).isprintable()


def test_printable_escapes_only_what_is_not_printable() -> None:
    assert printable("plain 'text' \\ ok") == "plain 'text' \\ ok"
    assert printable("a\nb\x00c\x9bd") == "a\\nb\\x00c\\x9bd"


@pytest.mark.parametrize(("text", "shown"), [
    ("postgresql://u:hunter2@db/x", "postgresql://u:***@db/x"),
    ("https://user:p@ss@host/simple", "https://user:***@host/simple"),  # an unescaped '@' in the password
    ("https://u:pa/ss@h", "https://u:***@h"),
    ("git+https://user:tok@github.com/org/repo.git@v1.0", "git+https://user:***@github.com/org/repo.git@v1.0"),
    ("git+https://oauth2:glpat-SECRETSECRETSECRET12@gitlab.com/x/y.git", "git+https://oauth2:***@gitlab.com/x/y.git"),
    ("https://ghp_abcdefghijklmnopqrstuvwxyz1234@github.com/x", "https://***@github.com/x"),
    ("https://0123456789abcdef0123@github.com/x", "https://***@github.com/x"),
    ("key AKIAIOSFODNN7EXAMPLE here", "key *** here"),
    ("xoxb-123456789012-abcdefghijkl", "***"),
    ("pypi-AgEIcHlwaS5vcmcCJGFiY2RlZg", "***"),
    ("https://x.blob.core.windows.net/c?sv=2020&sig=abcDEF123%3D&se=1", "https://x.blob.core.windows.net/c?sv=2020&sig=***&se=1"),
    ("https://api.example.com/v1?access_token=abc123&page=2", "https://api.example.com/v1?access_token=***&page=2"),
    ("Authorization: Bearer abc.def.ghi123", "Authorization: ***"),
    ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U", "***"),
    ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk\n-----END OPENSSH PRIVATE KEY-----", "***"),
])
def test_redact_text_hides_credentials_by_their_shape(text: str, shown: str) -> None:
    assert redact_text(text) == shown


@pytest.mark.parametrize("text", [
    "https://pypi.org/simple", "ssh://git@github.com/org/repo.git", "torch==2.14.1", "numpy 1.26; keys=3",
    "Linux 4.18.0-553.123.1.el8_10.x86_64", "--authors=x", "tokens=3", "/usr/lib/x86_64-linux-gnu",
    "existing-py_usr_bin_python3.11", "Intel(R) Xeon(R) CPU E5-2683 v4 @ 2.10GHz", "basic mode", "bearer of news",
    # Benchmark names, parameters and commit subjects, which every shown text's redaction sees (2026-12-07):
    "Add basic benchmarks for the kernel", "f(max_token=512, use_auth=True)", "g(max_tokens=409600, sig=2)",
    "bearer authentication", "basic 2D/3D-interpolation",
])
def test_redact_text_leaves_what_is_no_credential(text: str) -> None:
    assert redact_text(text) == text


def test_environment_changes_never_show_a_credential_an_older_store_holds() -> None:
    """A store ingested before requirements and URL passwords were redacted (2026-12-07) still holds
    them: what changed between two runs is shown redacted all the same."""
    from ci.verdicts.groups import environment_changes

    out = " ".join(environment_changes({"env:PIP_INDEX_URL": "https://ci:old-pass@m/simple", "req:y": "1"},
                                       {"env:PIP_INDEX_URL": "https://ci:new-pass@m/simple",
                                        "req:y": "git+https://u:glpat-SECRETSECRETSECRET12@gitlab.com/y.git"}))
    assert "old-pass" not in out and "new-pass" not in out and "glpat-" not in out and "https://ci:***@m/simple" in out



def test_a_clipped_value_hides_its_credential_before_the_cut() -> None:
    """Messages quote a file's values cut to a length (`f"{value!r:.80}"`): cut first, a URL's password
    whose "@" fell past the cut lost the shape that hides it (2026-12-07). `clip` redacts, then cuts."""
    from ci.text import clip

    name = "bench.B.time_x(url='https://deploy:S3cretPassw0rd-and-more@db.example.org/data')"
    assert "S3cret" in repr(name)[:45] and "S3cret" not in clip(name, 45)
    assert clip("plain", 80) == "'plain'" and len(clip("x" * 500, 80)) == 80
