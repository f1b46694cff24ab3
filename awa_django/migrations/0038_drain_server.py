"""What the server does per drained job (#32): a receipt writes no entry into the BRIN index on
``claim_receipts.deadline_at``, which no statement has read since 0010, and the claim and the
close probe ``awa.attempt_state`` for each job only while some job has saved state (one probe
per statement decides), instead of once per claimed row and once per completed attempt. A
claim of a queue without lane marks whose order is static (no aging, or one lane) takes its
lanes in that order from the statement that counts them, instead of through
``awa.claim_order``. The close writes what every closed attempt needs (closure, lease, a
completed job's state) in its statement and requeues, dead-letters or saves the state of the
attempts that did not complete in a second one that a batch of completions skips, so it no
longer sets up the plan of the rarer writes on every call.

The reverse creates the index again and puts ``awa.claim_ready`` and ``awa.close_batch`` back as
they were (``sql/migrations/0038_drain_server/down.sql``).
"""

from django.db import migrations

from awa_django import sql


class Migration(migrations.Migration):
    dependencies = [("awa_django", "0037_enqueue_server")]
    operations = [
        migrations.RunSQL(
            sql=sql.migration("0038_drain_server", "up") + sql.functions("claim", "close"),
            reverse_sql=sql.migration("0038_drain_server", "down"),
        ),
    ]
