"""The operator console beyond one hour (#36): awa.queue_meta.concurrency (new), a queue's
concurrency set live by an operator, which workers serving the queue use until it is reset; and
awa.queue_stat_rollups (new), the leader's 15-second samples compacted into 1-minute and
15-minute buckets per queue and per kind, for the 24-hour and 7-day charts.

The reverse drops both.
"""

from django.db import migrations

from awa_django import sql


class Migration(migrations.Migration):
    # 0018 is added in parallel on another branch; the dependency is rewired when both merge.
    dependencies = [("awa_django", "0017_lanes")]
    operations = [
        migrations.RunSQL(
            sql=sql.migration("0019_console_history", "up"),
            reverse_sql=sql.migration("0019_console_history", "down"),
        ),
    ]
