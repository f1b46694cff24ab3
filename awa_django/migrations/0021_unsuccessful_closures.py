"""The failed and cancelled closures by job id (a partial index on awa.done_entries): the
pages, counts and bulk walks of those states read only them instead of every closure of the
ring (issue #36). Completed closures, the hot path's, add no index entry.

The reverse drops the index.
"""

from django.db import migrations

from awa_django import sql


class Migration(migrations.Migration):
    dependencies = [("awa_django", "0020_workflow_release")]
    operations = [
        migrations.RunSQL(
            sql=sql.migration("0021_unsuccessful_closures", "up"),
            reverse_sql=sql.migration("0021_unsuccessful_closures", "down"),
        ),
    ]
