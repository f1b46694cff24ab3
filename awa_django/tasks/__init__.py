"""Django's ``django.tasks`` framework on awa: ``TASKS = {"default": {"BACKEND":
"awa_django.tasks.AwaBackend"}}`` (docs/django-tasks.md).

Needs Django 6's built-in ``django.tasks`` or, on Django 5.2, the ``django-tasks`` backport
(``pip install awa-django[tasks-backport]``). ``AwaTask`` is the ``task_class`` of
``AwaBackend``: ``@task`` and ``using()`` also take awa's ``max_attempts`` and ``tags``.
"""

from __future__ import annotations

from awa_django.declarations.priorities import awa_priority
from awa_django.tasks.awa_task import AwaTask
from awa_django.tasks.backend import AwaBackend

__all__ = ["AwaBackend", "AwaTask", "awa_priority"]
