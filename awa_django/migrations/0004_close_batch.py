"""Retry and snooze times come from the database's clock: awa.close_batch, which the worker now
calls, reads each item's delay in seconds (delay_s) and computes when the job runs again itself,
and returns that time. awa.close_attempts keeps its signature for 0.1.0 workers, whose items carry
an absolute run_at, and becomes a wrapper of awa.close_batch.

The reverse restores the 0.1.0 awa.close_attempts and drops awa.close_batch.
"""

from django.db import migrations

from awa_django import sql


class Migration(migrations.Migration):
    dependencies = [("awa_django", "0003_unique_waiting_external")]
    operations = [
        migrations.RunSQL(
            sql=sql.functions("close"), reverse_sql=sql.migration("0004_close_batch", "down")
        ),
    ]
