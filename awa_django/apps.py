"""Django app configuration for awa_django."""

from __future__ import annotations

from collections.abc import Sequence

from django.apps import AppConfig

from awa_django.eager import EagerAttempt, use_runner


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
        from awa_django.jobs import registry
        from awa_django.schema_guard import refuse_schema_drop

        use_runner(_run_in_process)
        # Django's own @task functions, stored by module path (see awa_django.tasks); named by
        # path so that the optional django.tasks stays optional.
        registry.add_resolver("django.tasks:", "awa_django.tasks.runner.resolve")

        # Sent once per app: only awa's own copy of the signal needs to look at the plan.
        pre_migrate.connect(refuse_schema_drop, sender=self, dispatch_uid="awa_schema_guard")


def _run_in_process(queue: str, job_ids: Sequence[int]) -> Sequence[EagerAttempt]:
    # Imported on the first eager run: a process that never runs a job eagerly never loads
    # the worker.
    from awa_django.worker.in_process import InProcessRunner

    return InProcessRunner().run_eagerly(queue, job_ids)
