"""django.tasks priorities keep their own lanes: the backend stores Django's -100..100 as lane
priorities -98..102 (awa_django.priorities). awa.effective_priority no longer raises a row
stored more urgent than 1 to 1 when the queue ages priorities, which would have put Django's
priorities 2..100 level with each other. A queue may now have 201 lanes per shard, so past 4
lanes per shard the static lane order of awa.claim_order leaves out the lanes with nothing to
claim (awa.lane_has_work, new) instead of awa.claim_ready locking and reading each one.

The reverse restores the 0.1.0 awa.effective_priority and awa.claim_order and drops
awa.lane_has_work.
"""

from django.db import migrations

from awa_django import sql


class Migration(migrations.Migration):
    dependencies = [("awa_django", "0005_job_waiters")]
    operations = [
        migrations.RunSQL(
            sql=sql.functions("claim"),
            reverse_sql=sql.migration("0006_task_priorities", "down"),
        ),
    ]
