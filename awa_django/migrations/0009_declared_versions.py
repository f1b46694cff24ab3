"""Drift badges show the values of every declared version: awa.declared_versions records, once
per (queue or kind, hash), the fields a worker declares, and the leader deletes versions that
nothing declares any more. A new table only: workers of 0.1.0 keep running beside it (their
versions show by hash until they are replaced).

The reverse drops the table.
"""

from django.db import migrations

from awa_django import sql


class Migration(migrations.Migration):
    dependencies = [("awa_django", "0008_name_filters")]
    operations = [
        migrations.RunSQL(
            sql=sql.migration("0009_declared_versions", "up"),
            reverse_sql=sql.migration("0009_declared_versions", "down"),
        ),
    ]
