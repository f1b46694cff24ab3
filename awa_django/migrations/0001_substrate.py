"""Installs the awa schema: rings, backlog, control plane and storage functions."""

from django.db import migrations

from awa_django import sql


class Migration(migrations.Migration):
    initial = True
    dependencies: list[tuple[str, str]] = []
    operations = [
        migrations.RunSQL(
            sql=sql.migration("0001_substrate", "up"),
            reverse_sql=sql.migration("0001_substrate", "down"),
        ),
    ]
