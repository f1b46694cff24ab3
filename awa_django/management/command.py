"""The base of awa_django's commands that read or write the queue: before its ``handle`` runs,
each one refuses, with one line, a database where awa_django's migrations are not applied.

Django's own ``requires_migrations_checks`` only prints a notice and goes on, so the first
statement then failed with a traceback ("schema "awa" does not exist"); ``check_migrations`` is
that hook, answering with the message the worker gives. It runs after the system checks, so
invalid settings are still reported by their check ids first. ``awa_health`` is not one of
these: it reports the migrations as one of its checks.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from awa_django.conf import get_settings
from awa_django.exceptions import UnknownDatabase
from awa_django.storage.migration_state import pending_message, pending_migrations


def require_migrated(alias: str) -> None:
    """Refuse to go on on a database where awa_django's migrations are not applied.

    Checked by the commands rather than as a system check: ``migrate`` runs the database checks
    before it migrates, so a check would warn about the very migrations it is applying.
    """
    pending = pending_migrations(alias)
    if pending:
        raise CommandError(pending_message(alias, pending))


def database_option(alias: str | None) -> str | None:
    """``--database``: an alias holding queues, or None when not given."""
    if alias is not None:
        chosen_database({"database": alias})
    return alias


def add_database_argument(parser: argparse.ArgumentParser) -> None:
    """``--database ALIAS`` of an operator command (queues in several databases)."""
    parser.add_argument(
        "--database",
        metavar="ALIAS",
        help="The database to act on (an alias holding queues); default: the named queue's "
        "database, else AWA['DATABASE_ALIAS'].",
    )


def chosen_database(options: Mapping[str, Any], *, queue: str | None = None) -> str:
    """The alias a command acts on: ``--database``, else ``queue``'s database, else
    ``DATABASE_ALIAS``; an alias holding no queue is refused with one line."""
    try:
        return get_settings().operator_database(options.get("database"), queue=queue)
    except UnknownDatabase as error:
        raise CommandError(f"--database: {error}") from None


class QueueCommand(BaseCommand):
    """A command that needs awa_django's schema on ``AWA["DATABASE_ALIAS"]``."""

    requires_migrations_checks = True

    def check_migrations(self) -> None:
        require_migrated(get_settings().DATABASE_ALIAS)
