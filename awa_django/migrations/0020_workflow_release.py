"""Workflows at size (#34), two costs that grew with the work:

- releasing steps (awa.workflow_release) read every step of the workflow for each step it
  released, so starting a chord of n members read about n² rows (a 10,000-member chord took
  minutes); it now follows each released step's edges;
- a close batch of steps (awa.workflow_steps_ended) updated each step's row and its
  workflow's counters one item at a time; steps that completed and added nothing, of a
  workflow not cancelled, are now done for the whole batch in a few set statements (the rest
  as before; awa.workflow_settle, new, holds what follows a workflow's last step).

Only function definitions change. The reverse restores the earlier definitions from
``sql/migrations/0020_workflow_release/down.sql`` and drops awa.workflow_settle.
"""

from django.db import migrations

from awa_django import sql


class Migration(migrations.Migration):
    dependencies = [("awa_django", "0019_console_history")]
    operations = [
        migrations.RunSQL(
            sql=sql.functions("workflows"),
            reverse_sql=sql.migration("0020_workflow_release", "down"),
        ),
    ]
