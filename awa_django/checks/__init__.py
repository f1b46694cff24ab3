"""System checks: invalid ``AWA`` settings fail ``manage.py check`` with ``awa.E0xx`` ids."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from importlib import import_module
from typing import Any, Final

from django.apps import AppConfig
from django.conf import settings
from django.core.checks import CheckMessage, Error, Tags, Warning, register
from django.urls import NoReverseMatch, reverse

from awa_django import conf
from awa_django.declarations import cron as declarations

# Where Django's Tasks framework comes from: built in on Django 6, the django-tasks backport on
# Django 5.2 (awa_django.tasks.compat imports whichever is there).
TASKS_FRAMEWORKS: Final = ("django.tasks", "django_tasks")


@register()
def check_settings(app_configs: Sequence[AppConfig] | None = None, **_: Any) -> list[CheckMessage]:
    """Every problem ``conf.problems()`` finds, as a Django check error."""
    return [
        Error(problem.message, id=problem.id, hint="See docs/configuration.md for every AWA key.")
        for problem in conf.problems()
    ]


@register(Tags.security)
def check_callback_endpoint(
    app_configs: Sequence[AppConfig] | None = None, **_: Any
) -> list[CheckMessage]:
    """A mounted callback endpoint without ``CALLBACK_SECRET`` refuses everything, or (with
    ``CALLBACK_ALLOW_UNSIGNED``) accepts anyone's callbacks: both deserve a warning."""
    if conf.problems():
        return []
    awa = conf.get_settings()
    if awa.CALLBACK_SECRET:
        return []
    if not getattr(settings, "ROOT_URLCONF", None):
        return []  # a worker-only settings module: no URLs, so no endpoint to protect
    try:
        reverse("awa_django:callback", kwargs={"token": "1-1-" + "0" * 32, "action": "complete"})
    except NoReverseMatch:
        return []  # awa_django.urls is not included: there is no endpoint to protect
    if awa.CALLBACK_ALLOW_UNSIGNED:
        return [
            Warning(
                "The awa callback endpoint accepts unsigned requests: anyone who learns a "
                "callback token can resolve its job.",
                id="awa.W051",
                hint="Set AWA['CALLBACK_SECRET'] and sign callbacks (docs/callbacks.md).",
            )
        ]
    return [
        Warning(
            "The awa callback endpoint is mounted but AWA['CALLBACK_SECRET'] is not set: it "
            "refuses every request (503).",
            id="awa.W050",
            hint="Set AWA['CALLBACK_SECRET'] (e.g. secrets.token_hex(32)), or "
            "AWA['CALLBACK_ALLOW_UNSIGNED'] = True for local development only.",
        )
    ]


@register()
def check_cron(app_configs: Sequence[AppConfig] | None = None, **_: Any) -> list[CheckMessage]:
    """Every declared schedule (``@awa.periodic`` and ``AWA["CRON"]``) resolves: a valid cron
    expression (awa.E030), timezone (E031) and options (E032), unique names (E033), and
    well-formed ``AWA["CRON"]`` entries (E034)."""
    if conf.problems():
        return []
    return [
        Error(str(problem), id=problem.check_id, hint="See docs/scheduling.md.")
        for problem in declarations.schedule_problems()
    ]


@register()
def check_scheduling_settings(
    app_configs: Sequence[AppConfig] | None = None, **_: Any
) -> list[CheckMessage]:
    """Scheduling options that have no effect in the chosen concurrency mode."""
    return [
        Warning(problem.message, id=problem.id, hint="See docs/scheduling.md.")
        for problem in conf.scheduling_warnings()
    ]


@register()
def check_worker_session(
    app_configs: Sequence[AppConfig] | None = None, **_: Any
) -> list[CheckMessage]:
    """Workers need a session (LISTEN, the leader's advisory lock): warn when their alias is one
    Django was told goes through a transaction pooler (``DISABLE_SERVER_SIDE_CURSORS``)."""
    if conf.problems():
        return []
    awa = conf.get_settings()
    if not awa.WORKER_SESSION:
        return []  # poll-only workers hold no session: a transaction pooler suits them
    # Where workers connect: WORKER_DATABASE stands for DATABASE_ALIAS; the other databases
    # holding queues (a queue's "database") are reached through their own alias.
    targets = [awa.WORKER_DATABASE or awa.DATABASE_ALIAS]
    targets += [alias for alias in awa.databases if alias != awa.DATABASE_ALIAS]
    return [
        _pooled_worker_database(alias)
        for alias in targets
        if alias in settings.DATABASES
        and settings.DATABASES[alias].get("DISABLE_SERVER_SIDE_CURSORS")
    ]


def _pooled_worker_database(alias: str) -> CheckMessage:
    awa = conf.get_settings()
    fix = (
        "Set AWA['WORKER_DATABASE'] to an alias or DSN with a direct (or session-pooled) connection"
        if alias == (awa.WORKER_DATABASE or awa.DATABASE_ALIAS)
        else f"Point {alias!r} (which holds queues) at a direct or session-pooled connection"
    )
    return Warning(
        f"awa workers connect through database {alias!r}, which sets "
        "DISABLE_SERVER_SIDE_CURSORS, so it goes through a transaction pooler; LISTEN and "
        "the maintenance leader's session lock do not work there.",
        id="awa.W060",
        hint=f"{fix}, or AWA['WORKER_SESSION'] = False for poll-only workers; see "
        "docs/deployment.md.",
    )


def _names_awa_backend(alias_options: object) -> bool:
    backend = alias_options.get("BACKEND") if isinstance(alias_options, Mapping) else None
    return isinstance(backend, str) and backend.startswith("awa_django.tasks")


def _tasks_framework_installed() -> bool:
    for module in TASKS_FRAMEWORKS:
        try:
            import_module(module)
        except ImportError:
            continue
        return True
    return False


@register()
def check_tasks_framework(
    app_configs: Sequence[AppConfig] | None = None, **_: Any
) -> list[CheckMessage]:
    """``TASKS`` names ``AwaBackend`` but neither ``django.tasks`` nor the backport is
    installed: Django 5.2 ignores the setting, so every ``@task`` would fail at import or
    enqueue, while ``check`` passed."""
    tasks = getattr(settings, "TASKS", None)
    if not isinstance(tasks, Mapping) or not any(map(_names_awa_backend, tasks.values())):
        return []
    if _tasks_framework_installed():
        return []
    return [
        Error(
            "settings.TASKS names awa_django.tasks.AwaBackend, but Django's Tasks framework is "
            "not installed: Django 6 has it built in (django.tasks); on Django 5.2 it is the "
            "django-tasks backport.",
            id="awa.E102",
            hint="Install the backport (awa_django's [tasks-backport] extra, or pip install "
            "'django-tasks>=0.8'), or upgrade to Django 6; see docs/django-tasks.md.",
        )
    ]
