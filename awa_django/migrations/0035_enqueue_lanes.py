"""A commit publishes every lane its transaction wrote in one statement (#32): the first firing
of ``awa.publish_ready`` that has rows to publish publishes its own row's lane and every lane
``awa.enqueue_job`` listed in the transaction's ``awa.unpublished``, so a transaction that
enqueues into two queues runs as many statements at commit as one that enqueues into one, and
the later firings return at once (docs/architecture.md, "Enqueue").

Only function definitions change. The reverse restores both from
``sql/migrations/0035_enqueue_lanes/down.sql``.
"""

from django.db import migrations

from awa_django import sql


class Migration(migrations.Migration):
    dependencies = [("awa_django", "0034_health_counts")]
    operations = [
        migrations.RunSQL(
            sql=sql.functions("enqueue"),
            reverse_sql=sql.migration("0035_enqueue_lanes", "down"),
        ),
    ]
