"""Django app configuration for awa_django."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.apps import AppConfig

if TYPE_CHECKING:
    from awa_django.declarations.jobs import DeclaredJob


class AwaConfig(AppConfig):
    name = "awa_django"
    label = "awa_django"
    verbose_name = "Awa job queue"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Importing registers the system checks; nothing here touches the database.
        from django.db.models.signals import pre_migrate

        from awa_django.checks import deploy  # noqa: F401
        from awa_django.checks.schema_guard import refuse_schema_drop
        from awa_django.declarations.jobs import registry
        from awa_django.declarations.priorities import TASK_KIND_PREFIX

        # Django's own @task functions, stored by module path (see awa_django.tasks).
        registry.add_resolver(TASK_KIND_PREFIX, _resolve_django_task)

        # Sent once per app: only awa's own copy of the signal needs to look at the plan.
        pre_migrate.connect(refuse_schema_drop, sender=self, dispatch_uid="awa_schema_guard")


def _resolve_django_task(kind: str) -> DeclaredJob[Any, Any] | None:
    # Imported on the first such kind, so that the optional django.tasks stays optional: where
    # it is missing, the kind is unknown here.
    try:
        from awa_django.tasks.runner import resolve
    except ImportError:
        return None
    return resolve(kind)
