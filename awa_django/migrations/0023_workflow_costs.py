"""Two costs of workflows (#34):

- enqueue: awa.workflow_create reads its spec once and writes every table from that reading in
  one statement, and a step without dependencies goes straight into the ready ring, released,
  instead of through a held row in awa.deferred_jobs that awa.workflow_release updated and then
  moved;
- a wide fan-in (more than awa.workflow_inputs_copied() dependencies, new) is released without
  its dependencies' results aggregated into its row: it reads them when it runs
  (awa.workflow_step_inputs, new).

Only functions change. The reverse restores the earlier definitions from
``sql/migrations/0023_workflow_costs/down.sql`` and drops the two new functions.
"""

from django.db import migrations

from awa_django import sql


class Migration(migrations.Migration):
    # Follows 0021: the number 0022 went unused (that change landed as 0025_aged_claims).
    dependencies = [("awa_django", "0021_unsuccessful_closures")]
    operations = [
        migrations.RunSQL(
            sql=sql.functions("workflows"),
            reverse_sql=sql.migration("0023_workflow_costs", "down"),
        ),
    ]
