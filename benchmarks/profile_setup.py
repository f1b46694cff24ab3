"""What the counting profiles (enqueue_profile, bulk_profile) start with: Django set up on the
benchmark settings with the schema migrated, and an autocommit connection that reads
pg_stat_statements."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import psycopg


def migrated_django(awa_overrides: dict[str, Any] | None = None) -> None:
    """Django on ``benchmarks.settings`` (with ``AWA_OVERRIDES`` when given), migrated."""
    os.environ["DJANGO_SETTINGS_MODULE"] = "benchmarks.settings"
    if awa_overrides is not None:
        os.environ["AWA_OVERRIDES"] = json.dumps(awa_overrides)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def statements_monitor() -> psycopg.Connection[Any]:
    """An autocommit connection to ``DATABASE_URL`` with pg_stat_statements installed; exits
    with a message when the variable is not set."""
    url = os.environ.get("DATABASE_URL")
    if not url:
        sys.exit("DATABASE_URL is not set: run under scripts/with_postgres.py")
    monitor = psycopg.connect(url, autocommit=True)
    monitor.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    return monitor
