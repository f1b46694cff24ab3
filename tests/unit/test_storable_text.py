"""``storable_text``: free text bound for the database (error messages, tracebacks, cancel
reasons, progress messages) always encodes and never holds a NUL, without a database."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from awa_django.declarations.exact_json import storable_text


@pytest.mark.parametrize(
    ("text", "stored"),
    [
        ("plain", "plain"),
        ("naïve café ☕", "naïve café ☕"),
        ("nul\x00here", "nul\\x00here"),
        ("bad \ud800 text", "bad \\ud800 text"),
        ("file \udcff.txt", "file \\udcff.txt"),  # os.fsdecode(b"file \xff.txt")
        ("both \x00 and \udc80 é", "both \\x00 and \\udc80 é"),
        # Two surrogates are two unpaired code points in a Python string: both escaped.
        ("\ud83d\ude00", "\\ud83d\\ude00"),
    ],
)
def test_nul_and_lone_surrogates_are_escaped_and_the_rest_kept(text: str, stored: str) -> None:
    assert storable_text(text) == stored


@given(st.text())
def test_any_text_becomes_utf8_without_nul_and_storable_text_is_kept(text: str) -> None:
    stored = storable_text(text)
    stored.encode()  # raises on a lone surrogate
    assert "\x00" not in stored
    try:
        text.encode()
    except UnicodeEncodeError:
        return
    if "\x00" not in text:
        assert stored == text
