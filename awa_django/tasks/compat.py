"""One import surface over Django's built-in ``django.tasks`` (Django 6.x) and the
``django-tasks`` backport (Django 5.2, ``pip install awa-django[tasks-backport]``).

The built-in framework wins when both are importable: on Django 6 that is what ``@task`` code
uses, and a backend must hand back the same ``TaskResult`` classes the caller imported.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

try:
    from django.tasks import (
        Task,
        TaskContext,
        TaskResult,
        TaskResultStatus,
        task,
        task_backends,
    )
    from django.tasks.backends.base import BaseTaskBackend
    from django.tasks.base import TaskError
    from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist
    from django.tasks.signals import (
        log_task_finished,
        log_task_started,
        task_enqueued,
        task_finished,
        task_started,
    )
    from django.utils.json import normalize_json
except ImportError:
    # Type-checked against django.tasks (django-stubs); the backport mirrors that API.
    if not TYPE_CHECKING:
        from django_tasks import (
            TaskContext,
            TaskResult,
            TaskResultStatus,
            task,
            task_backends,
        )
        from django_tasks.backends.base import BaseTaskBackend
        from django_tasks.base import Task, TaskError
        from django_tasks.exceptions import InvalidTaskError as InvalidTask
        from django_tasks.exceptions import TaskResultDoesNotExist
        from django_tasks.signals import (
            log_task_finished,
            log_task_started,
            task_enqueued,
            task_finished,
            task_started,
        )
        from django_tasks.utils import normalize_json

__all__ = [
    "BaseTaskBackend",
    "InvalidTask",
    "Task",
    "TaskContext",
    "TaskError",
    "TaskResult",
    "TaskResultDoesNotExist",
    "TaskResultStatus",
    "log_task_finished",
    "log_task_started",
    "normalize_json",
    "task",
    "task_backends",
    "task_enqueued",
    "task_finished",
    "task_started",
]
