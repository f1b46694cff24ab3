"""A transaction that published its jobs early (``SET CONSTRAINTS ... IMMEDIATE``, Django's
``check_constraints()``) and stays open no longer stalls its lanes: a claim steps over a
position missing for longer than a bound and records it in awa.lane_holes (new), whose late
commits claims still take, once. awa.claim_ready and awa.lane_head read the holes.

The reverse restores awa.claim_ready and awa.lane_head as 0011 left them and drops the holes.
"""

from django.db import migrations

from awa_django import sql


class Migration(migrations.Migration):
    dependencies = [("awa_django", "0013_workflows")]
    operations = [
        migrations.RunSQL(
            sql=sql.migration("0014_live_holes", "up") + sql.functions("claim"),
            reverse_sql=sql.migration("0014_live_holes", "down"),
        ),
    ]
