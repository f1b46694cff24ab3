"""Each cron schedule's recent fires: awa.cron_fires (new) records the job every fire and every
trigger enqueued, newest 50 per schedule, for the admin's cron page; awa.fire_cron writes it.

The reverse restores awa.fire_cron as 0001 created it and drops the history.
"""

from django.db import migrations

from awa_django import sql


class Migration(migrations.Migration):
    dependencies = [("awa_django", "0014_live_holes")]
    operations = [
        migrations.RunSQL(
            sql=sql.migration("0015_cron_fires", "up") + sql.functions("cron"),
            reverse_sql=sql.migration("0015_cron_fires", "down"),
        ),
    ]
