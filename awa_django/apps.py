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
        from django.db.models.signals import pre_migrate

        from awa_django import checks, deploy_checks, signal_handlers  # noqa: F401
        from awa_django.schema_guard import refuse_schema_drop

        # Sent once per app: only awa's own copy of the signal needs to look at the plan.
        pre_migrate.connect(refuse_schema_drop, sender=self, dispatch_uid="awa_schema_guard")
