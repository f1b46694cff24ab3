"""An attempt never overlaps itself: the worker running an attempt stops it at its queue's
deadline and closes it once the handler has returned, so the leader no longer rescues attempts
for their deadline, only for silence (a stale heartbeat) or a callback's timeout.
awa.find_rescuable takes three arguments; the four-argument form that 0.1.0 leaders call during a
rolling deploy becomes a wrapper of it.

The reverse restores migration 0001's awa.find_rescuable and drops the three-argument form.
"""

from django.db import migrations

from awa_django import sql


class Migration(migrations.Migration):
    dependencies = [("awa_django", "0009_declared_versions")]
    operations = [
        migrations.RunSQL(
            sql=sql.functions("rescue"),
            reverse_sql=sql.migration("0010_attempt_deadlines", "down"),
        ),
    ]
