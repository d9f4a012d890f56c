"""Text fit for a terminal: one printable line, file names quoted only where unusual."""

from __future__ import annotations

import pytest

from ci.text import printable, quote_path


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
