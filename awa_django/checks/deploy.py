"""``manage.py check --deploy``: awa settings that are fine in development and wrong in
production. Unsigned callbacks and eager mode are errors when ``DEBUG`` is off (awa.E055,
awa.E062); a guessable ``CALLBACK_SECRET``, a plain-HTTP ``CALLBACK_BASE_URL`` and a queue
database whose connections close after every request are warnings (awa.W052, awa.W053,
awa.W054)."""

from __future__ import annotations

import ipaddress
import math
import string
from collections.abc import Sequence
from typing import Any, Final
from urllib.parse import urlsplit

from django.apps import AppConfig
from django.conf import settings
from django.core.checks import CheckMessage, Error, Tags, Warning, register

from awa_django import conf

# A secret is weak with fewer distinct characters than this (a repeated letter, "abab..."),
# or with fewer bits than MIN_SECRET_BITS by its length and alphabet: 32 hex digits, the
# shortest secret the docs suggest (secrets.token_hex(16)), make exactly 128.
MIN_SECRET_DISTINCT: Final = 8
MIN_SECRET_BITS: Final = 128
# Alphabets a secret may come from whole, smallest first.
_ALPHABETS: Final = (
    frozenset(string.digits),
    frozenset(string.digits + "abcdef"),
    frozenset(string.digits + "ABCDEF"),
)
# Otherwise its alphabet is the sum of the classes it uses.
_CLASSES: Final = (
    (frozenset(string.digits), 10),
    (frozenset(string.ascii_lowercase), 26),
    (frozenset(string.ascii_uppercase), 26),
)
_OTHER_CLASS_SIZE: Final = 33  # printable ASCII punctuation and space; anything else counts so


def secret_bits(secret: str) -> float:
    """Bits of ``secret`` estimated as length x log2(its alphabet): digits (10) or hex digits
    (16) when it uses nothing else, else the sum of the classes it uses (digits 10, lowercase
    26, uppercase 26, anything else 33)."""
    used = frozenset(secret)
    whole = next((len(chars) for chars in _ALPHABETS if used <= chars), None)
    if whole is not None:
        return len(secret) * math.log2(whole)
    alphabet = sum(size for chars, size in _CLASSES if used & chars)
    if used - frozenset().union(*(chars for chars, _ in _CLASSES)):
        alphabet += _OTHER_CLASS_SIZE
    return len(secret) * math.log2(alphabet)


def secret_weakness(secret: str) -> str | None:
    """Why ``secret`` is guessable by the rule above, or None. Never quotes the secret."""
    distinct = len(set(secret))
    if distinct < MIN_SECRET_DISTINCT:
        return f"it has only {distinct} distinct characters (at least {MIN_SECRET_DISTINCT})"
    bits = secret_bits(secret)
    if bits < MIN_SECRET_BITS:
        return (
            f"it holds about {bits:.0f} bits by its length and alphabet "
            f"(at least {MIN_SECRET_BITS})"
        )
    return None


def _closes_every_request(alias: str) -> bool:
    """Django opens a new server session for each request on ``alias``: ``CONN_MAX_AGE`` is 0
    (Django's default) and no connection pool is configured (``OPTIONS["pool"]``)."""
    database = settings.DATABASES.get(alias, {})
    return database.get("CONN_MAX_AGE", 0) == 0 and not database.get("OPTIONS", {}).get("pool")


def _is_loopback(host: str | None) -> bool:
    if host is None:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@register(Tags.security, deploy=True)
def check_deployment(
    app_configs: Sequence[AppConfig] | None = None, **_: Any
) -> list[CheckMessage]:
    if conf.problems():
        return []  # check_settings reports those
    awa = conf.get_settings()
    found: list[CheckMessage] = []
    if not settings.DEBUG and awa.CALLBACK_ALLOW_UNSIGNED and not awa.CALLBACK_SECRET:
        found.append(
            Error(
                "AWA['CALLBACK_ALLOW_UNSIGNED'] is on without a CALLBACK_SECRET while DEBUG is "
                "off: the callback endpoint lets anyone who learns a token resolve its job.",
                id="awa.E055",
                hint="Set AWA['CALLBACK_SECRET'] (e.g. secrets.token_hex(32)) and remove "
                "CALLBACK_ALLOW_UNSIGNED; it is for local development only.",
            )
        )
    if not settings.DEBUG and awa.EAGER:
        found.append(
            Error(
                "AWA['EAGER'] is on while DEBUG is off: every job runs inside the process that "
                "enqueued it, when its transaction commits, instead of on a worker.",
                id="awa.E062",
                hint="Remove AWA['EAGER'] from production settings and run awa_worker; eager "
                "mode is for tests and development (docs/testing.md#eager-mode).",
            )
        )
    weakness = secret_weakness(awa.CALLBACK_SECRET) if awa.CALLBACK_SECRET else None
    if weakness is not None:
        found.append(
            Warning(
                f"AWA['CALLBACK_SECRET'] looks guessable: {weakness}.",
                id="awa.W052",
                hint="Use a random secret, e.g. secrets.token_hex(32).",
            )
        )
    base = urlsplit(awa.CALLBACK_BASE_URL)
    if base.scheme == "http" and not _is_loopback(base.hostname):
        found.append(
            Warning(
                f"AWA['CALLBACK_BASE_URL'] is {awa.CALLBACK_BASE_URL!r}: callback URLs carry "
                "their tokens over plain HTTP, where anyone on the way can read them.",
                id="awa.W053",
                hint="Serve the callback endpoint over HTTPS and give an https:// base URL.",
            )
        )
    closing = [alias for alias in awa.databases if _closes_every_request(alias)]
    if closing:
        found.append(
            Warning(
                f"{', '.join(f'DATABASES[{alias!r}]' for alias in closing)}: CONN_MAX_AGE = 0 "
                "and no pool, so every request that enqueues starts a new server "
                "session, whose first enqueue costs the server several times what a later one "
                "does (it loads PL/pgSQL and the queue's tables and functions).",
                id="awa.W054",
                hint="Keep connections: CONN_MAX_AGE = 60 (or None), or OPTIONS['pool'] with "
                "psycopg on Django 5.1+. If a pooler such as PgBouncer keeps the server "
                "sessions, add 'awa.W054' to SILENCED_SYSTEM_CHECKS.",
            )
        )
    return found
