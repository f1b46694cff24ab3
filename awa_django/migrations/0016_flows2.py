"""Workflows, the remaining parts of #34: retrying a step that failed for good resumes its
workflow (awa.workflow_step_retried, new, called by awa.workflow_dead_letter_gone when a retry
takes the step's DLQ entry), a workflow is finished only once it has no unfinished step, and
awa.workflow_cancel takes its locks in the closers' order (awa.workflow_cancel_step, new,
never waits for another closer of an attempt), so it no longer deadlocks with them.

Only function definitions change. The reverse drops the new functions and restores from
``sql/migrations/0016_flows2/down.sql`` the definitions 0013 applied.
"""

from django.db import migrations

from awa_django import sql


class Migration(migrations.Migration):
    dependencies = [("awa_django", "0015_cron_fires")]
    operations = [
        migrations.RunSQL(
            sql=sql.functions("workflows"), reverse_sql=sql.migration("0016_flows2", "down")
        ),
    ]
