"""Releasing workflow steps reads each released step's dependencies through its edges
(awa.workflow_release): it read every step of the workflow for each step it released, so
starting a chord of n members read about n² rows (a 10,000-member chord took minutes).

Only function definitions change. The reverse restores from
``sql/migrations/0020_workflow_release/down.sql`` the awa.workflow_release of 0013.
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
