"""Writing the declared schedules at process start, which every worker and ``awa_maintenance``
process does before it runs anything."""

from __future__ import annotations

from typing import Any

from psycopg_pool import AsyncConnectionPool

from awa_django.declarations.cron import declared_schedules
from awa_django.exceptions import ConfigError, InvalidSchedule
from awa_django.storage.cron import sync_cron_jobs
from awa_django.storage.statement import run_async


def declared_schedule_rows() -> list[dict[str, Any]]:
    """The declared schedules as rows; ``ConfigError`` (naming the check) when one is invalid,
    read before any connection opens so a bad declaration stops the process at once."""
    try:
        return [schedule.as_row() for schedule in declared_schedules()]
    except InvalidSchedule as exc:
        raise ConfigError(f"{exc} ({exc.check_id}; run manage.py check for all)") from None


async def publish_schedules(pool: AsyncConnectionPool[Any], rows: list[dict[str, Any]]) -> None:
    if rows:
        # Each deployment adds or updates the schedules it declares and deletes none.
        async with pool.connection() as conn:
            await run_async(conn, sync_cron_jobs(rows))
