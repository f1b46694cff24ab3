"""Statistics of the searchable error text of the backlog, the kept history and the DLQ, so the
planner tells a common error text from a rare one in the Jobs page's error search (issue #36).

The reverse drops them.
"""

from django.db import migrations

from awa_django import sql


class Migration(migrations.Migration):
    dependencies = [("awa_django", "0032_admin_filters")]
    operations = [
        migrations.RunSQL(
            sql=sql.migration("0033_failed_pages", "up"),
            reverse_sql=sql.migration("0033_failed_pages", "down"),
        ),
    ]
