"""What the server does per workflow step (#34):

- the foreign keys of ``awa.workflow_steps`` (to its workflow) and ``awa.workflow_edges`` (to
  its dependent step) are dropped: each checked the referenced row for every step and edge
  written; ``awa.workflow_prune`` deletes a workflow's steps and edges itself;
- ``awa.workflow_steps`` gets a fillfactor, so that a step's release and end update its row in
  place (HOT);
- ``awa.workflow_steps_ended`` reads whether a workflow was cancelled, and whether it has
  edges, once per close batch, not once per step; ``awa.close_batch`` passes it each step's
  workflow id as the worker read it from the step's metadata (``wf_id``), so that the step is
  not looked up before the workflow's lock (an older worker's items, without it, still are).

The reverse restores the keys, the fillfactor and the three functions
(``sql/migrations/0030_step_costs/down.sql``).
"""

from django.db import migrations

from awa_django import sql


class Migration(migrations.Migration):
    dependencies = [("awa_django", "0029_admin_scale")]
    operations = [
        migrations.RunSQL(
            sql=sql.migration("0030_step_costs", "up")
            + sql.functions("workflows")
            + sql.functions("close"),
            reverse_sql=sql.migration("0030_step_costs", "down"),
        ),
    ]
