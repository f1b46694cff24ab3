"""An enqueue that is its own transaction publishes its job in its own statement (#32):
awa.enqueue_job_alone (new), which the Python producer calls when Django's connection is in
autocommit outside ``atomic()``, appends the job's lane_commits row itself, so the commit has
no deferred trigger to run (docs/architecture.md, "Publication in the enqueue statement").

Only function definitions change. The reverse drops awa.enqueue_job_alone
(``sql/migrations/0018_inline_publish/down.sql``); the file's other definitions are unchanged.
"""

from django.db import migrations

from awa_django import sql


class Migration(migrations.Migration):
    dependencies = [("awa_django", "0017_lanes")]
    operations = [
        migrations.RunSQL(
            sql=sql.functions("enqueue"),
            reverse_sql=sql.migration("0018_inline_publish", "down"),
        ),
    ]
