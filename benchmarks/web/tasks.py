"""The django.tasks function the django-tasks-db client enqueues (never run: no worker)."""

from __future__ import annotations

from awa_django.tasks.compat import task


@task(queue_name="bench")
def bench_noop(n: int, payload: str) -> None:
    return None
