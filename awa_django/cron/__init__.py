"""Periodic jobs: ``awa.periodic`` declares them, ``awa.cron`` manages the stored schedules.

``awa.cron.list()``, ``pause(name)``, ``resume(name)``, ``trigger(name)``, ``remove(name)``;
see docs/scheduling.md.
"""

from __future__ import annotations

from awa_django.cron.declarations import Schedule, periodic
from awa_django.cron.operations import list_schedules as list
from awa_django.cron.operations import pause, remove, resume, trigger
from awa_django.storage.cron import CronJobRecord

__all__ = ["CronJobRecord", "Schedule", "list", "pause", "periodic", "remove", "resume", "trigger"]
