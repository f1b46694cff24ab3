"""A job whose kind the worker that claimed it has no handler for waits for one that has, instead
of failing at its first try: awa.close_batch records the error of a snooze that carries one
(appending it, or replacing the job's last entry when that one is a try of the same wait) and
puts the job back as retryable, still giving the attempt back; a partial index on
awa.deferred_jobs holds the jobs that wait so, for the operator's counts. Workers of 0.1.0 never
send a snooze with an error, so they close as before.

The reverse restores the earlier awa.close_batch and drops the index.
"""

from django.db import migrations

from awa_django import sql


class Migration(migrations.Migration):
    dependencies = [("awa_django", "0011_lane_marks")]
    operations = [
        migrations.RunSQL(
            sql=sql.migration("0012_unknown_kinds", "up"),
            reverse_sql=sql.migration("0012_unknown_kinds", "down"),
        ),
        migrations.RunSQL(sql=sql.functions("close"), reverse_sql=migrations.RunSQL.noop),
    ]
