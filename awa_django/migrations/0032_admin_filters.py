"""Indexes for the admin filters that read a big table whole (issue #36): the DLQ's error type
(with ``awa.dlq_error_types`` and ``awa.dlq_kinds``, which turn an operator's prefix into the
names it matches) and reason, and ``state=held`` in the backlog.

The reverse drops the indexes and the functions.
"""

from django.db import migrations

from awa_django import sql


class Migration(migrations.Migration):
    dependencies = [("awa_django", "0031_enqueue_cost")]
    operations = [
        migrations.RunSQL(
            sql=sql.migration("0032_admin_filters", "up") + sql.functions("dlq"),
            reverse_sql=sql.migration("0032_admin_filters", "down"),
        ),
    ]
