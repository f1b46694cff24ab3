"""What a callback payload or error text must be, beyond surviving a JSON round trip
(``awa_django.arguments.to_json_text``), to be stored: valid Unicode, and bounded nesting."""

from __future__ import annotations

from typing import Final

# Deep enough for any real document, and far below Python's recursion limit, which every JSON
# encoder and decoder on the way (the endpoint, storage, a handler reading the result) recurses
# against.
MAX_PAYLOAD_DEPTH: Final = 100
NOT_UNICODE: Final = "contains a lone surrogate (\\ud800-\\udfff), which is not Unicode text"


def is_unicode(text: str) -> bool:
    """False for a string holding a lone surrogate (JSON's ``"\\ud800"``), which is not Unicode
    text: PostgreSQL refuses it in text and jsonb alike."""
    if text.isascii():
        return True
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def payload_problem(value: object) -> str | None:
    """Why ``value`` cannot be stored as a payload, or None. Walks iteratively, so a payload
    nested past any limit is measured without recursing."""
    pending: list[tuple[object, int]] = [(value, 0)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, str):
            if not is_unicode(item):
                return NOT_UNICODE
        elif isinstance(item, dict | list | tuple):
            if depth == MAX_PAYLOAD_DEPTH:
                return f"is nested more than {MAX_PAYLOAD_DEPTH} levels deep"
            children = [*item.keys(), *item.values()] if isinstance(item, dict) else item
            pending.extend((child, depth + 1) for child in children)
    return None
