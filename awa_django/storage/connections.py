"""The worker's own psycopg connections, built from the Django database settings.

Django's connection cannot LISTEN and is per thread, so the worker's asyncio core opens its own:
one session connection (LISTEN and the session advisory locks, ``storage.session``) and a
one-connection autocommit pool for claims, completions, promotion and the other maintenance
passes. Each statement on them is its own transaction.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from json.scanner import make_scanner
from typing import Any, Final

from django.conf import settings
from django.db import connections
from psycopg import AsyncConnection, Connection
from psycopg.abc import Buffer
from psycopg.conninfo import conninfo_to_dict
from psycopg.types.json import JsonbLoader
from psycopg_pool import AsyncConnectionPool

from awa_django.storage.statement import Statement

# Django-specific entries of get_connection_params() that psycopg.connect does not take.
_DJANGO_ONLY: Final = ("cursor_factory", "context", "prepare_threshold")


def connection_kwargs(alias: str, *, application_name: str = "awa_worker") -> dict[str, Any]:
    """psycopg.connect keyword arguments for the database behind a Django alias, or behind a
    libpq connection string (``AWA["WORKER_DATABASE"]`` may be either); ``application_name``
    unless the settings name one."""
    if alias in settings.DATABASES:
        params = dict(connections[alias].get_connection_params())
        for key in _DJANGO_ONLY:
            params.pop(key, None)
    else:
        # Parsed, so the options added below extend the DSN's own instead of replacing them.
        params = conninfo_to_dict(alias)
    params.setdefault("application_name", application_name)
    # The worker's statements scan many small partitions whose cost estimates can cross the JIT
    # threshold; compiling them takes far longer than running them.
    # UTC, as Django's own connections use: timestamps then come back with Python's fixed UTC
    # zone, as the ORM returns them, whatever the server's default zone. With a zone name
    # such as the Debian default 'Etc/UTC', psycopg attaches a ZoneInfo, which made each
    # claimed job's two timestamps slower to decode and to compute with (docs/benchmarks.md).
    params["options"] = f"{params.get('options', '')} -c jit=off -c TimeZone=UTC".strip()
    return params


# The C scanner behind ``json.loads``, called directly: the server's jsonb text starts with its
# value and ends with it, so the whitespace matching, the type and prefix checks and the decoder
# object's two Python methods around the scanner (about ten Python calls a value) only confirm
# what the text already is.
# (typeshed types a scanner's context as the scanner class, whose settings the decoder holds.)
_SCAN: Final[Callable[[str, int], tuple[Any, int]]] = make_scanner(
    json.JSONDecoder()  # type: ignore[arg-type]
)


class ClaimJsonbLoader(JsonbLoader):
    """jsonb as Python values, like psycopg's loader, but without the parser for the empty
    object and array that most jobs' metadata and error history are, without its encoding
    detection, and with the rest read by the JSON scanner alone: a claim decodes three jsonb
    columns per job, most of them empty, so this saves most of the time a no-op drain spends
    decoding them (docs/benchmarks.md)."""

    def load(self, data: Buffer) -> Any:
        if data == b"{}":
            return {}
        if data == b"[]":
            return []
        # UTF-8, as psycopg's own loader assumes for JSON; str() decodes any buffer.
        text = str(data, "utf-8")
        try:
            value, end = _SCAN(text, 0)
        except StopIteration:
            end = -1
        if end == len(text):
            return value
        # Not one value from its first character to its last (never the server's jsonb output):
        # the full parser, which skips whitespace around it or says what is wrong.
        return self.loads(text)


async def _configure(conn: AsyncConnection[Any]) -> None:
    conn.adapters.register_loader("jsonb", ClaimJsonbLoader)


async def connect(alias: str) -> AsyncConnection[Any]:
    """A dedicated autocommit connection: the process's session (``storage.session``), named
    ``awa_worker_session`` in pg_stat_activity so that it can be told from the pool's."""
    return await AsyncConnection.connect(
        **connection_kwargs(alias, application_name="awa_worker_session"), autocommit=True
    )


@contextmanager
def listening(
    alias: str, listen: Statement[None], *, application_name: str
) -> Iterator[Connection[Any]]:
    """A short-lived blocking autocommit session that has run ``listen`` (a ``LISTEN``), for a
    caller that waits on a channel outside the worker (``awa.wait_workflow``)."""
    with Connection.connect(
        **connection_kwargs(alias, application_name=application_name), autocommit=True
    ) as conn:
        conn.execute(listen.sql, listen.params)
        yield conn


def await_notification(conn: Connection[Any], payload: str, timeout: float) -> bool:
    """Block for at most ``timeout`` seconds until a notification carrying ``payload`` arrives
    on a channel ``conn`` listens to; whether one did."""
    # Closed explicitly: the generator holds the connection's lock until it is.
    with closing(conn.notifies(timeout=timeout)) as notifies:
        return any(notify.payload == payload for notify in notifies)


async def open_pool(alias: str, *, max_size: int, prepare: bool = True) -> AsyncConnectionPool[Any]:
    """An opened ``new_pool``."""
    pool = new_pool(alias, max_size=max_size, prepare=prepare)
    await pool.open(wait=True)
    return pool


def new_pool(alias: str, *, max_size: int, prepare: bool = True) -> AsyncConnectionPool[Any]:
    """A pool of autocommit connections, not opened yet. ``prepare=False``: psycopg prepares
    no statement on the server, since behind a transaction pooler a prepared statement outlives
    its transaction on a server connection the next transaction may not get."""
    kwargs: dict[str, Any] = {**connection_kwargs(alias), "autocommit": True}
    if not prepare:
        kwargs["prepare_threshold"] = None
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        kwargs=kwargs,
        min_size=min(2, max_size),
        max_size=max_size,
        configure=_configure,
        open=False,
        name="awa-worker",
    )
    return pool
