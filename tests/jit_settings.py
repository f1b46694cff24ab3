"""The JIT setting an operator read plans its statements with (Django's connection plans with
JIT unless the read turns it off)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.db import connection


def show_jit() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SHOW jit")
        return str(cursor.fetchone()[0])


@contextmanager
def jit_before(marker: str) -> Iterator[list[str]]:
    """Within the block, the setting in force before each statement whose SQL holds ``marker``."""
    seen: list[str] = []

    def note(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        if marker in sql:
            seen.append(show_jit())
        return execute(sql, params, many, context)

    with connection.execute_wrapper(note):
        yield seen
