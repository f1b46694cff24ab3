"""A claim of a marked queue (more than 4 lanes per shard, as django.tasks priorities make) finds
the commits its lane mark did not see by probing ``lane_commits_batch`` for them (a range from
the mark's ``seen_below`` on, one lookup per transaction it listed as unseen), instead of
reading every commit of the queue the ring retains and filtering them: one condition with an
OR bounded the index by the queue alone (#32). And whether the lanes a claim took the last rows
of have anything left is read for all of them by the statement that appends the mark leaving
them out, instead of in a statement per lane: a claim crossing lanes of a few dozen jobs each
took the last rows of one on most claims.

Only awa.claim_ready changes. The reverse restores it as 0038 left it
(``sql/migrations/0039_spread_claims/down.sql``).
"""

from django.db import migrations

from awa_django import sql


class Migration(migrations.Migration):
    dependencies = [("awa_django", "0038_drain_server")]
    operations = [
        migrations.RunSQL(
            sql=sql.functions("claim"),
            reverse_sql=sql.migration("0039_spread_claims", "down"),
        ),
    ]
