"""Waiting for a job (awa.wait, awa.await_job): awa.job_waiters holds one row per session
waiting on a job, and the closers, awa.close_batch and awa.cancel_job, notify channel
awa_job_done for the jobs that ended while a session waits on them, and only for those.

The reverse restores both functions as 0004 left them and drops the table and
awa.notify_job_waiters.
"""

from django.db import migrations

from awa_django import sql


class Migration(migrations.Migration):
    dependencies = [("awa_django", "0004_close_batch")]
    operations = [
        migrations.RunSQL(
            sql=sql.migration("0005_job_waiters", "waiters"),
            reverse_sql=sql.migration("0005_job_waiters", "down"),
        ),
        migrations.RunSQL(sql=sql.functions("close", "cancel"), reverse_sql=migrations.RunSQL.noop),
    ]
