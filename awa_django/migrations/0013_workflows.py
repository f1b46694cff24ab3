"""Durable workflows (docs/workflows.md): the workflow tables, the 'held' state of
awa.deferred_jobs (steps waiting for their dependencies), the workflow functions, and
awa.close_batch and awa.cancel_job applied again, which now hand the steps they end to
awa.workflow_steps_ended.

The admin's Workflows page gets its unmanaged model (no database object).

The reverse drops the workflow tables, functions and held rows, and restores the two closers
as migration 0012 left them.
"""

from django.db import migrations, models

from awa_django import sql


class Migration(migrations.Migration):
    dependencies = [("awa_django", "0012_unknown_kinds")]
    operations = [
        migrations.RunSQL(
            sql=sql.migration("0013_workflows", "up"),
            reverse_sql=sql.migration("0013_workflows", "down"),
        ),
        migrations.RunSQL(
            sql=sql.functions("workflows", "close", "cancel"),
            reverse_sql=migrations.RunSQL.noop,
        ),
        migrations.RunSQL(
            sql=sql.migration("0013_workflows", "triggers"), reverse_sql=migrations.RunSQL.noop
        ),
        migrations.CreateModel(
            name="Workflow",
            fields=[("workflow_id", models.BigIntegerField(primary_key=True, serialize=False))],
            options={
                "verbose_name": "workflow",
                "db_table": 'awa"."workflows',
                "managed": False,
            },
        ),
    ]
