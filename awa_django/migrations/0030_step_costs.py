"""What the server does per workflow step (#34):

- the foreign keys of ``awa.workflow_steps`` (to its workflow) and ``awa.workflow_edges`` (to
  its dependent step) are dropped: each checked the referenced row for every step and edge
  written; ``awa.workflow_prune`` deletes a workflow's steps and edges itself;
- ``awa.workflow_steps`` gets a fillfactor, so that a step's release and end update its row in
  place (HOT);
- ``awa.workflow_steps_ended`` reads whether a workflow was cancelled once per close batch, not
  once per step.

The reverse restores the keys, the fillfactor and the two functions
(``sql/migrations/0030_step_costs/down.sql``).
"""

from django.db import migrations

from awa_django import sql


class Migration(migrations.Migration):
    dependencies = [("awa_django", "0029_admin_scale")]
    operations = [
        migrations.RunSQL(
            sql=sql.migration("0030_step_costs", "up") + sql.functions("workflows"),
            reverse_sql=sql.migration("0030_step_costs", "down"),
        ),
    ]
