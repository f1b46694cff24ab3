"""An aged claim of a marked queue (one with many lanes, as django.tasks priorities make) walks
its lanes below priority 1 in the static order and reads lane heads only for the lanes of
priority 1 or more it gets to: rows below priority 1 never age and always come first, so reading
their heads changed nothing but the cost. And a claim that takes a lane's last rows knows the
lane drained from its own newest receipt (no row of its commit after it, no commit after it, no
hole), reading the lane's head only when that does not settle it (#32).

Only awa.claim_ready changes. The reverse restores it as 0014 left it
(``sql/migrations/0025_aged_claims/down.sql``).
"""

from django.db import migrations

from awa_django import sql


class Migration(migrations.Migration):
    # Numbered 0025 when 0023 and 0024 were being written in parallel; it follows main's newest
    # migration (0024_search_indexes) so that the graph has one leaf.
    dependencies = [("awa_django", "0024_search_indexes")]
    operations = [
        migrations.RunSQL(
            sql=sql.functions("claim"),
            reverse_sql=sql.migration("0025_aged_claims", "down"),
        ),
    ]
