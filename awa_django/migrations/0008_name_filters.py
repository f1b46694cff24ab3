"""The admin's kind and queue filters read an index: a btree on (queue, kind, job_id) on
awa.ready_entries (declared on the partitioned parent, so on every partition), awa.deferred_jobs,
awa.terminal_history and awa.dlq_entries. Building them locks each table against writes for the
length of the build.

The reverse drops the four indexes.
"""

from django.db import migrations

from awa_django import sql


class Migration(migrations.Migration):
    dependencies = [("awa_django", "0007_operator_console")]
    operations = [
        migrations.RunSQL(
            sql=sql.migration("0008_name_filters", "up"),
            reverse_sql=sql.migration("0008_name_filters", "down"),
        ),
    ]
