"""A claim of a queue with more than 4 lanes per shard (django.tasks priorities) no longer probes
every lane the queue ever had: it visits the lanes of the queue's newest lane mark
(awa.lane_marks, new), plus the lanes of the commits that mark did not see (found by
transaction through the new index lane_commits_batch), and appends a new mark when it finds
lanes drained. awa.claim_order takes the lanes to order; awa.lane_has_work is gone.

The reverse restores awa.claim_ready, awa.claim_order and awa.lane_has_work as 0006 left them
and drops the marks and the index.
"""

from django.db import migrations

from awa_django import sql


class Migration(migrations.Migration):
    dependencies = [("awa_django", "0010_attempt_deadlines")]
    operations = [
        migrations.RunSQL(
            sql=sql.migration("0011_lane_marks", "up") + sql.functions("claim"),
            reverse_sql=sql.migration("0011_lane_marks", "down"),
        ),
    ]
