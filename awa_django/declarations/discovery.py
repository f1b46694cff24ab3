"""Finding job handlers: every installed app's ``jobs`` module plus ``AWA["JOB_MODULES"]``."""

from __future__ import annotations

from functools import cache
from importlib import import_module

from django.utils.module_loading import autodiscover_modules

from awa_django.conf import get_settings


def discover_jobs() -> None:
    """Import the modules that declare ``@awa.job`` handlers, registering them."""
    autodiscover_modules("jobs")
    for module in get_settings().JOB_MODULES:
        import_module(module)


@cache
def ensure_jobs_discovered() -> None:
    """``discover_jobs`` once per process (enqueue by kind name calls this on a miss)."""
    discover_jobs()
