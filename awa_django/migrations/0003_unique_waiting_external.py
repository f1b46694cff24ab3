"""A unique job whose attempt waits on a callback (waiting_external) keeps its key, as a running
one does: awa.lock_unique_keys and awa.sweep_unique_claims read that state as running.

Only function definitions change, so the reverse is a no-op: the definitions stay, and they work
on the schema of 0002 unchanged.
"""

from django.db import migrations

from awa_django import sql


class Migration(migrations.Migration):
    dependencies = [("awa_django", "0002_admin_models")]
    operations = [
        migrations.RunSQL(sql=sql.functions("unique"), reverse_sql=migrations.RunSQL.noop),
    ]
