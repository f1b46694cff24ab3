"""The admin's unmanaged models: no database objects, but Django permissions to check."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission
from django.core.management import call_command


@pytest.mark.django_db
def test_admin_models_migration_runs_no_sql(capsys):
    call_command("sqlmigrate", "awa_django", "0002")
    statements = [
        line
        for line in capsys.readouterr().out.splitlines()
        if line.strip() and not line.startswith("--") and line not in {"BEGIN;", "COMMIT;"}
    ]
    assert statements == []


@pytest.mark.django_db
def test_each_page_has_view_change_and_delete_permissions():
    codenames = set(
        Permission.objects.filter(content_type__app_label="awa_django").values_list(
            "codename", flat=True
        )
    )
    for model in ("job", "deadletter", "queue", "queuedescriptor", "kinddescriptor"):
        assert {f"view_{model}", f"change_{model}", f"delete_{model}"} <= codenames
    assert "view_runtimeinstance" in codenames


def test_a_row_is_named_by_its_key_with_what_it_is_when_the_key_is_a_number():
    from awa_django import models

    assert str(models.Job(job_id=12)) == "job 12"
    assert str(models.DeadLetter(job_id=12)) == "dead-letter job 12"
    assert str(models.Workflow(workflow_id=7)) == "workflow 7"
    assert str(models.Queue(queue="email")) == "email"
    assert str(models.QueueDescriptor(queue="email")) == "email"
    assert str(models.KindDescriptor(kind="send")) == "send"
    assert str(models.RuntimeInstance(instance_id="w-1")) == "w-1"


@pytest.mark.django_db
def test_the_models_need_no_new_migration():
    call_command("makemigrations", "awa_django", "--check", "--dry-run", verbosity=0)
