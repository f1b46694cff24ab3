"""A transaction's commit publishes each lane in one statement (#32): awa.publish_ready, the
deferred trigger of ``ready_entries``, takes the lane's producer lock, appends the lane_commits
row and records what it published in a single ``INSERT``, where it ran three (docs/architecture.md,
"Publication, at commit").

Only a function definition changes. The reverse restores the earlier awa.publish_ready from
``sql/migrations/0026_commit_publish/down.sql``.
"""

from django.db import migrations

from awa_django import sql


class Migration(migrations.Migration):
    dependencies = [("awa_django", "0025_aged_claims")]
    operations = [
        migrations.RunSQL(
            sql=sql.functions("enqueue"),
            reverse_sql=sql.migration("0026_commit_publish", "down"),
        ),
    ]
