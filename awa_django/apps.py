"""Django app configuration for awa_django."""

from __future__ import annotations

from django.apps import AppConfig


class AwaConfig(AppConfig):
    name = "awa_django"
    label = "awa_django"
    verbose_name = "Awa job queue"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Importing registers the system checks and the settings-reset receiver; nothing here
        # touches the database.
        from awa_django import checks, signal_handlers  # noqa: F401
