"""The statements PostgreSQL runs as a transaction of Django's connection commits, as
``pg_stat_statements`` with ``track = top`` would count them, without it in the test cluster:
``auto_explain`` (loaded in the session, logging at NOTICE level for this transaction only)
reports every top-level statement the executor runs, and the ones reported during the COMMIT
are those of the deferred triggers that fire there (#32)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from django.db import connection, transaction


def statements_at_commit(body: Callable[[], Any]) -> list[str]:
    """Run ``body`` in a transaction and return the text of each top-level statement its commit
    ran, in order (the statements of deferred triggers; BEGIN and COMMIT themselves are no
    executor runs)."""
    reported: list[str] = []

    def on_notice(diagnostic: Any) -> None:
        message = diagnostic.message_primary or ""
        if message.startswith("duration:"):
            plan = json.loads(message.split("plan:", 1)[1])
            reported.append(" ".join(plan["Query Text"].split()))

    raw: Any = None
    try:
        with transaction.atomic():
            with connection.cursor() as cursor:
                # Superuser only, as the test cluster's user is; settings for this transaction.
                cursor.execute("LOAD 'auto_explain'")
                cursor.execute("SET LOCAL auto_explain.log_min_duration = 0")
                cursor.execute("SET LOCAL auto_explain.log_format = 'json'")
                cursor.execute("SET LOCAL auto_explain.log_level = 'notice'")
                cursor.execute("SET LOCAL client_min_messages = 'notice'")
            body()
            # From here on, what is reported is the commit's.
            raw = connection.connection
            raw.add_notice_handler(on_notice)
    finally:
        if raw is not None:
            raw.remove_notice_handler(on_notice)
    return reported
