"""The ready rows that wait are read after each lane's claim cursor, by one function,
``awa.waiting_entries`` (issue #36): queue health's depths, the lane backlog, the available
count, the drain confirmation's count and ``awa.drain_queue`` no longer probe every ready row
of the ring for its claim.

The reverse puts ``awa.drain_queue`` back as it was and drops the new function.
"""

from django.db import migrations

from awa_django import sql


class Migration(migrations.Migration):
    dependencies = [("awa_django", "0033_failed_pages")]
    operations = [
        migrations.RunSQL(
            sql=sql.functions("claim", "dlq"),
            reverse_sql=sql.migration("0034_health_counts", "down"),
        ),
    ]
