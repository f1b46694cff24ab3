"""Where a ``django.tasks`` priority is stored among awa's lane priorities.

A lane priority is a smallint, and a lower one is claimed first. Native ``@awa.job``
priorities are 1..4 (default 2); Django's are -100..100, a higher one claimed first, default 0.
A Django priority is stored as ``2 - priority``: each of its 201 values has a lane priority of
its own (-98..102), Django's default 0 shares awa's default lane 2, and the native priorities 1,
3 and 4 rank with Django's 1, -1 and -2. Jobs of both kinds in one queue are then claimed in one
order, and equal priorities in enqueue order.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

# The lane Django's default priority 0 is stored in: awa's built-in DEFAULT_PRIORITY, fixed
# rather than read from settings, so a job's lane never depends on the settings it was
# enqueued under.
DJANGO_DEFAULT_LANE: Final = 2
DJANGO_PRIORITY_MIN: Final = -100
DJANGO_PRIORITY_MAX: Final = 100


def awa_priority(django_priority: int) -> int:
    """The lane priority a Django priority -100..100 is stored at: -98 (for 100) .. 102."""
    return DJANGO_DEFAULT_LANE - django_priority


# How the django.tasks backend names the jobs it enqueues (this prefix, then the task's module
# path), and the metadata key under which it records the task's own settings, its priority
# among them.
TASK_KIND_PREFIX: Final = "django.tasks:"
TASK_METADATA_KEY: Final = "django_tasks"


def django_priority(stored: int) -> int:
    """The Django priority stored at lane priority ``stored`` (the inverse of ``awa_priority``)."""
    return DJANGO_DEFAULT_LANE - stored


def shown_priority(kind: str, stored: int, metadata: Mapping[str, Any]) -> str:
    """A job's priority for operators: a django.tasks task's Django priority, as it was enqueued
    with, and the lane it is stored at; any other job's stored priority. The two can disagree:
    a task enqueued by awa_django 0.1.0 sits in one of the lanes 1..4, and a retry may have
    moved a job to another priority."""
    if not kind.startswith(TASK_KIND_PREFIX):
        return str(stored)
    task_meta = metadata.get(TASK_METADATA_KEY)
    enqueued = task_meta.get("priority") if isinstance(task_meta, Mapping) else None
    if isinstance(enqueued, bool) or not isinstance(enqueued, int):
        enqueued = django_priority(stored)
    return f"{enqueued} (django.tasks; lane {stored})"


# Every lane priority a job can be stored at, native 1..4 included.
STORED_PRIORITY_MIN: Final = awa_priority(DJANGO_PRIORITY_MAX)
STORED_PRIORITY_MAX: Final = awa_priority(DJANGO_PRIORITY_MIN)
