"""A bulk enqueue's lane goes on its transaction's list of lanes to publish (#32): the
reservation of a COPY (``reserve_ready_batch``) lists its lane with ``awa.list_lane``, which
``awa.enqueue_job`` now calls too, so a transaction that enqueues one job and then a batch into
another lane publishes both lanes at commit in one statement, as two single enqueues do since
0035 (docs/architecture.md, "Enqueue").

Only function definitions change. The reverse restores ``awa.enqueue_job`` and drops
``awa.list_lane`` (``sql/migrations/0036_bulk_cost/down.sql``).
"""

from django.db import migrations

from awa_django import sql


class Migration(migrations.Migration):
    dependencies = [("awa_django", "0035_enqueue_lanes")]
    operations = [
        migrations.RunSQL(
            sql=sql.functions("enqueue"),
            reverse_sql=sql.migration("0036_bulk_cost", "down"),
        ),
    ]
