"""A single enqueue runs fewer statements inside its functions (#32): ``awa.producer_slot``
reads the ring cursor and pins it in one statement instead of two, and ``awa.enqueue_job_alone``
takes the lane's producer lock, appends the ``lane_commits`` row and tries the wake lock in one
``INSERT`` instead of three statements, as ``awa.publish_ready`` does since 0026
(docs/architecture.md, "Publication in the enqueue statement").

Only function definitions change. The reverse restores both from
``sql/migrations/0031_enqueue_cost/down.sql``.
"""

from django.db import migrations

from awa_django import sql


class Migration(migrations.Migration):
    dependencies = [("awa_django", "0030_step_costs")]
    operations = [
        migrations.RunSQL(
            sql=sql.functions("lanes", "enqueue"),
            reverse_sql=sql.migration("0031_enqueue_cost", "down"),
        ),
    ]
