"""A claim reads what it needs before its lanes in one statement instead of three (#32):
whether the queue is paused, its newest lane mark with the commits the mark did not see, and,
for a queue without a mark, its lanes in the static order. Every claim of every queue ran the
three, each a statement inside the claim function, and a drain at c=32 pays a claim's latency
in full.

Only awa.claim_ready changes. The reverse restores it as 0039 left it
(``sql/migrations/0040_claim_statements/down.sql``).
"""

from django.db import migrations

from awa_django import sql


class Migration(migrations.Migration):
    dependencies = [("awa_django", "0039_spread_claims")]
    operations = [
        migrations.RunSQL(
            sql=sql.functions("claim"),
            reverse_sql=sql.migration("0040_claim_statements", "down"),
        ),
    ]
