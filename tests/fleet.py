"""How many server connections worker processes hold: pg_stat_activity rows of the test
database, by application_name (the worker's own connections say ``awa_worker``)."""

from __future__ import annotations

from collections import Counter

from django.db import connection


def backends(dbname: str | None = None) -> Counter[str]:
    """Client backends of ``dbname`` (default: the test database) other than this test's own
    connection, counted by application_name."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT application_name, count(*) FROM pg_stat_activity "
            "WHERE datname = %s AND backend_type = 'client backend' AND pid <> pg_backend_pid() "
            "GROUP BY 1",
            [dbname or connection.settings_dict["NAME"]],
        )
        return Counter(dict(cursor.fetchall()))
