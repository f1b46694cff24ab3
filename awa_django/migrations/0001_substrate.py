"""Installs the awa schema: rings, backlog, control plane and storage functions.

Released in v0.1.0: never edited. Its DDL is frozen in ``sql/migrations/0001_substrate/``; the
function files are today's definitions (see ``awa_django.sql``).
"""

from django.db import migrations

from awa_django import sql

SCHEMA = ("control", "queue_ring", "leases", "backlog", "scheduling", "ops", "cron", "unique")
FUNCTIONS = (
    "lanes",
    "enqueue",
    "shards",
    "claim",
    "close",
    "heartbeat",
    "promote",
    "rescue",
    "rings",
    "cancel",
    "callbacks",
    "dlq",
    "cron",
    "unique",
    "jobs_view",
)


class Migration(migrations.Migration):
    initial = True
    dependencies: list[tuple[str, str]] = []
    operations = [
        # The reverse of the first operation drops everything the three created.
        migrations.RunSQL(
            sql=sql.migration("0001_substrate", *SCHEMA),
            reverse_sql=sql.migration("0001_substrate", "down"),
        ),
        migrations.RunSQL(sql=sql.functions(*FUNCTIONS), reverse_sql=migrations.RunSQL.noop),
        migrations.RunSQL(
            sql=sql.migration("0001_substrate", "triggers"), reverse_sql=migrations.RunSQL.noop
        ),
    ]
