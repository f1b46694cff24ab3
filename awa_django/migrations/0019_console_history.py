"""The operator console beyond one hour (#36): awa.queue_meta.concurrency (new), a queue's
concurrency set live by an operator, which workers serving the queue use until it is reset; and
awa.queue_stat_rollups (new), the leader's 15-second samples compacted into 1-minute and
15-minute buckets per queue and per kind, for the 24-hour and 7-day charts.

The reverse drops both.
"""

from django.db import migrations

from awa_django import sql


class Migration(migrations.Migration):
    # Numbered 0019 when 0018 was being written in parallel; it follows main's newest
    # migration (0020_workflow_release) so that the graph has one leaf.
    dependencies = [("awa_django", "0018_inline_publish")]
    operations = [
        migrations.RunSQL(
            sql=sql.migration("0019_console_history", "up"),
            reverse_sql=sql.migration("0019_console_history", "down"),
        ),
    ]
