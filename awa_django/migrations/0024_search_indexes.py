"""Indexes for the operator console's content search (issue #36): arguments (GIN
jsonb_path_ops), tags (GIN) and error text (pg_trgm GIN on ``awa.error_text``), each partial so
that only rows that can match pay for an entry. Creates the pg_trgm extension when it is
missing, or stops with a message naming what to ask for.

The reverse drops the indexes and ``awa.error_text``; the extension stays.
"""

from django.db import migrations

from awa_django import sql


class Migration(migrations.Migration):
    dependencies = [("awa_django", "0023_workflow_costs")]
    operations = [
        migrations.RunSQL(
            sql=sql.migration("0024_search_indexes", "up"),
            reverse_sql=sql.migration("0024_search_indexes", "down"),
        ),
    ]
