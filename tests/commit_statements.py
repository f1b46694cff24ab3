"""The statements PostgreSQL runs for a piece of Django code, as ``pg_stat_statements`` would
count them, without it in the test cluster: ``auto_explain`` (loaded in the session, logging at
NOTICE level) reports every statement the executor runs.

``statements_at_commit`` gives the top-level statements run as a transaction of Django's
connection commits: those of the deferred triggers that fire there (#32). ``statements_run``
gives every statement a body runs, those PL/pgSQL functions run inside it included (``track =
all``): what an enqueue costs the server in executor runs."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from django.db import connection, transaction


def _collector(reported: list[str]) -> Callable[[Any], None]:
    """A notice handler adding the query text of each statement auto_explain reports."""

    def on_notice(diagnostic: Any) -> None:
        message = diagnostic.message_primary or ""
        if message.startswith("duration:"):
            plan = json.loads(message.split("plan:", 1)[1])
            reported.append(" ".join(plan["Query Text"].split()))

    return on_notice


def _explain_all(cursor: Any, scope: str, *, nested: bool) -> None:
    # Superuser only, as the test cluster's user is.
    cursor.execute("LOAD 'auto_explain'")
    cursor.execute(f"SET {scope} auto_explain.log_min_duration = 0")
    cursor.execute(f"SET {scope} auto_explain.log_format = 'json'")
    cursor.execute(f"SET {scope} auto_explain.log_level = 'notice'")
    cursor.execute(f"SET {scope} auto_explain.log_nested_statements = {'on' if nested else 'off'}")
    cursor.execute(f"SET {scope} client_min_messages = 'notice'")


def statements_at_commit(body: Callable[[], Any]) -> list[str]:
    """Run ``body`` in a transaction and return the text of each top-level statement its commit
    ran, in order (the statements of deferred triggers; BEGIN and COMMIT themselves are no
    executor runs)."""
    reported: list[str] = []
    on_notice = _collector(reported)
    raw: Any = None
    try:
        with transaction.atomic():
            with connection.cursor() as cursor:
                _explain_all(cursor, "LOCAL", nested=False)
            body()
            # From here on, what is reported is the commit's.
            raw = connection.connection
            raw.add_notice_handler(on_notice)
    finally:
        if raw is not None:
            raw.remove_notice_handler(on_notice)
    return reported


def statements_run(body: Callable[[], Any]) -> list[str]:
    """Run ``body`` on Django's connection as it stands (autocommit, or the caller's
    transaction) and return the text of every statement the server ran for it, nested ones
    included, in the order they finished (a function's statements before its call's)."""
    reported: list[str] = []
    on_notice = _collector(reported)
    with connection.cursor() as cursor:
        _explain_all(cursor, "SESSION", nested=True)
    raw = connection.connection
    raw.add_notice_handler(on_notice)
    try:
        body()
    finally:
        raw.remove_notice_handler(on_notice)
        with connection.cursor() as cursor:
            cursor.execute("RESET auto_explain.log_min_duration")
            cursor.execute("RESET auto_explain.log_nested_statements")
            cursor.execute("RESET client_min_messages")
    return reported
