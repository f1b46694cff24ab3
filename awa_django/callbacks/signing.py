"""Signatures of HTTP callbacks: HMAC-SHA256 with ``AWA["CALLBACK_SECRET"]``.

A request to ``POST <prefix>/callbacks/<token>/<action>`` carries two headers:
``X-Awa-Timestamp`` (Unix seconds) and ``X-Awa-Signature`` (``sha256=`` and the lowercase hex
HMAC of ``"<timestamp>.<token>.<action>."`` followed by the raw body bytes). Signing the action
stops a captured "complete" from being replayed as "resume", and the timestamp bounds how long a
captured request is worth anything; replays inside that window resolve nothing twice, because a
callback resolves once.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from typing import Final

from awa_django.conf import get_settings

TIMESTAMP_HEADER: Final = "X-Awa-Timestamp"
SIGNATURE_HEADER: Final = "X-Awa-Signature"
_PREFIX: Final = "sha256="


def _digest(secret: str, timestamp: str, token: str, action: str, body: bytes) -> str:
    message = f"{timestamp}.{token}.{action}.".encode() + body
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def sign_callback(
    token: str,
    body: bytes | str,
    *,
    action: str = "complete",
    timestamp: int | None = None,
    secret: str | None = None,
) -> dict[str, str]:
    """The headers that authenticate ``POST .../callbacks/<token>/<action>`` with exactly
    ``body`` (send the same bytes). ``secret`` defaults to ``AWA["CALLBACK_SECRET"]``."""
    key = get_settings().CALLBACK_SECRET if secret is None else secret
    if not key:
        raise ValueError("no callback secret: set AWA['CALLBACK_SECRET'] or pass secret=")
    raw = body.encode() if isinstance(body, str) else body
    stamp = str(int(time.time()) if timestamp is None else timestamp)
    return {
        TIMESTAMP_HEADER: stamp,
        SIGNATURE_HEADER: _PREFIX + _digest(key, stamp, token, action, raw),
    }


def signature_problem(
    *,
    secret: str,
    timestamp: str | None,
    signature: str | None,
    token: str,
    action: str,
    body: bytes,
    max_age_s: float,
    now: float,
) -> str | None:
    """Why a request's signature is not acceptable, or None when it is."""
    if not timestamp or not signature:
        return f"missing {TIMESTAMP_HEADER} or {SIGNATURE_HEADER} header"
    if not timestamp.isascii() or not timestamp.isdigit() or len(timestamp) > 12:
        return f"{TIMESTAMP_HEADER} must be Unix seconds"
    if abs(now - int(timestamp)) > max_age_s:
        return f"{TIMESTAMP_HEADER} is outside the {max_age_s:g}s window (replayed or clock skew)"
    expected = _PREFIX + _digest(secret, timestamp, token, action, body)
    if not hmac.compare_digest(expected.encode(), signature.encode()):
        return "signature does not match"
    return None
