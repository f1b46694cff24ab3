"""Lanes are created outside producers' transactions (#35): awa.ensure_lanes (new) creates the
lanes of a queue and priority on every current shard, called by the Python producers on a short
connection of their own before their first job of a lane, and awa.create_lane now serialises the
creators of one lane on an advisory lock of that lane instead of locking awa.queue_lanes, so a
transaction that creates a lane and stays open no longer blocks the creation of any other lane.

Only function definitions change. The reverse drops awa.ensure_lanes and restores from
``sql/migrations/0017_lanes/down.sql`` the awa.create_lane of 0001.
"""

from django.db import migrations

from awa_django import sql


class Migration(migrations.Migration):
    dependencies = [("awa_django", "0016_flows2")]
    operations = [
        migrations.RunSQL(
            sql=sql.functions("lanes"), reverse_sql=sql.migration("0017_lanes", "down")
        ),
    ]
