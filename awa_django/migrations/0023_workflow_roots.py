"""Workflows enqueue for less (#34): awa.workflow_create reads its spec once and writes every
table from that reading in one statement, and a step without dependencies goes straight into
the ready ring, released, instead of through a held row in awa.deferred_jobs that
awa.workflow_release updated and then moved.

Only function definitions change. The reverse restores the earlier definitions from
``sql/migrations/0023_workflow_roots/down.sql``.
"""

from django.db import migrations

from awa_django import sql


class Migration(migrations.Migration):
    # 0022 is another change's; the lead orders the two at merge.
    dependencies = [("awa_django", "0021_unsuccessful_closures")]
    operations = [
        migrations.RunSQL(
            sql=sql.functions("workflows"),
            reverse_sql=sql.migration("0023_workflow_roots", "down"),
        ),
    ]
