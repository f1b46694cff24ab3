"""Whether awa_django's migrations are applied on a database, and the one message that says
they are not.

The operator commands and the worker ask before they run (``pending_migrations``, from
``awa_django.management.command``). ``enqueue`` runs inside requests, so it asks nothing: a
statement of it that meets a schema its code does not know (no ``awa`` schema at all, or one
without a table, column or function a later migration adds) is reported with the same message,
as ``awa.NotMigrated`` (``reported_unmigrated``), instead of the database's error.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import TracebackType
from typing import Final

from django.db import ProgrammingError, connections
from django.db.migrations.executor import MigrationExecutor

from awa_django.exceptions import NotMigrated

# SQLSTATEs of a statement that names what only a migration creates: invalid_schema_name
# (schema "awa" does not exist, from a function call), undefined_table, undefined_column,
# undefined_function.
MISSING_OBJECT_STATES: Final = frozenset({"3F000", "42P01", "42703", "42883"})


def not_migrated_message(alias: str, *, detail: str) -> str:
    """What every surface says when awa_django's migrations are not applied on ``alias``."""
    return (
        f"awa_django migrations are not applied on database {alias!r} ({detail}). "
        f"Run: python manage.py migrate --database {alias}"
    )


def pending_migrations(alias: str) -> list[str]:
    """The names of awa_django's migrations not applied on database ``alias``."""
    executor = MigrationExecutor(connections[alias])
    targets = [key for key in executor.loader.graph.leaf_nodes() if key[0] == "awa_django"]
    return [migration.name for migration, _ in executor.migration_plan(targets)]


def pending_message(alias: str, pending: Sequence[str]) -> str:
    return not_migrated_message(alias, detail=f"pending: {', '.join(pending)}")


class reported_unmigrated:
    """Raise ``NotMigrated`` instead of the error of a statement on ``alias`` that met a schema
    without what a migration creates. The migration state itself is not read: the caller's
    transaction is aborted by then.

    A class rather than a ``@contextmanager`` generator: every enqueue enters one, and the
    generator's machinery costs several calls more on that path."""

    __slots__ = ("alias",)

    def __init__(self, alias: str) -> None:
        self.alias = alias

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc is None or not isinstance(exc, ProgrammingError):
            return
        if getattr(exc.__cause__, "sqlstate", None) not in MISSING_OBJECT_STATES:
            return
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise NotMigrated(not_migrated_message(self.alias, detail=first_line)) from exc
