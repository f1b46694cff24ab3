# Unmanaged models for the admin pages and their permissions; creates no database objects.

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("awa_django", "0001_substrate"),
    ]

    operations = [
        migrations.CreateModel(
            name="DeadLetter",
            fields=[
                ("job_id", models.BigIntegerField(primary_key=True, serialize=False)),
            ],
            options={
                "verbose_name": "dead-letter job",
                "verbose_name_plural": "dead-letter queue",
                "db_table": 'awa"."dlq_entries',
                "managed": False,
            },
        ),
        migrations.CreateModel(
            name="Job",
            fields=[
                ("job_id", models.BigIntegerField(primary_key=True, serialize=False)),
            ],
            options={
                "verbose_name": "job",
                "db_table": 'awa"."jobs',
                "managed": False,
            },
        ),
        migrations.CreateModel(
            name="KindDescriptor",
            fields=[
                ("kind", models.TextField(primary_key=True, serialize=False)),
            ],
            options={
                "verbose_name": "job kind descriptor",
                "db_table": 'awa"."kind_descriptors',
                "managed": False,
            },
        ),
        migrations.CreateModel(
            name="Queue",
            fields=[
                ("queue", models.TextField(primary_key=True, serialize=False)),
            ],
            options={
                "verbose_name": "queue health",
                "verbose_name_plural": "queue health",
                "db_table": 'awa"."queue_meta',
                "managed": False,
            },
        ),
        migrations.CreateModel(
            name="QueueDescriptor",
            fields=[
                ("queue", models.TextField(primary_key=True, serialize=False)),
            ],
            options={
                "verbose_name": "queue descriptor",
                "db_table": 'awa"."queue_descriptors',
                "managed": False,
            },
        ),
        migrations.CreateModel(
            name="RuntimeInstance",
            fields=[
                ("instance_id", models.TextField(primary_key=True, serialize=False)),
            ],
            options={
                "verbose_name": "runtime",
                "db_table": 'awa"."runtime_instances',
                "managed": False,
            },
        ),
    ]
