"""Less server work per enqueue (#32): the lanes a transaction is to publish at commit are one
setting, ``awa.lanes`` (their JSON keys, which the commit's statement reads as a jsonb array),
instead of four (three arrays and the keys); ``awa.list_lane`` is a SQL function the planner
inlines into its callers; ``awa.published`` keys a lane by that JSON key instead of its
sequence's name (an ``md5`` per lane); and the autocommit enqueue (``awa.enqueue_job_alone``)
reads the ring's slot, writes its row and publishes it in one statement instead of three
(docs/architecture.md, "Enqueue").

Only function definitions change. The reverse restores the three functions from
``sql/migrations/0037_enqueue_server/down.sql``.
"""

from django.db import migrations

from awa_django import sql


class Migration(migrations.Migration):
    dependencies = [("awa_django", "0036_bulk_cost")]
    operations = [
        migrations.RunSQL(
            sql=sql.functions("enqueue"),
            reverse_sql=sql.migration("0037_enqueue_server", "down"),
        ),
    ]
