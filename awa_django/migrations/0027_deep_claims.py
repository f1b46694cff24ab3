"""A claim behind many large commits reads about the rows it takes (#32): it read up to its limit
from each of the commits ahead of the lane's cursor (as many as the limit), sorted them and kept
the first, so a backlog enqueued in bulk calls made every claim read commits x limit rows. The
lane's next rows now come out of the join in claim order, and the claim stops after the rows it
takes.

Only awa.claim_ready changes. The reverse restores it as 0025 left it
(``sql/migrations/0027_deep_claims/down.sql``).
"""

from django.db import migrations

from awa_django import sql


class Migration(migrations.Migration):
    dependencies = [("awa_django", "0026_commit_publish")]
    operations = [
        migrations.RunSQL(
            sql=sql.functions("claim"),
            reverse_sql=sql.migration("0027_deep_claims", "down"),
        ),
    ]
