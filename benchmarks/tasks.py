"""The ``django.tasks`` no-ops of the side-by-side benchmark's task drain: the same handlers as
``benchmarks.jobs``'s probes, declared with Django's ``@task`` instead of ``@awa.job``.

Which backend runs them is the settings' choice: ``benchmarks.settings`` puts them on awa
(``AwaBackend``), ``benchmarks.sidebyside.tasks_db_settings`` on django-tasks-db.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import transaction

from awa_django.declarations.priorities import DJANGO_PRIORITY_MAX, DJANGO_PRIORITY_MIN
from awa_django.tasks.compat import task
from benchmarks.sidebyside.probe import PROBE
from benchmarks.sidebyside.systems.base import TASK_MODES


@task(queue_name="bench")
def probe_sync(n: int, payload: str) -> None:
    PROBE.start(n)
    PROBE.finish(n)


@task(queue_name="bench")
async def probe_async(n: int, payload: str) -> None:
    PROBE.start(n)
    PROBE.finish(n)


def enqueue_tasks(args_list: Sequence[dict[str, Any]], mode: str) -> None:
    """One task of ``mode`` per argument dict, enqueued through the configured backend in one
    transaction (Django's task API has no bulk enqueue)."""
    if mode not in TASK_MODES:
        raise ValueError(f"unknown task mode {mode!r}")
    probe = probe_async if mode.startswith("task-async") else probe_sync
    if mode.endswith("-spread"):
        at = [probe.using(priority=p) for p in range(DJANGO_PRIORITY_MIN, DJANGO_PRIORITY_MAX + 1)]
    else:
        at = [probe]
    with transaction.atomic():
        for index, args in enumerate(args_list):
            at[index % len(at)].enqueue(**args)
