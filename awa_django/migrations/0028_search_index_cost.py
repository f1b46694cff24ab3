"""The search indexes' pending lists are merged by autovacuum, not by enqueues (#32, #36): the
GIN indexes an enqueue writes (arguments and tags of the ready ring and the backlog) get a
pending-list limit of their own, above what accumulates between two autovacuum visits
(``sql/migrations/0028_search_index_cost``).

Only storage options change. The reverse resets them to the server's setting.
"""

from django.db import migrations

from awa_django import sql


class Migration(migrations.Migration):
    dependencies = [("awa_django", "0027_deep_claims")]
    operations = [
        migrations.RunSQL(
            sql=sql.migration("0028_search_index_cost", "up"),
            reverse_sql=sql.migration("0028_search_index_cost", "down"),
        ),
    ]
